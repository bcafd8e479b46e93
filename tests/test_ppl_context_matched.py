"""The context-matched baseline (``no-retrieval-matched``) and ``--sweep max_length`` with ``--compare``.

The matched row scores a window's targets with no passage and the context BM25's passage leaves. Checked
against an independent computation: a plain no-retrieval run whose window is shorter by exactly the
passage's length scores the same targets with the same context (eval_lm.py's layout: window i of the
long run and window i + P/s of the short one end at the same token).
"""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json

import pytest
from ppl_fixtures import ppl_setup  # noqa: F401

from ralm.eval.ppl.conditions import parse_conditions
from ralm.eval.ppl.ppl_command import eval_ppl
from ralm.eval.ppl.sweep import Sweep
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions

STRIDE, LENGTH, PASSAGE = 4, 128, 64


def _rows(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "windows.jsonl").read_text().splitlines()]


def _eval(ppl_setup, out, *, max_length=LENGTH, index="long_index", **kwargs):
    return eval_ppl(
        text=str(ppl_setup["text"]),
        lm=LMOptions(str(ppl_setup["lm_dir"]), device="cpu", max_length=max_length),
        output=str(out),
        retrieval=RetrievalOptions(str(ppl_setup[index]), k=2),
        max_tokens=400,
        retrieval_cache=str(out.parent / f"cache-{index}.jsonl"),
        progress=False,
        window=WindowOptions(stride=STRIDE, max_passage_tokens=PASSAGE),
        **kwargs,
    )


def test_context_matched_row_equals_a_plain_run_at_the_shorter_window(ppl_setup, tmp_path):
    _eval(ppl_setup, tmp_path / "cmp", compare=parse_conditions("no-retrieval,no-retrieval-matched,bm25"))
    matched = _rows(tmp_path / "cmp" / "no-retrieval-matched")
    bm25 = _rows(tmp_path / "cmp" / "bm25")
    plain = _rows(tmp_path / "cmp" / "no-retrieval")
    _eval(ppl_setup, tmp_path / "short", max_length=LENGTH - PASSAGE, no_retrieval=True)
    short = {r["end"]: r for r in _rows(tmp_path / "short")}

    # Passages of 250 words run to ~350 tokens: BM25's top-1 is cut to exactly PASSAGE tokens (checked).
    tokenizer = ppl_setup["lm"].tokenizer
    passages = {
        json.loads(x)["id"]: json.loads(x)["contents"]
        for x in ppl_setup["long_passages"].read_text().splitlines()
    }
    compared = 0
    for m, b, p in zip(matched, bm25, plain, strict=True):
        if b["passage_id"] is None:  # window 0: nothing displaced, the matched row is the plain one
            assert m["nll"] == p["nll"]
            continue
        assert len(tokenizer(passages[b["passage_id"]], add_special_tokens=False)["input_ids"]) >= PASSAGE
        twin = short.get(m["end"])
        if twin is None or twin["target_start"] != m["target_start"]:
            continue  # the short run's last window ends elsewhere
        assert m["nll"] == pytest.approx(twin["nll"], rel=1e-5, abs=1e-6)
        assert m["nll"] != pytest.approx(p["nll"], rel=1e-9)  # the cut context changes the score
        compared += 1
    assert compared >= len(matched) - 3


def test_max_length_sweep_compares_every_condition_on_common_targets(ppl_setup, tmp_path):
    conditions = parse_conditions("no-retrieval,bm25,oracle")
    sweep = _eval(ppl_setup, tmp_path / "sweep", compare=conditions, sweep=Sweep("max_length", (96, LENGTH)))
    assert sweep["field"] == "max_length" and sweep["common_targets_from"] == LENGTH
    assert (tmp_path / "sweep" / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    # Each point equals a separate --compare run at that input length, condition by condition.
    single = _eval(ppl_setup, tmp_path / "single96", max_length=96, compare=conditions)
    point = sweep["points"][0]
    assert point["value"] == 96
    for name in (c.name for c in conditions):
        assert point["conditions"][name]["total_nll"] == pytest.approx(
            single[name]["metrics"]["total_nll"], rel=1e-9
        )
        # The common targets: the tokens from 128 on, summed independently from the windows file.
        rows = [r for r in _rows(tmp_path / "single96" / name) if r["target_start"] >= LENGTH]
        common = point["conditions"][name]["common_targets"]
        assert common["scored_tokens"] == sum(r["num_targets"] for r in rows)
        assert common["total_nll"] == pytest.approx(sum(r["nll"] for r in rows), rel=1e-12)
    # Both points score the same common tokens.
    counts = {p["conditions"]["bm25"]["common_targets"]["scored_tokens"] for p in sweep["points"]}
    assert len(counts) == 1
