"""`ralm eval ppl --compare`: five conditions read off one table of k + 1 LM rows per retrieving window equal
five separate single-condition runs, window for window; the table resumes after a kill; the CLI prints it;
random, oracle-or-none and the statistics follow from it."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json

import numpy as np
import pytest
from naive_bootstrap import naive_change_interval
from ppl_compare_fixtures import MAX_LENGTH, SINGLE, WINDOW_KEYS, K, N, RequestCounter, _run, _windows
from ppl_fixtures import export_untrained_reranker, ppl_setup  # noqa: F401

import ralm.eval.ppl.perplexity
from ralm.eval.ppl.ppl_command import RerankingOptions
from ralm.eval.ppl.records import WindowScores
from ralm.eval.ppl.windows import strided_windows

# np.random.default_rng([5, window]).integers(k) for windows 0..39 (one digit per window), written down once
# (numpy 2.x: PCG64 seeded by SeedSequence([seed, window]), Generator.integers' bounded draw). The random
# condition must draw exactly these; another draw (rng.integers over [window, seed], a shared stream, a
# draw that depends on k's order) gives another table: for [window, 5] the k=4 row starts 2330021203.
DRAWS_SEED5 = {
    2: "1011110001001101110011101001100011001101",
    3: "2022210012112212210112201002200021102102",
    4: "2033220113113213320122312003310032103203",
}


@pytest.fixture(scope="module")
def runs(ppl_setup, tiny_encoder_dir, tmp_path_factory):
    """One compare run of all five conditions and the five separate runs, each with its LM row count."""
    root = tmp_path_factory.mktemp("compare")
    cache = root / "cache.jsonl"
    # Seed 8: a fresh abstaining head that declines some windows and reorders others (test_ppl_choosers).
    folder = export_untrained_reranker(tiny_encoder_dir, root / "reranker", abstain=True, seed=8)
    spec = f"no-retrieval,bm25,zero-shot,oracle,trained={folder}"
    singles, rows = {}, {}
    with pytest.MonkeyPatch.context() as mp:
        counter = RequestCounter(mp, ralm.eval.ppl.perplexity)
        compared = _run(ppl_setup, root / "compare", cache, compare=spec)
        compare_rows = counter.rows
    options = {**SINGLE, "trained": {"reranking": RerankingOptions(reranker=str(folder))}}
    for name, kwargs in options.items():
        with pytest.MonkeyPatch.context() as mp:
            counter = RequestCounter(mp, ralm.eval.ppl.perplexity)
            singles[name] = _run(ppl_setup, root / name, cache, **kwargs)
            rows[name] = counter.rows
    return {
        "root": root,
        "cache": cache,
        "spec": spec,
        "folder": folder,
        "compared": compared,
        "compare_rows": compare_rows,
        "singles": singles,
        "single_rows": rows,
    }


@pytest.mark.parametrize("name", ["no-retrieval", "bm25", "zero-shot", "oracle", "trained"])
def test_each_condition_equals_its_separate_run(runs, name):
    root, single, compared = runs["root"], runs["singles"][name], runs["compared"][name]
    got, want = _windows(root / "compare" / name), _windows(root / name)
    assert [list(r) for r in got] == [WINDOW_KEYS] * len(want)
    assert [r["chosen_rank"] for r in got] == [r["chosen_rank"] for r in want]
    assert [r["passage_id"] for r in got] == [r["passage_id"] for r in want]
    assert [r["query"] for r in got] == [r["query"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert g["nll"] == pytest.approx(w["nll"], rel=1e-4), g["window"]
    assert compared["metrics"]["token_ppl"] == pytest.approx(single["metrics"]["token_ppl"], rel=1e-5)
    assert compared["counts"] == single["counts"]
    # The config is the single run's own, plus the list of compared conditions.
    assert compared["config"].pop("compare") == runs["spec"].split(",")
    assert compared["config"] == single["config"]
    on_disk = json.loads((root / "compare" / name / "results.json").read_text())
    assert on_disk["config"]["mode"] == single["config"]["mode"] and on_disk["metrics"] == compared["metrics"]


def test_the_conditions_really_differ(runs):
    """Otherwise the equalities above would prove little: every chooser departs from BM25 somewhere."""
    root = runs["root"] / "compare"
    picks = {
        n: [r["chosen_rank"] for r in _windows(root / n)[1:]] for n in ("zero-shot", "oracle", "trained")
    }
    assert any(p not in (0, None) for p in picks["zero-shot"]) and picks["zero-shot"] != picks["oracle"]
    assert any(p not in (0, None) for p in picks["oracle"])
    assert None in picks["trained"] and any(p not in (0, None) for p in picks["trained"])
    m = {n: r["metrics"]["total_nll"] for n, r in runs["compared"].items()}
    assert m["oracle"] <= min(m["bm25"], m["zero-shot"], m["trained"])


def test_eval_outputs_load_with_pandas_and_datasets_as_documented(runs):
    """docs/formats.md §6 read as a user would, with nothing from ralm."""
    import datasets
    import pandas as pd

    root = runs["root"] / "compare"
    compare = json.loads((root / "compare.json").read_text())
    windows = pd.read_json(root / "bm25" / "windows.jsonl", lines=True)
    assert {"window", "nll", "num_targets", "passage_id", "copies_target"} <= set(windows.columns)
    assert windows["nll"].sum() == pytest.approx(compare["results"]["bm25"]["total_nll"], rel=1e-9)
    table = datasets.load_dataset("json", data_files=str(root / "candidates.jsonl"), split="train")
    assert len(table) == compare["table"]["windows"]
    per_candidate = table.to_pandas().explode("candidates").dropna(subset=["candidates"])
    assert len(per_candidate) == compare["table"]["candidates"]
    stats = pd.DataFrame({name: s["vs_bm25"] for name, s in compare["statistics"].items()}).T
    assert {"change", "low", "high", "significant"} <= set(stats.columns)


def test_table_has_k_candidates_per_retrieving_window_and_k_plus_one_lm_rows(runs):
    root = runs["root"] / "compare"
    table = [json.loads(x) for x in (root / "candidates.jsonl").read_text().splitlines()]
    windows = strided_windows(N, MAX_LENGTH, 4)
    assert [r["window"] for r in table] == [w.index for w in windows]
    assert table[0]["candidates"] == []
    bm25_rows = _windows(root / "bm25")
    for row, w, b in zip(table[1:], windows[1:], bm25_rows[1:], strict=True):
        assert (row["target_start"], row["num_targets"]) == (w.target_start, w.num_targets)
        assert len(row["candidates"]) == K and row["candidates"][0]["id"] == b["passage_id"]
        scores = [c["bm25"] for c in row["candidates"]]
        assert scores == sorted(scores, reverse=True)
        assert all(c["rank_logprob"] is not None and c["rank_logprob"] < 0 for c in row["candidates"])
    assert not (root / "candidates.jsonl.partial").exists()

    retrieving = len(windows) - 1
    assert runs["compare_rows"] == 1 + retrieving * (K + 1)
    singles = runs["single_rows"]
    assert singles["no-retrieval"] == singles["bm25"] == singles["trained"] == len(windows)
    assert singles["zero-shot"] == singles["oracle"] == 1 + retrieving * K
    assert sum(singles.values()) == 5 + retrieving * (2 * K + 3)

    summary = json.loads((root / "compare.json").read_text())
    assert summary["conditions"] == runs["spec"].split(",")
    assert summary["table"]["lm_requests"] == runs["compare_rows"]
    assert summary["table"]["candidates"] == retrieving * K and summary["table"]["resumed_windows"] == 0
    for name, r in runs["compared"].items():
        assert summary["results"][name]["token_ppl"] == r["metrics"]["token_ppl"]
        assert summary["results"][name]["total_nll"] == r["metrics"]["total_nll"]


def test_a_single_condition_scores_only_the_rows_its_plan_names(runs):
    """The planner's rows, counted at the LM: one condition scores fewer rows than the table of five."""
    from ralm.eval.ppl.conditions import parse_conditions, plan_rows, single_condition

    lines = (runs["root"] / "compare" / "candidates.jsonl").read_text().splitlines()
    table = [WindowScores.from_json(json.loads(x)) for x in lines]
    trained = {r["window"]: r["chosen_rank"] for r in _windows(runs["root"] / "trained")}
    conditions = {
        "no-retrieval": single_condition(True, "none"),
        "bm25": single_condition(False, "none"),
        "zero-shot": single_condition(False, "zero-shot"),
        "oracle": single_condition(False, "oracle"),
        "trained": single_condition(False, str(runs["folder"])),
    }
    for name, condition in conditions.items():
        planned = sum(plan_rows([condition], r, {"trained": trained[r.window]}).rows for r in table)
        assert runs["single_rows"][name] == planned < runs["compare_rows"], name
    together = parse_conditions(runs["spec"])
    assert runs["compare_rows"] == sum(plan_rows(together, r, {}, baselines=True).rows for r in table)
    assert runs["single_rows"]["bm25"] == len(table)  # BM25 alone: one row per window, not k + 1


