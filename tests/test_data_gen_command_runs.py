"""`ralm data-gen` end to end on CPU: tiny GPT-2, real text, a bm25s index built here.

The reference run is in-process with one thread; child processes run with OMP_NUM_THREADS=1 too, so a
resumed or two-process run must reproduce it row for row, floats included. A foreign shard beside it is
refused, and --exclude leaves documents out of every row.
"""

# ruff: noqa: F811  (the module fixture `corpus` is imported from data_gen_fixtures and used as an argument)

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import time

import pytest
import torch
from data_gen_fixtures import (
    OPTIONS,
    SHORT_DOCS,
    _data_gen,
    cli_args,
    corpus,  # noqa: F401
    fork,
    run_in_process,
    spawn,
)
from datasets import load_from_disk

from ralm.data_gen.schema import FEATURES
from ralm.errors import RalmInputError


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus, tiny_lm_dir):
    """One uninterrupted run: 40 prefixes in 8 shards of 5."""
    docs, _, index = corpus
    out = tmp_path_factory.mktemp("reference") / "data"
    run_in_process(cli_args(docs, index, tiny_lm_dir, out, num_shards=8, **OPTIONS))
    return out


def test_dataset_schema_rows_and_metadata(reference, corpus, tiny_lm_dir, real_documents):
    ds = load_from_disk(str(reference))
    assert ds.features == FEATURES
    assert ds["prefix_index"] == list(range(40))
    meta = json.loads((reference / "ralm_data_gen.json").read_text())
    assert meta["format"] == "ralm-rerank-data/2" and meta["complete"] is True
    assert (meta["k"], meta["s"], meta["l"], meta["seed"], meta["exclude_same_doc"]) == (4, 4, 16, 1, True)
    assert meta["documents_skipped_too_short"] == len(SHORT_DOCS)
    assert meta["index"]["backend"] == "bm25s" and len(meta["index_hash"]) == 64
    assert not (reference / "shards").exists()  # merged and cleaned up
    frame = load_from_disk(str(reference)).to_pandas()  # docs/formats.md §7: a user's pandas frame
    assert len(frame) == 40 and frame["lm_logprobs"].map(len).equals(frame["candidate_ids"].map(len))
    texts = {d["id"]: d["text"] for d in real_documents}
    for row in ds:
        assert len(row["candidate_ids"]) <= 4 and row["doc_id"] not in row["candidate_doc_ids"]
        assert len(row["lm_logprobs"]) == len(row["candidate_ids"]) == len(row["candidate_texts"])
        assert all(
            cid.rsplit("-", 1)[0] == d
            for cid, d in zip(row["candidate_ids"], row["candidate_doc_ids"], strict=True)
        )
        assert row["bm25_scores"] == sorted(row["bm25_scores"], reverse=True)
        assert row["lm_logprobs"] == pytest.approx([sum(t) for t in row["lm_token_logprobs"]], abs=1e-4)
        assert (
            all(len(t) == 4 for t in row["lm_token_logprobs"])
            and len(row["no_retrieval_token_logprobs"]) == 4
        )
        assert row["position"] >= 16 and row["position"] % 4 == 0
        # prefix, query and target are consecutive text of the source document
        assert (row["query"] + row["target"]).strip() in texts[row["doc_id"]] or row[
            "target"
        ].strip() in texts[row["doc_id"]]
    summary = meta["summary"]
    assert summary["examples"] == 40
    assert summary["examples_with_fewer_than_k"] == sum(len(r) < 4 for r in ds["candidate_ids"])
    assert summary["examples_with_candidates"] == sum(len(r) > 0 for r in ds["candidate_ids"])
    # most prefixes of real prose find k passages that share a term with their query
    assert summary["examples_with_fewer_than_k"] < 10


