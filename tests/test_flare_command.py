"""`ralm eval flare` end to end on CPU: tiny GPT-2, a real bm25s index, every method, resume, results."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from flare_fixtures import tiny_qa_corpus

from ralm.cli.main import main as ralm_main
from ralm.errors import RalmInputError
from ralm.eval.qa.flare_command import eval_flare
from ralm.eval.qa.flare_options import FlareOptions
from ralm.lm.options import LMOptions
from ralm.retrieval.options import RetrievalOptions


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, real_documents):
    return tiny_qa_corpus(tmp_path_factory.mktemp("flare_corpus"), real_documents)


def read_predictions(folder):
    return [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("method", ["flare", "single", "window", "sentence", "no-retrieval"])
def test_each_method_writes_traces_and_results(tmp_path, corpus, tiny_lm_dir, method, capsys):
    out = tmp_path / method
    index = [] if method == "no-retrieval" else ["--index", str(corpus["index"])]
    ralm_main(
        [
            "eval",
            "flare",
            "--data",
            str(corpus["questions"]),
            "--output",
            str(out),
            "--lm",
            str(tiny_lm_dir),
            "--method",
            method,
            "--max-new-tokens",
            "24",
            "--lookahead-tokens",
            "12",
            "--window-tokens",
            "8",
            "--device",
            "cpu",
            "--limit",
            "3",
            "--stop",
            "\\n",
            *index,
        ]
    )
    # "\n" typed in a shell arrives as a backslash and an n; it means a newline
    assert json.loads((out / "run.json").read_text())["flare"]["stop"] == "\n"
    results = json.loads((out / "results.json").read_text())
    records = read_predictions(out)
    assert results["done"] == len(records) == 3
    for key in (
        "em",
        "f1",
        "precision",
        "recall",
        "retrieval_rate",
        "search_rate",
        "searches_per_example",
        "lm_calls_per_example",
        "seconds_per_example",
    ):
        assert key in results["metrics"]
    passage_ids = {json.loads(line)["id"] for line in corpus["passages"].read_text().splitlines()}
    for record in records:
        steps = [s for s in record["trace"] if "text" in s]
        assert steps and "".join(s["text"] for s in steps).startswith(record["generation"])
        for step in record["trace"]:
            assert set(step.get("passages", [])) <= passage_ids
            # A query of the random LM's gibberish may match no passage at all, so later steps show <= 2.
            assert len(step.get("passages", [])) <= (0 if method == "no-retrieval" else 2)
        if method != "no-retrieval":
            assert record["trace"][0]["step"] == "input" and len(record["trace"][0]["passages"]) == 2
        if method == "flare":
            assert all("min_prob" in s for s in steps if s["text"])
        # Every method's steps say what they sent and whether a search's passages reached their prompt.
        assert record["retrieval_steps"] == sum(s["retrieved"] for s in steps)
        assert record["search_steps"] == sum(s["searches"] > 0 for s in steps)
        assert all(s["passages"] for s in steps if s["retrieved"])
    total = sum(r["steps"] for r in records)
    for rate, count in (("retrieval_rate", "retrieval_steps"), ("search_rate", "search_steps")):
        assert results["metrics"][rate] == pytest.approx(sum(r[count] for r in records) / total)
    if method in ("window", "sentence"):  # each piece but the last searches for the next
        assert all(r["search_steps"] == r["searches"] - 1 == r["steps"] - 1 for r in records)
    summary = capsys.readouterr().out
    assert f"searched at {results['metrics']['search_rate']:.2f} of steps" in summary


def test_flare_resumes_and_exemplars_are_used(tmp_path, corpus, tiny_lm_dir):
    shots = tmp_path / "shots.jsonl"
    shots.write_text('{"question": "Which module parses JSON?", "answer": "So the answer is json."}\n')
    config = FlareOptions(max_new_tokens=16, lookahead_tokens=8)
    common = dict(
        data=str(corpus["questions"]),
        lm=LMOptions(str(tiny_lm_dir), device="cpu"),
        flare=config,
        retrieval=RetrievalOptions(str(corpus["index"])),
        exemplars=str(shots),
        output=str(tmp_path / "run"),
    )
    eval_flare(**common, limit=2)
    first = read_predictions(tmp_path / "run")
    # run.json keeps the keys, order and values of the flat options before the option groups (the LM's
    # name, the requested max_length, 1024 when not given), and says how prompts start.
    assert list(json.loads((tmp_path / "run" / "run.json").read_text()).items()) == [
        ("command", "eval flare"),
        ("predictions_format", "ralm-eval-flare/2"),
        ("lm", str(tiny_lm_dir)),
        ("index", str(corpus["index"])),
        ("format", "auto"),
        ("split", "dev"),
        ("exemplars", str(shots)),
        ("reranker", "none"),
        ("k", 16),
        ("max_length", 1024),
        ("prompt_start", "special-prefix"),
        ("data", str(corpus["questions"].resolve())),
        ("flare", asdict(config)),
    ]
    results = eval_flare(**common)
    again = read_predictions(tmp_path / "run")
    assert again[:2] == first and results["done"] == 6
    with pytest.raises(RalmInputError, match="other settings"):
        eval_flare(**{**common, "flare": FlareOptions(max_new_tokens=16, lookahead_tokens=8, theta=0.5)})


def test_bad_options_fail_before_loading(tmp_path, corpus, capsys):
    base = [
        "eval",
        "flare",
        "--data",
        str(corpus["questions"]),
        "--output",
        str(tmp_path / "o"),
        "--lm",
        "/nope",
    ]
    for extra, message in [
        (["--theta", "1.2", "--index", "x"], "error: --theta: must be >= 0 and <= 1, got 1.2"),
        (["--method", "single"], "--method single needs --index"),
    ]:
        with pytest.raises(SystemExit):
            ralm_main(base + extra)
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_theta_sweep_runs_each_point_and_both_references(tmp_path, corpus, tiny_lm_dir):
    """theta=0 never searches after the input and theta=1 searches at every sentence (full queries); a
    random LM's sentences ("::::") match no passage, so its retrieval rate counts only the steps whose
    prompt got one; each row is its own run's results; the plot is written."""
    config = FlareOptions(max_new_tokens=16, lookahead_tokens=8, query="full")
    out = tmp_path / "sweep"
    summary = eval_flare(
        data=str(corpus["questions"]),
        output=str(out),
        lm=LMOptions(str(tiny_lm_dir), device="cpu"),
        retrieval=RetrievalOptions(str(corpus["index"])),
        flare=config,
        limit=3,
        sweep="theta=0,1",
    )
    searched = [p["search_rate"] for p in summary["points"]]
    assert [p["run"] for p in summary["points"]] == ["theta=0", "theta=1"] and searched == [0.0, 1.0]
    for row in summary["points"] + summary["references"]:
        results = json.loads((out / row["run"] / "results.json").read_text())
        assert row["em"] == results["metrics"]["em"] and row["examples"] == 3
        steps = [s for r in read_predictions(out / row["run"]) for s in r["trace"] if "text" in s]
        shown = (
            sum(bool(s["passages"]) and s["searches"] > 0 for s in steps) if row["run"] == "theta=1" else 0
        )
        assert row["retrieval_rate"] == pytest.approx(shown / len(steps))
    assert [r["run"] for r in summary["references"]] == ["single", "no-retrieval"]
    assert json.loads((out / "sweep.json").read_text()) == summary and (out / "sweep.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ("theta=0.2,high", "'high' is not a number"),
        ("theta=0.5,1.5", r"--theta \(FlareOptions.theta\): must be >= 0 and <= 1, got 1.5"),
        ("stride=4", "expected theta or beta"),
        ("theta=0.2,0.2", "distinct"),
    ],
)
def test_bad_sweeps_fail_before_loading(tmp_path, corpus, sweep, message):
    with pytest.raises(RalmInputError, match=message):
        eval_flare(
            data=str(corpus["questions"]),
            output=str(tmp_path / "x"),
            lm=LMOptions("/nonexistent/lm"),
            retrieval=RetrievalOptions(str(corpus["index"])),
            sweep=sweep,
        )
    assert not (tmp_path / "x").exists()
