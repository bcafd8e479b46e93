"""Progress in a log file: whole lines at most every few seconds, with rate and time left."""

from __future__ import annotations

import io

from ralm.progress import LineProgress, duration, progress, track


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_line_progress_writes_one_line_per_interval_with_rate_and_time_left():
    out, clock = io.StringIO(), FakeClock()
    bar = LineProgress(100, desc="score", unit="pair", every=10.0, stream=out, clock=clock)
    for _ in range(40):  # 40 updates over 20 s: one line at 10 s, one at 20 s
        clock.now += 0.5
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 3
    # At 10 s, 20 of 100 pairs: 2 pairs/s, 80 left -> 40 s.
    assert lines[0] == "score: 20/100 pair (20%), 2.0 pair/s, 40s left"
    assert lines[-1] == "score: done, 40 pair in 20s (2.0 pair/s)"


def test_a_resumed_count_measures_its_rate_from_where_it_started():
    out, clock = io.StringIO(), FakeClock()
    bar = LineProgress(1000, desc="eval", unit="tok", initial=600, every=5.0, stream=out, clock=clock)
    clock.now = 5.0
    bar.update(100)
    assert out.getvalue().splitlines()[0] == "eval: 700/1,000 tok (70%), 20.0 tok/s, 15s left"


def test_piped_progress_is_plain_lines_and_track_counts_every_item(capsys):
    assert isinstance(progress(3, desc="x"), LineProgress)  # pytest's captured stderr is not a terminal
    assert list(track(["a", "b", "c"], desc="docs", unit="doc")) == ["a", "b", "c"]
    assert capsys.readouterr().err.splitlines()[-1].startswith("docs: done, 3 doc in ")


def test_durations_read_as_a_person_would_say_them():
    assert [duration(s) for s in (42, 185, 3725)] == ["42s", "3m05s", "1h02m"]