def test_the_recorded_config_is_the_one_written_before_the_option_groups(reference, corpus, tiny_lm_dir):
    """`config` for this command line as ralm wrote it before the shared option groups (commit ec25360, run
    on this fixture: the same values, the same hashes), and the y' length format /2 added (the effective
    8 of the default 16: half the 16-token shortest prefix)."""
    from ralm.retrieval.index_meta import index_fingerprint, read_meta

    docs, _, index = corpus
    digest = hashlib.sha256()  # the documents as read (id and text), as tokenize_documents hashes them
    for doc in map(json.loads, docs.read_text().splitlines()):
        digest.update(doc["id"].encode() + b"\0" + doc["text"].encode() + b"\0")
    config = json.loads((reference / "ralm_data_gen.json").read_text())["config"]
    assert config == {
        "lm": str(tiny_lm_dir),
        "tokenizer": str(tiny_lm_dir),
        "dtype": "float32",
        "documents_sha256": digest.hexdigest(),
        "index_hash": index_fingerprint(read_meta(index)),
        "s": 4,
        "l": 16,
        "k": 4,
        "min_prefix_tokens": 16,
        "max_length": 96,
        "max_passage_tokens": 40,
        "seed": 1,
        "num_prefixes": 40,
        "num_examples": 40,
        "num_shards": 8,
        "exclude_same_doc": True,
        "rank_tokens": 8,
    }


