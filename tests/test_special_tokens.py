"""Every input starts as the LM expects (``--special-tokens every-input``, the default): with a tokenizer
that adds a BOS, no retrieval, the context-matched baseline, data-gen's no-retrieval row and QA prompts start
with it, as every passage does, so conditions differ by the passage alone (``ralm.lm.special_tokens``).

The references are computed here with the Hugging Face model directly (``ralm.testing.target_losses``, one
unbatched forward per input) from inputs built by hand from the rule's wording: the BOS, then the window's
last ``max_length - 1`` tokens (no retrieval), or what the passage leaves (context-matched).
"""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from ppl_fixtures import bos_adding_copy, ppl_setup, reference_total_nll  # noqa: F401

from ralm.eval.ppl.conditions import parse_conditions
from ralm.eval.ppl.ppl_command import BatchOptions, eval_ppl
from ralm.lm.loading import FrozenLM, default_special_prefix, load_lm
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.index import open_index
from ralm.retrieval.options import RetrievalOptions
from ralm.testing import target_losses

MAX_LENGTH, PASSAGE, N = 128, 64, 300


@pytest.fixture(scope="module")
def bos_lm(ppl_setup, tmp_path_factory):
    lm_dir = bos_adding_copy(ppl_setup["lm_dir"], tmp_path_factory.mktemp("bos") / "lm")
    return lm_dir, load_lm(lm_dir, device="cpu", dtype="float32")


def test_the_special_prefix_is_read_off_the_tokenizer(ppl_setup, bos_lm, tmp_path):
    lm_dir, lm = bos_lm
    bos = lm.tokenizer.convert_tokens_to_ids(lm.tokenizer.eos_token)
    assert lm.special_prefix == (bos,) and lm.lead == (bos,)  # every-input is the default
    assert ppl_setup["lm"].special_prefix == ()  # the GPT-2-style tokenizer adds nothing
    two = bos_adding_copy(ppl_setup["lm_dir"], tmp_path / "two", extra=("<extra>",))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(two)
    assert default_special_prefix(tokenizer) == (bos, tokenizer.convert_tokens_to_ids("<extra>"))
    eval_lm = load_lm(lm_dir, device="cpu", dtype="float32", special_tokens="eval-lm")
    assert eval_lm.special_prefix == (bos,) and eval_lm.lead == ()
    assert eval_lm.encode_passages(["a b"])[0] == [bos, *eval_lm.encode("a b")]


def _run(ppl_setup, lm_dir, out, compare: str, max_tokens: int = N):
    return eval_ppl(
        text=str(ppl_setup["text"]),
        lm=LMOptions(str(lm_dir), device="cpu", dtype="float32", max_length=MAX_LENGTH),
        output=str(out),
        retrieval=RetrievalOptions(str(ppl_setup["index"]), k=1),
        max_tokens=max_tokens,
        retrieval_cache=str(out) + ".cache.jsonl",
        progress=False,
        window=WindowOptions(stride=4, query_tokens=32, max_passage_tokens=PASSAGE),
        compare=parse_conditions(compare),
        batching=BatchOptions(batch_size=6),
    )


@pytest.mark.parametrize("max_tokens", [N, 100])  # 100: a text shorter than one window
def test_no_retrieval_and_bm25_equal_the_reference_with_the_bos_first(
    ppl_setup, bos_lm, tmp_path, max_tokens
):
    lm_dir, lm = bos_lm
    _run(ppl_setup, lm_dir, tmp_path / "out", "no-retrieval,bm25", max_tokens)
    tokens = lm.tokenizer(ppl_setup["text"].read_text(), add_special_tokens=False)["input_ids"][:max_tokens]
    retriever = open_index(ppl_setup["index"])
    for condition, strategy in (("no-retrieval", "none"), ("bm25", "first")):
        got = json.loads((tmp_path / "out" / condition / "results.json").read_text())
        want, scored = reference_total_nll(
            lm.model,
            lm.tokenizer,
            tokens,
            input_length=MAX_LENGTH,
            stride=4,
            strategy=strategy,
            retriever=retriever,
            max_passage_tokens=PASSAGE,
            passage_special_tokens=True,
            lead=lm.special_prefix,
        )
        assert got["metrics"]["scored_tokens"] == scored
        assert got["metrics"]["total_nll"] == pytest.approx(want, rel=1e-6), condition
        assert got["config"]["special_tokens"] == "every-input"
        assert got["config"]["special_prefix"] == list(lm.special_prefix)


