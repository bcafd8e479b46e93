"""`ralm eval ppl` takes typed conditions and a typed sweep (`Condition`s, a `Sweep`); the command line and
YAML give them as text, read at that edge (``ppl_command.TEXT_FORMS``) and written back as the same text.
The same run from the text or from the typed values writes the same files."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppl_fixtures import ppl_setup  # noqa: F401

from ralm.cli.command_args import parse
from ralm.cli.command_render import command_line
from ralm.errors import RalmInputError
from ralm.eval.ppl.conditions import Condition
from ralm.eval.ppl.ppl_command import build_parser, eval_ppl, main
from ralm.eval.ppl.sweep import Sweep, parse_sweep
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions

TEXT = "no-retrieval,bm25,bm25-above=4.0,oracle"
TYPED = [
    Condition("no-retrieval", "no-retrieval"),
    Condition("bm25", "bm25"),
    Condition("bm25-above", "bm25-above", threshold=4.0),
    Condition("oracle", "oracle"),
]
TIMES = ("setup_s", "retrieval_s", "rerank_s", "scoring_s", "tokens_per_s")
"""Wall times: the only values two runs of the same inputs may write differently."""


def test_the_command_line_reads_the_text_into_typed_values_and_writes_it_back():
    parser = build_parser()
    argv = ["--text", "t", "--output", "o", "--compare", TEXT, "--sweep", "query-tokens=16,32"]
    _, init = parse(parser, argv)
    assert init.compare == TYPED and init.sweep == Sweep("query_tokens", (16, 32))
    typed = {"text": "t", "output": "o", "compare": TYPED, "sweep": init.sweep}
    rendered = command_line(eval_ppl, typed, parser.ralm_option_names)
    assert rendered == ["--text", "t", "--output", "o", "--compare", TEXT, "--sweep", "query_tokens=16,32"]
    _, back = parse(parser, rendered)
    assert (back.compare, back.sweep) == (TYPED, init.sweep)


def test_a_yaml_config_gives_them_as_text_too(tmp_path):
    config = tmp_path / "ppl.yaml"
    config.write_text(f"text: t\noutput: o\ncompare: {TEXT}\nsweep: stride=4,8\n")
    _, init = parse(build_parser(), ["--config", str(config)])
    assert init.compare == TYPED and init.sweep == Sweep("stride", (4, 8))


def test_bad_text_is_a_one_line_error_before_any_work(tmp_path, capsys):
    for option, text, words in (
        ("--compare", "bm25,bm-25", "--compare: unknown condition 'bm-25'"),
        ("--sweep", "stride=4,4", "--sweep 'stride=4,4': values must be distinct positive integers"),
    ):
        with pytest.raises(SystemExit) as stopped:
            main(["--text", "t", "--output", str(tmp_path / "out"), option, text])
        assert stopped.value.code == 2 and f"error: {words}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_sweep_is_checked_however_it_is_made():
    assert parse_sweep("stride=4,8") == Sweep("stride", [4, 8])  # values kept as a tuple
    for field, values in (
        ("k", (1, 2)),
        ("stride", (0, 4)),
        ("stride", (4, 4)),
        ("stride", ()),
        ("stride", ("4",)),
    ):
        with pytest.raises(RalmInputError, match="--sweep"):
            Sweep(field, values)
    with pytest.raises(TypeError, match="parse_sweep"):
        eval_ppl("t", "o", sweep="stride=4,8")


def _files(root: Path) -> dict[str, object]:
    """Every file a run wrote under `root`/out, parsed, with `root` as <root> and the wall times left out."""
    found = {}
    for path in sorted(p for p in (root / "out").rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8").replace(str(root), "<root>")
        rows = [json.loads(x) for x in text.splitlines()] if path.suffix == ".jsonl" else json.loads(text)
        found[str(path.relative_to(root))] = _untimed(rows)
    return found


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMES}
    return [_untimed(v) for v in value] if isinstance(value, list) else value


def test_the_command_line_text_and_the_typed_list_write_the_same_files(ppl_setup, tmp_path):
    text, by_text, by_type = str(ppl_setup["text"]), tmp_path / "text", tmp_path / "typed"
    main(
        ["--text", text, "--output", str(by_text / "out"), "--retrieval-cache", str(by_text / "cache.jsonl")]
        + ["--lm", str(ppl_setup["lm_dir"]), "--lm.device", "cpu", "--lm.dtype", "float32"]
        + ["--max-length", "128", "--index", str(ppl_setup["index"]), "--k", "2", "--max-tokens", "176"]
        + ["--stride", "16", "--query-tokens", "16", "--max-passage-tokens", "32"]
        + ["--compare", TEXT, "--progress", "false", "--print-table", "false"]
    )
    eval_ppl(
        text=text,
        output=str(by_type / "out"),
        retrieval_cache=str(by_type / "cache.jsonl"),
        lm=LMOptions(str(ppl_setup["lm_dir"]), device="cpu", dtype="float32", max_length=128),
        retrieval=RetrievalOptions(str(ppl_setup["index"]), k=2),
        max_tokens=176,
        window=WindowOptions(stride=16, query_tokens=16, max_passage_tokens=32),
        compare=TYPED,
        progress=False,
        print_table=False,
    )
    written, typed = _files(by_text), _files(by_type)
    assert sorted(written) == sorted(typed) and "out/bm25-above/results.json" in written
    assert written == typed
    recorded = json.loads((by_type / "out" / "oracle" / "results.json").read_text())["config"]["compare"]
    assert recorded == TEXT.split(",")  # results.json records the conditions as their text, as before