def test_a_row_matches_an_independent_forward(reference, tiny_lm_dir):
    """Re-tokenize a stored row's texts and score candidate 0 with one plain forward and all logits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    row = load_from_disk(str(reference))[5]
    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir, dtype=torch.float32).eval()
    passage = tok(row["candidate_texts"][0], add_special_tokens=False)["input_ids"][:40]
    prefix = tok(row["prefix"], add_special_tokens=False)["input_ids"]
    target = tok(row["target"], add_special_tokens=False)["input_ids"]
    if len(target) != 4:  # a token that straddles the cut re-tokenizes differently: nothing to compare
        pytest.skip("target text does not re-tokenize to the same 4 tokens")
    ids = passage + prefix[-(96 - len(passage) - 4) :] + target
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
    want = sum(float(logp[len(ids) - 5 + t, target[t]]) for t in range(4))
    assert row["lm_logprobs"][0] == pytest.approx(want, abs=1e-3)
    # y': the prefix's last 8 tokens (the default 16 halved for this 16-token floor), off the same forward
    ranked = len(ids) - 4 - 8
    want_rank = sum(float(logp[ranked - 1 + t, ids[ranked + t]]) for t in range(8))
    assert row["lm_rank_logprobs"][0] == pytest.approx(want_rank, abs=1e-3)


def test_rerun_of_a_complete_output_does_nothing_and_another_config_is_refused(
    reference, corpus, tiny_lm_dir
):
    docs, _, index = corpus
    before = (reference / "ralm_data_gen.json").read_text()
    run_in_process(cli_args(docs, index, tiny_lm_dir, reference, num_shards=8, **OPTIONS))
    assert (reference / "ralm_data_gen.json").read_text() == before
    with pytest.raises(SystemExit):
        run_in_process(cli_args(docs, index, tiny_lm_dir, reference, num_shards=8, **{**OPTIONS, "k": 3}))


def _python_data_gen(out, corpus, tiny_lm_dir, **options) -> dict:
    """The reference run's first 6 prefixes through `data_gen` with the groups built in Python (one thread,
    as the reference), plus `options`."""
    from ralm.data_gen.data_gen_command import data_gen
    from ralm.data_gen.options import SamplingOptions
    from ralm.lm.options import LMOptions, WindowOptions
    from ralm.retrieval.options import RetrievalOptions

    docs, _, index = corpus
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return data_gen(
            str(docs),
            str(out),
            lm=LMOptions(model=str(tiny_lm_dir), max_length=96),
            retrieval=RetrievalOptions(index=str(index), k=4),
            sampling=SamplingOptions(num_prefixes=40, min_prefix_tokens=16, seed=1, limit=6),
            window=WindowOptions(stride=4, query_tokens=16, max_passage_tokens=40),
            progress=False,
            **options,
        )
    finally:
        torch.set_num_threads(threads)


def test_a_python_caller_passes_the_option_groups(tmp_path, reference, corpus, tiny_lm_dir):
    """`ralm.generate_reranking_data` (the README's API) with the groups built in Python: the same rows as
    the command line's run."""
    meta = _python_data_gen(tmp_path / "data", corpus, tiny_lm_dir)
    assert meta["complete"] and meta["limit"] == 6
    rows = load_from_disk(str(tmp_path / "data")).to_list()
    assert rows == load_from_disk(str(reference)).select(range(6)).to_list()


def _wait_for_shards(shards_dir, count: int, proc, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if shards_dir.exists() and len(list(shards_dir.glob("shard-*/ralm_shard.json"))) >= count:
            return
        assert proc.is_alive(), "the run ended before it could be killed"
        time.sleep(0.002)
    raise AssertionError("the run wrote no shard in time")


def test_sigkill_then_resume_equals_uninterrupted_run(tmp_path, reference, corpus, tiny_lm_dir):
    docs, _, index = corpus
    out = tmp_path / "data"
    args = cli_args(docs, index, tiny_lm_dir, out, num_shards=8, **OPTIONS)
    proc = fork(args, tmp_path / "killed.log")
    _wait_for_shards(out / "shards", 2, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert proc.exitcode == -signal.SIGKILL
    done = len(list((out / "shards").glob("shard-*/ralm_shard.json")))
    assert 2 <= done < 8, f"the kill should land mid-run ({done} of 8 shards complete)"
    assert not (out / "state.json").exists()

    resumed = fork(args, tmp_path / "resumed.log")
    resumed.join(300)
    log = (tmp_path / "resumed.log").read_text()
    assert resumed.exitcode == 0, log
    assert f"{8 - done} shard(s) written by this process, {done} already complete" in log
    assert load_from_disk(str(out)).to_list() == load_from_disk(str(reference)).to_list()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []  # no temporaries left


def _run_together(runs: list[tuple[list[str], dict]], logs) -> list[str]:
    procs = [fork(args, log, env) for (args, env), log in zip(runs, logs, strict=True)]
    for p in procs:
        p.join(300)
    texts = [log.read_text() for log in logs]
    assert [p.exitcode for p in procs] == [0] * len(procs), texts
    return texts


def test_two_processes_with_two_shards_equal_one_process(tmp_path, reference, corpus, tiny_lm_dir):
    docs, _, index = corpus
    out = tmp_path / "data"
    runs = [
        (cli_args(docs, index, tiny_lm_dir, out, num_shards=2, shard_id=i, **OPTIONS), {}) for i in (0, 1)
    ]
    logs = _run_together(runs, [tmp_path / "0.log", tmp_path / "1.log"])
    # each process wrote its own shard; whichever finished last merged
    assert sum("1 shard(s) written by this process" in log for log in logs) == 2
    assert load_from_disk(str(out)).to_list() == load_from_disk(str(reference)).to_list()
    assert json.loads((out / "ralm_data_gen.json").read_text())["config"]["num_shards"] == 2


def test_torchrun_ranks_take_their_own_shards(tmp_path, reference, corpus, tiny_lm_dir):
    docs, _, index = corpus
    out = tmp_path / "data"
    args = cli_args(docs, index, tiny_lm_dir, out, num_shards=4, **OPTIONS)
    runs = [(args, {"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r)}) for r in (0, 1)]
    logs = _run_together(runs, [tmp_path / "0.log", tmp_path / "1.log"])
    assert sum("2 shard(s) written by this process" in log for log in logs) == 2
    assert load_from_disk(str(out)).to_list() == load_from_disk(str(reference)).to_list()


@pytest.mark.slow  # no real weights, but ~20 s of a fresh interpreter importing torch on 2 busy cores
def test_the_installed_cli_runs_in_a_fresh_process(tmp_path, reference, corpus, tiny_lm_dir):
    """`python -m ralm data-gen --limit 6` from scratch: the same first rows as the full run."""
    docs, _, index = corpus
    out = tmp_path / "data"
    proc = spawn(cli_args(docs, index, tiny_lm_dir, out, limit=6, **OPTIONS))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "6 examples" in stdout
    assert load_from_disk(str(out)).to_list() == load_from_disk(str(reference)).select(range(6)).to_list()


def test_a_foreign_shard_in_the_output_is_refused_with_fields_named(tmp_path, reference, corpus, tiny_lm_dir):
    docs, _, index = corpus
    donor = tmp_path / "donor"
    _data_gen(docs, index, tiny_lm_dir, donor, num_prefixes=4, num_shards=2, shard_id=0)
    out = tmp_path / "out"
    (out / "shards").mkdir(parents=True)
    shutil.copytree(donor / "shards" / "shard-00000-of-00002", out / "shards" / "shard-00000-of-00002")
    with pytest.raises(
        RalmInputError,
        match=(
            r"shard-00000-of-00002/ralm_shard.json: made with a different "
            r".*num_examples: found 4, this run 40"
            r".*num_prefixes: found 4, this run 40"
            r".*num_shards: found 2, this run 8"
        ),
    ):
        _data_gen(docs, index, tiny_lm_dir, out, num_shards=8)


def test_exclude_leaves_documents_out_of_every_row_and_is_recorded(
    tmp_path, corpus, tiny_lm_dir, reference, capsys
):
    """--exclude (names or re:PATTERNs, as `ralm passages --exclude`): no row is a prefix of a left-out
    document, the metadata records the rules and the ids left out, and the summary counts them."""
    docs, _, index = corpus
    ids = [json.loads(line)["id"] for line in docs.read_text().splitlines()]
    rules = ["re:[a-m].*", ids[-1], "no-such-document"]
    left_out = [i for i in ids if "a" <= i[0] <= "m" or i == ids[-1]]
    assert 0 < len(left_out) < len(ids) - len(SHORT_DOCS)
    out = tmp_path / "data"
    run_in_process(
        [*cli_args(docs, index, tiny_lm_dir, out, num_shards=2, **OPTIONS), "--exclude", json.dumps(rules)]
    )
    rows = load_from_disk(str(out))
    assert len(rows) == 40 and not set(rows["doc_id"]) & set(left_out)
    meta = json.loads((out / "ralm_data_gen.json").read_text())
    assert meta["excluded"]["rules"] == rules and meta["excluded"]["excluded_ids"] == left_out
    assert meta["excluded"]["documents"] == len(ids) and meta["excluded"]["unmatched_exclude"] == [
        "no-such-document"
    ]
    assert meta["documents_total"] == len(ids) - len(left_out)
    assert meta["summary"]["documents_excluded"] == len(left_out)
    # The rows depend on which documents are left: another config than the run without --exclude.
    reference_meta = json.loads((reference / "ralm_data_gen.json").read_text())
    assert meta["config"]["documents_sha256"] != reference_meta["config"]["documents_sha256"]
    assert f"--exclude left out {len(left_out)} of {len(ids)} training documents" in capsys.readouterr().out


def test_continuation_candidates_run_from_the_best_sentence_into_the_next_passage(
    tmp_path, reference, corpus, tiny_lm_dir
):
    """`--passage-form continuation`: the same hits as the reference run's, each from one of its sentences
    on and continued into its document's next passage (the passage's own first words are kept in order),
    recorded in the metadata."""
    meta = _python_data_gen(tmp_path / "data", corpus, tiny_lm_dir, passage_form="continuation")
    passages = corpus[1]
    assert meta["config"]["passage_form"] == "continuation"
    by_id = {json.loads(line)["id"]: json.loads(line) for line in passages.read_text().splitlines()}
    order = list(by_id)
    rows = load_from_disk(str(tmp_path / "data")).to_list()
    for row, plain in zip(rows, load_from_disk(str(reference)).select(range(6)).to_list(), strict=True):
        assert [c.partition("@")[0] for c in row["candidate_ids"]] == plain["candidate_ids"]
        for cid, text in zip(row["candidate_ids"], row["candidate_texts"], strict=True):
            pid = cid.partition("@")[0]
            title, body = by_id[pid]["contents"].split("\n", 1)
            assert text.startswith(title + "\n")
            own, after = text.split("\n", 1)[1], order.index(pid) + 1
            if after < len(order) and by_id[order[after]]["doc_id"] == by_id[pid]["doc_id"]:
                following = by_id[order[after]]["contents"].split("\n", 1)[1].strip()
                assert own.endswith(" " + following)
                own = own.removesuffix(" " + following)
            assert own and " ".join(body.split()).endswith(" ".join(own.split()))  # a tail of the passage
    continued = [text for row in rows for text in row["candidate_texts"]]
    assert continued != [
        text for row in load_from_disk(str(reference)).select(range(6))["candidate_texts"] for text in row
    ]