def test_each_window_row_is_its_hand_built_input(ppl_setup, bos_lm, tmp_path, monkeypatch):
    """Per retrieving window: no retrieval is BOS + the window's last L - 1 tokens; the context-matched row
    is BOS + the context BM25's passage leaves (so it loses exactly what the passage's text displaces); and
    every LM input of every condition starts with the BOS."""
    lm_dir, lm = bos_lm
    firsts: list[int] = []
    original = FrozenLM.logits

    def observed(self, input_ids, positions):
        firsts.extend(input_ids[:, 0].tolist())
        return original(self, input_ids, positions)

    monkeypatch.setattr(FrozenLM, "logits", observed)
    _run(ppl_setup, lm_dir, tmp_path / "out", "no-retrieval,no-retrieval-matched,bm25")
    assert firsts and set(firsts) == set(lm.special_prefix)
    tokens = lm.tokenizer(ppl_setup["text"].read_text(), add_special_tokens=False)["input_ids"][:N]
    rows = {
        c: [json.loads(x) for x in (tmp_path / "out" / c / "windows.jsonl").read_text().splitlines()]
        for c in ("no-retrieval", "no-retrieval-matched", "bm25")
    }
    retriever, bos = open_index(ppl_setup["index"]), list(lm.special_prefix)
    checked, prev_end = 0, 0
    for i, begin in enumerate(range(0, N, 4)):
        end = min(begin + MAX_LENGTH, N)
        if i > 0:
            n = end - prev_end
            hit = retriever.search([lm.tokenizer.decode(tokens[:prev_end][-32:])], 1)[0][0]
            passage = lm.tokenizer(hit.contents)["input_ids"][:PASSAGE]  # BOS first, as eval_lm.py
            assert passage[0] == bos[0]
            inputs = {
                "no-retrieval": bos + tokens[end - (MAX_LENGTH - 1) : end],
                "no-retrieval-matched": bos + tokens[begin + len(passage) : end],
                "bm25": passage + tokens[begin + len(passage) : end],
            }
            for condition, ids in inputs.items():
                want = float(target_losses(lm.model, torch.tensor(ids), n).sum())
                assert rows[condition][i]["nll"] == pytest.approx(want, rel=1e-5), (condition, i)
            checked += 1
        prev_end = end
        if end == N:
            break
    assert checked > 10


def test_eval_lm_mode_keeps_the_asymmetry_and_says_so(ppl_setup, bos_lm, tmp_path):
    lm_dir, lm = bos_lm
    eval_ppl(
        text=str(ppl_setup["text"]),
        lm=replace(
            LMOptions(str(lm_dir), device="cpu", dtype="float32", max_length=MAX_LENGTH),
            special_tokens="eval-lm",
        ),
        output=str(tmp_path / "out"),
        no_retrieval=True,
        max_tokens=N,
        progress=False,
        batching=BatchOptions(batch_size=6),
    )
    got = json.loads((tmp_path / "out" / "results.json").read_text())
    tokens = lm.tokenizer(ppl_setup["text"].read_text(), add_special_tokens=False)["input_ids"][:N]
    want, _ = reference_total_nll(lm.model, lm.tokenizer, tokens, input_length=MAX_LENGTH, stride=4)
    assert got["metrics"]["total_nll"] == pytest.approx(want, rel=1e-6)
    assert got["config"]["special_tokens"] == "eval-lm"


def test_data_gen_no_retrieval_row_starts_with_the_bos(bos_lm):
    from ralm.data_gen.prefixes import PrefixTokens
    from ralm.data_gen.scoring import score_prefix
    from ralm.lm.scoring import ScoringSettings

    _, lm = bos_lm
    ids = lm.encode("the quick brown fox jumps over the lazy dog " * 12)
    prefix, target = ids[:90], ids[90:94]
    passages = lm.encode_passages(["a short passage about foxes and dogs"])
    scores = score_prefix(
        lm,
        PrefixTokens(prefix, target, prefix[-32:]),
        passages,
        ScoringSettings(input_length=64, max_passage_tokens=32, rank_tokens=8),
    )
    bos = list(lm.special_prefix)
    # BOS + the prefix's last tokens that fit beside the target (64 in all), as no retrieval in eval.
    want = -target_losses(lm.model, torch.tensor(bos + prefix[-(64 - 1 - 4) :] + target), 4)
    assert scores.no_retrieval == pytest.approx(want.tolist(), abs=1e-5)
    want_rank = -target_losses(lm.model, torch.tensor(bos + prefix[-(64 - 1 - 4) :]), 8).sum()
    assert scores.no_retrieval_rank == pytest.approx(float(want_rank), abs=1e-4)


def test_qa_prompts_start_with_the_bos_in_both_modes(bos_lm):
    from ralm.eval.qa.prompts import PassageFitter, PromptPassage, keep_last

    _, lm = bos_lm
    bos = list(lm.special_prefix)
    for model in (lm, replace(lm, special_tokens="eval-lm")):
        fitter = PassageFitter(model, 40)
        long = PromptPassage("p", "title", "word " * 200)
        ids, cut = fitter.fit(lambda ps: "Q: who? " + " ".join(p.text for p in ps) + " A:", [long], reserve=8)
        assert ids[:1] == bos and len(ids) <= 32 and cut[0].text != long.text
    ids = bos + lm.encode("one two three four five six seven")
    assert keep_last(lm, ids, 4) == bos + ids[-3:]
