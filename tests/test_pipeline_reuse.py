"""A finished run is found again wherever its folder is and however its path is spelled: stage folders are
keyed by what the stages compute (ralm.pipeline.stage_keys), not by paths or command lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from demo_fixtures import own_data_demo


@pytest.fixture(scope="module")
def texts(tmp_path_factory, real_documents) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("reuse_texts")
    paths = {"corpus": folder / "corpus.jsonl", "eval": folder / "held_out.jsonl"}
    for path, docs in ((paths["corpus"], real_documents[:-3]), (paths["eval"], real_documents[-3:])):
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return paths


def test_a_moved_run_folder_given_as_a_relative_path_reuses_every_stage(
    texts, tiny_lm_dir, tiny_encoder_dir, tmp_path, monkeypatch
):
    first_dir = tmp_path / "first"
    first = own_data_demo(texts, tiny_lm_dir, tiny_encoder_dir, first_dir)  # an absolute path
    (tmp_path / "elsewhere").mkdir()
    moved = tmp_path / "elsewhere" / "renamed"
    first_dir.rename(moved)  # moved and renamed: the old path is gone
    entries = sorted(p.name for p in moved.iterdir())
    monkeypatch.chdir(tmp_path / "elsewhere")
    second = own_data_demo(texts, tiny_lm_dir, tiny_encoder_dir, Path("renamed"))  # a relative one
    stages = json.loads((moved / "stages.json").read_text())
    assert list(stages) == [
        "index",
        "data-gen",
        "train",
        "eval",
        "forward eval continuation",
        "forward eval future-query",
    ]
    assert {name: stage["reused"] for name, stage in stages.items()} == dict.fromkeys(stages, True)
    assert sorted(p.name for p in moved.iterdir()) == entries  # no stage folder made anew
    assert not first_dir.exists()
    before, after = first["sets"]["eval"]["metrics"], second["sets"]["eval"]["metrics"]
    assert {c: m["token_ppl"] for c, m in after.items()} == {c: m["token_ppl"] for c, m in before.items()}
