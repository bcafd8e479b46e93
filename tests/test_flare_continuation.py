"""Long-form generation (``--format continuation``, ``ralm demo --flare``): the prompt layout, the stride
baseline's query, theta from a retrieval rate, the demo's prompts and the continuation metrics, each
checked against values worked out by hand."""

from __future__ import annotations

import json
import re

import pytest
from flare_fixtures import RecordingRetriever, chain_lm

from ralm.demo.flare_demo import continuation_prompts, flare_options, sentence_starts
from ralm.errors import RalmInputError
from ralm.eval.qa.data import QAExample, load_examples
from ralm.eval.qa.flare import FlareRunner, run_batched
from ralm.eval.qa.flare_options import FlareOptions
from ralm.eval.qa.flare_sweep import theta_for_rate
from ralm.eval.qa.lookahead import sentence_min_probs
from ralm.eval.qa.metrics import name_recall, names, score_answer
from ralm.eval.qa.prompts import PromptPassage, continuation_prompt
from ralm.eval.qa.retrieval import PassageSource

SENT1 = [("the", 0.95), ("capital", 0.9), ("is", 0.85), ("paris", 0.3), (".", 0.99)]
SENT2 = [("france", 0.9), ("has", 0.5), ("wine", 0.9), ("!", 0.95)]
TEXT = QAExample(
    "x", "so the story goes :", ["the capital is paris . france has wine !"], task="continuation"
)


def runner(method: str, retriever=None, **settings) -> tuple[FlareRunner, object]:
    lm = chain_lm(SENT1 + SENT2, extra_words=["so", "story", "goes", "t0", "t1", "t2", "t3", "passage", "0"])
    source = PassageSource(retriever or RecordingRetriever())
    return FlareRunner(lm, FlareOptions(method=method, **settings), source, layout="continuation"), lm


def test_continuation_prompt_shows_each_passage_then_the_text():
    passages = [PromptPassage("a", "Kings", "Solomon reigned."), PromptPassage("b", "Acts", "Paul went.")]
    assert (
        continuation_prompt("And then", passages) == "Kings\nSolomon reigned.\n\nActs\nPaul went.\n\nAnd then"
    )
    assert continuation_prompt("And then", []) == "And then"


def test_a_continuation_has_no_stop_pattern_and_runs_to_its_budget():
    # " france" would end a QA answer (tests/test_flare.py); a continuation ignores it.
    run, _ = runner("single", stop=" france")
    out = run.answer(TEXT)
    assert out["generation"] == "the capital is paris . france has wine !"
    run, _ = runner("single", stop=" france", max_new_tokens=6)
    assert run.answer(TEXT)["generation"] == "the capital is paris . france"
    batched = run_batched(runner("no-retrieval", stop=" france")[0], [TEXT], batch_size=1)
    assert batched[0]["generation"] == "the capital is paris . france has wine !"


def test_stride_queries_with_the_last_tokens_of_the_input_and_the_answer():
    retriever = RecordingRetriever()
    run, _ = runner("stride", retriever, window_tokens=3, max_query_tokens=4)
    out = run.answer(TEXT)
    assert out["generation"] == "the capital is paris . france has wine !"
    # The input's search (the whole input), then after every 3 tokens the last 4 of input + answer.
    assert retriever.queries == [
        "so the story goes :",
        ": the capital is",
        "is paris . france",
        "france has wine !",
    ]


def test_past_masked_queries_keep_the_text_before_the_unsure_sentence():
    """``past+masked``: the last max_query_tokens tokens of the input and the answer so far, then the
    unsure sentence with its tokens <= beta masked (worked out from SENT1 and SENT2 by hand)."""
    retriever = RecordingRetriever()
    run, _ = runner("flare", retriever, theta=0.55, beta=0.4, query="past+masked", max_query_tokens=4)
    assert run.answer(TEXT)["generation"] == "the capital is paris . france has wine !"
    assert retriever.queries == [
        "so the story goes :",  # the input's search
        "the story goes : the capital is .",  # "paris" (0.3) masked; nothing answered yet
        "capital is paris . france has wine !",  # "has" (0.5) unsure at theta, kept above beta
    ]
    masked, _ = runner("flare", RecordingRetriever(), theta=0.55, beta=0.4, max_query_tokens=4)
    masked.answer(TEXT)
    assert masked.source.retriever.queries[1:] == ["the capital is .", "france has wine !"]


def test_sentence_min_probs_cut_as_flare_cuts_its_look_aheads():
    lm = chain_lm(SENT1 + SENT2)
    tokens = lm.encode("the capital is paris . france has wine !")
    probs = [p for _, p in SENT1 + SENT2]
    assert sentence_min_probs(lm.decode, tokens, probs, 64) == [0.3, 0.5]
    # A look-ahead of 3 tokens: "the capital is" | "paris ." | "france has wine" | "!"
    assert sentence_min_probs(lm.decode, tokens, probs, 3) == [0.85, 0.3, 0.5, 0.95]


