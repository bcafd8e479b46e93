"""Loaders for the QA formats users download (2WikiMultihopQA, StrategyQA, ASQA, DPR) and their bad input."""

from __future__ import annotations

import json

import pytest

from ralm.errors import RalmInputError
from ralm.eval.qa.data import load_examples, load_exemplars
from ralm.eval.qa.prompts import PromptPassage, flare_prompt, normalize_question, ralm_qa_prompt


def write(path, payload):
    path.write_text(json.dumps(payload))
    return path


def test_jsonl(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": 7, "question": " Who? ", "answers": ["a", "b"], "context": "c"}\n\n')
    [ex] = load_examples(path)
    assert (ex.id, ex.question, ex.answers, ex.context, ex.task) == ("7", "Who?", ["a", "b"], "c", "short")


def test_2wikimultihopqa(tmp_path):
    rec = {
        "_id": "abc",
        "type": "compositional",
        "question": "Who founded Versus?",
        "answer": "Gianni Versace",
        "context": [["Versus", ["Versus is a brand."]]],
        "supporting_facts": [["Versus", 0]],
    }
    [ex] = load_examples(write(tmp_path / "dev.json", [rec]))
    assert (ex.id, ex.answers, ex.task) == ("abc", ["Gianni Versace"], "short")


def test_strategyqa(tmp_path):
    recs = [
        {"qid": "q1", "term": "Pear", "question": "Would a pear sink in water?", "answer": False, "facts": []}
    ]
    [ex] = load_examples(write(tmp_path / "strategyqa_train.json", recs))
    assert (ex.id, ex.answers, ex.task) == ("q1", ["no"], "yesno")


def test_asqa(tmp_path):
    sample = {
        "ambiguous_question": "Who directed Pirates?",
        "qa_pairs": [
            {"question": "2003?", "short_answers": ["Gore Verbinski"]},
            {"question": "2011?", "short_answers": ["Rob Marshall", "Marshall"]},
        ],
        "annotations": [{"knowledge": [], "long_answer": "Gore Verbinski directed the 2003 film."}],
        "sample_id": "s1",
    }
    path = write(tmp_path / "ASQA.json", {"train": {}, "dev": {"s1": sample}})
    [ex] = load_examples(path, split="dev")
    assert ex.task == "long" and ex.answer_groups == [["Gore Verbinski"], ["Rob Marshall", "Marshall"]]
    assert ex.long_answers == ["Gore Verbinski directed the 2003 film."]
    with pytest.raises(RalmInputError, match="no 'test' split"):
        load_examples(path, split="test")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            [{"_id": "q", "question": "x?", "answer": ["a"]}],
            r"dev.json\[0\]: field 'answer' must be a string",
        ),
        ([{"_id": "q", "question": "", "answer": "a"}], r"dev.json\[0\]: field 'question' is empty"),
        (
            [{"question": "x", "answers": ["a"], "ctxs": [{"title": "t"}]}],
            r"dev.json\[0\].ctxs\[0\]: missing field 'text'",
        ),
        ({"something": 1}, "cannot tell the format"),
    ],
)
def test_bad_json_records(tmp_path, payload, message):
    with pytest.raises(RalmInputError, match=message):
        load_examples(write(tmp_path / "dev.json", payload))


def test_strategyqa_answer_must_be_boolean(tmp_path):
    path = write(tmp_path / "s.json", [{"qid": "q", "question": "x?", "answer": "yes"}])
    with pytest.raises(RalmInputError, match=r"s.json\[0\]: field 'answer' must be true or false"):
        load_examples(path, "strategyqa")


def test_duplicate_ids_and_missing_file(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"id": 1, "question": "a", "answers": ["x"]}\n{"id": 1, "question": "b", "answers": ["y"]}\n'
    )
    with pytest.raises(RalmInputError, match="duplicate example id '1'"):
        load_examples(path)
    with pytest.raises(RalmInputError, match="no such file"):
        load_examples(tmp_path / "none.jsonl")


def test_exemplars(tmp_path):
    path = tmp_path / "shots.jsonl"
    path.write_text('{"question": "Q1", "answer": "A1. So the answer is X."}\n')
    assert load_exemplars(path) == [("Q1", "A1. So the answer is X.")]
    path.write_text('{"question": "Q1"}\n')
    with pytest.raises(RalmInputError, match="shots.jsonl:1: missing field 'answer'"):
        load_exemplars(path)


def test_prompts_are_the_papers():
    # PAPERS.md / appendix C, as in the authors' eval_qa.py
    assert (
        normalize_question("Who got the first nobel prize in physics")
        == "who got the first nobel prize in physics?"
    )
    assert ralm_qa_prompt("Who got the first nobel prize in physics?", []) == (
        "Answer these questions:\nQ: who got the first nobel prize in physics?\nA:"
    )
    docs = [PromptPassage("1", "Nobel Prize", "A group."), PromptPassage("2", "Alfred Nobel", "Born 1833.")]
    assert ralm_qa_prompt("Who?", docs) == (
        "Nobel Prize\n\nA group.\n\nAlfred Nobel\n\nBorn 1833.\n\n"
        "Based on these texts, answer these questions:\nQ: who?\nA:"
    )
    assert ralm_qa_prompt("Who?", docs[:1]).startswith("Nobel Prize\n\nA group.\n\nBased on this text,")
    assert flare_prompt("Q?", docs[:1], [("E?", "F.")]) == (
        "Question: E?\nAnswer: F.\n\nSearch results:\n[1] Nobel Prize: A group.\n\nQuestion: Q?\nAnswer:"
    )
