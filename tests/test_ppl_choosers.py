"""Choosers that decide before scoring: a trained reranker folder (with abstention) and a zero-shot
reranking LM with another tokenizer; each checked against the naive reference with choices made here."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json

import pytest
import torch
from ppl_fixtures import (  # noqa: F401
    build_tiny_lm,
    export_untrained_reranker,
    ppl_setup,
    reference_total_nll,
    train_other_tokenizer,
)

from ralm.eval.ppl.ppl_command import RerankingOptions, eval_ppl
from ralm.lm.loading import load_lm
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.index import open_index
from ralm.retrieval.options import RetrievalOptions

MAX_LENGTH, MPT, N = 128, 64, 260


def _run(ppl_setup, out, reranking: RerankingOptions):
    return eval_ppl(
        text=str(ppl_setup["text"]),
        output=str(out),
        retrieval=RetrievalOptions(str(ppl_setup["index"]), k=4),
        lm=LMOptions(str(ppl_setup["lm_dir"]), device="cpu", dtype="float32", max_length=MAX_LENGTH),
        max_tokens=N,
        retrieval_cache=str(out.parent / "cache.jsonl"),
        progress=False,
        window=WindowOptions(stride=4, max_passage_tokens=MPT),
        reranking=reranking,
    )


def _reference(ppl_setup, pick):
    lm = ppl_setup["lm"]
    tokens = lm.encode(ppl_setup["text"].read_text())[:N]
    return tokens, reference_total_nll(
        lm.model,
        lm.tokenizer,
        tokens,
        input_length=MAX_LENGTH,
        stride=4,
        strategy="given",
        retriever=open_index(ppl_setup["index"]),
        k=4,
        max_passage_tokens=MPT,
        pick=pick,
    )


def test_trained_reranker_with_abstention(ppl_setup, tiny_encoder_dir, tmp_path):
    from ralm.rerank.inference import PredictiveReranker

    # Seed 8: a fresh head under which the empty passage wins some windows but not all.
    folder = export_untrained_reranker(tiny_encoder_dir, tmp_path / "reranker", abstain=True, seed=8)
    results = _run(ppl_setup, tmp_path / "out", RerankingOptions(reranker=str(folder)))

    reranker = PredictiveReranker.from_pretrained(folder, device="cpu")
    lm = ppl_setup["lm"]
    tokens = lm.encode(ppl_setup["text"].read_text())[:N]
    picks = []

    def pick(begin, prev_end, hits):
        prefix = lm.decode(tokens[max(begin, prev_end - 512) : prev_end])
        scores = reranker.score([prefix], [[h.contents for h in hits] + [""]])[0]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        picks.append(None if best == len(hits) else best)
        return picks[-1]

    _, (want_nll, _) = _reference(ppl_setup, pick)
    assert results["metrics"]["total_nll"] == pytest.approx(want_nll, rel=1e-5)
    rows = [json.loads(x) for x in (tmp_path / "out" / "windows.jsonl").read_text().splitlines()]
    assert [r["chosen_rank"] for r in rows[1:]] == picks
    assert None in picks and any(p not in (None, 0) for p in picks), "abstention and reordering both occur"


def test_zero_shot_with_another_lm_and_tokenizer(ppl_setup, real_documents, tmp_path):
    other_tok = tmp_path / "other_tok"
    train_other_tokenizer([d["text"] for d in real_documents], other_tok)
    phi_dir = build_tiny_lm(other_tok, tmp_path / "phi", n_positions=512, seed=5)
    phi = load_lm(phi_dir, device="cpu", dtype="float32")
    lm = ppl_setup["lm"]
    assert phi.encode("The module provides") != lm.encode("The module provides")  # really another tokenizer

    results = _run(
        ppl_setup, tmp_path / "out", RerankingOptions(reranker="zero-shot", rerank_lm=str(phi_dir))
    )
    tokens = lm.encode(ppl_setup["text"].read_text())[:N]
    ce = torch.nn.CrossEntropyLoss(reduction="none")

    def pick(begin, prev_end, hits):
        context = phi.encode(lm.decode(tokens[max(begin, prev_end - MAX_LENGTH) : prev_end]))
        y, prefix = context[-16:], context[:-16]
        logps = []
        for h in hits:
            d = phi.encode(h.contents)[:MPT]
            room = MAX_LENGTH - len(d) - len(y)
            ids = torch.tensor([d + (prefix[-room:] if room > 0 else []) + y])
            with torch.no_grad():
                logits = phi.model(ids).logits[0].double()
            logps.append(-float(ce(logits[-len(y) - 1 : -1], ids[0, -len(y) :]).sum()))
        return max(range(len(logps)), key=lambda i: (logps[i], -i))

    _, (want_nll, _) = _reference(ppl_setup, pick)
    assert results["metrics"]["total_nll"] == pytest.approx(want_nll, rel=1e-5)


def test_trained_reranker_with_a_bm25_prior_reads_each_windows_bm25_scores(
    ppl_setup, tiny_encoder_dir, tmp_path
):
    from ralm.rerank.inference import PredictiveReranker

    # The tiny random head's scores differ by about 3e-5 between candidates; a prior weight of that size
    # lets both the head and the BM25 scores decide some windows.
    folder = export_untrained_reranker(tiny_encoder_dir, tmp_path / "reranker", abstain=False, seed=8)
    info = json.loads((folder / "ralm_reranker.json").read_text())
    info["bm25_prior"] = {"rule": "bm25-zscore", "weight": 1e-5}
    (folder / "ralm_reranker.json").write_text(json.dumps(info))
    _run(ppl_setup, tmp_path / "out", RerankingOptions(reranker=str(folder)))

    reranker = PredictiveReranker.from_pretrained(folder, device="cpu")
    lm = ppl_setup["lm"]
    tokens = lm.encode(ppl_setup["text"].read_text())[:N]
    picks, head_picks = [], []

    def argmax_first(scores):
        return max(range(len(scores)), key=lambda i: (scores[i], -i))

    def pick(begin, prev_end, hits):
        prefix = lm.decode(tokens[max(begin, prev_end - 512) : prev_end])
        texts = [[h.contents for h in hits]]
        picks.append(argmax_first(reranker.score([prefix], texts, [[h.score for h in hits]])[0]))
        # Equal BM25 scores give z = 0: the head alone.
        head_picks.append(argmax_first(reranker.score([prefix], texts, [[0.0] * len(hits)])[0]))
        return picks[-1]

    _reference(ppl_setup, pick)
    rows = [json.loads(x) for x in (tmp_path / "out" / "windows.jsonl").read_text().splitlines()]
    assert [r["chosen_rank"] for r in rows[1:]] == picks
    assert any(p != 0 for p in picks), "the head reorders some windows"
    assert picks != head_picks, "the BM25 prior changes some picks"


def test_a_prior_reranker_that_abstains_declines_where_its_bias_wins(ppl_setup, tiny_encoder_dir, tmp_path):
    """BM25 prior and abstention together: the empty passage scores f(x, "") + b + c * t, t the window's best
    BM25 score standardised by the training statistics (mu, sigma), the others f + w * z(BM25) with z over the
    real candidates; eval prepends nothing exactly where the empty passage wins."""
    from ralm.rerank.inference import PredictiveReranker
    from ralm.rerank.inputs import bm25_prior

    folder = export_untrained_reranker(tiny_encoder_dir, tmp_path / "reranker", abstain=True, seed=8)
    plain = PredictiveReranker.from_pretrained(folder, device="cpu")  # no prior: the head's own f
    lm = ppl_setup["lm"]
    tokens = lm.encode(ppl_setup["text"].read_text())[:N]
    w, c, mu, sigma = 1e-5, 2e-6, 10.0, 4.0
    margins, groups = [], []

    def collect(begin, prev_end, hits):
        prefix = lm.decode(tokens[max(begin, prev_end - 512) : prev_end])
        f = plain.score([prefix], [[h.contents for h in hits] + [""]])[0]
        with_prior = [v + w * z for v, z in zip(f, bm25_prior([h.score for h in hits]), strict=False)]
        empty = f[-1] + c * (max(h.score for h in hits) - mu) / sigma
        groups.append((with_prior, empty))
        margins.append(max(with_prior) - empty)
        return 0

    _reference(ppl_setup, collect)
    ordered = sorted(margins)
    # About half the windows abstain; halfway between two windows' margins, so no window is a tie.
    bias = (ordered[len(ordered) // 2] + ordered[len(ordered) // 2 + 1]) / 2
    info = json.loads((folder / "ralm_reranker.json").read_text())
    info["bm25_prior"] = {
        "rule": "bm25-zscore",
        "weight": w,
        "abstain_bias": bias,
        "abstain_weight": c,
        "bm25_top_mean": mu,
        "bm25_top_std": sigma,
    }
    (folder / "ralm_reranker.json").write_text(json.dumps(info))
    _run(ppl_setup, tmp_path / "out", RerankingOptions(reranker=str(folder)))

    want = []
    for with_prior, empty in groups:
        scores = [*with_prior, empty + bias]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        want.append(None if best == len(with_prior) else best)
    rows = [json.loads(x) for x in (tmp_path / "out" / "windows.jsonl").read_text().splitlines()]
    assert [r["chosen_rank"] for r in rows[1:]] == want
    assert None in want and any(p is not None for p in want)


def test_a_killed_trained_reranker_run_resumes_with_the_same_picks(ppl_setup, tiny_encoder_dir, tmp_path):
    """On resume the reranker chooses only for the windows left; its picks must land on those windows."""
    from ralm.eval.ppl.outputs import config_key

    folder = export_untrained_reranker(tiny_encoder_dir, tmp_path / "reranker", abstain=True, seed=8)
    out = tmp_path / "out"
    full = _run(ppl_setup, out, RerankingOptions(reranker=str(folder)))
    rows = (out / "windows.jsonl").read_text().splitlines()
    header = json.dumps({"config_key": config_key(full["config"])})
    half = len(rows) // 2
    (out / "windows.jsonl.partial").write_text("\n".join([header, *rows[:half], rows[half][:10]]))
    (out / "windows.jsonl").unlink()
    (out / "results.json").unlink()
    resumed = _run(ppl_setup, out, RerankingOptions(reranker=str(folder)))
    assert resumed["counts"]["resumed_windows"] == half
    assert (out / "windows.jsonl").read_text().splitlines() == rows
    assert resumed["metrics"]["total_nll"] == pytest.approx(full["metrics"]["total_nll"], rel=1e-9)
