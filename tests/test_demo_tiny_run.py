"""`ralm demo` end to end on tiny models and real English text (fast): files, commands, reuse, own-data
exclusion, edited inputs, bad eval text."""

# ruff: noqa: F811  (the module fixture `texts` is imported from demo_fixtures and used as an argument)

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from demo_fixtures import (
    FORWARDS,
    TINY,
    own_data_demo,
    stage_commands,
    texts,  # noqa: F401
)

from ralm.demo.demo_command import demo
from ralm.errors import RalmInputError
from ralm.passage_rules import RULES
from ralm.pipeline.plan import forward_rows
from ralm.pipeline.report import BASELINES
from ralm.retrieval.passage_forms import RETRIEVED


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, texts, tiny_lm_dir, tiny_encoder_dir):
    run_dir = tmp_path_factory.mktemp("demo_run")
    report = own_data_demo(texts, tiny_lm_dir, tiny_encoder_dir, run_dir)
    return run_dir, report


def no_retrieval_ppl(eval_path: Path, lm_dir: Path) -> float:
    """TINY's no-retrieval perplexity the slow way: the held-out documents joined by a blank line, their
    first 224 tokens, and eval_lm.py's windows for 224 tokens at max_length 128 and stride 16 worked out
    by hand: [0, 128) scoring tokens 1-127, [16, 144) scoring 128-143, [32, 160) scoring 144-159, ...,
    [96, 224) scoring 208-223."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    text = "\n\n".join(json.loads(line)["text"] for line in eval_path.read_text().splitlines())
    ids = torch.tensor(
        AutoTokenizer.from_pretrained(lm_dir)(text, add_special_tokens=False)["input_ids"][:224]
    )
    model = AutoModelForCausalLM.from_pretrained(lm_dir, dtype=torch.float32).eval()
    nll = 0.0
    windows = (
        (0, 128, 1),
        (16, 144, 128),
        (32, 160, 144),
        (48, 176, 160),
        (64, 192, 176),
        (80, 208, 192),
        (96, 224, 208),
    )
    for begin, end, first_target in windows:
        with torch.no_grad():
            logits = model(ids[None, begin:end]).logits[0].double()
        targets = ids[first_target:end]
        nll += torch.nn.functional.cross_entropy(
            logits[first_target - begin - 1 : -1], targets, reduction="sum"
        )
    return math.exp(nll.item() / 223)


def test_demo_writes_report_commands_and_every_stage(finished_run, texts, tiny_lm_dir):
    run_dir, report = finished_run
    metrics = report["sets"]["eval"]["metrics"]
    forward = [row.name for row in forward_rows(RETRIEVED)]  # BM25 with another passage form or query, beside
    fitted = ["bm25-above", "zero-shot-above"]  # the threshold rules, each fitted on the training prefixes
    exports = ["trained-seed0", "no-lm-seed0"]  # the seed's export, and its export that runs no LM
    assert list(metrics) == [*BASELINES[:5], *fitted, *exports, *BASELINES[5:], *forward]
    assert metrics["no-retrieval"]["token_ppl"] == pytest.approx(
        no_retrieval_ppl(texts["eval"], tiny_lm_dir), rel=1e-5
    )  # TINY runs the LM in fp32 everywhere
    # All conditions scored the same held-out tokens.
    assert len({m["scored_tokens"] for m in metrics.values()}) == 1
    for name in ("report.txt", "report.json", "report.png", "commands.sh", "stages.json"):
        assert (run_dir / name).is_file(), name
    table = (run_dir / "report.txt").read_text()
    # The seed's row is named by what it plays: the export decision recorded in its exported folder.
    exported = json.loads(next(run_dir.glob("reranker-*/reranker/ralm_reranker.json")).read_text())[
        "decision"
    ]
    assert metrics["trained-seed0"]["exported"] == exported
    seed_row = "trained reranker, seed 0" if exported == "trained" else f"seed 0, exported {exported}"
    for label in ("no retrieval", "BM25 top-1", "random", seed_row, "best of k or none", "stage times"):
        assert label in table
    # The second export: the rule the decision keeps when no frozen LM may run at rerank time.
    no_lm = json.loads(next(run_dir.glob("reranker-*/reranker-no-lm/ralm_reranker.json")).read_text())
    assert (
        RULES[no_lm["decision"]].cost.lm_inputs(4) == 0
        and metrics["no-lm-seed0"]["exported"] == no_lm["decision"]
    )
    no_lm_row = "trained reranker" if no_lm["decision"] == "trained" else f"exported {no_lm['decision']}"
    assert f"seed 0, no LM: {no_lm_row}" in table
    if no_lm["decision"] == exported:  # the same rule from the same scores: the same picks
        assert metrics["no-lm-seed0"]["token_ppl"] == metrics["trained-seed0"]["token_ppl"]
    # The forward-looking rows come from runs of their own: the whole text's table names them beside it,
    # and the retrieving windows' table pairs them with its BM25 row.
    whole, retrieving = table.split("whole text:")[1].split("\nretrieving windows  ", 1)
    assert not [line for line in whole.splitlines() if line.startswith(tuple(forward))]
    assert f"paired in the next table): {', '.join(forward)}" in whole
    assert all(any(line.startswith(name) for line in retrieving.splitlines()) for name in forward)
    commands = stage_commands(run_dir)
    assert [c[0] for c in commands] == ["index", "data-gen", "train", *["eval"] * (1 + len(FORWARDS))]
    assert "--compare" in commands[3]  # one table serves every condition
    # The typed conditions are written as the --compare text the eval recorded (its results read it back).
    evaluate = commands[3]
    recorded = json.loads(next(run_dir.glob("eval-*/compare.json")).read_text())["conditions"]
    assert evaluate[evaluate.index("--compare") + 1] == ",".join(recorded)
    rule, rank_rule, trained, no_lm_trained = (name for name in recorded if "=" in name)
    assert (
        rule.startswith("bm25-above=")
        and rank_rule.startswith("zero-shot-above=")
        and trained == f"trained-seed0={next(run_dir.glob('reranker-*/reranker'))}"
        and no_lm_trained == f"no-lm-seed0={next(run_dir.glob('reranker-*/reranker-no-lm'))}"
    )
    # passage_stride reaches the index: a document's second passage starts 15 words into its first.
    first_doc = []
    for line in next(run_dir.glob("index-*.passages.jsonl")).read_text().splitlines():
        row = json.loads(line)
        if first_doc and row["doc_id"] != first_doc[0]["doc_id"]:
            break
        first_doc.append(row)
    words = [row["contents"].split("\n", 1)[-1].split() for row in first_doc[:2]]  # after the title line
    assert words[1][:15] == words[0][15:30]
    stages = json.loads((run_dir / "stages.json").read_text())
    assert set(stages) == {"index", "data-gen", "train", "eval", *FORWARDS}
    # The oracle picks the best candidate by the true targets, so no retrieval-based condition beats it
    # on the same windows and candidates.
    ppl = {c: m["token_ppl"] for c, m in metrics.items() if c not in forward}
    assert ppl["oracle"] <= min(ppl["bm25"], ppl["trained-seed0"], ppl["zero-shot"], ppl["random"]) * (
        1 + 1e-4
    )
    assert ppl["oracle-or-none"] <= min(ppl.values()) * (1 + 1e-4)  # no passage is one of its options
    # What was scored is said: the first 224 of the held-out text's tokens.
    assert metrics["bm25"]["text_tokens"] > 224 and "scored 223 of" in table
    # The retrieving windows' table: targets from max_length (128) on, 6 windows of 16 tokens.
    retrieving = report["sets"]["eval"]["retrieving"]
    assert {c["scored_tokens"] for c in retrieving.values()} == {224 - 128}
    assert "retrieving windows only (targets from token 128 on): 6 windows" in table


def test_commands_sh_runs_where_no_ralm_is_on_path(finished_run, tmp_path):
    """commands.sh must work from a shell where the venv is not active (no `ralm` on PATH)."""
    run_dir, _ = finished_run
    lines = (run_dir / "commands.sh").read_text().splitlines()
    cd = next(i for i, line in enumerate(lines) if line.startswith("cd "))
    header, first_stage = lines[: cd + 1], lines[cd + 1]
    script = tmp_path / "first_stage.sh"
    script.write_text("\n".join([*header, first_stage]) + "\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    assert subprocess.run(["bash", "-c", "command -v ralm"], env=env).returncode != 0
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shlex.split(first_stage)[3] == "index"


def test_second_run_reuses_finished_stages_and_redoes_a_missing_one(
    finished_run, texts, tiny_lm_dir, tiny_encoder_dir
):
    run_dir, first = finished_run
    for name in ("compare.json", "trained-seed0/results.json"):
        next(run_dir.glob(f"eval-*/{name}")).unlink()  # as if the run was killed during the eval stage
    second = own_data_demo(texts, tiny_lm_dir, tiny_encoder_dir, run_dir)
    stages = json.loads((run_dir / "stages.json").read_text())
    assert [k for k, v in stages.items() if not v.get("reused")] == ["eval"]
    before, after = first["sets"]["eval"]["metrics"], second["sets"]["eval"]["metrics"]
    for condition in before:  # the rerun rescored the same table
        assert after[condition]["token_ppl"] == pytest.approx(before[condition]["token_ppl"])


def test_own_data_exclusion_by_pattern_is_counted(texts, tiny_lm_dir, tiny_encoder_dir, tmp_path):
    run_dir = tmp_path / "own"
    corpus_ids = [json.loads(line)["id"] for line in texts["corpus"].read_text().splitlines()]
    own_data_demo(
        texts,
        tiny_lm_dir,
        tiny_encoder_dir,
        run_dir,
        exclude=[f"re:{corpus_ids[0][:3]}.*", "no-such-document"],
    )
    excluded = json.loads(next(run_dir.glob("index-*.passages.jsonl.excluded.json")).read_text())
    want = [i for i in corpus_ids if i.startswith(corpus_ids[0][:3])]
    assert excluded["excluded_ids"] == want and excluded["excluded"] == len(want)
    assert excluded["unmatched_exclude"] == ["no-such-document"]


def test_an_edited_input_file_forces_its_stages_to_rerun(
    texts, tiny_lm_dir, tiny_encoder_dir, tmp_path, capsys
):
    """Stages are keyed by the input files' contents: the same path with new text is not reused."""
    own = tmp_path / "texts"
    own.mkdir()
    corpus, held_out = own / "corpus.jsonl", own / "held_out.jsonl"
    corpus.write_text(texts["corpus"].read_text())
    held_out.write_text(texts["eval"].read_text())
    run = {
        "quick": True,
        "output": str(tmp_path / "run"),
        "corpus": str(corpus),
        "eval_text": str(held_out),
        "lm": str(tiny_lm_dir),
        "encoder": str(tiny_encoder_dir),
        "scale": TINY,
    }
    first = demo(**run)
    rows = held_out.read_text().splitlines()
    held_out.write_text("\n".join(rows[1:] + rows[:1]) + "\n")  # same file, documents in another order
    capsys.readouterr()
    second = demo(**run)
    stages = json.loads((tmp_path / "run" / "stages.json").read_text())
    assert [k for k, v in stages.items() if not v["reused"]] == ["eval", *FORWARDS]
    assert "eval: its inputs or settings changed since the last run" in capsys.readouterr().out
    assert (
        second["sets"]["eval"]["metrics"]["no-retrieval"]["token_ppl"]
        != first["sets"]["eval"]["metrics"]["no-retrieval"]["token_ppl"]
    )


