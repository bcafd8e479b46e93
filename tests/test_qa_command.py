"""`ralm eval qa` end to end on CPU with the tiny GPT-2, a real bm25s index and a DPR results file."""

from __future__ import annotations

import json
import re

import pytest
from flare_fixtures import tiny_qa_corpus

from ralm.cli.main import main as ralm_main
from ralm.errors import RalmInputError
from ralm.eval.qa.metrics import has_answer
from ralm.eval.qa.qa_command import eval_qa
from ralm.lm.options import LMOptions
from ralm.retrieval.options import RetrievalOptions


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, real_documents):
    return tiny_qa_corpus(tmp_path_factory.mktemp("qa_corpus"), real_documents)


def cpu_lm(folder, **options) -> LMOptions:
    return LMOptions(str(folder), device="cpu", **options)


def read_predictions(folder):
    return [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]


def test_open_and_closed_book_write_predictions_and_results(tmp_path, corpus, tiny_lm_dir):
    open_dir, closed_dir = tmp_path / "open", tmp_path / "closed"
    ralm_main(
        [
            "eval",
            "qa",
            "--data",
            str(corpus["questions"]),
            "--output",
            str(open_dir),
            "--lm",
            str(tiny_lm_dir),
            "--index",
            str(corpus["index"]),
            "--docs",
            "2",
            "--device",
            "cpu",
            "--batch-size",
            "4",
        ]
    )
    eval_qa(str(corpus["questions"]), str(closed_dir), cpu_lm(tiny_lm_dir), docs=0)
    results = json.loads((open_dir / "results.json").read_text())
    records = read_predictions(open_dir)
    assert results["done"] == results["examples"] == len(records) == 6
    import pandas as pd

    frame = pd.read_json(open_dir / "predictions.jsonl", lines=True)  # docs/formats.md §7
    assert frame["em"].mean() == pytest.approx(results["metrics"]["em"])
    passages = {
        json.loads(line)["id"]: json.loads(line) for line in corpus["passages"].read_text().splitlines()
    }
    for record in records:
        assert len(record["passages"]) == 2
        shown = [passages[p["id"]]["contents"] for p in record["passages"]]
        assert record["has_answer"] == has_answer(shown, record["answers"])
        assert record["prediction"] == record["generation"].split("\n")[0]
    # BM25 finds each question's own module (the question quotes it), so the answer is in the passages.
    assert results["metrics"]["has_answer"] == 1.0
    closed = json.loads((closed_dir / "results.json").read_text())
    assert closed["metrics"]["has_answer"] is None and closed["done"] == 6


def test_dpr_results_file_needs_no_index(tmp_path, tiny_lm_dir):
    data = tmp_path / "dpr.json"
    ctxs = [
        {"id": "1", "title": "Tirana", "text": "Tirana is the capital of Albania."},
        {"title": "B", "text": "other"},
    ]
    data.write_text(
        json.dumps([{"question": "What is the capital of Albania", "answers": ["Tirana"], "ctxs": ctxs}])
    )
    out = eval_qa(str(data), str(tmp_path / "out"), cpu_lm(tiny_lm_dir), docs=1)
    record = read_predictions(tmp_path / "out")[0]
    assert record["passages"] == [{"id": "1", "title": "Tirana"}]
    assert out["metrics"]["has_answer"] == 1.0
    # run.json keeps the keys and values of the flat options before the option groups (the LM's name, the
    # requested max_length, 1024 when not given), and says how prompts start (the special prefix first).
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run == {
        "command": "eval qa",
        "lm": str(tiny_lm_dir),
        "docs": 1,
        "index": None,
        "format": "auto",
        "split": "dev",
        "reranker": "none",
        "k": 16,
        "max_new_tokens": 10,
        "max_length": 1024,
        "prompt_start": "special-prefix",
        "data": str(data.resolve()),
    }
    again = eval_qa(
        str(data),
        str(tmp_path / "out"),
        cpu_lm(tiny_lm_dir, max_length=1024),
        docs=1,
        retrieval=RetrievalOptions(threads=2),
    )
    assert again["done"] == 1 and read_predictions(tmp_path / "out") == [record]  # resumed, nothing redone
    with pytest.raises(RalmInputError, match=r"other settings \(max_length\)"):
        eval_qa(str(data), str(tmp_path / "out"), cpu_lm(tiny_lm_dir, max_length=512), docs=1)
    # A folder whose prompts did not start with the special prefix (ralm 0.1.0's run.json) is not mixed.
    del run["prompt_start"]
    (tmp_path / "out" / "run.json").write_text(json.dumps(run))
    with pytest.raises(RalmInputError, match=r"other settings \(prompt_start\)"):
        eval_qa(str(data), str(tmp_path / "out"), cpu_lm(tiny_lm_dir, max_length=1024), docs=1)


