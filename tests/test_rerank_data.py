"""Reading ralm-rerank-data/1: the split by document, candidate groups, batching, samplers, bad input."""

from __future__ import annotations

import json

import pytest

from ralm.errors import RalmInputError
from ralm.rerank.inputs import encode_groups, prefix_tails
from ralm.rerank.model import load_tokenizer
from ralm.train.batch import GroupCollator
from ralm.train.dataset import GroupDataset, load_rerank_data
from ralm.train.losses import MASKED
from ralm.train.sampling import ShardBatchSampler, StreamBatchSampler
from tests.rerank_fixtures import NO_RETRIEVAL_LOGPROB, keyword_rows, save_rows


@pytest.fixture(scope="module")
def rows(real_documents):
    return keyword_rows(real_documents, 60, k=4, seed=3)


def test_split_is_by_document_and_keeps_every_usable_row(tmp_path, rows):
    rows = [dict(r) for r in rows]
    # two groups too small to rank: one with a single candidate, one with none
    for i, n in ((5, 1), (6, 0)):
        for key in (
            "candidate_ids",
            "candidate_doc_ids",
            "candidate_texts",
            "bm25_scores",
            "lm_logprobs",
            "lm_token_logprobs",
        ):
            rows[i][key] = rows[i][key][:n]
    data = load_rerank_data(str(save_rows(rows, tmp_path / "d")), abstain=False, val_fraction=0.25, seed=0)
    assert data.skipped_small == 2
    assert sorted(data.train_rows + data.val_rows + data.decision_rows) == [
        i for i in range(60) if i not in (5, 6)
    ]
    train_docs = {rows[i]["doc_id"] for i in data.train_rows}
    val_docs = {rows[i]["doc_id"] for i in data.val_rows}
    decision_docs = {rows[i]["doc_id"] for i in data.decision_rows}
    assert not train_docs & val_docs and len(val_docs) == 3  # 3 documents of 5 rows: 15 of 58 rows >= 25%
    # the decision's default tenth: 2 documents of 5 rows (10 of 58 >= 5.8), from neither other part
    assert not decision_docs & (train_docs | val_docs) and len(decision_docs) == 2
    # with --abstain the one-passage group gains the empty passage and becomes usable
    data = load_rerank_data(str(tmp_path / "d"), abstain=True, val_fraction=0.25, seed=0)
    assert data.skipped_small == 1


def test_validation_share_counts_prefixes_not_documents(tmp_path, rows):
    """Books differ in size: holding out a share of the documents could hold out almost no prefixes."""
    rows = [dict(r) for r in rows[:60]]
    for i, row in enumerate(rows):  # one document of 36 rows, twelve of 2
        row["doc_id"] = "big" if i < 36 else f"small{(i - 36) // 2}"
    for seed in range(6):
        data = load_rerank_data(
            str(save_rows(rows, tmp_path / f"d{seed}")), abstain=False, val_fraction=0.1, seed=seed
        )
        val_docs = {rows[i]["doc_id"] for i in data.val_rows}
        assert not val_docs & {rows[i]["doc_id"] for i in data.train_rows}
        assert len(data.val_rows) >= 6  # a tenth of 60 prefixes, whichever documents come first
        assert len(data.train_rows) > 0


def test_groups_and_collation(tmp_path, rows, tiny_encoder_dir):
    rows = [dict(r) for r in rows[:3]]
    rows[1] = {**rows[1], **{k: rows[1][k][:2] for k in ("candidate_texts", "lm_logprobs")}}
    path = save_rows(rows, tmp_path / "d")
    ds = GroupDataset(str(path), [0, 1, 2], abstain=True)
    group = ds[1]
    assert group.passages == rows[1]["candidate_texts"] + [""]
    assert group.lm_logprobs == pytest.approx(rows[1]["lm_logprobs"] + [NO_RETRIEVAL_LOGPROB])
    assert group.is_empty == [False, False, True]
    tokenizer = load_tokenizer(str(tiny_encoder_dir))
    batch = GroupCollator(tokenizer, max_length=48, max_prefix_tokens=16)([ds[0], ds[1], ds[2]])
    assert batch.mask.tolist() == [[True] * 5, [True] * 3 + [False] * 2, [True] * 5]
    assert batch.input_ids.shape[0] == 5 + 3 + 5  # only real pairs are encoded
    assert batch.input_ids.shape[1] <= 48
    assert (batch.lm_logprobs[1, 3:] == MASKED).all()
    assert batch.is_empty[1].tolist() == [False, False, True, False, False]


