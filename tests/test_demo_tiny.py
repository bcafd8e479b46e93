"""`ralm demo` end to end on tiny models and real English text (fast): files, commands, reuse, bad input."""

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
import yaml

from ralm.demo.demo_command import build_parser, demo
from ralm.demo.presets import FULL_BOOKS, QUICK_BOOKS, BookOptions, resolve_books
from ralm.errors import RalmInputError
from ralm.pipeline.report import BASELINES, orderings, relative_change
from ralm.pipeline.scale import FULL, QUICK, ScaleOptions, resolve_scale

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "demo"

# Small enough for two tiny models to run every stage in seconds.
TINY = ScaleOptions(
    eval_tokens=224,
    dtype="fp32",
    train_seeds=[0],
    stride=16,
    query_tokens=16,
    max_length=128,
    max_passage_tokens=32,
    passage_words=30,
    passage_stride=15,
    k=2,
    num_prefixes=8,
    prefixes_per_shard=4,
    train_steps=2,
    batch_size=2,
    warmup_steps=0,
    max_pair_tokens=96,
    max_prefix_tokens=24,
    val_fraction=0.25,
    val_every=1,
)


def stage_commands(run_dir: Path) -> list[list[str]]:
    """The stage commands of a run's commands.sh, each without its leading `PYTHON -m ralm`."""
    lines = [shlex.split(line) for line in (run_dir / "commands.sh").read_text().splitlines()]
    return [words[3:] for words in lines if words[1:3] == ["-m", "ralm"]]


@pytest.fixture(scope="module")
def texts(tmp_path_factory, real_documents) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("demo_texts")
    corpus, held_out = real_documents[:-3], real_documents[-3:]
    paths = {"corpus": folder / "corpus.jsonl", "eval": folder / "held_out.jsonl"}
    for path, docs in ((paths["corpus"], corpus), (paths["eval"], held_out)):
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return paths


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, texts, tiny_lm_dir, tiny_encoder_dir):
    run_dir = tmp_path_factory.mktemp("demo_run")
    report = own_data_demo(texts, tiny_lm_dir, tiny_encoder_dir, run_dir)
    return run_dir, report