def test_theta_for_rate_makes_that_share_of_sentences_unsure():
    mins = [0.1, 0.5, 0.2, 0.9, 0.3]
    assert theta_for_rate(mins, 0.6) == 0.3  # 0.1, 0.2 and 0.3 are <= 0.3: 3 of 5
    assert sum(m <= theta_for_rate(mins, 0.5) for m in mins) == 3  # ceil(2.5)
    assert theta_for_rate(mins, 1.0) == 0.9
    with pytest.raises(RalmInputError, match="no look-ahead sentence"):
        theta_for_rate([], 0.5)


def test_only_flare_methods_read_theta():
    assert flare_options(_settings(), "single", 0.123).theta == FlareOptions.theta
    assert flare_options(_settings(), "flare", 0.123).theta == 0.123
    assert flare_options(_settings(), "flare-explicit", 0.123).query == "explicit"


def _settings():
    from ralm.demo.flare_demo import QUICK_FLARE

    return QUICK_FLARE


def _words(text: str) -> list[int]:
    return [m.start() for m in re.finditer(r"\S+", text)]


def test_continuation_prompts_open_at_sentence_starts_and_never_overlap():
    text = " ".join(f"Word{i} a b c d e f." if i % 2 else f"word{i} g h i." for i in range(60))
    starts = _words(text)
    prompts = continuation_prompts(text, starts, 4, prompt_tokens=10, new_tokens=6, name="t")
    assert [p["id"] for p in prompts] == ["t-0", "t-1", "t-2", "t-3"]
    sentence = set(sentence_starts(text))
    previous_end = 0
    for p in prompts:
        first = p["first_token"]
        assert starts[first] in sentence and first >= previous_end
        assert len(p["prompt"].split()) == 10 and len(p["continuation"].split()) == 6
        assert text.find(p["prompt"] + " " + p["continuation"]) == starts[first]
        previous_end = first + 16
    with pytest.raises(RalmInputError, match="hold at most"):
        continuation_prompts(text, starts, 100, prompt_tokens=10, new_tokens=6, name="t")


def test_a_prompt_keeps_its_first_word_when_tokens_start_at_the_space_before_it():
    """Gemma's tokenizer starts a word's token at the space before it ("▁Then"): the sentence's first
    token is the one holding its first character, not the next one."""
    text = "Alpha beta gamma. Delta epsilon zeta eta. Theta iota kappa lambda. Mu nu xi omicron."
    starts = [0, *(m.start() - 1 for m in re.finditer(r"\S+", text))][:1] + [
        m.start() - 1 for m in list(re.finditer(r"\S+", text))[1:]
    ]
    prompts = continuation_prompts(text, starts, 2, prompt_tokens=4, new_tokens=3, name="t")
    assert [p["prompt"] for p in prompts] == ["Alpha beta gamma. Delta", "Theta iota kappa lambda."]
    assert [p["continuation"] for p in prompts] == ["epsilon zeta eta.", "Mu nu xi"]


def test_names_are_capitalised_words_that_do_not_open_a_sentence():
    text = "Then Solomon spoke to Israel. The king’s men came; God’s ark stayed. And I saw Hiram.\nNow Tyre"
    assert names(text) == {"Solomon", "Israel", "God", "Hiram", "Tyre"}
    # Quoted speech opens a sentence: its first word is no name either (the WEB's curly quotes).
    assert names("He said, “Now go to Hiram.” Then ‘Behold’ Tyre") == {"Hiram", "Tyre"}
    assert name_recall("Solomon and God but not the rest", text) == 2 / 5
    assert name_recall("anything", "no names here. None at all.") is None


def test_a_continuation_is_scored_on_its_whole_text():
    scores = score_answer(
        "Solomon built the house of Yahweh", ["Solomon built a house for Yahweh"], "continuation"
    )
    # rouge-score's tokens: solomon built the house of yahweh | solomon built a house for yahweh: LCS 4 of 6.
    assert scores["rouge_l"] == pytest.approx(4 / 6)
    # SQuAD tokens (articles dropped): solomon built house of yahweh | solomon built house for yahweh.
    assert scores["f1"] == pytest.approx(4 / 5)
    # The reference's one name is Yahweh (Solomon opens it); "em" is no continuation metric.
    assert scores["name_recall"] == 1.0 and "em" not in scores


def test_the_continuation_format_is_read_and_checked(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        json.dumps({"id": "a", "prompt": "In the beginning", "continuation": "God created"}) + "\n"
    )
    (example,) = load_examples(path)  # auto: a .jsonl file whose records have prompt and continuation
    assert (example.question, example.answers, example.task) == (
        "In the beginning",
        ["God created"],
        "continuation",
    )
    path.write_text(json.dumps({"id": "a", "prompt": "In the beginning"}) + "\n")
    with pytest.raises(RalmInputError, match=r"prompts.jsonl:1: missing field 'continuation'"):
        load_examples(path, "continuation")
