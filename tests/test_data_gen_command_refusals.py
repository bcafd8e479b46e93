"""`ralm data-gen` refuses bad input before any work: an LM too short, a stale or foreign index, an unwritable
output; `data-gen merge` reports missing shards.
"""

# ruff: noqa: F811  (the module fixture `corpus` is imported from data_gen_fixtures and used as an argument)

from __future__ import annotations

import json
import os

import pytest
from data_gen_fixtures import (
    OPTIONS,
    _data_gen,
    cli_args,
    corpus,  # noqa: F401
    run_in_process,
    write_corpus,
)
from datasets import load_from_disk

from ralm.cli.main import main as ralm_main
from ralm.errors import RalmInputError


def test_lm_too_short_for_passage_and_query_is_refused_before_work(tmp_path, corpus, tiny_lm_dir):
    docs, _, index = corpus
    with pytest.raises(RalmInputError, match=r"--max-length: the LM holds 256 tokens, less than .* = 292"):
        _data_gen(
            docs,
            index,
            tiny_lm_dir,
            tmp_path / "out",
            max_length=1024,
            max_passage_tokens=256,
            query_tokens=32,
        )
    assert not (tmp_path / "out" / "shards").exists()


def test_stale_index_is_refused(tmp_path, corpus, tiny_lm_dir):
    docs, passages, index = corpus
    stale = tmp_path / "passages.jsonl"
    stale.write_text(passages.read_text().replace("the", "THE", 1))
    with pytest.raises(RalmInputError, match="index was built from another passages file"):
        _data_gen(docs, index, tiny_lm_dir, tmp_path / "out", passages=stale)


def test_index_of_the_same_documents_under_other_ids_is_refused(tmp_path, tiny_lm_dir, real_documents):
    docs, _, index = write_corpus(tmp_path / "renamed", real_documents, id_prefix="wiki:")
    with pytest.raises(RalmInputError, match=r"documents and index disagree: .*under another doc_id"):
        _data_gen(docs, index, tiny_lm_dir, tmp_path / "out", num_prefixes=8)
    # with exclusion off (the bare switch, as the issue spells it) the same corpus is fine; the choice is
    # recorded
    out = tmp_path / "out2"
    run_in_process(
        [*cli_args(docs, index, tiny_lm_dir, out, **{**OPTIONS, "num_prefixes": 4}), "--allow-same-doc"]
    )
    meta = json.loads((out / "ralm_data_gen.json").read_text())
    assert meta["exclude_same_doc"] is False and meta["config"]["exclude_same_doc"] is False


def test_unwritable_output_is_refused_before_loading(tmp_path, corpus, tiny_lm_dir):
    docs, _, index = corpus
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RalmInputError, match=r"file/out: output folder is not writable"):
        _data_gen(docs, index, tiny_lm_dir, blocker / "out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_output_is_refused(tmp_path, corpus, tiny_lm_dir):
    docs, _, index = corpus
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(RalmInputError, match="not writable"):
            _data_gen(docs, index, tiny_lm_dir, ro / "out")
    finally:
        ro.chmod(0o700)


def test_merge_subcommand_reports_missing_shards(tmp_path, corpus, tiny_lm_dir, capsys):
    docs, _, index = corpus
    out = tmp_path / "data"
    _data_gen(docs, index, tiny_lm_dir, out, num_prefixes=6, num_shards=3, shard_id=1)
    with pytest.raises(SystemExit):
        ralm_main(["data-gen", "merge", "--output", str(out)])
    assert "2 shard(s) missing (shard-00000-of-00003, shard-00002-of-00003)" in capsys.readouterr().err
    assert not (out / ".merge.lock").exists()

    # The other shards run as separate jobs with `--keep-shards`; a lock left by a killed merge (a dead
    # process on this host) is taken over, and `merge` joins them.
    import socket
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / ".merge.lock").write_text(f"{socket.gethostname()}-{dead.pid}")
    for shard_id in (0, 2):
        _data_gen(
            docs, index, tiny_lm_dir, out, num_prefixes=6, num_shards=3, shard_id=shard_id, keep_shards="true"
        )
    meta = json.loads((out / "ralm_data_gen.json").read_text())
    assert meta["complete"] and not (out / ".merge.lock").exists()
    assert load_from_disk(str(out))["prefix_index"] == list(range(6))
    assert len(list((out / "shards").glob("shard-*"))) == 3  # kept
    ralm_main(["data-gen", "merge", "--output", str(out)])  # already merged: reports and returns
    assert "6 examples" in capsys.readouterr().out
