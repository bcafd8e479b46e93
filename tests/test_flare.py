"""FLARE's mechanism on a real torch LM whose token probabilities the test writes (tests/flare_fixtures.py).

The bigram LM writes "the capital is paris . france has wine !" after "Answer:", each word with the
probability the test chose, so which sentences are unsure, which tokens a masked query drops and how many
LM calls are needed are all known before the run.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from flare_fixtures import RecordingRetriever, chain_lm

from ralm.errors import RalmInputError
from ralm.eval.qa.data import QAExample
from ralm.eval.qa.flare import FlareRunner, run_batched
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.lookahead import first_sentence_length, sentence_end
from ralm.eval.qa.retrieval import PassageSource

SENT1 = [("the", 0.95), ("capital", 0.9), ("is", 0.85), ("paris", 0.3), (".", 0.99)]
SENT2 = [("france", 0.9), ("has", 0.5), ("wine", 0.9), ("!", 0.95)]
EXAMPLE = QAExample("x", "where is the capital ?", ["paris"])


def run(chain, texts=(), reuse_cache=True, **settings):
    lm = chain_lm(chain, extra_words=[w for t in (*texts, EXAMPLE.question) for w in t.split()])
    retriever = RecordingRetriever(texts)
    config = FlareOptions(**settings)
    config.check()
    runner = FlareRunner(lm, config, PassageSource(retriever), reuse_cache=reuse_cache)
    return runner.answer(EXAMPLE), retriever, lm


def test_sentence_end_and_first_sentence():
    assert sentence_end("the capital is paris . france") == len("the capital is paris .")
    assert sentence_end("the capital is paris .") is None  # no whitespace after the period yet
    assert sentence_end("  It is 3.5 m tall! Then") == len("  It is 3.5 m tall!")
    assert sentence_end('He said "yes." Then') == len('He said "yes."')
    assert sentence_end("He said, “Go.” Then") == len("He said, “Go.”")  # curly quotes (the WEB's)
    assert sentence_end("\n\nfirst line\nsecond") == len("\n\nfirst line\n")
    words = "a b . c d".split()
    decode = lambda ids: " ".join(words[i] for i in ids)  # noqa: E731
    assert first_sentence_length(decode, [0, 1, 2, 3, 4]) == 3
    assert first_sentence_length(decode, [0, 1]) == 2


@pytest.mark.parametrize(("theta", "fires"), [(0.29, False), (0.31, True), (0.84, True)])
def test_retrieval_fires_exactly_when_a_token_is_below_theta(theta, fires):
    out, retriever, _ = run(SENT1, theta=theta)
    steps = [s for s in out["trace"] if "text" in s]
    assert [s["retrieved"] for s in steps] == [fires]
    assert steps[0]["min_prob"] == pytest.approx(0.3, abs=1e-6)
    assert len(retriever.queries) == 1 + int(fires)  # the input retrieval, then one per unsure sentence
    assert out["generation"] == "the capital is paris ."


@pytest.mark.parametrize(
    ("beta", "query"),
    [(0.4, "the capital is ."), (0.2, "the capital is paris ."), (0.86, "the capital ."), (0.96, ".")],
)
def test_masked_query_drops_exactly_the_tokens_below_beta(beta, query):
    out, retriever, _ = run(SENT1, theta=0.8, beta=beta)
    assert retriever.queries == ["where is the capital ?", query]
    assert [s.get("query") for s in out["trace"] if "text" in s] == [query]


def test_fully_masked_query_retrieves_nothing_and_keeps_the_lookahead():
    unsure = [(w, 0.3) for w, _ in SENT1]
    out, retriever, _ = run(unsure, theta=0.8, beta=0.4)
    [step] = [s for s in out["trace"] if "text" in s]
    assert step["query"] == "" and step["searches"] == 0 and step["retrieved"] is False
    assert retriever.queries == ["where is the capital ?"] and out["lm_calls"] == 1


def test_full_query_uses_the_whole_sentence():
    _, retriever, _ = run(SENT1, theta=0.8, beta=0.4, query="full")
    assert retriever.queries[1] == "the capital is paris ."


def test_passages_are_replaced_not_accumulated():
    texts = ["alpha alpha", "bravo bravo", "charlie charlie"]
    out, retriever, lm = run(SENT1 + SENT2, texts=texts, reuse_cache=False, theta=0.8, docs=2)
    steps = [s for s in out["trace"] if "text" in s]
    assert [s["retrieved"] for s in steps] == [True, True]
    # Turn 0 is the input retrieval; turns 1 and 2 the two unsure sentences. Each regeneration shows
    # exactly the passages of its own query.
    assert [s["passages"] for s in steps] == [["q1-0", "q1-1"], ["q2-0", "q2-1"]]
    # Without cache reuse each generation call feeds its whole prompt at once (later forwards are 1 token).
    prompts = [lm.decode(p) for p in lm.model.prompts if len(p) > 1]
    last = prompts[-1]  # the regeneration of sentence 2: only turn 2's passages are in its prompt
    assert "charlie" in last and "bravo" not in last and "alpha" not in last
    assert out["generation"] == "the capital is paris . france has wine !"


def test_confident_lookahead_is_kept_without_a_second_call():
    confident = [(w, 0.9) for w, _ in SENT1 + SENT2]
    kept, retriever, _ = run(confident, theta=0.8)
    regenerated, _, _ = run(confident, theta=0.8, keep_confident=False)
    assert kept["generation"] == regenerated["generation"] == "the capital is paris . france has wine !"
    assert kept["lm_calls"] == 2 and regenerated["lm_calls"] == 4  # two sentences, one call each when kept
    assert kept["retrieval_steps"] == 0 and len(retriever.queries) == 1
    # The second look-ahead's prompt extends the first: the KV cache serves it.
    assert kept["tokens_reused"] > 0


def counts(out: dict) -> dict:
    """Each step's searches and whether a search's passages reached its prompt; the example's totals."""
    steps = [s for s in out["trace"] if "text" in s]
    return {
        "searches": [s["searches"] for s in steps],
        "retrieved": [s["retrieved"] for s in steps],
        "totals": (out["steps"], out["searches"], out["search_steps"], out["retrieval_steps"]),
    }


