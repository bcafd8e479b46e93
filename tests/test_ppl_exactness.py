"""`ralm eval ppl` end to end (real bm25s index, tiny GPT-2) against a naive eval_lm.py-style reference
loop."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import functools
import json
import math
from dataclasses import replace

import pytest
import torch
from ppl_fixtures import bos_adding_copy, ppl_setup, reference_total_nll  # noqa: F401

from ralm.eval.ppl.ppl_command import BatchOptions, RerankingOptions, eval_ppl
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.index import open_index
from ralm.retrieval.options import RetrievalOptions


def run(
    ppl_setup,
    tmp_path,
    *,
    max_tokens,
    stride=4,
    max_length=128,
    query_tokens=32,
    reranker="none",
    k=4,
    no_retrieval=False,
    max_passage_tokens=64,
    long=False,
):
    return eval_ppl(
        text=str(ppl_setup["text"]),
        lm=_cpu(ppl_setup["lm_dir"], max_length),
        output=str(tmp_path / "out"),
        retrieval=RetrievalOptions(
            None if no_retrieval else str(ppl_setup["long_index" if long else "index"]), k=k
        ),
        no_retrieval=no_retrieval,
        max_tokens=max_tokens,
        retrieval_cache=str(tmp_path / "cache.jsonl"),
        progress=False,
        window=WindowOptions(stride=stride, query_tokens=query_tokens, max_passage_tokens=max_passage_tokens),
        reranking=RerankingOptions(reranker=reranker),
        batching=BatchOptions(batch_size=6),
    )


def _cpu(lm_dir, max_length: int) -> LMOptions:
    return LMOptions(str(lm_dir), device="cpu", dtype="float32", max_length=max_length)


def reference(
    ppl_setup,
    *,
    max_tokens,
    stride=4,
    max_length=128,
    query_tokens=32,
    strategy="first",
    k=4,
    max_passage_tokens=64,
    long=False,
):
    lm = ppl_setup["lm"]
    tokens = lm.encode(ppl_setup["text"].read_text())[:max_tokens]
    retriever = None if strategy == "none" else open_index(ppl_setup["long_index" if long else "index"])
    return reference_total_nll(
        lm.model,
        lm.tokenizer,
        tokens,
        input_length=max_length,
        stride=stride,
        strategy=strategy,
        retriever=retriever,
        k=k,
        query_tokens=query_tokens,
        max_passage_tokens=max_passage_tokens,
    )


CASES = {
    # name: (options for eval_ppl, options for the reference)
    "no-retrieval": (dict(no_retrieval=True, max_tokens=400), dict(strategy="none", max_tokens=400)),
    "bm25-s1": (dict(stride=1, max_tokens=180), dict(stride=1, max_tokens=180)),
    "bm25-s4": (dict(stride=4, max_tokens=400), dict(stride=4, max_tokens=400)),
    "bm25-s7": (dict(stride=7, max_tokens=400), dict(stride=7, max_tokens=400)),
    "zero-shot": (dict(reranker="zero-shot", max_tokens=300), dict(strategy="zero-shot", max_tokens=300)),
    "oracle": (dict(reranker="oracle", max_tokens=300), dict(strategy="oracle", max_tokens=300)),
    "shorter-than-one-window": (dict(max_tokens=100), dict(max_tokens=100)),
    "passage-over-256-tokens": (
        dict(long=True, max_length=300, max_passage_tokens=256, max_tokens=420),
        dict(long=True, max_length=300, max_passage_tokens=256, max_tokens=420),
    ),
    "max-length-below-passage-plus-query": (
        dict(max_length=64, max_passage_tokens=48, max_tokens=200),
        dict(max_length=64, max_passage_tokens=48, max_tokens=200),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_total_nll_matches_naive_reference(ppl_setup, tmp_path, case):
    ours_options, ref_options = CASES[case]
    results = run(ppl_setup, tmp_path, **ours_options)
    want_nll, want_scored = reference(ppl_setup, **ref_options)
    got = results["metrics"]
    assert got["scored_tokens"] == want_scored == results["counts"]["tokens"] - 1
    assert abs(got["total_nll"] - want_nll) <= 1e-5 * abs(want_nll)
    assert got["token_ppl"] == pytest.approx(math.exp(want_nll / want_scored), rel=1e-5)
    rows = [json.loads(line) for line in (tmp_path / "out" / "windows.jsonl").read_text().splitlines()]
    assert math.fsum(r["nll"] for r in rows) == pytest.approx(want_nll, rel=1e-5)
    if not ours_options.get("no_retrieval") and case != "shorter-than-one-window":
        assert results["counts"]["windows_with_passage"] > 0  # retrieval really happened
    if case in ("zero-shot", "oracle"):  # reranking really reordered BM25's list somewhere
        assert any(r["chosen_rank"] not in (None, 0) for r in rows)


def test_case_shapes_are_what_their_names_say(ppl_setup):
    """The edge cases exercise what they claim: one window; a last window shorter than the stride."""
    from ralm.eval.ppl.windows import strided_windows

    assert len(strided_windows(100, 128, 4)) == 1
    last = strided_windows(400, 128, 7)[-1]
    assert 0 < last.num_targets < 7
    lm = ppl_setup["lm"]
    hits = open_index(ppl_setup["long_index"]).search(["the module"], 1)[0]
    assert len(lm.encode(hits[0].contents)) > 256


def test_stride_equal_to_max_length_is_plain_chunked_perplexity(ppl_setup, tmp_path):
    max_length, n = 64, 300
    results = run(
        ppl_setup, tmp_path, no_retrieval=True, stride=max_length, max_length=max_length, max_tokens=n
    )
    lm = ppl_setup["lm"]
    tokens = torch.tensor(lm.encode(ppl_setup["text"].read_text())[:n])
    total = 0.0
    with torch.no_grad():
        for start in range(0, n, max_length):
            chunk = tokens[start : start + max_length][None]
            out = lm.model(chunk, labels=chunk)  # HF's own shifted mean loss over len - 1 tokens
            total += float(out.loss) * (chunk.shape[1] - 1)
    assert results["metrics"]["total_nll"] == pytest.approx(total, rel=1e-5)


def test_eval_lm_mode_scores_a_bos_adding_tokenizer_as_eval_lm_does(ppl_setup, tmp_path):
    """``--special-tokens eval-lm``: eval_lm.py encodes each passage with special tokens (BOS first) and the
    text without them, so window 0 (no passage) reads no BOS."""
    from ralm.lm.loading import load_lm

    lm_dir = bos_adding_copy(ppl_setup["lm_dir"], tmp_path / "bos-lm")
    lm = load_lm(lm_dir, device="cpu", dtype="float32", special_tokens="eval-lm")
    bos = lm.tokenizer("x")["input_ids"][0]
    assert lm.special_prefix == (bos,) and lm.lead == ()
    n = 300
    got = eval_ppl(
        text=str(ppl_setup["text"]),
        lm=replace(_cpu(lm_dir, 128), special_tokens="eval-lm"),
        output=str(tmp_path / "out"),
        retrieval=RetrievalOptions(str(ppl_setup["index"])),
        batching=BatchOptions(batch_size=6),
        max_tokens=n,
        retrieval_cache=str(tmp_path / "cache.jsonl"),
        progress=False,
        window=WindowOptions(stride=4, query_tokens=32, max_passage_tokens=64),
    )["metrics"]
    tokens = lm.tokenizer(ppl_setup["text"].read_text(), add_special_tokens=False)["input_ids"][:n]
    reference = functools.partial(
        reference_total_nll,
        lm.model,
        lm.tokenizer,
        tokens,
        input_length=128,
        stride=4,
        strategy="first",
        retriever=open_index(ppl_setup["index"]),
        k=1,
        max_passage_tokens=64,
    )
    want, scored = reference(passage_special_tokens=True)
    assert got["scored_tokens"] == scored
    assert abs(got["total_nll"] - want) <= 1e-7 * abs(want), got["total_nll"] - want
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    # Recorded: a resumed run cannot mix the two modes' rows.
    assert results["config"]["special_tokens"] == "eval-lm" and results["config"]["special_prefix"] == [bos]
    plain, _ = reference()
    assert abs(plain - want) > 1e-6 * abs(
        want
    )  # without the passages' BOS it differs (a tiny random LM: a little)
