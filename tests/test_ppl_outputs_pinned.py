"""Every file of a tiny ``ralm eval ppl --compare`` run, pinned: the keys in their order, the types, and every
value that is not a float (windows, queries, passages, picks, counts, config) against a stored expectation
(``tests/data/ppl_compare_pinned.json``), and the exact JSON layout of each file (indent, separators, ASCII
escapes). Floats are pinned by type only: their last bits may differ between CPUs. A refactor that changes
any written byte other than a float's fails here.

The fixture text and tokenizer come from the standard library's docstrings, so the values are those of one
Python version (recorded with them); under another the files' layout is still checked and the comparison
is skipped, naming the version. Regenerate the expectation (only for an intended format change) with
``RALM_PIN_WRITE=1``.
"""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from ppl_fixtures import ppl_setup  # noqa: F401

from ralm.eval.ppl.conditions import parse_conditions
from ralm.eval.ppl.ppl_command import eval_ppl
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions

EXPECTED = Path(__file__).parent / "data" / "ppl_compare_pinned.json"
CONDITIONS = "no-retrieval,no-retrieval-matched,bm25,random,zero-shot,bm25-above=4.0,oracle,oracle-or-none"
LM_PICKS = ("zero-shot", "oracle", "oracle-or-none")
"""Conditions that pick by the LM's floats: their picks are pinned by type (a near-tie could differ)."""
PICK_FIELDS = ("chosen_rank", "passage_id", "copies_target", "windows_with_passage", "copy_windows")
TIMES = ("setup_s", "retrieval_s", "rerank_s", "scoring_s", "tokens_per_s", "copy_rate", "ralm_version")
"""Pinned by type: wall times, and the version (a release changes it)."""
PYTHON = "python {}.{}".format(*sys.version_info[:2])


def skeleton(value, roots: dict[str, str], masked: bool = False):
    """`value` with its floats as their type, paths under `roots` as their names, and (`masked`) a pick
    as its type (compared as JSON text, so the key order is pinned too)."""
    if isinstance(value, dict):
        return {k: _entry(k, v, roots, masked) for k, v in value.items()}
    if isinstance(value, list):
        return [skeleton(v, roots, masked) for v in value]
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        for root, name in roots.items():
            value = value.replace(root, name)
    return value


def _entry(key: str, value, roots: dict[str, str], masked: bool):
    if key in TIMES or (masked and key in PICK_FIELDS):
        return type(value).__name__
    return skeleton(value, roots, masked or key in LM_PICKS)  # compare.json: statistics per condition


def layout(path: Path) -> object:
    """The file's parsed content, after checking it is written exactly as ralm writes that kind of file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl" or path.name.endswith(".jsonl"):
        rows = [json.loads(line) for line in text.splitlines()]
        assert text == "".join(json.dumps(r) + "\n" for r in rows), path  # compact, ASCII escapes
        return rows
    parsed = json.loads(text)
    assert text == json.dumps(parsed, indent=2) + "\n", path
    return parsed


def test_a_tiny_compare_run_writes_exactly_the_pinned_files(ppl_setup, tmp_path):
    out = tmp_path / "compare"
    eval_ppl(
        text=str(ppl_setup["text"]),
        output=str(out),
        lm=LMOptions(str(ppl_setup["lm_dir"]), device="cpu", dtype="float32", max_length=128),
        retrieval=RetrievalOptions(str(ppl_setup["index"]), k=2),
        max_tokens=176,
        retrieval_cache=str(tmp_path / "cache.jsonl"),
        progress=False,
        window=WindowOptions(stride=16, query_tokens=16, max_passage_tokens=32),
        compare=parse_conditions(CONDITIONS),
        print_table=False,
    )
    roots = {str(tmp_path): "<tmp>", str(ppl_setup["root"]): "<fixture>"}
    got = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = str(path.relative_to(out))
        got[name] = skeleton(layout(path), roots, masked=name.split("/")[0] in LM_PICKS)
    if os.environ.get("RALM_PIN_WRITE"):
        lines = ",\n".join(f"{json.dumps(name)}: {json.dumps(files)}" for name, files in got.items())
        EXPECTED.write_text(f'{{\n"python": "{PYTHON}",\n{lines}\n}}\n')  # one line per file
    expected = json.loads(EXPECTED.read_text())
    if expected.pop("python") != PYTHON:
        pytest.skip(f"the pinned values are of the fixture text of another Python version ({PYTHON} here)")
    assert list(got) == list(expected)  # the same files
    for name in expected:
        assert json.dumps(got[name]) == json.dumps(expected[name]), name
