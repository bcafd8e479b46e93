"""Reading ``ralm-rerank-data/2`` (or /1) (docs/formats.md §4) into candidate groups for the reranker.

One row is one prefix with its BM25 top-k and the frozen LM's log-prob of the target given each
candidate. A group (``ralm.train.batch.Group``, batched there too) is everything the loss needs for that
prefix: the prefix text, the candidate passages (BM25 order, so candidate 0 is BM25's top-1) and their LM
log-probs. With ``abstain`` the empty passage joins every group, with the no-retrieval log-prob as its LM
log-prob.

The rows stay in the Arrow files (memory-mapped by ``datasets``); only the columns we use are read.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow.compute as pc
import torch

from ralm.errors import RalmInputError
from ralm.rerank.inputs import bm25_prior
from ralm.train.batch import Group

DATA_FORMAT = "ralm-rerank-data/2"
DATA_FORMATS = ("ralm-rerank-data/1", DATA_FORMAT)
"""Formats read: /1 lacks the zero-shot rule's columns (``lm_rank_logprobs``), so its decisions have no
``zero-shot`` rule."""
DECISION_FRACTION = 0.1
"""``LoaderOptions.decision_fraction``'s default (the schema's value, here for Python callers of the
loader)."""
META_FILE = "ralm_data_gen.json"
_COLUMNS = ["prefix", "doc_id", "candidate_texts", "lm_logprobs"]


@dataclass
class RerankData:
    """The usable rows of a reranking dataset, split by source document into three disjoint parts:
    training, selection (``val_rows``: validated every few steps, chooses the checkpoint) and decision
    (``decision_rows``: scored once at the end, decides the export)."""

    path: str
    meta: dict
    train_rows: list[int]
    val_rows: list[int]
    skipped_small: int
    """Rows skipped because their group had fewer than 2 candidates."""
    abstain: bool
    columns: list[str] = field(default_factory=list)
    bm25_prior: bool = False
    """Groups carry the standardised BM25 scores (``--bm25-prior``)."""
    zero_shot_prior: bool = False
    """Groups carry the LM's y' log-probs wherever they are read (``--zero-shot-prior``: the model's score
    adds them)."""
    decision_rows: list[int] = field(default_factory=list)
    """Ordered by (document, position in document): neighbours in the list are neighbours in the text,
    which the decision's block bootstrap needs."""
    decision_documents: list[str] = field(default_factory=list)
    """The document of each decision row (the block bootstrap never draws a block across two)."""
    documents: dict[str, int] = field(default_factory=dict)
    """Distinct documents of each part's rows: ``train``, ``selection``, ``decision``."""
    overlap: int = 0
    """Documents with rows in more than one part, counted from the rows themselves (0 by construction)."""

    def groups(self, rows: list[int], *, rank_target: bool = False) -> GroupDataset:
        """The candidate groups of `rows`, carrying what this data's model reads (the BM25 prior, y' with
        the zero-shot prior) and y' as a target too with `rank_target`."""
        return GroupDataset(
            self.path,
            rows,
            abstain=self.abstain,
            bm25_prior=self.bm25_prior,
            rank_target=rank_target or self.zero_shot_prior,
        )


def _load(path: str):
    import datasets

    if not os.path.isdir(path):
        raise RalmInputError(f"{path}: no such dataset folder (expected `ralm data-gen` output)")
    try:
        ds = datasets.load_from_disk(path)
    except (FileNotFoundError, ValueError) as err:
        raise RalmInputError(f"{path}: not a saved `datasets` dataset ({str(err).splitlines()[0]})") from None
    if isinstance(ds, datasets.DatasetDict):
        raise RalmInputError(f"{path}: a DatasetDict; give the folder of one split ({', '.join(ds)})")
    return ds


def read_meta(path: str) -> dict:
    """``ralm_data_gen.json`` if present (its format must match); {} for a dataset written without it."""
    meta_path = os.path.join(path, META_FILE)
    if not os.path.exists(meta_path):
        return {}
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except json.JSONDecodeError as err:
        raise RalmInputError(f"{meta_path}:{err.lineno}: not valid JSON") from None
    if meta.get("format", DATA_FORMAT) not in DATA_FORMATS:
        raise RalmInputError(
            f"{meta_path}: field 'format' is {meta.get('format')!r}, expected one of {DATA_FORMATS}"
        )
    if meta.get("complete") is False:
        raise RalmInputError(
            f"{meta_path}: field 'complete' is false (`ralm data-gen` has not finished; rerun it)"
        )
    return meta


def open_dataset(path: str, *, abstain: bool, bm25_prior: bool = False, rank_target: bool = False):
    """The dataset restricted to the columns a group needs; raises RalmInputError on a missing column."""
    ds = _load(path)
    needed = (
        _COLUMNS + (["no_retrieval_logprob"] if abstain else []) + (["bm25_scores"] if bm25_prior else [])
    )
    if rank_target:  # the y' target: data-gen's ranking columns (ralm-rerank-data/2)
        needed += ["lm_rank_logprobs"] + (["no_retrieval_rank_logprob"] if abstain else [])
    for column in needed:
        if column not in ds.column_names:
            hint = (
                " (the rows carry no LM scores: is this `ralm data-gen` output?)"
                if "logprob" in column
                else ""
            )
            raise RalmInputError(f"{path}: column {column!r} is missing{hint}")
    return ds.select_columns(needed)


