"""The demo's proportions and dtype rule, and the report's verdicts (pure functions; fast)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ralm.demo.presets import FULL_BOOKS, QUICK_BOOKS
from ralm.devices import cpu_has_native_bf16
from ralm.errors import RalmInputError
from ralm.pipeline.dtype_check import dtype_change
from ralm.pipeline.scale import FULL, QUICK
from ralm.pipeline.verdicts import verdicts


@pytest.mark.parametrize("preset", [QUICK, FULL])
def test_presets_keep_the_papers_proportions(preset):
    # The paper: passages cut at 256 tokens in a 1,024-token window (a quarter), 100-word passages.
    assert preset.max_passage_tokens * 4 <= preset.max_length
    assert preset.passage_words == preset.passage_stride == 100
    # Most scored tokens are in retrieving windows (the first max_length tokens never retrieve).
    assert preset.eval_tokens - preset.max_length > preset.max_length


@pytest.mark.parametrize("books", [QUICK_BOOKS, FULL_BOOKS])
def test_dev_and_test_books_are_disjoint(books):
    assert not set(books.dev_books) & set(books.test_books)
    assert books.related_books and books.unrelated_books


def test_a_passage_over_a_quarter_of_the_window_is_refused():
    with pytest.raises(RalmInputError, match="more than a quarter of --max-length 192"):
        replace(QUICK, max_length=192, max_passage_tokens=96)


def test_native_bf16_is_read_off_the_cpu_flags():
    assert cpu_has_native_bf16("processor: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16\n")
    assert cpu_has_native_bf16("flags : fpu amx_bf16 amx_tile\n")
    assert not cpu_has_native_bf16("flags : fpu sse avx2 avx512f avx512bw\n")  # emulated: 6x slower measured


def _windows(folder, rows):
    """A windows.jsonl of these lines (window, end, nll), the other fields of the format filled in."""
    folder.mkdir(parents=True)
    blank = {"begin": 0, "target_start": 0, "num_targets": 1, "query": None, "chosen_rank": None}
    lines = [{**blank, **r, "passage_id": None, "copies_target": False} for r in rows]
    (folder / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_dtype_change_compares_the_same_windows(tmp_path):
    for name, fp32, bf16 in (
        ("no-retrieval", [10.0, 20.0], [10.5, 20.5, 99.0]),
        ("bm25", [8.0, 16.0], [8.0, 18.0, 1.0]),
    ):
        _windows(
            tmp_path / "fp32" / name, [{"window": i, "end": 100 + i, "nll": v} for i, v in enumerate(fp32)]
        )
        _windows(
            tmp_path / "bf16" / name, [{"window": i, "end": 100 + i, "nll": v} for i, v in enumerate(bf16)]
        )
    change = dtype_change(tmp_path / "bf16", tmp_path / "fp32")
    # Only the two windows both runs scored: (10.5 + 20.5) / (10 + 20) - 1 and (8 + 18) / (8 + 16) - 1.
    assert change["no-retrieval"]["windows"] == 2
    assert change["no-retrieval"]["relative_change"] == pytest.approx(31 / 30 - 1)
    assert change["bm25"]["relative_change"] == pytest.approx(26 / 24 - 1)


def _change(low: float, high: float) -> dict:
    return {"change": (low + high) / 2, "low": low, "high": high, "significant": low > 0 or high < 0}


def test_verdicts_say_each_claim_with_its_interval_side():
    comparisons = {
        "no-retrieval": {"vs_no_retrieval": _change(0, 0), "vs_bm25": _change(0.05, 0.1)},
        "bm25": {"vs_no_retrieval": _change(-0.1, -0.05), "vs_bm25": _change(0, 0)},
        "trained-seed0": {"vs_no_retrieval": _change(-0.12, -0.02), "vs_bm25": _change(-0.03, 0.01)},
    }
    related = verdicts("related", comparisons)
    assert related[0] == "BM25 top-1 vs no retrieval: -7.5% [-10.0, -5.0], lower"
    assert related[1] == (
        "trained reranker, seed 0 vs BM25: -1.0% [-3.0, +1.0], a tie; vs no retrieval: -7.0% [-12.0, -2.0], "
        "lower; does NOT beat both"
    )
    # A seed whose export decided a rule is named by the rule its row plays, not as a trained model.
    played = verdicts("related", comparisons, {"trained-seed0": "zero-shot"})[1]
    assert played.startswith("seed 0, exported zero-shot vs BM25: -1.0% [-3.0, +1.0], a tie")
    assert verdicts("related", comparisons, {"trained-seed0": "trained"})[1] == related[1]
    comparisons["trained-seed0"]["vs_no_retrieval"] = _change(-0.002, 0.012)
    assert verdicts("unrelated", comparisons)[1].endswith(
        "NOT within +1% (the goal: the upper end below +1%)"
    )
    comparisons["trained-seed0"]["vs_no_retrieval"] = _change(-0.002, 0.009)
    assert "; within +1%" in verdicts("unrelated", comparisons)[1]
    # The seed's second export, the best rule with no LM at rerank time, is judged as its export is.
    comparisons["no-lm-seed0"] = {"vs_no_retrieval": _change(0.0, 0.0), "vs_bm25": _change(-0.05, -0.02)}
    no_lm = verdicts("unrelated", comparisons, {"no-lm-seed0": "bm25-above"})[2]
    assert no_lm == (
        "seed 0, no LM: exported bm25-above vs no retrieval: +0.0% [+0.0, +0.0], a tie; within +1% "
        "(the goal: the upper end below +1%)"
    )
    assert verdicts("related", comparisons, {"no-lm-seed0": "trained"})[2].startswith(
        "seed 0, no LM: trained reranker vs BM25: -3.5% [-5.0, -2.0], lower"
    )