def test_resume_skips_finished_examples_and_drops_a_torn_line(tmp_path, corpus, tiny_lm_dir):
    out = tmp_path / "run"
    common = dict(data=str(corpus["questions"]), output=str(out), lm=cpu_lm(tiny_lm_dir), docs=0)
    eval_qa(**common, limit=3)
    first = read_predictions(out)
    assert len(first) == 3
    with open(out / "predictions.jsonl", "a") as f:
        f.write('{"id": "torn", "pred')  # a run killed mid-write
    eval_qa(**common)
    again = read_predictions(out)
    assert [r["id"] for r in again] == [
        json.loads(line)["id"] for line in corpus["questions"].read_text().splitlines()
    ]
    assert again[:3] == first  # finished predictions were kept, not redone
    with pytest.raises(RalmInputError, match="other settings"):
        eval_qa(**{**common, "max_new_tokens": 5})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "answers": ["x"]}', "questions.jsonl:1: missing field 'question'"),
        ('{"id": "a", "question": "  ", "answers": ["x"]}', "questions.jsonl:1: field 'question' is empty"),
        ('{"id": "a", "question": "q", "answers": "x"}', "field 'answers' must be a list of strings"),
        ('{"id": "a", "question": "q"', r"questions.jsonl:1:\d+: not valid JSON"),
    ],
)
def test_bad_input_fails_before_the_model_loads(tmp_path, line, message, capsys):
    data = tmp_path / "questions.jsonl"
    data.write_text(line + "\n")
    with pytest.raises(SystemExit) as exit_info:
        ralm_main(
            [
                "eval",
                "qa",
                "--data",
                str(data),
                "--output",
                str(tmp_path / "o"),
                "--lm",
                "/nonexistent",
                "--docs",
                "0",
            ]
        )
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


def test_prompt_longer_than_context_cuts_passages_not_question(tmp_path, tiny_lm_dir):
    long_text = "word " * 2000
    data = tmp_path / "dpr.json"
    ctxs = [{"title": "T", "text": long_text + " Tirana"}, {"title": "U", "text": long_text}]
    data.write_text(
        json.dumps([{"question": "What is the capital of Albania", "answers": ["Tirana"], "ctxs": ctxs}])
    )
    out = eval_qa(str(data), str(tmp_path / "out"), cpu_lm(tiny_lm_dir), docs=2)
    assert out["passages_cut"] == 1 and out["done"] == 1
    question_only = tmp_path / "q.jsonl"
    question_only.write_text(json.dumps({"id": "1", "question": "why " * 400, "answers": ["x"]}) + "\n")
    with pytest.raises(RalmInputError, match="example '1': the prompt without passages is"):
        eval_qa(str(question_only), str(tmp_path / "out2"), cpu_lm(tiny_lm_dir), docs=0)


def test_zero_shot_rerank_through_the_command(tmp_path, corpus, tiny_lm_dir):
    from ralm.eval.qa.retrieval import PassageSource
    from ralm.lm.loading import load_lm
    from ralm.retrieval.index import open_index

    out = eval_qa(
        str(corpus["questions"]),
        str(tmp_path / "zs"),
        cpu_lm(tiny_lm_dir),
        docs=2,
        retrieval=RetrievalOptions(str(corpus["index"]), k=4),
        reranker="zero-shot",
        limit=2,
    )
    records = read_predictions(tmp_path / "zs")
    assert out["done"] == 2 and all(len(r["passages"]) == 2 for r in records)
    # The passages shown are the reranker's top 2 of BM25's top 4, the same as asking the source directly.
    source = PassageSource(
        open_index(corpus["index"]), lm=load_lm(tiny_lm_dir, device="cpu"), rerank="zero-shot", candidates=4
    )
    expected = source.search([r["question"] for r in records], 2)
    assert [[p["id"] for p in r["passages"]] for r in records] == [[p.id for p in ps] for ps in expected]