def test_a_malformed_eval_line_stops_the_run_before_any_work(texts, tiny_lm_dir, tiny_encoder_dir, tmp_path):
    bad = tmp_path / "held_out.jsonl"
    lines = texts["eval"].read_text().splitlines()
    bad.write_text("\n".join([lines[0], '{"id": "broken", "text": ', *lines[1:]]) + "\n")
    run_dir = tmp_path / "run"
    with pytest.raises(RalmInputError, match=rf"{bad}:2:\d+: not valid JSON"):
        own_data_demo(texts, tiny_lm_dir, tiny_encoder_dir, run_dir, eval_text=str(bad))
    assert not run_dir.exists()  # nothing written: no run folder, no index, no commands.sh


def test_an_eval_text_too_short_for_one_retrieving_window_stops_before_any_work(
    texts, tiny_lm_dir, tiny_encoder_dir, tmp_path
):
    short = tmp_path / "short.jsonl"
    short.write_text('{"id": "s", "text": "Only a handful of words here."}\n')
    run_dir = tmp_path / "run"
    need = (TINY.max_length + TINY.stride) * 2 // 3  # the first window (no passage) and one retrieving window
    with pytest.raises(RalmInputError, match=rf"{short}: 6 words; at least {need} are needed"):
        own_data_demo(texts, tiny_lm_dir, tiny_encoder_dir, run_dir, eval_text=str(short))
    assert not run_dir.exists()
