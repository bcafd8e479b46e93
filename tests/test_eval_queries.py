"""What each window's BM25 query is made of (``--query-form``), checked end to end through `ralm eval ppl` on
the character bigram LM (tests/protocol_lm.py), whose greedy look-ahead and its probabilities are known in
closed form (``CharBigramLM.greedy``): the next character depends only on the last one; and, for a look-ahead
after BM25's passage, on a tiny GPT-2 against a plain greedy loop."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json
import re

import pytest
import torch
from ppl_fixtures import build_bm25_index, ppl_setup  # noqa: F401
from protocol_lm import CharBigramLM
from test_lm_protocol import given_lm

from ralm.errors import RalmInputError
from ralm.eval.ppl.options import QueryOptions
from ralm.eval.ppl.ppl_command import eval_ppl
from ralm.eval.ppl.queries import kept_tokens, lookahead_prompt
from ralm.eval.ppl.windows import Window
from ralm.lm.options import WindowOptions
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.passage_forms import best_sentence, continuation, next_passage, sentences
from ralm.retrieval.passages import read_passages
from ralm.retrieval.types import Hit

QUERY_TOKENS, LOOKAHEAD = 16, 6


@pytest.fixture(scope="module")
def bigram(real_documents) -> CharBigramLM:
    return CharBigramLM([d["text"] for d in real_documents], context_length=80)


@pytest.fixture(scope="module")
def corpus(real_documents, tmp_path_factory):
    root = tmp_path_factory.mktemp("queries")
    index, passages = build_bm25_index(real_documents, root / "corpus", words=40)
    text = real_documents[0]["text"][:600]
    data = root / "eval.txt"
    data.write_text(text)
    return {"index": index, "passages": passages, "data": data, "text": text, "root": root}


def _run(bigram, corpus, name: str, query: QueryOptions) -> tuple[dict, list[dict]]:
    out = corpus["root"] / name
    results = eval_ppl(
        str(corpus["data"]),
        str(out),
        lm=given_lm(bigram, max_length=80),
        retrieval=RetrievalOptions(index=str(corpus["index"]), passages=str(corpus["passages"]), k=2),
        window=WindowOptions(stride=8, query_tokens=QUERY_TOKENS, max_passage_tokens=16),
        query=query,
        retrieval_cache=str(corpus["root"] / "cache.jsonl"),
        progress=False,
    )
    return results, _windows(out)[1:]  # window 0 makes no query


def _greedy(bigram: CharBigramLM, text: str, at: int) -> tuple[list[int], list[float]]:
    """The LM's greedy look-ahead after text[:at]: a bigram reads only the last character."""
    return bigram.greedy(bigram.encode(text[at - 1])[0], LOOKAHEAD)


def _windows(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "windows.jsonl").read_text().splitlines()]


def _past(text: str, row: dict) -> str:
    """The paper's query: the ℓ characters before the window's targets."""
    return text[row["target_start"] - QUERY_TOKENS : row["target_start"]]


def test_the_future_query_is_the_true_next_tokens(bigram, corpus):
    results, rows = _run(bigram, corpus, "future", QueryOptions("future", lookahead_tokens=LOOKAHEAD))
    text = corpus["text"]
    assert [r["query"] for r in rows] == [text[r["target_start"] :][:LOOKAHEAD] for r in rows]
    assert results["config"]["query_form"] == "future" and results["config"]["lookahead_tokens"] == LOOKAHEAD
    assert "lookahead_generated_tokens" not in results["timings"]  # nothing was generated


@pytest.mark.parametrize("form, mask", [("lookahead", 0.0), ("lookahead", 0.3), ("past+lookahead", 0.3)])
def test_a_lookahead_query_is_the_lms_greedy_guess_with_unsure_tokens_left_out(bigram, corpus, form, mask):
    results, rows = _run(bigram, corpus, f"{form}-{mask}", QueryOptions(form, LOOKAHEAD, mask))
    text, expected, generated, dropped = corpus["text"], [], 0, 0
    for r in rows:
        start = r["target_start"]
        tokens, probs = _greedy(bigram, text, start)
        kept = [t for t, p in zip(tokens, probs, strict=True) if p >= mask]
        generated, dropped = generated + len(tokens), dropped + len(tokens) - len(kept)
        past = _past(text, r)
        guess = bigram.decode(kept)
        expected.append(past + guess if form == "past+lookahead" or not guess else guess)
    assert [r["query"] for r in rows] == expected
    assert (dropped > 0) == (mask > 0)  # the mask leaves tokens out here, and nothing without it
    assert results["timings"]["lookahead_generated_tokens"] == generated
    assert results["config"]["lookahead_mask"] == mask and results["config"]["query_form"] == form


def test_a_lookahead_with_no_sure_token_falls_back_to_the_past_query(bigram, corpus):
    results, rows = _run(bigram, corpus, "all-masked", QueryOptions("lookahead", LOOKAHEAD, 0.999))
    text = corpus["text"]
    assert [r["query"] for r in rows] == [_past(text, r) for r in rows]
    assert results["timings"]["lookahead_fallbacks"] == len(rows)