def _list_lengths(table, column: str) -> np.ndarray:
    return pc.list_value_length(table.column(column)).to_numpy(zero_copy_only=False)


def _same_lengths(path: str, table, column: str, n_texts: np.ndarray) -> np.ndarray:
    """Per-row lengths of list `column`; the first row whose length differs from its candidate_texts fails."""
    lengths = _list_lengths(table, column)
    mismatch = np.flatnonzero(lengths != n_texts)
    if mismatch.size:
        row = int(mismatch[0])
        raise RalmInputError(f"{path}: row {row}: {n_texts[row]} candidate_texts but {lengths[row]} {column}")
    return lengths


def load_rerank_data(
    path: str,
    *,
    abstain: bool,
    val_fraction: float,
    seed: int,
    max_val_prefixes: int | None = None,
    bm25_prior: bool = False,
    decision_fraction: float = DECISION_FRACTION,
    zero_shot_prior: bool = False,
) -> RerankData:
    """Check every row, drop groups of fewer than 2 candidates, split training / selection / decision by
    ``doc_id`` (the fractions are shares of the usable rows, each in (0, 1), summing below 1:
    ``LoaderOptions`` checks them). `zero_shot_prior`: the rows must hold y' (``ralm-rerank-data/2``)."""
    meta = read_meta(path)
    ds = open_dataset(path, abstain=abstain, bm25_prior=bm25_prior, rank_target=zero_shot_prior)
    table = ds.data.table if hasattr(ds.data, "table") else ds.data
    n_texts = _checked_candidates(path, table, abstain=abstain, bm25_prior=bm25_prior)
    sizes = n_texts + (1 if abstain else 0)
    usable = np.flatnonzero(sizes >= 2)
    doc_ids = table.column("doc_id").to_pylist()
    docs = sorted({doc_ids[i] for i in usable})
    if len(docs) < 3:
        raise RalmInputError(
            f"{path}: {len(usable)} usable prefixes from {len(docs)} source document(s); "
            "training, checkpoint "
            "selection and the export decision each take whole documents and need at least 3"
        )
    row_docs = [doc_ids[i] for i in usable]
    val_docs, decision_docs = held_out_documents(docs, row_docs, (val_fraction, decision_fraction), seed)
    train_rows = [int(i) for i in usable if doc_ids[i] not in val_docs and doc_ids[i] not in decision_docs]
    val_rows = [int(i) for i in usable if doc_ids[i] in val_docs]
    if max_val_prefixes is not None:
        val_rows = val_rows[:max_val_prefixes]
    positions = _positions(path, len(doc_ids))
    decision_rows = sorted(
        (int(i) for i in usable if doc_ids[i] in decision_docs), key=lambda i: (doc_ids[i], positions[i], i)
    )
    parts = {
        "train": {doc_ids[i] for i in train_rows},
        "selection": {doc_ids[i] for i in val_rows},
        "decision": {doc_ids[i] for i in decision_rows},
    }
    shared = (parts["train"] & parts["selection"]) | (parts["train"] | parts["selection"]) & parts["decision"]
    return RerankData(
        path=path,
        meta=meta,
        train_rows=train_rows,
        val_rows=val_rows,
        skipped_small=int(len(sizes) - len(usable)),
        abstain=abstain,
        columns=list(ds.column_names),
        bm25_prior=bm25_prior,
        zero_shot_prior=zero_shot_prior,
        decision_rows=decision_rows,
        decision_documents=[doc_ids[i] for i in decision_rows],
        documents={name: len(found) for name, found in parts.items()},
        overlap=len(shared),
    )


def _checked_candidates(path: str, table, *, abstain: bool, bm25_prior: bool) -> np.ndarray:
    """Each row's number of candidates, after checking the columns that go with them (lengths, finite
    log-probs); the first bad row is a RalmInputError naming it."""
    n_texts = _list_lengths(table, "candidate_texts")
    n_logprobs = _same_lengths(path, table, "lm_logprobs", n_texts)
    flat = pc.list_flatten(table.column("lm_logprobs")).to_numpy(zero_copy_only=False)
    if flat.size and not np.isfinite(flat).all():
        bad = int(
            np.searchsorted(np.cumsum(n_logprobs), int(np.flatnonzero(~np.isfinite(flat))[0]), side="right")
        )
        raise RalmInputError(f"{path}: row {bad}: lm_logprobs holds a NaN or infinite value")
    if bm25_prior:
        _same_lengths(path, table, "bm25_scores", n_texts)
    if abstain:
        none = table.column("no_retrieval_logprob").to_numpy(zero_copy_only=False).astype(np.float64)
        if not np.isfinite(none).all():
            raise RalmInputError(
                f"{path}: row {int(np.flatnonzero(~np.isfinite(none))[0])}: "
                "no_retrieval_logprob is not finite"
            )
    return n_texts


