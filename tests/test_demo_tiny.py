"""`ralm demo` end to end on tiny models and real English text (fast): files, commands, reuse, bad input."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from ralm.demo import build_parser, demo
from ralm.demo.presets import FULL, QUICK, Overrides, resolve_scale
from ralm.demo.report import CONDITIONS, orderings, relative_change
from ralm.errors import RalmInputError

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "demo"

# Small enough for two tiny models to run every stage in seconds.
TINY = Overrides(
    eval_tokens=160, stride=16, query_tokens=16, max_length=128, max_passage_tokens=32, passage_words=30,
    passage_stride=15, k=2, num_prefixes=8, prefixes_per_shard=4, train_steps=2, batch_size=2, warmup_steps=0,
    encoder_max_length=96, max_prefix_tokens=24, val_fraction=0.25, val_every=1,
)  # fmt: skip


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
    report = demo(
        quick=True, run_dir=str(run_dir), corpus=str(texts["corpus"]), eval_text=str(texts["eval"]),
        lm=str(tiny_lm_dir), encoder=str(tiny_encoder_dir), scale=TINY,
    )  # fmt: skip
    return run_dir, report


def test_demo_writes_report_commands_and_every_stage(finished_run):
    run_dir, report = finished_run
    assert set(report["metrics"]) == set(CONDITIONS)
    for condition, m in report["metrics"].items():
        assert m["token_ppl"] > 1.0, condition
    # All conditions scored the same held-out tokens.
    assert len({m["scored_tokens"] for m in report["metrics"].values()}) == 1
    for name in ("report.txt", "report.json", "report.png", "commands.sh", "stages.json"):
        assert (run_dir / name).is_file(), name
    table = (run_dir / "report.txt").read_text()
    for label in ("no retrieval", "BM25 top-1", "trained reranker", "oracle", "stage times"):
        assert label in table
    commands = [
        line for line in (run_dir / "commands.sh").read_text().splitlines() if line.startswith("ralm ")
    ]
    assert [shlex.split(c)[1] for c in commands] == ["index", "data-gen", "train", "eval"]
    assert "--compare" in shlex.split(commands[-1])  # one table serves all five conditions
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
    ppl = {c: m["token_ppl"] for c, m in report["metrics"].items()}
    assert ppl["oracle"] <= min(ppl["bm25"], ppl["trained"], ppl["zero-shot"]) * (1 + 1e-4)


def test_second_run_reuses_finished_stages_and_redoes_a_missing_one(
    finished_run, texts, tiny_lm_dir, tiny_encoder_dir
):
    run_dir, first = finished_run
    for name in ("compare.json", "trained/results.json"):
        next(run_dir.glob(f"eval-*/{name}")).unlink()  # as if the run was killed during the eval stage
    second = demo(
        quick=True, run_dir=str(run_dir), corpus=str(texts["corpus"]), eval_text=str(texts["eval"]),
        lm=str(tiny_lm_dir), encoder=str(tiny_encoder_dir), scale=TINY,
    )  # fmt: skip
    stages = json.loads((run_dir / "stages.json").read_text())
    assert [k for k, v in stages.items() if not v.get("reused")] == ["eval"]
    assert second["metrics"]["trained"]["token_ppl"] == pytest.approx(
        first["metrics"]["trained"]["token_ppl"]
    )
    for condition in CONDITIONS:  # the rerun rescored the same table
        assert second["metrics"][condition]["token_ppl"] == pytest.approx(
            first["metrics"][condition]["token_ppl"]
        )


def test_own_corpus_needs_eval_text(texts):
    with pytest.raises(RalmInputError, match="--corpus and --eval-text"):
        demo(corpus=str(texts["corpus"]))


def test_missing_offline_lm_is_an_error_not_a_fallback(monkeypatch, tmp_path):
    import ralm.demo.assets as assets

    monkeypatch.setattr(assets, "SMOLLM2_PACKAGE", "ralm_no_such_package")
    with pytest.raises(RalmInputError, match="--lm: the offline SmolLM2"):
        demo(quick=True, run_dir=str(tmp_path))


def test_unknown_heldout_book_is_refused_before_fetching(tmp_path):
    with pytest.raises(RalmInputError, match="--heldout-books"):
        demo(quick=True, run_dir=str(tmp_path), scale=Overrides(heldout_books=["Hezekiah"]))


def test_bare_quick_switch_parses():
    from ralm.command_args import parse

    _, init = parse(build_parser(), ["--quick", "--k", "3"])
    assert init.quick is True and init.scale.k == 3


@pytest.mark.parametrize(("name", "preset"), [("quick.yaml", QUICK), ("full.yaml", FULL)])
def test_shipped_yaml_spells_out_the_preset(name, preset):
    values = yaml.safe_load((CONFIGS / name).read_text())
    scale = resolve_scale(values["quick"], Overrides(**values["scale"]))
    assert scale == preset


def test_orderings_and_relative_change():
    assert relative_change(6.0, 8.0) == pytest.approx(-25.0)
    metrics = {c: {"token_ppl": v} for c, v in zip(CONDITIONS, [13.0, 6.5, 6.4, 6.2, 5.0], strict=True)}
    assert orderings(metrics) == {"bm25 < none": True, "trained < bm25": True, "oracle lowest": True}
    metrics["trained"]["token_ppl"] = 6.6
    assert orderings(metrics)["trained < bm25"] is False
