"""`ralm eval ppl` as a command: bad input fails early and clearly; the retrieval cache, resume and sweeps."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json

import pytest
from ppl_fixtures import build_bm25_index, ppl_setup  # noqa: F401

from ralm.cli.main import main as ralm_main
from ralm.errors import RalmInputError
from ralm.eval.ppl.ppl_command import RerankingOptions, eval_ppl
from ralm.eval.ppl.sweep import Sweep
from ralm.eval.ppl.windows import strided_windows
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions


def cli(args: list[str], capsys) -> str:
    """Run `ralm eval ppl ...`; return the error line (exit status 2 expected)."""
    with pytest.raises(SystemExit) as exit_info:
        ralm_main(["eval", "ppl", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()  # model loading may print progress lines first
    assert err[-1].startswith("error: ") and sum(line.startswith("error: ") for line in err) == 1
    return err[-1]


def base_args(ppl_setup, out, lm=None) -> list[str]:
    return [
        "--text",
        str(ppl_setup["text"]),
        "--lm",
        str(lm or ppl_setup["lm_dir"]),
        "--output",
        str(out),
        "--index",
        str(ppl_setup["index"]),
        "--max-length",
        "128",
        "--max-passage-tokens",
        "64",
        "--progress=false",
        "--device",
        "cpu",
    ]


def test_bad_input_fails_before_lm_work(ppl_setup, tmp_path, capsys):
    missing_lm = tmp_path / "no-such-model"  # an error about the LM would mean the checks came too late
    args = base_args(ppl_setup, tmp_path / "out", lm=missing_lm)

    assert "--stride: must be > 0, got 0" in cli([*args, "--stride", "0"], capsys)

    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n ")
    assert f"{empty}: the evaluation text is empty" in cli([*args, "--text", str(empty)], capsys)

    not_reranker = tmp_path / "plain_folder"
    not_reranker.mkdir()
    assert "not an exported reranker" in cli([*args, "--reranker", str(not_reranker)], capsys)
    assert "expected none, zero-shot, oracle" in cli([*args, "--reranker", "zero-shoot"], capsys)

    # An index built from another corpus: its passages file does not match the one given.
    other_passages = tmp_path / "other.jsonl"
    other_passages.write_text(
        json.dumps({"id": "x-0", "contents": "t\nother text", "title": "t", "doc_id": "x"}) + "\n"
    )
    assert "error: " in cli([*args, "--passages", str(other_passages)], capsys)
    assert not (tmp_path / "out" / "results.json").exists()


def test_bad_input_needing_the_tokenizer_fails_before_scoring(ppl_setup, tmp_path, capsys):
    args = base_args(ppl_setup, tmp_path / "out")
    short = tmp_path / "short.txt"
    short.write_text("A few words only.")
    assert "fewer than --query-tokens 32" in cli([*args, "--text", str(short)], capsys)
    assert "too small to hold a 64-token passage and 4 target tokens" in cli(
        [*args, "--max-length", "60"], capsys
    )
    assert "larger than --max-length" in cli([*args, "--no-retrieval", "true", "--stride", "200"], capsys)
    assert not list((tmp_path / "out").glob("windows.jsonl*"))


def _run(ppl_setup, out, cache, **kwargs):
    window = kwargs.pop("window", WindowOptions(stride=4, max_passage_tokens=64))
    return eval_ppl(
        text=str(ppl_setup["text"]),
        lm=LMOptions(str(ppl_setup["lm_dir"]), device="cpu", max_length=128),
        output=str(out),
        retrieval=RetrievalOptions(str(ppl_setup["index"]), k=4),
        max_tokens=240,
        retrieval_cache=str(cache),
        progress=False,
        window=window,
        **kwargs,
    )


def test_retrieval_cache_is_keyed_by_query_text_and_reused(ppl_setup, tmp_path):
    cache = tmp_path / "cache.jsonl"
    first = _run(ppl_setup, tmp_path / "a", cache)
    lines = [json.loads(x) for x in cache.read_text().splitlines()]
    queries = {row["query"] for row in lines[1:]}
    window_queries = {
        json.loads(x)["query"] for x in (tmp_path / "a" / "windows.jsonl").read_text().splitlines()
    }
    assert queries == window_queries - {None}
    assert first["timings"]["queries_searched"] == len(queries)
    # A second run (another reranker) finds every query in the cache: no search at all.
    second = _run(ppl_setup, tmp_path / "b", cache, reranking=RerankingOptions(reranker="oracle"))
    assert second["timings"]["queries_searched"] == 0
    assert second["metrics"]["total_nll"] <= first["metrics"]["total_nll"] + 1e-6  # oracle >= top-1


def test_killed_run_resumes_with_the_same_result(ppl_setup, tmp_path):
    cache = tmp_path / "cache.jsonl"
    out = tmp_path / "run"
    full = _run(ppl_setup, out, cache)
    rows = (out / "windows.jsonl").read_text().splitlines()
    # What a kill mid-run leaves: a partial log (its header, half the windows, a torn line), no results.
    header = json.dumps(
        {"config_key": __import__("ralm.eval.ppl.outputs").eval.ppl.outputs.config_key(full["config"])}
    )
    half = len(rows) // 2
    (out / "windows.jsonl.partial").write_text("\n".join([header, *rows[:half], rows[half][:10]]))
    (out / "windows.jsonl").unlink()
    (out / "results.json").unlink()
    resumed = _run(ppl_setup, out, cache)
    assert resumed["counts"]["resumed_windows"] == half
    assert resumed["metrics"]["total_nll"] == pytest.approx(full["metrics"]["total_nll"], rel=1e-9)
    assert (out / "windows.jsonl").read_text().splitlines() == rows
    assert not (out / "windows.jsonl.partial").exists()


def test_sweep_shares_one_retrieval_pass_and_plots(ppl_setup, tmp_path):
    cache = tmp_path / "cache.jsonl"
    sweep = _run(ppl_setup, tmp_path / "sweep", cache, sweep=Sweep("stride", (4, 8)))
    assert [p["value"] for p in sweep["points"]] == [4, 8]
    png = (tmp_path / "sweep" / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text())["field"] == "stride"
    # One search for the union of both strides' queries (stride 8's are a subset of stride 4's).
    results4 = json.loads((tmp_path / "sweep" / "stride=4" / "results.json").read_text())
    n4 = len(
        {
            q
            for q in (
                json.loads(x)["query"]
                for x in (tmp_path / "sweep" / "stride=4" / "windows.jsonl").read_text().splitlines()
            )
            if q
        }
    )
    assert results4["timings"]["queries_searched"] == n4
    # Each point equals a separate run with that stride.
    single = _run(
        ppl_setup,
        tmp_path / "s8",
        tmp_path / "other_cache.jsonl",
        window=WindowOptions(stride=8, max_passage_tokens=64),
    )
    assert sweep["points"][1]["total_nll"] == pytest.approx(single["metrics"]["total_nll"], rel=1e-9)
    assert single["counts"]["windows"] == len(strided_windows(240, 128, 8))


def test_results_file_has_counts_metrics_and_divisors(ppl_setup, tmp_path, capsys):
    results = _run(ppl_setup, tmp_path / "r", tmp_path / "cache.jsonl")
    on_disk = json.loads((tmp_path / "r" / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results))
    m, c = results["metrics"], results["counts"]
    text = ppl_setup["lm"].decode(ppl_setup["lm"].encode(ppl_setup["text"].read_text())[:240])
    assert c["words"] == len(text.split()) and c["words_eval_lm"] == text.count(" ")
    assert m["word_ppl"] == pytest.approx(
        pow(2.718281828459045, m["total_nll"] / len(text.split())), rel=1e-9
    )
    assert m["token_ppl_eval_lm"] == pytest.approx(pow(2.718281828459045, m["total_nll"] / 240), rel=1e-9)
    assert c["scored_tokens"] == 239 and 0 < m["retrieval_rate"] <= 1
    # The rate's numerator and denominator, as printed: windows with a passage of the windows whose query
    # found one (window 0 makes no query), not of all windows.
    rows = [json.loads(x) for x in (tmp_path / "r" / "windows.jsonl").read_text().splitlines()]
    retrieving = sum(
        1 for r in rows if r["query"] is not None and r["chosen_rank"] is not None
    )  # BM25: top-1
    given = sum(1 for r in rows if r["passage_id"] is not None)
    assert (c["retrieving_windows"], c["windows_with_passage"]) == (retrieving, given)
    assert m["retrieval_rate"] == pytest.approx(given / retrieving) and c["windows"] == retrieving + 1
    assert f"given a passage {given} of {retrieving} retrieving windows (rate {given / retrieving:.3f})" in (
        capsys.readouterr().out
    )
    assert results["config"]["stride"] == 4 and results["config"]["mode"] == "bm25"


def test_cli_with_a_shipped_config_end_to_end(ppl_setup, tmp_path, capsys):
    from pathlib import Path

    config = Path(__file__).resolve().parents[1] / "configs" / "eval_ppl" / "no_retrieval.yaml"
    out = tmp_path / "cli"
    ralm_main(
        [
            "eval",
            "ppl",
            "--config",
            str(config),
            "--text",
            str(ppl_setup["text"]),
            "--lm",
            str(ppl_setup["lm_dir"]),
            "--output",
            str(out),
            "--max-length",
            "128",
            "--max-tokens",
            "150",
            "--progress=false",
            "--device",
            "cpu",
        ]
    )
    summary = capsys.readouterr().out
    rows = [json.loads(x) for x in (out / "windows.jsonl").read_text().split("\n") if x]
    assert all(r["query"] is None and r["passage_id"] is None for r in rows)
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["mode"] == "no-retrieval" and results["config"]["max_length"] == 128
    assert (
        results["counts"]["scored_tokens"] == 149
        and len((out / "windows.jsonl").read_text().splitlines()) == 7
    )
    assert f"token perplexity {results['metrics']['token_ppl']:.4f}" in summary


def test_a_missing_lm_fails_naming_the_option_before_the_output_exists(ppl_setup, tmp_path):
    with pytest.raises(RalmInputError, match="^--lm: required"):
        eval_ppl(text=str(ppl_setup["text"]), output=str(tmp_path / "out"), no_retrieval=True)
    assert not (tmp_path / "out").exists()