def test_without_zero_shot_the_table_has_no_ranking_tokens(runs, ppl_setup, tmp_path):
    out = tmp_path / "plain"
    compared = _run(ppl_setup, out, runs["cache"], compare="bm25,oracle")
    table = [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()]
    assert all(c["rank_logprob"] is None for r in table for c in r["candidates"])
    for name in ("bm25", "oracle"):
        got, want = _windows(out / name), _windows(runs["root"] / name)
        assert [r["chosen_rank"] for r in got] == [r["chosen_rank"] for r in want]
        assert compared[name]["metrics"]["token_ppl"] == pytest.approx(
            runs["singles"][name]["metrics"]["token_ppl"], rel=1e-5
        )
    assert sorted(p.name for p in out.iterdir()) == ["bm25", "candidates.jsonl", "compare.json", "oracle"]


class Killed(Exception):
    pass


def test_killed_compare_resumes_without_rescoring(runs, ppl_setup, tmp_path, monkeypatch):
    out = tmp_path / "killed"
    real = ralm.eval.ppl.perplexity.score_continuations
    calls = []

    def dies_on_second_chunk(lm, requests, *args, **kwargs):
        calls.append(len(requests))
        if len(calls) == 2:
            raise Killed
        return real(lm, requests, *args, **kwargs)

    monkeypatch.setattr(ralm.eval.ppl.perplexity, "score_continuations", dies_on_second_chunk)
    with pytest.raises(Killed):
        _run(ppl_setup, out, runs["cache"], compare=runs["spec"])
    partial = out / "candidates.jsonl.partial"
    lines = partial.read_text().splitlines()
    assert len(lines) > 8 and not (out / "compare.json").exists() and not (out / "bm25").exists()
    # What a kill mid-write leaves: the header, some finished windows, a torn line.
    kept = 7
    partial.write_text("\n".join([*lines[: 1 + kept], lines[1 + kept][:15]]))

    monkeypatch.setattr(ralm.eval.ppl.perplexity, "score_continuations", real)
    counter = RequestCounter(monkeypatch, ralm.eval.ppl.perplexity)
    resumed = _run(ppl_setup, out, runs["cache"], compare=runs["spec"])
    windows = strided_windows(N, MAX_LENGTH, 4)
    # Window 0 and windows 1..6 were done: only the rest is scored again.
    assert counter.rows == (len(windows) - kept) * (K + 1)
    assert json.loads((out / "compare.json").read_text())["table"]["resumed_windows"] == kept
    for name, full in runs["compared"].items():
        assert resumed[name]["counts"]["resumed_windows"] == kept
        got, want = _windows(out / name), _windows(runs["root"] / "compare" / name)
        assert [r["chosen_rank"] for r in got] == [r["chosen_rank"] for r in want]
        for g, w in zip(got, want, strict=True):
            assert g["nll"] == pytest.approx(w["nll"], rel=1e-6)
        assert resumed[name]["metrics"]["token_ppl"] == pytest.approx(full["metrics"]["token_ppl"], rel=1e-6)
    assert not partial.exists() and (out / "candidates.jsonl").is_file()


