"""`ralm data-gen`'s same-document exclusion: candidates equal filtering the whole ranking, and a real LM
profits from its own document's passages, which the exclusion removes.
"""

# ruff: noqa: F811  (the module fixture `corpus` is imported from data_gen_fixtures and used as an argument)

from __future__ import annotations

import json

import pytest
import torch
from data_gen_fixtures import (
    OPTIONS,
    cli_args,
    corpus,  # noqa: F401
    run_in_process,
)
from datasets import load_from_disk


def test_candidates_equal_filtering_the_whole_ranking(corpus, real_documents):
    """Fetch-more-and-filter (with deeper retries) equals ranking every passage and dropping own-document
    ones."""
    from ralm.data_gen.candidates import retrieve_candidates
    from ralm.retrieval.index import open_index

    _, _, index = corpus
    retriever = open_index(index)
    n = retriever.meta["num_passages"]
    # queries that are the document's own words, so own-document passages rank first and must be skipped
    docs = real_documents[:6]
    queries = [" ".join(d["text"].split()[:30]) for d in docs]
    got = retrieve_candidates(retriever, queries, [d["id"] for d in docs], 5, True, n)
    full = retriever.search(queries, n)
    for hits, ranking, d in zip(got, full, docs, strict=True):
        want = [h.id for h in ranking if h.doc_id != d["id"]][:5]
        assert [h.id for h in hits] == want and len(want) == 5
    assert any(r[0].doc_id == d["id"] for r, d in zip(full, docs, strict=True))
    kept = retrieve_candidates(retriever, queries, [d["id"] for d in docs], 5, False, n)
    assert [[h.id for h in r] for r in kept] == [[h.id for h in r[:5]] for r in full]


@pytest.mark.slow
def test_real_lm_profits_from_own_document_passages_which_exclusion_removes(tmp_path, corpus, smollm2_gguf):
    """SmolLM2 on real prose: with --allow-same-doc the LM's best passage is mostly the prefix's own document
    (it holds the continuation) and its gain over no retrieval is far larger than with the default exclusion,
    which is why the default excludes it (DESIGN.md)."""
    docs, _, index = corpus
    options = {
        **OPTIONS,
        "num_prefixes": 6,
        "k": 3,
        "max_length": 192,
        "max_passage_tokens": 80,
        "query_tokens": 32,
    }
    run_in_process(cli_args(docs, index, smollm2_gguf, tmp_path / "excluded", **options))
    run_in_process(
        [*cli_args(docs, index, smollm2_gguf, tmp_path / "allowed", **options), "--allow-same-doc"]
    )
    excluded = json.loads((tmp_path / "excluded" / "ralm_data_gen.json").read_text())["summary"]
    allowed = json.loads((tmp_path / "allowed" / "ralm_data_gen.json").read_text())["summary"]
    rows = load_from_disk(str(tmp_path / "allowed")).to_list()
    own_best = sum(
        r["candidate_doc_ids"][int(torch.tensor(r["lm_logprobs"]).argmax())] == r["doc_id"]
        for r in rows
        if r["lm_logprobs"]
    )
    assert own_best >= len(rows) // 2
    assert allowed["gain_best_over_no_retrieval"] > excluded["gain_best_over_no_retrieval"] + 0.3
    assert excluded["examples"] == allowed["examples"] == 6