def test_window_baseline_queries_with_the_previous_window():
    out, retriever, _ = run(SENT1 + SENT2, method="window", window_tokens=3)
    assert retriever.queries == ["where is the capital ?", "the capital is", "paris . france", "has wine !"]
    assert out["generation"] == "the capital is paris . france has wine !"
    assert out["lm_calls"] == 4  # the fourth window finds EOS at once
    # Windows 2-4 are generated with the previous window's passages: three retrieving steps of four, after
    # four searches (the input's, which serves window 1 as it serves every method, and three more).
    assert counts(out) == {
        "searches": [1, 1, 1, 0],
        "retrieved": [False, True, True, True],
        "totals": (4, 4, 3, 3),
    }


def test_sentence_baseline_queries_with_the_previous_sentence():
    out, retriever, _ = run(SENT1 + SENT2, method="sentence")
    assert retriever.queries == ["where is the capital ?", "the capital is paris ."]
    assert out["generation"] == "the capital is paris . france has wine !"
    # The second sentence is generated with the first one's passages: it retrieved.
    assert counts(out) == {"searches": [1, 0], "retrieved": [False, True], "totals": (2, 2, 1, 1)}


def test_a_search_that_finds_nothing_is_a_search_not_a_retrieving_step():
    """FLARE sends the unsure sentence's query; no passage comes back, so no passage reaches the prompt."""

    class EmptyRetriever(RecordingRetriever):
        def search(self, queries, k, threads=1):
            super().search(queries, k, threads)
            return [[] for _ in queries]

    lm = chain_lm(SENT1, extra_words=EXAMPLE.question.split())
    out = FlareRunner(lm, FlareOptions(theta=0.8), PassageSource(EmptyRetriever())).answer(EXAMPLE)
    assert counts(out) == {"searches": [1], "retrieved": [False], "totals": (1, 2, 1, 0)}


