"""FLARE's queries as the authors' code forms them (jzbjyb/FLARE at ec4b06b; the file and line each test
follows is named in it), on the bigram LM of tests/flare_fixtures.py: after any prompt ending in ":" it
writes its chain of words, so the "question" an explicit query asks is the chain's text."""

from __future__ import annotations

import re

from flare_fixtures import RecordingRetriever, chain_lm

from ralm.eval.qa.data import QAExample
from ralm.eval.qa.explicit import question_prompt
from ralm.eval.qa.flare import FlareRunner
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.lookahead import is_unsure, low_confidence_terms, masked_query
from ralm.eval.qa.retrieval import PassageSource

EXAMPLE = QAExample("x", "where is the capital ?", ["paris"])
PROMPT_WORDS = re.findall(r"\w+|[^\w\s]+", question_prompt("", "x"))  # as the fixture's tokenizer splits


def run(chain, reuse_cache=True, **settings):
    lm = chain_lm(chain, extra_words=[*EXAMPLE.question.split(), *PROMPT_WORDS])
    retriever = RecordingRetriever()
    runner = FlareRunner(lm, FlareOptions(**settings), PassageSource(retriever), reuse_cache=reuse_cache)
    out = runner.answer(EXAMPLE)
    return out, [s for s in out["trace"] if "text" in s], retriever, lm


def test_a_sentence_is_unsure_when_a_probability_is_at_most_theta_and_always_at_theta_one():
    # templates.py:746-751: retrieval when some token has p <= look_ahead_filter_prob.
    assert is_unsure([0.9, 0.4], theta=0.4) and not is_unsure([0.9, 0.41], theta=0.4)
    assert is_unsure([1.0, 1.0], theta=1.0)
    assert not is_unsure([1e-9, 0.5], theta=0.0)


def test_theta_one_retrieves_even_when_float32_rounds_every_probability_to_one():
    certain = [(w, 1 - 1e-12) for w in ("the", "capital", "is", "paris", ".")]
    out, [step], retriever, _ = run(certain, theta=1.0, query="full")
    assert step["min_prob"] == 1.0  # the float32 softmax rounded 1 - 1e-12 (the case the rule must survive)
    assert retriever.queries == ["where is the capital ?", "the capital is paris ."]
    assert step["searches"] == 1 and step["retrieved"] is True


def test_the_masked_query_replaces_tokens_at_or_below_beta_by_a_space():
    # templates.py:756: "".join(t if p > mask_prob else " " ...).strip(), on subword tokens.
    pieces = ["Yer", "ev", "an", " is", " the", " capital", "."]
    probs = [0.9, 0.4, 0.9, 0.9, 0.39, 0.95, 0.2]
    authors = "".join(t if p > 0.4 else " " for t, p in zip(pieces, probs, strict=True)).split()
    query = masked_query(lambda ids: "".join(pieces[i] for i in ids), range(len(pieces)), probs, beta=0.4)
    assert query.split() == authors == ["Yer", "an", "is", "capital"]


def test_unsure_tokens_fewer_than_five_apart_form_one_term():
    # templates.py:145-158 (min_gap=5): a token with p <= low starts a new term when 5 or more positions
    # after the previous one, else extends that term through it.
    probs = [0.9, 0.3, 0.9, 0.9, 0.9, 0.2, 0.9, 0.9, 0.9, 0.9, 0.1, 0.9, 0.4, 0.9]
    # unsure: 1; 5 (4 after 1: same term); 10 (5 after 5: a new term); 12 (2 after 10: same term)
    assert low_confidence_terms(probs, beta=0.4) == [(1, 6), (10, 13)]
    assert low_confidence_terms([0.9, 0.9], beta=0.4) == []


def test_nearby_unsure_words_make_one_question_that_retrieves():
    chain = [("is", 0.9), ("it", 0.3), ("paris", 0.9), ("or", 0.2), ("rome", 0.9), ("?", 0.99)]
    out, [step], retriever, _ = run(chain, theta=0.8, beta=0.4, query="explicit")
    assert retriever.queries == ["where is the capital ?", "is it paris or rome ?"]
    assert out["lm_calls"] == 3  # look-ahead, one question, the regenerated sentence
    assert step["terms"] == ["it paris or"]  # "it" and "or" are 2 tokens apart: one term
    assert step["questions"] == ["is it paris or rome ?"] and step["searches"] == 1 and step["retrieved"]


def test_a_reply_that_is_not_a_question_is_dropped_and_nothing_is_retrieved():
    # templates.py:325-326 drops a reply not ending in "?"; with no query left none is sent
    # (openai_api.py:424) and the passages stay.
    chain = [("the", 0.95), ("capital", 0.9), ("is", 0.85), ("paris", 0.3), (".", 0.99)]
    out, [step], retriever, _ = run(chain, theta=0.8, beta=0.4, query="explicit")
    assert retriever.queries == ["where is the capital ?"]
    assert out["lm_calls"] == 2 and out["generation"] == "the capital is paris ."  # look-ahead kept
    assert step["terms"] == ["paris"] and step["questions"] == [] and step["dropped"] == 1
    assert step["searches"] == 0 and step["retrieved"] is False and step["passages"] == ["q0-0", "q0-1"]


def test_with_only_punctuation_unsure_the_whole_sentence_is_the_query():
    # templates.py:169-170 drops punctuation terms; with no term left, templates.py:318-319 returns the
    # sentence itself as the query, and no question is asked.
    chain = [("the", 0.95), ("capital", 0.9), ("is", 0.85), ("paris", 0.9), (".", 0.3)]
    out, [step], retriever, _ = run(chain, theta=0.8, beta=0.4, query="explicit")
    assert retriever.queries == ["where is the capital ?", "the capital is paris ."]
    assert out["lm_calls"] == 2  # look-ahead and regeneration: no question
    assert step["terms"] == [] and step["fallback"] == "sentence" and "questions" not in step


def test_the_question_is_asked_given_the_answer_so_far_not_the_input():
    # templates.py:760-763 with openai_api.py:400: the context is the generated part of the prompt, then
    # the sentence (templates.py:313).
    chain = [("the", 0.9), ("capital", 0.9), ("is", 0.9), ("paris", 0.9), (".", 0.9)]
    chain += [("france", 0.9), ("has", 0.3), ("wine", 0.9), ("?", 0.99)]
    out, steps, retriever, lm = run(chain, reuse_cache=False, theta=0.8, beta=0.4, query="explicit")
    [asked] = [lm.decode(p) for p in lm.model.prompts if "Given" in lm.decode(p)]
    assert asked.startswith("the capital is paris . france has wine ? Given the above passage")
    assert "where" not in asked and asked.endswith('term / entity / phrase " has ". Question :')
    assert [s["terms"] for s in steps if "terms" in s] == [["has"]]
