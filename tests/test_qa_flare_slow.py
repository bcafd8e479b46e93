"""Real weights, real text: SmolLM2-135M-Instruct answering BSD quiz questions (atomic numbers, European
capitals) with BM25 over WordNet's noun glosses (ralm.eval.qa.quiz; Debian packages via ralm.corpora).

Open-book QA must beat closed-book exact match, and FLARE must do at least as well as no retrieval.
"""

from __future__ import annotations

import pytest

from ralm.eval.qa.flare import FlareRunner, run_batched
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.metrics import score_answer
from ralm.eval.qa.odqa import QARunner
from ralm.eval.qa.quiz import QUIZZES, quiz_examples, quiz_qa_set, wordnet_noun_index
from ralm.eval.qa.quiz import SHOTS as QUIZ_SHOTS
from ralm.eval.qa.retrieval import PassageSource

pytestmark = pytest.mark.slow

SHOTS = list(QUIZ_SHOTS)  # the set leaves their questions out


@pytest.fixture(scope="module")
def setup(tmp_path_factory, smollm2_gguf):
    from ralm.lm.loading import load_lm
    from ralm.retrieval.index import open_index

    _, index = wordnet_noun_index(tmp_path_factory.mktemp("wordnet"))
    lm = load_lm(smollm2_gguf)
    examples = quiz_examples("elements", every=5)[:12] + quiz_examples("europe", every=3)[:12]
    return lm, PassageSource(open_index(index)), examples


def qa_em(lm, source, examples, docs):
    runner = QARunner(lm, docs=docs, source=source)
    records = [r for i in range(0, len(examples), 8) for r in runner.answer_batch(examples[i : i + 8])]
    return sum(r["em"] for r in records) / len(records), records


def test_open_book_beats_closed_book(setup):
    lm, source, examples = setup
    closed, _ = qa_em(lm, source, examples, docs=0)
    opened, records = qa_em(lm, source, examples, docs=2)
    has_answer = sum(r["has_answer"] for r in records) / len(records)
    print(f"closed-book EM {closed:.3f}, open-book EM {opened:.3f}, has-answer {has_answer:.3f}")
    assert has_answer >= 0.5  # BM25 over the glosses finds the evidence for most questions
    assert opened > closed


def test_flare_is_at_least_no_retrieval(setup):
    lm, source, examples = setup

    def em(outs):
        return sum(
            score_answer(o["generation"], ex.answers)["em"] for o, ex in zip(outs, examples, strict=True)
        )

    config = dict(max_new_tokens=16, lookahead_tokens=16, stop="\n")
    none = run_batched(
        FlareRunner(lm, FlareOptions(method="no-retrieval", **config), None, SHOTS), examples, 8
    )
    flare_runner = FlareRunner(lm, FlareOptions(method="flare", **config), source, SHOTS)
    flare = [flare_runner.answer(ex) for ex in examples]
    steps = sum(o["steps"] for o in flare)
    rate = sum(o["retrieval_steps"] for o in flare) / steps
    print(
        f"no-retrieval EM {em(none) / len(examples):.3f}, FLARE EM {em(flare) / len(examples):.3f}, "
        f"retrieval rate {rate:.2f}, LM calls/example {sum(o['lm_calls'] for o in flare) / len(flare):.2f}"
    )
    assert 0.0 <= rate <= 1.0
    assert em(flare) >= em(none)


def test_explicit_queries_on_real_weights_ask_questions_about_unsure_spans(setup):
    """FLARE §3.2.2 with SmolLM2: every unsure step asked one question per term of unsure tokens (or, with
    no term, searched with the sentence); replies without "?" were dropped."""
    lm, source, examples = setup
    # beta = theta: every token that makes a sentence unsure is in a span (at beta 0.4 SmolLM2's unsure
    # sentences here had no token that low, and the implicit query stood in for every one).
    config = FlareOptions(
        method="flare",
        query="explicit",
        theta=0.8,
        beta=0.8,
        max_new_tokens=16,
        lookahead_tokens=16,
        stop="\n",
    )
    runner = FlareRunner(lm, config, source, SHOTS)
    outs = [runner.answer(ex) for ex in examples[:6]]
    steps = [s for o in outs for s in o["trace"] if "terms" in s]
    assert steps, "no sentence was unsure: the explicit path never ran"
    for step in steps:
        if not step["terms"]:  # no term at or below beta (only theta crossed): the sentence is the query
            assert step["fallback"] == "sentence" and step["searches"] == 1
            continue
        assert len(step["questions"]) + step["dropped"] == len(step["terms"])
        assert step["searches"] == len([q for q in step["questions"] if q.strip()])
    asked = [q for s in steps for q in s.get("questions", [])]
    with_terms = [s for s in steps if s["terms"]]
    print(
        f"{len(steps)} unsure steps, {len(with_terms)} with terms at or below beta, {len(asked)} questions: "
        f"{asked[:3]}, {sum(s.get('dropped', 0) for s in steps)} replies dropped (no '?')"
    )
    assert with_terms and asked, "terms at or below beta but the LM asked no question about any of them"
    assert all(q.endswith("?") for q in asked)


def test_the_quiz_qa_set_splits_every_question_once_without_the_exemplars():
    """bench/flare_qa.py's set: each quiz question once, in dev or test (every third one dev), the
    exemplars' own questions in neither, every quiz file in both splits."""
    dev, test, every = quiz_qa_set("dev"), quiz_qa_set("test"), quiz_qa_set("all")
    questions = {ex.question for name in QUIZZES for ex in quiz_examples(name)} - {q for q, _ in QUIZ_SHOTS}
    assert {ex.question for ex in every} == questions and len(every) == len(questions)
    assert {ex.id for ex in dev}.isdisjoint(ex.id for ex in test) and len(dev) + len(test) == len(every)
    assert [ex.id for ex in dev] == [ex.id for ex in every[::3]]
    kinds = [{ex.id.split("-")[0] for ex in split} for split in (dev, test)]
    assert kinds == [set(QUIZZES), set(QUIZZES)]