def test_single_and_no_retrieval_make_one_call():
    single, retriever, _ = run(SENT1 + SENT2, method="single")
    assert retriever.queries == ["where is the capital ?"] and single["lm_calls"] == 1
    assert counts(single)["totals"] == (1, 1, 0, 0)  # the input's search only: no retrieving step
    lm = chain_lm(SENT1 + SENT2, extra_words=EXAMPLE.question.split())
    none = FlareRunner(lm, FlareOptions(method="no-retrieval")).answer(EXAMPLE)
    assert none["searches"] == 0 and none["generation"] == single["generation"]
    batched = run_batched(
        FlareRunner(lm, FlareOptions(method="no-retrieval")), [EXAMPLE, EXAMPLE], batch_size=2
    )
    assert [b["generation"] for b in batched] == [none["generation"]] * 2


def test_stop_pattern_and_token_budget_end_the_answer():
    out, _, _ = run(SENT1 + SENT2, method="single", stop=" france")
    assert out["generation"] == "the capital is paris ."
    out, _, _ = run(SENT1 + SENT2, max_new_tokens=7, theta=0.0)
    assert out["generation"] == "the capital is paris . france has"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"theta": 1.5}, "--theta (FlareOptions.theta): must be >= 0 and <= 1, got 1.5"),
        ({"beta": -0.1}, "--beta (FlareOptions.beta): must be >= 0 and <= 1, got -0.1"),
        ({"method": "magic"}, "--method must be one of"),
        ({"query": "questions"}, "--query must be one of masked, past+masked, full, explicit"),
        ({"docs": 0}, "--docs (FlareOptions.docs): must be > 0, got 0"),
    ],
)
def test_bad_settings_are_input_errors(settings, message):
    with pytest.raises(RalmInputError, match=re.escape(message)):  # when built, not only when checked
        FlareOptions(**settings)


CONFIDENT2 = [(w, 0.9) for w, _ in SENT2]


def test_look_ahead_pre_retrieval_none_generates_the_first_look_ahead_without_passages():
    """FlashRAG's variant: no retrieval with the input; the unsure first sentence retrieves by itself."""
    out, retriever, _ = run(SENT1, theta=0.8, look_ahead_pre_retrieval="none")
    assert retriever.queries == ["the capital is ."]  # only the masked look-ahead ("paris" < beta)
    assert [s["step"] for s in out["trace"] if "step" in s] == []  # no input retrieval step
    [step] = [s for s in out["trace"] if "text" in s]
    assert step["retrieved"] is True and step["passages"] == ["q0-0", "q0-1"]


def test_reinit_ctx_generates_each_later_look_ahead_without_the_previous_passages():
    kept, _, _ = run(SENT1 + CONFIDENT2, theta=0.8)
    fresh, _, _ = run(SENT1 + CONFIDENT2, theta=0.8, reinit_ctx=True)
    passages = [[s["passages"] for s in out["trace"] if "text" in s] for out in (kept, fresh)]
    # Sentence 2 is confident, so it is kept as generated: with the unsure sentence's passages, or none.
    assert passages == [[["q1-0", "q1-1"], ["q1-0", "q1-1"]], [["q1-0", "q1-1"], []]]
    assert kept["generation"] == fresh["generation"] == "the capital is paris . france has wine !"


def test_first_keep_shows_the_input_passages_first_in_every_prompt():
    """The authors' look_ahead_pre_retrieval='first-keep': the input's passages stay, and each unsure
    sentence's passages follow them in place of the previous sentence's."""
    texts = ["alpha alpha", "bravo bravo", "charlie charlie"]
    out, retriever, lm = run(
        SENT1 + SENT2,
        texts=texts,
        reuse_cache=False,
        theta=0.8,
        docs=2,
        look_ahead_pre_retrieval="first-keep",
    )
    steps = [s for s in out["trace"] if "text" in s]
    assert len(retriever.queries) == 3 and [s["retrieved"] for s in steps] == [True, True]
    assert [s["passages"] for s in steps] == [
        ["q0-0", "q0-1", "q1-0", "q1-1"],
        ["q0-0", "q0-1", "q2-0", "q2-1"],
    ]
    last = [lm.decode(p) for p in lm.model.prompts if len(p) > 1][-1]  # sentence 2's regeneration
    assert "alpha" in last and "charlie" in last and "bravo" not in last
    assert last.index("alpha") < last.index("charlie")  # the kept passages come first
    assert out["generation"] == "the capital is paris . france has wine !"


