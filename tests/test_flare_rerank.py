"""Reranking BM25 candidates for QA and FLARE: the zero-shot LM rule against a plain forward pass, and a
trained reranker folder driving the order."""

from __future__ import annotations

import json

import pytest
import torch

from ralm.eval.qa.retrieval import PassageSource
from ralm.lm.loading import load_lm
from ralm.retrieval.types import Hit

BODIES = [
    "The json module encodes and decodes JSON documents.",
    "A queue is a first in first out collection of items.",
    "Regular expressions match patterns in strings of text.",
    "The random module draws pseudo random numbers from distributions.",
    "Sockets carry bytes between processes over a network.",
]


class FixedRetriever:
    """Returns the same candidates, in a fixed (BM25-like) order, for every query."""

    index_dir, meta = "memory", {}

    def search(self, queries, k, threads=1):
        hits = [
            Hit(f"p{i}", float(10 - i), f"title{i}\n{b}", f"title{i}", f"d{i}") for i, b in enumerate(BODIES)
        ]
        return [hits[:k] for _ in queries]


def plain_logprob(lm, passage: str, query: str) -> float:
    """log p(query | passage) from one full forward pass over passage + query tokens."""
    p, q = lm.encode(passage), lm.encode(" " + query)
    ids = torch.tensor([p + q])
    with torch.no_grad():
        logprobs = torch.log_softmax(lm.model(input_ids=ids).logits[0].float(), -1)
    return float(sum(logprobs[len(p) - 1 + i, t] for i, t in enumerate(q)))


def test_zero_shot_orders_by_lm_logprob_of_the_query(tiny_lm_dir):
    lm = load_lm(tiny_lm_dir, device="cpu", dtype="float32")
    source = PassageSource(FixedRetriever(), lm=lm, rerank="zero-shot", candidates=5)
    query = "decode JSON documents"
    [top] = source.search([query], 3)
    scores = {f"p{i}": plain_logprob(lm, f"title{i}\n{b}", query) for i, b in enumerate(BODIES)}
    expected = sorted(scores, key=lambda pid: -scores[pid])[:3]
    assert [p.id for p in top] == expected


def export_tiny_reranker(folder, tiny_encoder_dir, abstain=False, bm25_prior=None):
    """A Hugging Face folder with a 1-label head and the ralm_reranker.json the inference side reads."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ralm.rerank.export_record import RERANKER_FILE, RERANKER_FORMAT
    from ralm.rerank.inputs import INPUT_FORMAT

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_encoder_dir, num_labels=1)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_encoder_dir).save_pretrained(folder)
    info = {
        "format": RERANKER_FORMAT,
        "input_format": INPUT_FORMAT,
        "max_length": 128,
        "max_prefix_tokens": 64,
        "abstain": abstain,
        "base_model": "tiny",
        "loss": "marginal",
        "trained_on": "test",
        "bm25_prior": bm25_prior,
    }
    (folder / RERANKER_FILE).write_text(json.dumps(info))
    return folder


@pytest.mark.parametrize("abstain", [False, True])
def test_trained_reranker_orders_candidates_by_its_scores(tmp_path, tiny_encoder_dir, abstain):
    from ralm.rerank.inference import PredictiveReranker

    folder = export_tiny_reranker(tmp_path / "reranker", tiny_encoder_dir, abstain=abstain)
    source = PassageSource(FixedRetriever(), rerank=str(folder), candidates=5)
    query = "Which module decodes JSON? The answer is"
    [top] = source.search([query], 3)
    candidates = [f"title{i}\n{b}" for i, b in enumerate(BODIES)] + ([""] if abstain else [])
    scores = PredictiveReranker.from_pretrained(folder, device="cpu").score([query], [candidates])[0]
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])[:3]
    # The empty passage (abstain) is offered but never shown: it only leaves a slot empty.
    assert [p.id for p in top] == [f"p{i}" for i in order if i < len(BODIES)]


def test_bm25_prior_reranker_gets_the_hits_bm25_scores(tmp_path, tiny_encoder_dir):
    """A reranker trained with the BM25 prior needs each hit's score; with a dominating prior weight the
    order is BM25's own (p0, p1, p2), although the head alone orders the candidates differently."""
    from ralm.rerank.inference import PredictiveReranker

    plain = export_tiny_reranker(tmp_path / "plain", tiny_encoder_dir)
    query = "Which module decodes JSON? The answer is"
    candidates = [f"title{i}\n{b}" for i, b in enumerate(BODIES)]
    head = PredictiveReranker.from_pretrained(plain, device="cpu").score([query], [candidates])[0]
    assert sorted(range(5), key=lambda i: -head[i])[:3] != [0, 1, 2], (
        "the head alone must not agree with BM25"
    )

    folder = export_tiny_reranker(
        tmp_path / "prior", tiny_encoder_dir, bm25_prior={"rule": "bm25-zscore", "weight": 1e4}
    )
    [top] = PassageSource(FixedRetriever(), rerank=str(folder), candidates=5).search([query], 3)
    assert [p.id for p in top] == ["p0", "p1", "p2"]


