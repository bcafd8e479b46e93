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


_SAVE_IN_A_FRESH_PROCESS = """
import sys
from transformers import GPT2Config, GPT2LMHeadModel
from ralm.progress import save_pretrained_quietly
config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, bos_token_id=0, eos_token_id=0)
save_pretrained_quietly(GPT2LMHeadModel(config), sys.argv[1])
print("deepspeed imported:", "deepspeed" in sys.modules)
"""


def test_saving_a_model_piped_to_a_file_draws_no_bar_and_leaves_deepspeed_alone(tmp_path):
    """transformers' save_pretrained imports DeepSpeed through accelerate whenever it is installed (its
    "Setting accelerator to CPU" banner) and draws "Writing model shards": neither in a log."""
    import importlib.util
    import os
    import subprocess
    import sys

    import pytest

    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("DeepSpeed is not installed: nothing could import it")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    log = tmp_path / "log.txt"
    with open(log, "w") as out:
        code = [sys.executable, "-c", _SAVE_IN_A_FRESH_PROCESS, str(tmp_path / "model")]
        assert (
            subprocess.run(code, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=300).returncode == 0
        )
    assert log.read_text().splitlines() == ["deepspeed imported: False"]
    assert (tmp_path / "model" / "config.json").is_file()