class SameAnswerRetriever(RecordingRetriever):
    """Every search finds the input's passages again (ids q0-*)."""

    def search(self, queries, k, threads=1):
        found = super().search(queries, k, threads)
        return [[replace(h, id=h.id.replace(h.id.split("-")[0], "q0")) for h in hits] for hits in found]


def test_first_keep_search_that_finds_only_kept_passages_is_a_search_not_a_retrieval():
    lm = chain_lm(SENT1, extra_words=EXAMPLE.question.split())
    config = FlareOptions(theta=0.8, look_ahead_pre_retrieval="first-keep")
    out = FlareRunner(lm, config, PassageSource(SameAnswerRetriever())).answer(EXAMPLE)
    [step] = [s for s in out["trace"] if "text" in s]
    assert step["searches"] == 1 and step["retrieved"] is False
    assert step["passages"] == ["q0-0", "q0-1"]  # nothing new: the kept passages alone, once each
    assert (out["searches"], out["retrieval_steps"]) == (2, 0)


def test_first_keep_with_reinit_ctx_keeps_only_the_input_passages():
    out, _, _ = run(SENT1 + CONFIDENT2, theta=0.8, reinit_ctx=True, look_ahead_pre_retrieval="first-keep")
    passages = [s["passages"] for s in out["trace"] if "text" in s]
    # Sentence 1 retrieves (its passages after the input's); confident sentence 2 is generated afresh with
    # the kept passages alone, and shows nothing new, so it is not a retrieving step.
    assert passages == [["q0-0", "q0-1", "q1-0", "q1-1"], ["q0-0", "q0-1"]]
    assert [s["retrieved"] for s in out["trace"] if "text" in s] == [True, False]


def test_use_full_input_as_query_sends_the_whole_question_first():
    _, full, _ = run(SENT1, theta=0.0, max_query_tokens=2)
    _, cut, _ = run(SENT1, theta=0.0, max_query_tokens=2, use_full_input_as_query=False)
    assert full.queries == ["where is the capital ?"] and cut.queries == ["capital ?"]


def test_use_ctx_for_examplars_shows_each_exemplar_its_own_passages():
    shots = [("where is the capital ?", "paris")]
    texts = ["alpha", "bravo"]  # turn 0 (the exemplar's query) shows alpha, turn 1 (the input's) bravo
    lm = chain_lm(SENT1, extra_words=[*EXAMPLE.question.split(), *texts])
    retriever = RecordingRetriever(texts)
    config = FlareOptions(theta=0.0, use_ctx_for_examplars=True, docs=1)
    runner = FlareRunner(lm, config, PassageSource(retriever), shots, reuse_cache=False)
    runner.answer(EXAMPLE)
    assert retriever.queries == ["where is the capital ?", "where is the capital ?"]  # exemplar, then input
    prompt = lm.decode(lm.model.prompts[0])
    # The exemplar's passage before the exemplar's answer, the input's after it (before the input).
    assert prompt.index("alpha") < prompt.index("paris") < prompt.index("bravo")


def test_an_explicit_query_prompt_that_cannot_fit_is_an_error_before_generating():
    lm = chain_lm(SENT1, extra_words=EXAMPLE.question.split(), context_length=40)
    runner = FlareRunner(lm, FlareOptions(query="explicit"), PassageSource(RecordingRetriever()))
    with pytest.raises(RalmInputError, match="--query explicit: its question prompt"):
        runner.check([EXAMPLE])
    assert lm.model.prompts == []  # nothing was generated