def test_cli_compare(runs, ppl_setup, tmp_path, capsys):
    from ralm.cli.main import main as ralm_main

    out = tmp_path / "cli"
    argv = [
        *("eval", "ppl", "--text", str(ppl_setup["text"]), "--lm", str(ppl_setup["lm_dir"])),
        *("--output", str(out), "--index", str(ppl_setup["index"]), "--retrieval-cache", str(runs["cache"])),
        *("--max-length", "128", "--max-passage-tokens", "64", "--k", "4", "--max-tokens", str(N)),
        *("--progress=false", "--device", "cpu", "--compare", "no-retrieval,oracle"),
    ]
    ralm_main(argv)
    printed = capsys.readouterr().out.splitlines()
    oracle = json.loads((out / "oracle" / "results.json").read_text())
    assert oracle["metrics"]["token_ppl"] == pytest.approx(
        runs["singles"]["oracle"]["metrics"]["token_ppl"], rel=1e-5
    )
    # What the conditions share is said once (one scoring pass serves both), each condition is one row.
    assert sum("scoring" in line for line in printed) == 1
    assert sum(line.startswith("condition ") for line in printed) == 1  # the table's header
    rows = [line.split()[0] for line in printed if line.split()[:1] in (["no-retrieval"], ["oracle"])]
    assert rows == ["no-retrieval", "oracle"]
    assert any(
        f"{oracle['metrics']['token_ppl']:.3f}" in line for line in printed if line.startswith("oracle")
    )

    # `ralm demo` prints the table once, in its report: its eval stage leaves it out.
    ralm_main([*argv, "--print-table", "false"])
    printed = capsys.readouterr().out.splitlines()
    assert not any(line.startswith(("condition ", "oracle ")) for line in printed)
    assert sum("scoring" in line for line in printed) == 1

    with pytest.raises(SystemExit) as exit_info:
        ralm_main(
            [
                "eval",
                "ppl",
                "--text",
                str(ppl_setup["text"]),
                "--lm",
                "x",
                "--output",
                str(out),
                "--index",
                str(ppl_setup["index"]),
                "--compare",
                "bm25,best",
            ]
        )
    assert exit_info.value.code == 2
    assert "error: --compare: unknown condition 'best'" in capsys.readouterr().err