def test_the_papers_query_records_nothing_new(bigram, corpus):
    results, rows = _run(bigram, corpus, "past", QueryOptions())
    assert not {"query_form", "lookahead_tokens", "lookahead_mask"} & set(results["config"])
    text = corpus["text"]
    assert [r["query"] for r in rows] == [_past(text, r) for r in rows]


def test_kept_tokens_and_the_prompt_by_hand():
    assert kept_tokens([5, 6, 7, 8], [0.9, 0.3, 0.5, 0.1], 0.4) == [5, 7]
    assert kept_tokens([5, 6], [0.9, 0.3], 0.0) == [5, 6]
    tokens = list(range(100))
    window = Window(index=3, begin=24, end=88, prev_end=80)
    # 20 tokens of input: the lead (2) and the 20 - 6 - 2 = 12 tokens before token 80.
    assert lookahead_prompt(tokens, window, 20, 6, (998, 999)) == [998, 999, *range(68, 80)]
    assert lookahead_prompt(tokens, Window(1, 0, 8, 4), 20, 6, ()) == [0, 1, 2, 3]  # near the start
    with pytest.raises(ValueError, match="no context"):
        lookahead_prompt(tokens, window, 8, 6, (998, 999))


def test_query_options_refuse_what_their_form_does_not_read():
    with pytest.raises(RalmInputError, match="--lookahead-mask"):
        QueryOptions("past", lookahead_mask=0.4)
    with pytest.raises(RalmInputError, match="--lookahead-mask"):
        QueryOptions("future", lookahead_mask=0.4)
    with pytest.raises(RalmInputError, match="--lookahead-tokens"):
        QueryOptions("past", lookahead_tokens=8)
    with pytest.raises(RalmInputError, match="lookahead_mask"):
        QueryOptions("lookahead", lookahead_mask=1.0)  # β must leave some token possible


def test_a_lookahead_after_the_passage_continues_bm25s_top1_then_the_context(ppl_setup, tmp_path):
    """``--lookahead-context passage``: the look-ahead is the greedy decode (a plain loop without a cache,
    tests/test_flare_generation.py) of BM25's top-1 passage for the past query, cut as it is prepended, then
    the last context tokens before the targets that fit beside it and the look-ahead."""
    from test_flare_generation import reference_greedy

    from ralm.lm.loading import load_lm

    lm = load_lm(ppl_setup["lm_dir"], device="cpu", dtype="float32")
    with torch.no_grad():
        lm.model.lm_head.weight.mul_(40.0)  # a random model's logits are nearly flat: keep greedy off ties
    common = {
        "lm": given_lm(lm, max_length=128),
        "retrieval": RetrievalOptions(str(ppl_setup["index"]), passages=str(ppl_setup["passages"]), k=2),
        "window": WindowOptions(stride=8, query_tokens=QUERY_TOKENS, max_passage_tokens=32),
        "max_tokens": 200,
        "retrieval_cache": str(tmp_path / "cache.jsonl"),
        "progress": False,
    }
    text = str(ppl_setup["text"])
    eval_ppl(text, str(tmp_path / "past"), **common)
    query = QueryOptions("lookahead", LOOKAHEAD, lookahead_context="passage")
    eval_ppl(text, str(tmp_path / "look"), query=query, **common)
    past, look = (
        [json.loads(x) for x in (tmp_path / d / "windows.jsonl").read_text().splitlines()][1:]
        for d in ("past", "look")
    )
    contents = {p.id: p.contents for p in read_passages(ppl_setup["passages"])}
    tokens = lm.encode(ppl_setup["text"].read_text())[:200]
    for before, row in zip(past, look, strict=True):
        head = lm.encode_passages([contents[before["passage_id"]]])[0][:32]
        start = row["target_start"]
        prompt = head + tokens[max(0, start - (128 - LOOKAHEAD - len(head))) : start]
        guess, _ = reference_greedy(lm, prompt, LOOKAHEAD)
        assert row["query"] == (lm.decode(guess) if guess else before["query"])
    assert sum(b["query"] != r["query"] for b, r in zip(past, look, strict=True)) > len(look) // 2


def test_sentences_and_the_best_match_by_hand():
    body = "In the beginning. God said, “Let there be light!” And there was light? ‘Yes.’” end"
    assert sentences(body) == [
        "In the beginning.",
        "God said, “Let there be light!”",
        "And there was light?",
        "‘Yes.’”",
        "end",
    ]
    assert best_sentence(body, "there was light") == 2  # 3 shared words; sentence 1 shares 2
    assert best_sentence(body, "light") == 1  # a tie: the earliest
    assert best_sentence(body, "nothing shared") == 0


