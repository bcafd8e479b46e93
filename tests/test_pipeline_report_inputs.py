"""The report's "LM inputs" line says how every input started, and that passages were continuations when a
run handed the LM those (``ralm run --passage-form continuation``), from the eval's own results.json."""

from __future__ import annotations

import json

import pytest

from ralm.pipeline.report import inputs_line


@pytest.mark.parametrize("form", [None, "continuation"])
def test_the_inputs_line_names_the_passage_form_the_eval_recorded(tmp_path, form):
    config = {"special_prefix": [2], "special_tokens": "every-input"}
    if form:
        config["passage_form"] = form
    folder = tmp_path / "eval-related" / "bm25"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"config": config}))
    line = inputs_line({"related": {"bm25": folder / "results.json"}})
    assert line.startswith("LM inputs: every input starts with the tokenizer's special prefix [2]")
    assert ("--passage-form continuation" in line) == (form == "continuation")