def test_random_best_or_none_and_the_statistics_read_off_the_table(runs, ppl_setup, tmp_path):
    """random, oracle-or-none and every CI follow from the table by direct computation."""
    out = tmp_path / "stats"
    first = [json.loads(x) for x in (runs["root"] / "compare" / "candidates.jsonl").read_text().splitlines()]
    tops = sorted(max(c["bm25"] for c in r["candidates"]) for r in first if r["candidates"])
    threshold = tops[len(tops) // 2]
    compared = _run(
        ppl_setup,
        out,
        runs["cache"],
        compare=f"no-retrieval,bm25,random,bm25-above={threshold},oracle,oracle-or-none",
        seed=5,
        bootstrap_resamples=300,
    )
    table = [json.loads(x) for x in (out / "candidates.jsonl").read_text().splitlines()]
    by_name = {name: _windows(out / name) for name in compared}
    for row, rule in zip(table, by_name["bm25-above"], strict=True):
        strong = bool(row["candidates"]) and max(c["bm25"] for c in row["candidates"]) >= threshold
        assert rule["chosen_rank"] == (0 if strong else None)
    assert {r["chosen_rank"] for r in by_name["bm25-above"][1:]} == {0, None}
    for row, rand, best_or_none in zip(table, by_name["random"], by_name["oracle-or-none"], strict=True):
        cands = row["candidates"]
        if not cands:
            assert rand["chosen_rank"] is None and best_or_none["chosen_rank"] is None
            continue
        draw = int(DRAWS_SEED5[len(cands)][row["window"]])
        assert rand["chosen_rank"] == draw and rand["nll"] == cands[draw]["nll"]
        assert best_or_none["nll"] == min([row["no_passage_nll"]] + [c["nll"] for c in cands])
    assert {r["chosen_rank"] for r in by_name["random"]} >= {0, 1}  # it does draw, not always BM25's top-1
    n = [r["num_targets"] for r in table]
    # One document (a text file): blocks are runs of the table's one block length, read off compare.json.
    bootstrap = json.loads((out / "compare.json").read_text())["bootstrap"]
    length = bootstrap["block_length"]
    assert bootstrap["method"] == "blocks" and 1 <= length <= len(table) // 8 and bootstrap["documents"] == 1
    labels = [i // length for i in range(len(table))]
    retrieving = sum(1 for r in table if r["candidates"])
    for name, record in compared.items():
        nll = [r["nll"] for r in by_name[name]]
        stats = record["comparison"]
        assert stats["bootstrap"] == {k: bootstrap[k] for k in stats["bootstrap"]}
        for key, base in (("vs_bm25", "bm25"), ("vs_no_retrieval", "no-retrieval")):
            other = [r["nll"] for r in by_name[base]]
            low, high = naive_change_interval(nll, other, n, labels, 300, 5)
            assert (stats[key]["low"], stats[key]["high"]) == pytest.approx((low, high), rel=1e-9, abs=1e-12)
            assert stats[key]["change"] == pytest.approx(np.expm1((sum(nll) - sum(other)) / sum(n)))
            assert (stats[key]["method"], stats[key]["blocks"]) == ("blocks", len(set(labels))), (name, key)
        copies = sum(1 for r in by_name[name] if r["passage_id"] is not None and r["copies_target"])
        assert stats["copy_windows"] == copies and stats["retrieving_windows"] == retrieving
    m = {name: r["metrics"]["token_ppl"] for name, r in compared.items()}
    assert m["oracle-or-none"] <= min(m.values())
    assert json.loads((out / "compare.json").read_text())["statistics"]["bm25"]["vs_bm25"]["change"] == 0.0
