"""`ralm demo`'s presets and options (fast): the quick switch, the shipped YAML, the orderings, the Bible
demo's books, and bad options refused before any work."""

# ruff: noqa: F811  (the module fixture `texts` is imported from demo_fixtures and used as an argument)

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from demo_fixtures import (
    TINY,
    texts,  # noqa: F401
)

from ralm.demo.demo_command import build_parser, demo
from ralm.demo.presets import FULL_BOOKS, QUICK_BOOKS, BookOptions, bible_scale, resolve_books
from ralm.errors import RalmInputError
from ralm.pipeline.report import orderings, relative_change
from ralm.pipeline.scale import FULL, QUICK, ScaleOptions, resolve_scale

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "demo"


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
    from ralm.cli.command_args import parse

    _, init = parse(build_parser(), ["--quick", "--k", "3"])
    assert init.quick is True and init.scale.k == 3


@pytest.mark.parametrize(
    ("name", "preset", "books"), [("quick.yaml", QUICK, QUICK_BOOKS), ("full.yaml", FULL, FULL_BOOKS)]
)
def test_shipped_yaml_spells_out_the_preset(name, preset, books):
    values = yaml.safe_load((CONFIGS / name).read_text())
    spelled = ScaleOptions(**values["scale"])
    assert bible_scale(values["quick"], spelled) == bible_scale(values["quick"], ScaleOptions())
    form = "retrieved" if values["quick"] else "continuation"  # the Bible demo's (ralm.demo.presets)
    stacked = not values["quick"]
    assert resolve_scale(values["quick"], spelled) == replace(preset, passage_form=form, stacked=stacked)
    assert resolve_books(values["quick"], BookOptions(**values["books"])) == books


def test_the_full_bible_demo_hands_the_lm_continuations_and_stacks_unless_told_otherwise():
    """The full Bible demo's passage form (chosen on its dev book) and stacked reranker (on its training
    books' decision prefixes) replace the scale's, the paper's passage and the BM25 start, which the quick
    scale and `ralm run` keep; `--passage-form` and `--stacked` still set them."""
    assert (QUICK.passage_form, FULL.passage_form) == ("retrieved", "retrieved")
    assert (QUICK.stacked, FULL.stacked) == (False, False)
    assert bible_scale(True, ScaleOptions()) == QUICK
    bible = replace(FULL, passage_form="continuation", stacked=True)
    assert bible_scale(False, ScaleOptions(k=3)) == replace(bible, k=3)
    assert bible_scale(False, ScaleOptions(passage_form="retrieved", stacked=False)) == FULL
    continued = ScaleOptions(passage_form="continuation")
    assert bible_scale(True, continued) == replace(QUICK, passage_form="continuation")


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
