"""The stages need only ``ralm.lm.interface.LanguageModel``: `ralm eval ppl` and generation run end to end on
a character bigram LM that has nothing else (tests/protocol_lm.py), and give the numbers its closed form
gives. The Hugging Face LM implements the same protocol."""

from __future__ import annotations

import json
import math

import pytest
from ppl_fixtures import build_bm25_index
from protocol_lm import CharBigramLM

from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.eval_text import DOCUMENT_SEPARATOR
from ralm.eval.ppl.ppl_command import eval_ppl
from ralm.lm.generation import Generator, generate_batch
from ralm.lm.interface import LanguageModel
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions

CONDITIONS = ["no-retrieval", "bm25", "zero-shot", "oracle"]


def given_lm(lm: LanguageModel, max_length: int) -> LMOptions:
    """`--lm` options whose ``load`` is the LM built here (the seam a plug-in LM would use)."""

    class Given(LMOptions):
        def load(self) -> LanguageModel:
            return lm

    return Given(model=lm.name, device="cpu", max_length=max_length)


@pytest.fixture(scope="module")
def bigram(real_documents) -> CharBigramLM:
    return CharBigramLM([d["text"] for d in real_documents], context_length=80)


def test_both_lms_have_the_protocol_and_the_bigram_nothing_else(bigram, tiny_lm_dir):
    from ralm.lm.loading import load_lm

    assert isinstance(bigram, LanguageModel) and isinstance(load_lm(tiny_lm_dir, device="cpu"), LanguageModel)
    assert not hasattr(bigram, "model") and not hasattr(bigram, "tokenizer")


def test_eval_ppl_end_to_end_on_a_protocol_only_lm(bigram, real_documents, tmp_path):
    index, passages = build_bm25_index(real_documents, tmp_path / "corpus", words=40)
    texts = [real_documents[0]["text"][:900], real_documents[1]["text"][:700]]
    data = tmp_path / "eval.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out"
    eval_ppl(
        str(data),
        str(out),
        lm=given_lm(bigram, max_length=128),  # capped at the LM's 80 characters
        retrieval=RetrievalOptions(index=str(index), passages=str(passages), k=3),
        window=WindowOptions(stride=8, query_tokens=16, max_passage_tokens=16),
        compare=[Condition(name, name) for name in CONDITIONS],
        retrieval_cache=str(tmp_path / "cache.jsonl"),
        print_table=False,
        progress=False,
    )
    raw = DOCUMENT_SEPARATOR.join(texts)
    # A bigram LM reads only the previous character, which every input keeps (a 16-character passage and
    # 8 targets leave 56 of the prefix's): each condition's NLL is the text's own, whatever was retrieved.
    expected = -bigram.logprob(raw)
    summary = json.loads((out / "compare.json").read_text())
    assert summary["bootstrap"]["documents"] == 2  # the documents found by encode_with_offsets
    for condition in CONDITIONS:
        results = json.loads((out / condition / "results.json").read_text())
        assert results["config"]["max_length"] == 80 and results["config"]["tokenizer"] == "characters"
        assert results["counts"]["tokens"] == len(raw) and results["metrics"]["scored_tokens"] == len(raw) - 1
        assert results["metrics"]["total_nll"] == pytest.approx(expected, rel=1e-6)
        assert results["metrics"]["token_ppl"] == pytest.approx(math.exp(expected / (len(raw) - 1)), rel=1e-6)
    rows = [json.loads(line) for line in (out / "bm25" / "windows.jsonl").read_text().splitlines()]
    # Windows of 80 characters every 8: window 0 scores characters 1-79, then 8 at a time.
    assert [r["target_start"] for r in rows] == [1, *range(80, len(raw), 8)]
    for r in rows[1:]:  # each query is the 16 characters before the targets, decoded
        assert r["query"] == raw[r["target_start"] - 16 : r["target_start"]]
    # Most queries find a passage (a query of stopwords and word pieces may find none).
    assert sum(r["passage_id"] is not None for r in rows[1:]) > len(rows) / 2


def test_generation_on_a_protocol_only_lm_is_the_tables_greedy_walk(bigram):
    prompt = bigram.encode("The module")
    expected, probs = bigram.greedy(prompt[-1], 12)
    generator = Generator(bigram)
    got = generator.generate(prompt, max_new_tokens=12)
    assert got.token_ids == expected and got.probs == pytest.approx(probs, rel=1e-5)
    # The next prompt extends this one: its shared tokens are not fed again.
    longer = prompt + got.token_ids[:5]
    again = generator.generate(longer, max_new_tokens=4)
    assert again.token_ids == bigram.greedy(longer[-1], 4)[0]
    assert generator.counters.tokens_reused == len(longer) - 1
    # A batch (left-padded) gives each row its lone decode.
    short = bigram.encode("A")
    batch = generate_batch(bigram, [prompt, short], max_new_tokens=12)
    assert [g.token_ids for g in batch] == [expected, bigram.greedy(short[-1], 12)[0]]
