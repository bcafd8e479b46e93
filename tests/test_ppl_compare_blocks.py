"""`ralm eval ppl --compare`'s bootstrap blocks: one block length per table, no block spans two documents."""

# ruff: noqa: F811  (the session fixture `ppl_setup` is imported from ppl_fixtures and used as an argument)

from __future__ import annotations

import json

import numpy as np
import pytest
from naive_bootstrap import naive_change_interval
from ppl_compare_fixtures import N, _run
from ppl_fixtures import ppl_setup  # noqa: F401

from ralm.eval.ppl.records import CandidateScores, WindowScores


def test_blocks_never_span_two_documents_of_a_jsonl_text(ppl_setup, tmp_path, capsys):
    """Short JSONL documents: every block holds the windows of one document (found here from the decoded
    text: a window belongs to the document whose separators precede its first target token), and the
    intervals equal the naive bootstrap over those blocks; --bootstrap windows draws single windows."""
    words = ppl_setup["text"].read_text().split()
    docs = [" ".join(words[i : i + 8]) for i in range(0, 400, 8)]  # no document holds "\n\n"
    text = tmp_path / "docs.jsonl"
    text.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    results = {}
    for method in ("blocks", "windows"):
        results[method] = _run(
            ppl_setup,
            tmp_path / method,
            tmp_path / "cache.jsonl",
            text=text,
            compare="no-retrieval,bm25",
            seed=5,
            bootstrap_resamples=300,
            bootstrap=method,
        )
    printed = capsys.readouterr().out
    table = [json.loads(x) for x in (tmp_path / "blocks" / "candidates.jsonl").read_text().splitlines()]
    tokens = ppl_setup["lm"].encode("\n\n".join(docs))[:N]
    decode = ppl_setup["lm"].tokenizer.decode
    documents = [decode(tokens[: r["target_start"] + 1]).rstrip("\n").count("\n\n") for r in table]
    bootstrap = json.loads((tmp_path / "blocks" / "compare.json").read_text())["bootstrap"]
    length = bootstrap["block_length"]
    labels, run = [], 0
    for i, doc in enumerate(documents):
        new = i == 0 or doc != documents[i - 1] or run == length
        labels.append(labels[-1] + 1 if new and labels else 0 if new else labels[-1])
        run = 1 if new else run + 1
    assert bootstrap["documents"] == len(set(documents)) >= 4 and bootstrap["blocks"] == len(set(labels))
    assert f"block length {length} windows, {len(set(labels))} blocks" in printed
    nll = {
        name: [json.loads(x)["nll"] for x in (tmp_path / "blocks" / name / "windows.jsonl").open()]
        for name in ("bm25", "no-retrieval")
    }
    n = [r["num_targets"] for r in table]
    for method, draws in (("blocks", labels), ("windows", range(len(table)))):
        got = results[method]["bm25"]["comparison"]["vs_no_retrieval"]
        want = naive_change_interval(nll["bm25"], nll["no-retrieval"], n, draws, 300, 5)
        assert (got["low"], got["high"]) == pytest.approx(want, rel=1e-9), method
        assert got["method"] == method and got["blocks"] == len(set(draws))
    windows_summary = json.loads((tmp_path / "windows" / "compare.json").read_text())["bootstrap"]
    assert (windows_summary["method"], windows_summary["block_length"]) == ("windows", 1)


def test_one_block_length_per_table_and_blocks_cut_at_document_starts():
    """table_blocks on a table whose BM25 − no retrieval difference is strongly autocorrelated: one
    length (from that difference) for the whole table, and a new block at every document start."""
    from ralm.eval.ppl.compare_stats import table_blocks
    from ralm.statistics import block_length

    rng = np.random.default_rng(0)
    diff = np.zeros(120)
    for t in range(1, 120):
        diff[t] = 0.9 * diff[t - 1] + rng.normal()
    table = [
        WindowScores(
            i, 100 + 4 * i, 4, 50.0, candidates=[CandidateScores("p", None, 50.0 + diff[i])] if i else []
        )
        for i in range(120)
    ]
    starts = (0, 150, 170, 300)  # tokens: windows 0-12, 13-17, 18-49 and 50-119
    blocks = table_blocks(table, starts)
    documents = [sum(1 for s in starts if s <= r.target_start) - 1 for r in table]
    assert blocks.block_length == block_length(diff) > 2 and blocks.documents == 4
    for label in set(blocks.labels):
        members = [i for i, lab in enumerate(blocks.labels) if lab == label]
        assert len({documents[i] for i in members}) == 1 and len(members) <= blocks.block_length
        assert members == list(range(members[0], members[-1] + 1))  # consecutive windows
    runs = sum(-(-documents.count(d) // blocks.block_length) for d in set(documents))
    assert blocks.blocks == len(set(blocks.labels)) == runs
    single = table_blocks(table, starts, "windows")
    assert (single.labels, single.blocks, single.block_length) == (None, 120, 1)
    with pytest.raises(ValueError, match="bootstrap 'window'"):
        table_blocks(table, starts, "window")