def test_a_continuation_starts_at_the_best_sentence_and_runs_into_the_next_passage():
    hit = Hit(
        id="Gen-3",
        score=2.0,
        contents="Genesis\nA b c. Light was made. Then night.",
        title="Genesis",
        doc_id="Gen",
    )
    cont = continuation(hit, "Genesis\nMorning came.", "the light was made")
    assert cont.contents == "Genesis\nLight was made. Then night. Morning came." and cont.id == "Gen-3@1"
    assert continuation(hit, None, "then night").contents == "Genesis\nThen night."
    assert (cont.score, cont.doc_id) == (2.0, "Gen")


def test_the_next_passage_is_the_same_documents_following_row(real_documents, tmp_path):
    from ralm.retrieval.index import open_index

    index, passages = build_bm25_index(real_documents, tmp_path / "corpus", words=40)
    rows = read_passages(passages)
    store = open_index(index, passages).store
    for i, p in enumerate(rows):
        hit = Hit(id=p.id, score=1.0, contents=p.contents, title=p.title, doc_id=p.doc_id)
        same = i + 1 < len(rows) and rows[i + 1].doc_id == p.doc_id
        assert next_passage(store, hit) == (rows[i + 1].contents if same else None)
    assert sum(
        next_passage(store, Hit(p.id, 1.0, p.contents, p.title, p.doc_id)) is None for p in rows
    ) == len({p.doc_id for p in rows})  # one last passage per document


def test_eval_ppl_hands_the_lm_each_hits_continuation(bigram, corpus):
    common = {
        "lm": given_lm(bigram, max_length=80),
        "retrieval": RetrievalOptions(index=str(corpus["index"]), passages=str(corpus["passages"]), k=2),
        "window": WindowOptions(stride=8, query_tokens=QUERY_TOKENS, max_passage_tokens=16),
        "retrieval_cache": str(corpus["root"] / "cache.jsonl"),
        "progress": False,
    }
    out = corpus["root"]
    eval_ppl(str(corpus["data"]), str(out / "retrieved"), **common)
    results = eval_ppl(str(corpus["data"]), str(out / "cont"), passage_form="continuation", **common)
    assert results["config"]["passage_form"] == "continuation"
    contents = {p.id: p.contents for p in read_passages(corpus["passages"])}
    pairs = list(zip(_windows(out / "retrieved"), _windows(out / "cont"), strict=True))
    assert [p["passage_id"] is None for p, _ in pairs] == [c["passage_id"] is None for _, c in pairs]
    for plain, cont in (pair for pair in pairs if pair[0]["passage_id"] is not None):
        passage_id, _, start = cont["passage_id"].partition("@")
        assert passage_id == plain["passage_id"]  # the same hit, handed on from sentence `start`
        body = contents[passage_id].split("\n", 1)[1]
        words = [set(re.findall(r"[^\W_]+", s.lower())) for s in re.split(r"(?<=[.!?])\s+", body.strip())]
        query = set(re.findall(r"[^\W_]+", cont["query"].lower()))
        overlaps = [len(w & query) for w in words]
        assert int(start) == overlaps.index(max(overlaps))
    assert any(
        not c["passage_id"].endswith("@0") for _, c in pairs if c["passage_id"]
    )  # not all from the top


def test_flare_and_qa_passages_are_handed_on_as_continuations(corpus):
    """`PassageSource(passage_form="continuation")` (``ralm eval flare --passage-form``): each hit from its
    sentence that best matches the query issued, on into the next passage of its document, the same hits in
    the same order as the passages as retrieved."""
    from ralm.eval.qa.retrieval import PassageSource
    from ralm.retrieval.index import open_index

    retriever = open_index(corpus["index"], corpus["passages"])
    queries = [corpus["text"][200:320], corpus["text"][400:520]]
    plain = PassageSource(retriever).search(queries, 3)
    handed = PassageSource(retriever, passage_form="continuation").search(queries, 3)
    rows = read_passages(corpus["passages"])
    row_of = {p.id: i for i, p in enumerate(rows)}
    starts = []
    for query, as_retrieved, continued in zip(queries, plain, handed, strict=True):
        assert [p.id for p in as_retrieved] == [p.id.partition("@")[0] for p in continued]
        for p in continued:
            passage_id, _, start = p.id.partition("@")
            # independently: split the body into sentences, keep from the one sharing most query words
            body = rows[row_of[passage_id]].contents.split("\n", 1)[1].strip()
            said = re.split(r"(?<=[.!?])\s+", body)
            query_words = set(re.findall(r"[^\W_]+", query.lower()))
            overlaps = [len(set(re.findall(r"[^\W_]+", s.lower())) & query_words) for s in said]
            assert int(start) == overlaps.index(max(overlaps))
            i = row_of[passage_id]
            same_document = i + 1 < len(rows) and rows[i + 1].doc_id == rows[i].doc_id
            following = rows[i + 1].contents.split("\n", 1)[1].strip() if same_document else ""
            assert p.text == " ".join([*said[int(start) :], following]).strip()
            starts.append(int(start))
    assert any(starts)  # not every passage from its first sentence