def _positions(path: str, rows: int) -> list[int]:
    """Each row's token offset in its document (``position``); the row number for a dataset without it
    (rows are in sample order, not text order, but still one document's rows are kept together)."""
    ds = _load(path)
    if "position" not in ds.column_names:
        return list(range(rows))
    return [int(p) for p in ds["position"]]


def held_out_documents(
    docs: list[str], row_docs: list[str], fractions: tuple[float, ...], seed: int
) -> tuple[set[str], ...]:
    """One set of documents per fraction, disjoint: documents in one seeded random order, the first set
    taking documents until they hold its fraction of the rows (at least one document), the next set
    continuing from there; at least one document always stays for training. Counting rows rather than
    documents matters when documents differ in size (Bible books): a tenth of the books can hold a
    fiftieth of the prefixes."""
    per_doc: dict[str, int] = {}
    for d in row_docs:
        per_doc[d] = per_doc.get(d, 0) + 1
    order = [docs[i] for i in np.random.default_rng(seed).permutation(len(docs))]
    parts: list[set[str]] = []
    next_doc = 0
    for share in fractions:
        chosen: set[str] = set()
        held = 0
        wanted = share * len(row_docs)
        # leave one document for each later part and one for training
        last = len(order) - (len(fractions) - len(parts))
        while next_doc < last and not (chosen and held >= wanted):
            chosen.add(order[next_doc])
            held += per_doc[order[next_doc]]
            next_doc += 1
        parts.append(chosen)
    return tuple(parts)


class GroupDataset(torch.utils.data.Dataset):
    """Candidate groups (``Group``) for the given row numbers."""

    def __init__(
        self,
        path: str,
        rows: list[int],
        *,
        abstain: bool,
        bm25_prior: bool = False,
        rank_target: bool = False,
    ):
        self.path, self.rows, self.abstain, self.bm25_prior = path, rows, abstain, bm25_prior
        self.rank_target = rank_target
        """Groups carry the y' log-probs (``--rank-weight`` > 0)."""
        self._ds = None  # opened lazily so the object pickles cheaply into dataloader workers

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Group:
        if self._ds is None:
            self._ds = open_dataset(
                self.path, abstain=self.abstain, bm25_prior=self.bm25_prior, rank_target=self.rank_target
            )
        row = self._ds[self.rows[i]]
        passages = list(row["candidate_texts"])
        logprobs = [float(x) for x in row["lm_logprobs"]]
        is_empty = [False] * len(passages)
        if self.abstain:
            passages.append("")
            logprobs.append(float(row["no_retrieval_logprob"]))
            is_empty.append(True)
        prior, top = [], None
        if self.bm25_prior:
            # The empty passage has no BM25 score: its prior slot is 0 and the model scores it with its own
            # learned abstention terms instead (RerankerModule: bias + weight * standardised bm25_top).
            scores = [float(x) for x in row["bm25_scores"]]
            prior = bm25_prior(scores) + ([0.0] if self.abstain else [])
            top = max(scores, default=0.0)
        rank = None
        if self.rank_target:
            rank = [float(x) for x in row["lm_rank_logprobs"]]
            rank += [float(row["no_retrieval_rank_logprob"])] if self.abstain else []
        return Group(
            row["prefix"], passages, logprobs, is_empty, bm25_prior=prior, bm25_top=top, rank_logprobs=rank
        )

    def __getstate__(self):
        return {**self.__dict__, "_ds": None}


def bm25_top_stats(path: str, rows: list[int]) -> tuple[float, float]:
    """Mean and standard deviation of each row's best BM25 score over `rows` (the training prefixes).

    Raw BM25 scores have a corpus- and query-dependent scale; the abstention feature standardises a
    prefix's best score with these training statistics, which the export records for inference.
    """
    scores = open_dataset(path, abstain=False, bm25_prior=True).select(rows)["bm25_scores"]
    tops = np.array([max(s, default=0.0) for s in scores], dtype=np.float64)
    if tops.size == 0:
        return 0.0, 1.0
    std = float(tops.std())
    return float(tops.mean()), std if std > 1e-6 else 1.0


def describe(data: RerankData) -> str:
    """One line for the run summary."""
    docs = data.documents
    return (
        f"{len(data.train_rows)} train / {len(data.val_rows)} selection / {len(data.decision_rows)} decision "
        f"prefixes from {docs.get('train')} / {docs.get('selection')} / {docs.get('decision')} documents "
        f"(split by document, overlap {data.overlap}), {data.skipped_small} skipped with < 2 candidates"
    )


def finite_or_none(value: float) -> float | None:
    """JSON has no NaN: metrics that are undefined are written as null."""
    return value if math.isfinite(value) else None
