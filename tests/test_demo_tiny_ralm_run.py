"""`ralm run` on tiny models and real English text (fast): the pipeline for own data, the eval documents
kept out of training and the threshold fit."""

# ruff: noqa: F811  (the module fixture `texts` is imported from demo_fixtures and used as an argument)

from __future__ import annotations

import json

from demo_fixtures import (
    FORWARDS,
    TINY,
    stage_commands,
    texts,  # noqa: F401
)


def _run_args(corpus, eval_text, lm, encoder, output, scale: dict, *extra: str) -> list[str]:
    """`ralm run --quick` on these files and models, every set `scale` value as its `--scale.NAME`."""
    args = ["run", "--corpus", str(corpus), "--eval-text", str(eval_text), *extra]
    args += ["--lm", str(lm), "--encoder", str(encoder), "--quick", "--output", str(output)]
    for name, value in scale.items():
        if value is not None:
            args += [f"--scale.{name}", json.dumps(value) if isinstance(value, list) else str(value)]
    return args


def test_ralm_run_is_the_pipeline_for_own_data(texts, tiny_lm_dir, tiny_encoder_dir, tmp_path, capsys):
    """`ralm run` runs the demo's stages on the user's files; its report equals the demo's on the same
    data."""
    from ralm.cli.main import main as ralm_main

    run_dir = tmp_path / "run"
    ralm_main(
        _run_args(texts["corpus"], texts["eval"], tiny_lm_dir, tiny_encoder_dir, run_dir, TINY.__dict__)
    )
    printed = capsys.readouterr().out.splitlines()
    # One table in the log (the report's, with labels), and the scoring time of each eval stage's one pass
    # said once: the table's and each forward-looking row's (``ralm.pipeline.plan.FORWARD_ROWS``).
    assert sum(line.startswith("condition ") for line in printed) == 1
    assert sum("scoring" in line for line in printed) == 1 + len(FORWARDS)
    report = json.loads((run_dir / "report.json").read_text())
    assert [c[0] for c in stage_commands(run_dir)] == ["index", "data-gen", "train", *["eval"] * 3]
    assert report["settings"]["k"] == TINY.k and report["texts"]["eval"].endswith("(yours)")
    # One line starts each stage, counted against the whole run and tagged by its command, not "[demo]".
    starts = [line.partition(":")[0] for line in printed if line.startswith("[run] [stage ")]
    assert starts == [
        f"[run] [stage {i}/6] {key}"
        for i, key in enumerate(["index", "data-gen", "train", "eval", *FORWARDS], 1)
    ]
    assert not [line for line in printed if line.startswith("[demo]")]


def test_ralm_run_keeps_the_eval_documents_out_of_training_and_the_threshold_fit(
    real_documents, tiny_lm_dir, tiny_encoder_dir, tmp_path, monkeypatch
):
    """Issue 23 item 4: a corpus holding the eval documents (two under their own ids, one re-filed under
    another id and title with its lines re-joined) and no --train-text. None of them, nor what --exclude
    names, may give a row of data-gen (the reranker's training and validation prefixes) or a row of the
    bm25-above threshold's fit, or a passage of the index; the report counts what left each input."""
    import datasets

    import ralm.train.scalar_init as scalar_init
    from ralm.cli.main import main as ralm_main

    held_out, others = real_documents[-3:], real_documents[:9]
    refiled = {"id": "refiled", "title": "another title", "text": " ".join(held_out[2]["text"].split())}
    corpus = [*others, held_out[0], held_out[1], refiled]
    paths = {"corpus": tmp_path / "corpus.jsonl", "eval": tmp_path / "held_out.jsonl"}
    for path, docs in ((paths["corpus"], corpus), (paths["eval"], held_out)):
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    by_rule = others[0]["id"]
    forbidden = {held_out[0]["id"], held_out[1]["id"], "refiled", by_rule}
    fits = []
    real_fit = scalar_init.fit_bm25_threshold
    monkeypatch.setattr(
        scalar_init, "fit_bm25_threshold", lambda data_dir: fits.append(data_dir) or real_fit(data_dir)
    )

    run_dir = tmp_path / "run"
    scale = {**TINY.__dict__, "num_prefixes": 40, "prefixes_per_shard": 20}
    exclude = ["--exclude", json.dumps([by_rule])]
    ralm_main(
        _run_args(paths["corpus"], paths["eval"], tiny_lm_dir, tiny_encoder_dir, run_dir, scale, *exclude)
    )

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