def own_data_demo(texts: dict[str, Path], lm_dir: Path, encoder_dir: Path, run_dir: Path, **changes) -> dict:
    """`ralm demo --quick` on the module's own texts at TINY's scale; `changes` replace any argument."""
    arguments = {
        "quick": True,
        "output": str(run_dir),
        "corpus": str(texts["corpus"]),
        "eval_text": str(texts["eval"]),
        "lm": str(lm_dir),
        "encoder": str(encoder_dir),
        "scale": TINY,
    }
    return demo(**{**arguments, **changes})


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
    assert list(metrics) == [*BASELINES[:5], "bm25-above", "trained-seed0", *BASELINES[5:]]
    assert metrics["no-retrieval"]["token_ppl"] == pytest.approx(
        no_retrieval_ppl(texts["eval"], tiny_lm_dir), rel=1e-5
    )  # TINY runs the LM in fp32 everywhere
    # All conditions scored the same held-out tokens.
    assert len({m["scored_tokens"] for m in metrics.values()}) == 1
    for name in ("report.txt", "report.json", "report.png", "commands.sh", "stages.json"):
        assert (run_dir / name).is_file(), name
    table = (run_dir / "report.txt").read_text()
    for label in (
        "no retrieval",
        "BM25 top-1",
        "random",
        "trained reranker",
        "best of k or none",
        "stage times",
    ):
        assert label in table
    commands = stage_commands(run_dir)
    assert [c[0] for c in commands] == ["index", "data-gen", "train", "eval"]
    assert "--compare" in commands[-1]  # one table serves every condition
    # The typed conditions are written as the --compare text the eval recorded (its results read it back).
    evaluate = commands[-1]
    recorded = json.loads(next(run_dir.glob("eval-*/compare.json")).read_text())["conditions"]
    assert evaluate[evaluate.index("--compare") + 1] == ",".join(recorded)
    rule, trained = (name for name in recorded if "=" in name)
    assert (
        rule.startswith("bm25-above=")
        and trained == f"trained-seed0={next(run_dir.glob('reranker-*/reranker'))}"
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
    assert set(stages) == {"index", "data-gen", "train", "eval"}
    # The oracle picks the best candidate by the true targets, so no retrieval-based condition beats it
    # on the same windows and candidates.
    ppl = {c: m["token_ppl"] for c, m in metrics.items()}
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


def test_own_corpus_needs_eval_text(texts):
    with pytest.raises(RalmInputError, match="--corpus and --eval-text"):
        demo(corpus=str(texts["corpus"]))


def test_missing_offline_lm_is_an_error_not_a_fallback(monkeypatch, tmp_path):
    import ralm.pipeline.models as models

    monkeypatch.setattr(models, "GEMMA3_PACKAGE", "ralm_no_such_package")
    with pytest.raises(RalmInputError, match="--lm: the offline Gemma-3-270m"):
        demo(quick=True, output=str(tmp_path))


def test_unknown_heldout_book_is_refused_before_fetching(tmp_path):
    with pytest.raises(RalmInputError, match="--related-books"):
        demo(quick=True, output=str(tmp_path / "run"), books=BookOptions(related_books=["Hezekiah"]))
    assert not (tmp_path / "run").exists()


def test_bare_quick_switch_parses():
    from ralm.command_args import parse

    _, init = parse(build_parser(), ["--quick", "--k", "3"])
    assert init.quick is True and init.scale.k == 3


@pytest.mark.parametrize(
    ("name", "preset", "books"), [("quick.yaml", QUICK, QUICK_BOOKS), ("full.yaml", FULL, FULL_BOOKS)]
)
def test_shipped_yaml_spells_out_the_preset(name, preset, books):
    values = yaml.safe_load((CONFIGS / name).read_text())
    assert resolve_scale(values["quick"], ScaleOptions(**values["scale"])) == preset
    assert resolve_books(values["quick"], BookOptions(**values["books"])) == books


def _condition(high_vs_bm25: float, high_vs_none: float) -> dict:
    return {"comparison": {"vs_bm25": {"high": high_vs_bm25}, "vs_no_retrieval": {"high": high_vs_none}}}


def test_orderings_need_the_whole_interval_below_zero():
    assert relative_change(6.0, 8.0) == pytest.approx(-25.0)
    metrics = {
        "bm25": _condition(0.0, -0.02)["comparison"],
        "trained-seed0": _condition(-0.01, -0.05)["comparison"],
        "trained-seed1": _condition(-0.003, -0.04)["comparison"],
    }
    assert orderings(metrics) == {
        "bm25 < no retrieval (CI)": True,
        "trained < bm25 (CI, every seed)": True,
        "trained < no retrieval (CI, every seed)": True,
    }
    metrics["trained-seed1"] = _condition(0.001, -0.04)[
        "comparison"
    ]  # one seed's interval reaches above 0: a tie
    assert orderings(metrics)["trained < bm25 (CI, every seed)"] is False


def test_bible_demo_keeps_dev_and_test_books_out_of_corpus_and_training(
    tmp_path, monkeypatch, real_documents, tiny_lm_dir, tiny_encoder_dir
):
    """The worst case of a second translation: each "King James" book is a verbatim copy of its "World
    English" book. The dev and test books must still never be retrieved (excluded from the index by id),
    no training prefix may retrieve its own book, and the copy counts must say so (0 copies)."""
    import ralm.corpora as corpora

    ids = ["Gen", "Exod", "Lev", "Num", "Deut", "Josh", "Judg", "Mark", "Jonah"]
    books = [
        {"id": b, "title": corpora.CANON[b], "text": d["text"]}
        for b, d in zip(ids, real_documents, strict=False)
    ]
    monkeypatch.setattr(corpora, "bible_books", lambda name, **_: [dict(b) for b in books])
    run_dir = tmp_path / "bible"
    scale = ScaleOptions(**{**TINY.__dict__, "eval_tokens": None})
    split = BookOptions(dev_books=["Mark"], related_books=["Judg"], unrelated_books=["Jonah"])
    report = demo(
        quick=True,
        output=str(run_dir),
        lm=str(tiny_lm_dir),
        encoder=str(tiny_encoder_dir),
        scale=scale,
        books=split,
    )

    passages = next(run_dir.glob("index-*.passages.jsonl"))
    doc_ids = {json.loads(line)["doc_id"] for line in passages.read_text().splitlines()}
    assert doc_ids == set(ids) - {"Mark", "Judg", "Jonah"}
    excluded = json.loads(Path(f"{passages}.excluded.json").read_text())
    assert (
        sorted(excluded["excluded_ids"]) == ["Jonah", "Judg", "Mark"] and excluded["unmatched_exclude"] == []
    )
    train_ids = {
        json.loads(line)["id"]
        for line in (run_dir / "data" / "web_train_books.jsonl").read_text().splitlines()
    }
    assert train_ids == set(doc_ids)
    data_meta = json.loads(next(run_dir.glob("rerank-data-*/ralm_data_gen.json")).read_text())
    assert data_meta["summary"]["candidates_copying_target"] == 0  # own book's copy excluded by its id
    assert set(report["sets"]) == {"related", "unrelated"}
    for name, book in (("related", "Judg"), ("unrelated", "Jonah")):
        metrics = report["sets"][name]["metrics"]
        assert all(m["comparison"]["copy_windows"] == 0 for m in metrics.values())
        assert f"{name}: World English Bible {book}" in report["texts"]["eval"]
        # The whole test book is scored when eval_tokens is unset.
        assert metrics["bm25"]["scored_tokens"] == metrics["bm25"]["text_tokens"] - 1
    assert report["texts"]["split"] == "test"


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
    assert [k for k, v in stages.items() if not v["reused"]] == ["eval"]
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


def test_ralm_run_is_the_pipeline_for_own_data(texts, tiny_lm_dir, tiny_encoder_dir, tmp_path, capsys):
    """`ralm run` runs the demo's stages on the user's files; its report equals the demo's on the same
    data."""
    from ralm.cli import main as ralm_main

    run_dir = tmp_path / "run"
    args = [
        "run",
        "--corpus",
        str(texts["corpus"]),
        "--eval-text",
        str(texts["eval"]),
        "--lm",
        str(tiny_lm_dir),
        "--encoder",
        str(tiny_encoder_dir),
        "--quick",
        "--output",
        str(run_dir),
    ]
    for name, value in TINY.__dict__.items():
        if value is not None:
            args += [f"--scale.{name}", json.dumps(value) if isinstance(value, list) else str(value)]
    ralm_main(args)
    printed = capsys.readouterr().out.splitlines()
    # One table in the log (the report's, with labels), and the scoring time of the one pass said once.
    assert sum(line.startswith("condition ") for line in printed) == 1
    assert sum("scoring" in line for line in printed) == 1
    report = json.loads((run_dir / "report.json").read_text())
    assert [c[0] for c in stage_commands(run_dir)] == ["index", "data-gen", "train", "eval"]
    assert report["settings"]["k"] == TINY.k and report["texts"]["eval"].endswith("(yours)")


def test_ralm_run_keeps_the_eval_documents_out_of_training_and_the_threshold_fit(
    real_documents, tiny_lm_dir, tiny_encoder_dir, tmp_path, monkeypatch
):
    """Issue 23 item 4: a corpus holding the eval documents (two under their own ids, one re-filed under
    another id and title with its lines re-joined) and no --train-text. None of them, nor what --exclude
    names, may give a row of data-gen (the reranker's training and validation prefixes) or a row of the
    bm25-above threshold's fit, or a passage of the index; the report counts what left each input."""
    import datasets

    import ralm.rerank.selection as selection
    from ralm.cli import main as ralm_main

    held_out, others = real_documents[-3:], real_documents[:9]
    refiled = {"id": "refiled", "title": "another title", "text": " ".join(held_out[2]["text"].split())}
    corpus = [*others, held_out[0], held_out[1], refiled]
    paths = {"corpus": tmp_path / "corpus.jsonl", "eval": tmp_path / "held_out.jsonl"}
    for path, docs in ((paths["corpus"], corpus), (paths["eval"], held_out)):
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    by_rule = others[0]["id"]
    forbidden = {held_out[0]["id"], held_out[1]["id"], "refiled", by_rule}
    fits = []
    real_fit = selection.fit_bm25_threshold
    monkeypatch.setattr(
        selection, "fit_bm25_threshold", lambda data_dir: fits.append(data_dir) or real_fit(data_dir)
    )

    run_dir = tmp_path / "run"
    args = [
        "run",
        "--corpus",
        str(paths["corpus"]),
        "--eval-text",
        str(paths["eval"]),
        "--exclude",
        json.dumps([by_rule]),
        "--lm",
        str(tiny_lm_dir),
        "--encoder",
        str(tiny_encoder_dir),
        "--quick",
        "--output",
        str(run_dir),
    ]
    scale = {**TINY.__dict__, "num_prefixes": 40, "prefixes_per_shard": 20}
    for name, value in scale.items():
        if value is not None:
            args += [f"--scale.{name}", json.dumps(value) if isinstance(value, list) else str(value)]
    ralm_main(args)

    data_dir = next(run_dir.glob("rerank-data-*"))
    rows = datasets.load_from_disk(str(data_dir))
    assert len(rows) == 40 and set(rows["doc_id"]) <= {d["id"] for d in others} - {by_rule}
    assert not forbidden & {d for row in rows["candidate_doc_ids"] for d in row}
    eval_words = " ".join(" ".join(d["text"].split()) for d in held_out)
    assert not any(" ".join(r["prefix"].split()) in eval_words for r in rows)  # no eval text, whatever its id
    assert fits == [str(data_dir)]  # the threshold was fitted on these rows and no others
    passages = next(run_dir.glob("index-*.passages.jsonl")).read_text().splitlines()
    assert not forbidden & {json.loads(p)["doc_id"] for p in passages}
    meta = json.loads((data_dir / "ralm_data_gen.json").read_text())
    assert sorted(meta["excluded"]["excluded_ids"]) == sorted(forbidden)
    excluded = json.loads((run_dir / "report.json").read_text())["texts"]["excluded"]
    assert excluded.startswith(f"4 of {len(corpus)} corpus documents (")
    assert f"; training text: 4 of {len(corpus)} documents (" in excluded
