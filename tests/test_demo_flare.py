"""`ralm demo --flare` on the real offline assets, at a tiny scale (slow: real weights): the prompts are the
held-out book's own text, no passage shown to the LM comes from a held-out book, theta comes from the dev
book, and every change in the report lies inside its interval."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TINY = dict(dev_prompts=2, test_prompts=3, new_tokens=24, methods=("no-retrieval", "single", "flare"))


@pytest.fixture(scope="module")
def flare_run(tmp_path_factory, gemma3_gguf):
    from dataclasses import replace

    from ralm.demo.flare_demo import QUICK_FLARE, flare_demo
    from ralm.demo.presets import QUICK_BOOKS
    from ralm.pipeline.scale import QUICK

    out = tmp_path_factory.mktemp("flare")
    report = flare_demo(True, out, QUICK_BOOKS, str(gemma3_gguf), QUICK, replace(QUICK_FLARE, **TINY))
    return out, report


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_prompts_are_the_books_own_text(flare_run):
    out, _ = flare_run
    books = {
        r["id"]: r["text"]
        for name in ("dev", "related")
        for r in _rows(out / "data" / f"web_{name}_books.jsonl")
    }
    for split, book in (("dev", "Mark"), ("test", "2Chr")):
        prompts = _rows(out / "flare-data" / f"{split}-prompts.jsonl")
        assert len(prompts) == TINY[f"{split}_prompts"]
        for p in prompts:
            assert p["id"].startswith(f"{split}-{book}-")
            start = books[book].find(p["prompt"])
            assert start >= 0 and books[book][start + len(p["prompt"]) :].lstrip().startswith(
                p["continuation"]
            )
            # It opens where a sentence does, with its first word (Gemma's tokens start at the space).
            assert start == 0 or re.search(r"(?:[.!?][\"'’”)\]]*\s+|\n\s*)$", books[book][:start]), p[
                "prompt"
            ]


def test_no_passage_comes_from_a_held_out_book(flare_run):
    out, report = flare_run
    held_out = ("Mark", "2Chr", "Ruth")
    shown = set()
    for folder in out.glob("flare-*-*-*"):
        if folder.is_dir():
            for row in _rows(folder / "predictions.jsonl"):
                shown |= {pid for step in row["trace"] for pid in step.get("passages", [])}
    assert shown, "the retrieving methods showed passages"
    assert not {pid for pid in shown if pid.split("-")[0] in held_out}
    excluded = json.loads(next(out.glob("index-*.passages.jsonl.excluded.json")).read_text())
    assert set(held_out) <= set(excluded["excluded_ids"])


def test_theta_comes_from_dev_and_every_change_has_its_interval(flare_run):
    out, report = flare_run
    dev_single = next(out.glob("flare-dev-single-*"))
    mins = sorted(p for row in _rows(dev_single / "predictions.jsonl") for p in row["sentence_min_probs"])
    assert report["theta"] == mins[-(-len(mins) * 6 // 10) - 1]  # the ceil(0.6 n)-th smallest
    assert report["metrics"]["single"]["searches_per_example"] == 1.0
    assert report["metrics"]["no-retrieval"]["searches_per_example"] == 0.0
    for rows in report["changes"].values():
        for by_metric in rows.values():
            for d in by_metric.values():
                assert d["low"] <= d["difference"] <= d["high"]
    assert (out / "flare-report.png").stat().st_size > 0
    assert "against single" in (out / "flare-report.txt").read_text()