def test_flare_reranks_against_the_query_it_issues(tmp_path, tiny_encoder_dir):
    """Inside FLARE the trained reranker judges the candidates against each issued query (the input,
    then the masked look-ahead), the text BM25 searched with, not the question plus the answer so far."""
    from flare_fixtures import RecordingRetriever, chain_lm

    from ralm.eval.qa.data import QAExample
    from ralm.eval.qa.flare import FlareRunner
    from ralm.eval.qa.flare_options import FlareOptions

    example = QAExample("x", "where is the capital ?", ["paris"])
    chain = [("the", 0.95), ("capital", 0.9), ("is", 0.85), ("paris", 0.3), (".", 0.99)]
    lm = chain_lm(chain, extra_words=example.question.split())
    source = PassageSource(
        RecordingRetriever(), rerank=str(export_tiny_reranker(tmp_path / "r", tiny_encoder_dir))
    )
    judged: list[str] = []
    score = source._reranker.score  # a spy on the real reranker: it still scores every candidate
    source._reranker.score = lambda prefixes, *rest: judged.extend(prefixes) or score(prefixes, *rest)
    out = FlareRunner(lm, FlareOptions(theta=0.8, docs=2), source).answer(example)
    issued = [step["query"] for step in out["trace"] if "query" in step]
    assert issued == ["where is the capital ?", "the capital is ."] and judged == issued


def test_a_search_whose_passages_a_no_retrieval_export_declines_is_not_a_retrieving_step(
    tmp_path, tiny_encoder_dir
):
    """An export whose validation decided no retrieval shows no passage: FLARE's unsure sentence still
    sends its query (a search), but nothing reaches the prompt, so the step is not a retrieving one."""
    from flare_fixtures import RecordingRetriever, chain_lm

    from ralm.eval.qa.data import QAExample
    from ralm.eval.qa.flare import FlareRunner
    from ralm.eval.qa.flare_options import FlareOptions
    from ralm.rerank.export_record import RERANKER_FILE

    folder = export_tiny_reranker(tmp_path / "r", tiny_encoder_dir, abstain=True)
    info = json.loads((folder / RERANKER_FILE).read_text())
    (folder / RERANKER_FILE).write_text(json.dumps({**info, "decision": "no-retrieval"}))
    example = QAExample("x", "where is the capital ?", ["paris"])
    chain = [("the", 0.95), ("capital", 0.9), ("is", 0.85), ("paris", 0.3), (".", 0.99)]
    lm = chain_lm(chain, extra_words=example.question.split())
    source = PassageSource(RecordingRetriever(), rerank=str(folder))
    out = FlareRunner(lm, FlareOptions(theta=0.8, docs=2), source).answer(example)
    [step] = [s for s in out["trace"] if "text" in s]
    assert step["searches"] == 1 and step["passages"] == [] and step["retrieved"] is False
    assert (out["searches"], out["search_steps"], out["retrieval_steps"]) == (2, 1, 0)
