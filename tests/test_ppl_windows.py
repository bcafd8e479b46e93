"""Window layout (eval_lm.py's loop), the ranking span, the retrieval cache file, and the metric formulas."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from ralm.errors import RalmInputError
from ralm.eval.ppl.compare_stats import condition_statistics
from ralm.eval.ppl.eval_text import EvalText
from ralm.eval.ppl.outputs import perplexity_metrics, point_results
from ralm.eval.ppl.records import CandidateScores, WindowRecord, WindowScores
from ralm.eval.ppl.retrieval_cache import read_cache, retrieve_cached
from ralm.eval.ppl.sweep import parse_sweep
from ralm.eval.ppl.windows import ranking_span, retrieving_windows, strided_windows
from ralm.pipeline.report import run_copies
from ralm.retrieval.types import Hit


@pytest.mark.parametrize(
    ("n", "input_length", "stride"),
    [(1000, 128, 4), (1000, 128, 7), (1000, 128, 1), (50, 128, 4), (1000, 100, 100), (129, 128, 4)],
)
def test_every_token_but_the_first_is_scored_exactly_once(n, input_length, stride):
    windows = strided_windows(n, input_length, stride)
    scored = [t for w in windows for t in range(w.target_start, w.end)]
    # Chunked perplexity (stride == input_length) leaves each chunk's first token unscored, as eval_lm.py
    # does.
    unscored = set(range(0, n, input_length)) if stride == input_length else {0}
    assert scored == [t for t in range(n) if t not in unscored]
    for w in windows:
        assert 0 < w.end - w.begin <= input_length and w.begin == w.index * stride
        if w.index > 0 and stride < input_length:
            assert w.num_targets <= stride
    assert windows[-1].end == n and [w.retrieves for w in windows] == [False] + [True] * (len(windows) - 1)


def test_window_numbers_of_eval_lm_for_a_small_case():
    # N=10, input_length=6, stride=2: begins 0,2,4; ends 6,8,10; targets 1-5, 6-7, 8-9; stops at end == N.
    windows = strided_windows(10, 6, 2)
    assert [(w.begin, w.end, w.target_start) for w in windows] == [(0, 6, 1), (2, 8, 6), (4, 10, 8)]
    assert windows[1].query_span(3) == (3, 6)
    assert windows[1].context_start(2) == 4 and windows[1].context_start(5) == 6  # never past the targets


def test_ranking_span_is_the_tokens_just_before_the_targets():
    w = strided_windows(2000, 1024, 4)[5]  # begin 20, targets 1040..1043 (after window 4's end)
    assert ranking_span(w, 16, 256) == (1024, 1040)
    small = strided_windows(2000, 64, 4)[5]  # begin 20, context 20..80: a 56-token passage leaves 4 tokens
    assert ranking_span(small, 16, 56) == (76, 80)


def test_bad_window_options():
    with pytest.raises(ValueError):
        strided_windows(100, 64, 0)
    with pytest.raises(ValueError):
        strided_windows(100, 64, 65)


class CountingRetriever:
    """A real (if tiny) retriever: word overlap ranking over three passages; counts its calls."""

    index_dir = "mem"

    def __init__(self, meta=None):
        self.meta = meta or {"backend": "overlap", "passages_sha256": "abc", "num_passages": 3}
        self.calls: list[list[str]] = []
        self.passages = {"p0": "cats purr", "p1": "dogs bark loudly", "p2": "cats and dogs"}

    def search(self, queries, k, threads=1):
        self.calls.append(list(queries))
        out = []
        for q in queries:
            words = set(q.split())
            ranked = sorted(self.passages, key=lambda p: -len(words & set(self.passages[p].split())))
            out.append(
                [
                    Hit(p, float(len(words & set(self.passages[p].split()))), self.passages[p], "", p)
                    for p in ranked[:k]
                ]
            )
        return out


def test_retrieval_cache_searches_each_distinct_query_once(tmp_path):
    retriever, path = CountingRetriever(), tmp_path / "cache.jsonl"
    hits, searched = retrieve_cached(retriever, ["cats", "dogs bark", "cats"], 2, path)
    assert retriever.calls == [["cats", "dogs bark"]] and searched == 2
    assert [h.id for h in hits["dogs bark"]] == ["p1", "p2"]
    hits2, searched2 = retrieve_cached(retriever, ["dogs bark", "cats and"], 2, path)
    assert retriever.calls[-1] == ["cats and"] and searched2 == 1 and hits2["dogs bark"] == hits["dogs bark"]
    header = json.loads(path.read_text().splitlines()[0])
    assert header["k"] == 2 and header["format"] == "ralm-eval-retrieval/1"
    # Another index, or a larger k, does not reuse the file.
    assert read_cache(path, {"backend": "overlap", "passages_sha256": "zzz", "num_passages": 3}, 2) == {}
    assert read_cache(path, retriever.meta, 3) == {}
    # A smaller k reuses it, cut to k.
    assert [len(v) for v in read_cache(path, retriever.meta, 1).values()] == [1, 1, 1]


def test_a_smaller_k_keeps_the_cache_as_deep_as_it_was(tmp_path):
    """A run reading BM25's top-1 (k = 1) beside one reading the top 2 shares their file: its new query is
    searched 2 deep, so the deeper run still finds every query it needs, with its second hit."""
    retriever, path = CountingRetriever(), tmp_path / "cache.jsonl"
    retrieve_cached(retriever, ["cats"], 2, path)
    top1, searched = retrieve_cached(retriever, ["cats", "dogs bark"], 1, path)
    assert searched == 1 and [[h.id for h in hits] for hits in top1.values()] == [["p0"], ["p1"]]
    assert json.loads(path.read_text().splitlines()[0])["k"] == 2
    deep = read_cache(path, retriever.meta, 2)
    assert {q: [h.id for h in hits] for q, hits in deep.items()} == {
        "cats": ["p0", "p2"],
        "dogs bark": ["p1", "p2"],
    }
    retrieve_cached(retriever, ["cats", "dogs bark"], 2, path)
    assert len(retriever.calls) == 2  # nothing searched again


def window_record(window: int, *, nll: float, num_targets: int, passage_id=None, copies_target=False):
    """A windows.jsonl line with the fields the metrics read (the others placeholders)."""
    return WindowRecord(window, 0, 0, 0, num_targets, nll, None, None, passage_id, copies_target)


def test_metrics_against_direct_formulas():
    rows = [
        window_record(0, nll=10.0, num_targets=5),
        window_record(1, nll=2.5, num_targets=2, passage_id="p"),
        window_record(2, nll=1.5, num_targets=2),
    ]
    m = perplexity_metrics(rows, num_tokens=10, words=6, words_eval_lm=5, retrieving=2)
    assert m.total_nll == 14.0 and m.scored_tokens == 9
    assert m.token_ppl == pytest.approx(math.exp(14 / 9))
    assert m.word_ppl == pytest.approx(math.exp(14 / 6))
    assert m.token_ppl_eval_lm == pytest.approx(math.exp(14 / 10))
    assert m.word_ppl_eval_lm == pytest.approx(math.exp(14 / 5))
    assert m.retrieval_rate == 0.5  # 1 of the 2 retrieving windows got a passage
    # A query that found nothing makes its window non-retrieving: 1 of 1.
    assert perplexity_metrics(rows, 10, 6, 5, retrieving=1).retrieval_rate == 1.0


def test_a_window_retrieves_when_its_query_found_a_candidate_in_every_count():
    """Window 0 makes no query and window 2's query finds nothing: 2 retrieving windows of 4, not 3 (the
    `window > 0` count), in results.json's counts, its retrieval rate, and the compare statistics."""
    candidates = [[], ["p1"], [], ["p3", "p4"]]
    assert retrieving_windows(candidates) == [1, 3]
    rows = [
        window_record(i, nll=2.0, num_targets=2, passage_id="p1" if i == 1 else None, copies_target=i == 1)
        for i in range(4)
    ]
    text = EvalText(path="t", sha256="x", tokens=tuple(range(9)), words=4, words_eval_lm=3)
    results = point_results(rows, text, {}, {}, resumed=0, candidates=candidates)
    assert results.counts.retrieving_windows == 2 and results.counts.windows_with_passage == 1
    assert results.metrics.retrieval_rate == 0.5  # 1 of the 2 retrieving windows
    table = [
        WindowScores(
            i, 2 * i, 2, no_passage_nll=2.0, candidates=[CandidateScores(c, None, 2.0) for c in cands]
        )
        for i, cands in enumerate(candidates)
    ]
    stats = condition_statistics(table, rows, resamples=10)
    assert stats["retrieving_windows"] == 2 and stats["copy_rate"] == 0.5
    # a run of one condition counts the copying window too, and the report reads its rate as the table's
    assert results.counts.copy_windows == stats["copy_windows"] == 1
    copies = run_copies(dataclasses.asdict(results.counts))
    assert copies == {"copy_windows": 1, "copy_rate": stats["copy_rate"]}


def test_sweep_spec():
    assert parse_sweep("stride=4,8,16").values == (4, 8, 16)
    assert parse_sweep("query-tokens=16,32").field == "query_tokens"
    for bad in ("stride", "k=1,2", "stride=4,x", "stride=0,4", "stride=4,4"):
        with pytest.raises(RalmInputError):
            parse_sweep(bad)