def test_input_rule_keeps_the_prefix_tail_and_cuts_the_passage_end(tiny_encoder_dir):
    tokenizer = load_tokenizer(str(tiny_encoder_dir))
    prefix = " ".join(f"word{i}" for i in range(200))
    tail = prefix_tails(tokenizer, [prefix], 20)[0]
    assert prefix.endswith(tail) and tail.endswith("word199")
    tail_ids = tokenizer(tail, add_special_tokens=False)["input_ids"]
    assert len(tail_ids) == 20  # cut at a token start, so it re-tokenizes to the same 20 tokens
    passage = "alpha beta gamma " * 40
    enc = encode_groups(
        tokenizer, [prefix], [[passage, "short passage"]], max_length=40, max_prefix_tokens=20
    )
    ids = enc["input_ids"][0][enc["attention_mask"][0].bool()].tolist()
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert len(ids) == 40 and ids[0] == cls and ids[-1] == sep
    assert ids[1:21] == tail_ids  # the whole prefix tail, then the passage start
    passage_ids = tokenizer(passage, add_special_tokens=False)["input_ids"]
    assert ids[22:-1] == passage_ids[: 40 - 23]


def test_stream_sampler_resumes_and_shards():
    full = list(StreamBatchSampler(10, 3, 8, seed=5))
    assert len(full) == 8
    # every pass over the data is a permutation
    stream = [i for b in full for i in b]
    assert sorted(stream[:10]) == list(range(10)) and sorted(stream[10:20]) == list(range(10))
    # resuming at batch 5 gives exactly the remaining batches; len still counts the whole run
    resumed = StreamBatchSampler(10, 3, 8, seed=5, start=5)
    assert list(resumed) == full[5:] and len(resumed) == 8
    # two ranks with 3 each see exactly what one process with 6 sees, split in halves
    one = list(StreamBatchSampler(10, 6, 4, seed=5))
    r0 = list(StreamBatchSampler(10, 3, 4, seed=5, rank=0, world_size=2))
    r1 = list(StreamBatchSampler(10, 3, 4, seed=5, rank=1, world_size=2))
    assert [a + b for a, b in zip(r0, r1, strict=True)] == one
    shards = [list(ShardBatchSampler(7, 2, rank=r, world_size=2)) for r in (0, 1)]
    assert sorted(i for s in shards for b in s for i in b) == list(range(7))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"drop": ("lm_logprobs", "lm_token_logprobs")}, "column 'lm_logprobs' is missing"),
        ({"bad_row": 4}, "row 4: lm_logprobs holds a NaN"),
        ({"short_row": 2}, "row 2: 4 candidate_texts but 3 lm_logprobs"),
        ({"meta": {"format": "something-else/3"}}, "field 'format'"),
        ({"meta": {"complete": False}}, "field 'complete' is false"),
        ({"one_doc": True}, "need at least 3"),
    ],
)
def test_bad_datasets_are_clear_errors(tmp_path, rows, change, message):
    rows = [dict(r) for r in rows]
    if "bad_row" in change:
        rows[change["bad_row"]]["lm_logprobs"] = [float("nan")] + rows[change["bad_row"]]["lm_logprobs"][1:]
    if "short_row" in change:
        rows[change["short_row"]]["lm_logprobs"] = rows[change["short_row"]]["lm_logprobs"][:3]
    if change.get("one_doc"):
        for r in rows:
            r["doc_id"] = "same"
    path = save_rows(rows, tmp_path / "d", meta=change.get("meta"), drop=change.get("drop", ()))
    with pytest.raises(RalmInputError, match=message) as err:
        load_rerank_data(str(path), abstain=False, val_fraction=0.2, seed=0)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_missing_folder_and_no_retrieval_column(tmp_path, rows):
    with pytest.raises(RalmInputError, match="no such dataset folder"):
        load_rerank_data(str(tmp_path / "nope"), abstain=False, val_fraction=0.2, seed=0)
    path = save_rows(rows, tmp_path / "d", drop=("no_retrieval_logprob", "no_retrieval_token_logprobs"))
    load_rerank_data(str(path), abstain=False, val_fraction=0.2, seed=0)  # fine without --abstain
    with pytest.raises(RalmInputError, match="no_retrieval_logprob"):
        load_rerank_data(str(path), abstain=True, val_fraction=0.2, seed=0)
    assert json.loads((path / "ralm_data_gen.json").read_text())["format"] == "ralm-rerank-data/1"
