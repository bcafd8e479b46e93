"""The conditions of ``ralm eval ppl``: which passage, if any, each window is scored with.

A run evaluates one condition (``--reranker X`` or ``--no-retrieval``) or several (``--compare A,B,...``);
both go through one engine (``ralm.eval.ppl.point``). The kinds:

- ``no-retrieval``: nothing is prepended (the baseline);
- ``no-retrieval-matched``: nothing is prepended, but the window's context is cut by the length of BM25's
  top-1 passage, exactly as that passage would cut it: the context-matched baseline. Against it a passage's
  change is what its content adds; against ``no-retrieval``, that minus the context it displaced;
- ``bm25``: candidate 0, BM25's top-1 (``--reranker none``);
- ``random``: a seeded uniform draw among the window's candidates (``--seed``; the same draw for a window
  whatever else is compared or resumed);
- ``bm25-above=T``: BM25's top-1 when the window's best BM25 score is at least T, else nothing (the trivial
  abstention rule a reranker must beat; `ralm run` fits T on the training prefixes);
- ``zero-shot``: the candidate with the largest log-probability of the ranking tokens y' (§6.1) under the
  evaluated LM, or under ``--rerank-lm`` (another tokenizer: it chooses before the LM scores anything);
- ``oracle``: the smallest target NLL among the candidates (best of k, Figure 7's bound);
- ``oracle-or-none``: the smallest of the candidates' and the no-passage NLL (the bound of a reranker that
  may abstain);
- ``trained`` (``--reranker PATH``, ``NAME=PATH`` in a list): a ``PredictiveReranker``'s choice, abstention
  and BM25 prior applied inside the reranker.

``pick`` is the one place where a condition picks from a window's row, with the one tie rule: among
passages the earlier (higher BM25) candidate wins, as ``torch.argmin`` does in eval_lm.py; between passages
and no passage, no passage wins. ``plan_rows`` says which LM rows a window needs for a set of conditions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ralm.errors import RalmInputError
from ralm.ranking import best_first, first_smallest

NO_RETRIEVAL, BM25, RANDOM, BM25_ABOVE = "no-retrieval", "bm25", "random", "bm25-above"
ZERO_SHOT, ORACLE, ORACLE_OR_NONE, TRAINED = "zero-shot", "oracle", "oracle-or-none", "trained"
CONTEXT_MATCHED = "no-retrieval-matched"
BUILT_IN = (NO_RETRIEVAL, CONTEXT_MATCHED, BM25, RANDOM, ZERO_SHOT, ORACLE, ORACLE_OR_NONE)
"""Conditions named by their kind alone in a ``--compare`` list."""
RERANKER_VALUES = {"none": BM25, "zero-shot": ZERO_SHOT, "oracle": ORACLE}
"""``--reranker`` value -> condition kind (any other value is a trained reranker's folder)."""
_RECORDED = {NO_RETRIEVAL: "none", CONTEXT_MATCHED: "none", BM25: "none"}
"""results.json ``config.reranker`` where it is not the kind (what ``--reranker`` says for that run)."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


@dataclass(frozen=True)
class Condition:
    kind: str
    """One of BUILT_IN, BM25_ABOVE or TRAINED; results.json records it as ``config.mode``."""
    name: str
    """Output folder under ``--compare``: the kind, or NAME of NAME=PATH."""
    model: str | None = None
    """trained: the reranker folder; zero-shot: the reranking LM (``--rerank-lm``), None for the evaluated
    LM."""
    threshold: float | None = None
    """bm25-above: the BM25 score from which BM25's top-1 is prepended."""

    @property
    def spec(self) -> str:
        """The condition as a ``--compare`` item (recorded in each compared results.json)."""
        if self.kind == TRAINED:
            return f"{self.name}={self.model}"
        return f"{self.kind}={self.threshold!r}" if self.kind == BM25_ABOVE else self.name

    @property
    def recorded_reranker(self) -> str:
        """results.json ``config.reranker``: what the single run's ``--reranker`` would say."""
        if self.kind == TRAINED:
            return str(self.model)
        return repr(self.threshold) if self.kind == BM25_ABOVE else _RECORDED.get(self.kind, self.kind)

    @property
    def chooses_first(self) -> bool:
        """Its model chooses before the evaluated LM scores the window (a reranker, or another LM)."""
        return self.kind == TRAINED or (self.kind == ZERO_SHOT and self.model is not None)

    @property
    def reads_every_candidate(self) -> bool:
        """It picks from the evaluated LM's scores of every candidate (same-LM zero-shot, the oracles)."""
        return self.kind in (ZERO_SHOT, ORACLE, ORACLE_OR_NONE) and not self.chooses_first

    @property
    def ranks(self) -> bool:
        """Candidate rows must also score the ranking tokens y' (same-LM zero-shot)."""
        return self.kind == ZERO_SHOT and self.model is None


def parse_conditions(spec: str) -> list[Condition]:
    """``"no-retrieval,bm25,trained=runs/r"`` -> Conditions; bad names, duplicates and missing folders
    fail."""
    conditions: list[Condition] = []
    for item in (part.strip() for part in spec.split(",")):
        condition = _parse_item(item)
        if any(c.name == condition.name for c in conditions):
            raise RalmInputError(f"--compare: condition {condition.name!r} given twice")
        conditions.append(condition)
    return conditions


def _parse_item(item: str) -> Condition:
    name, eq, value = (part.strip() for part in item.partition("="))
    if name == BM25_ABOVE:
        try:
            return Condition(BM25_ABOVE, BM25_ABOVE, threshold=float(value))
        except ValueError:
            raise RalmInputError(
                f"--compare: {item!r} is not {BM25_ABOVE}=T with T a number (inf: never retrieve)"
            ) from None
    if not eq:
        if name not in BUILT_IN:
            raise RalmInputError(
                f"--compare: unknown condition {item!r}; expected {', '.join(BUILT_IN)} or NAME=PATH"
            )
        return Condition(name, name)
    if not _NAME.match(name) or name in BUILT_IN or not value:
        raise RalmInputError(
            f"--compare: {item!r} is not NAME=PATH with NAME a simple identifier (not a built-in condition)"
        )
    if not Path(value).is_dir():
        raise RalmInputError(f"--compare {item}: no such reranker folder {value!r}")
    return Condition(TRAINED, name, model=value)


def single_condition(no_retrieval: bool, reranker: str, rerank_lm: str | None = None) -> Condition:
    """The one condition of a run without ``--compare`` (``--no-retrieval``, ``--reranker``,
    ``--rerank-lm``)."""
    if no_retrieval:
        return Condition(NO_RETRIEVAL, NO_RETRIEVAL)
    if reranker in RERANKER_VALUES:
        kind = RERANKER_VALUES[reranker]
        return Condition(kind, kind, model=rerank_lm if kind == ZERO_SHOT else None)
    if not Path(reranker).is_dir():
        raise RalmInputError(
            f"--reranker {reranker!r}: expected none, zero-shot, oracle or a reranker folder"
        )
    return Condition(TRAINED, TRAINED, model=reranker)


def random_pick(seed: int, window: int, k: int) -> int:
    """A uniform draw among `k` candidates that depends only on the seed and the window's index."""
    return int(np.random.default_rng([seed, window]).integers(k))


def pick(condition: Condition, row: dict, chosen: int | None = None, seed: int = 0) -> int | None:
    """The candidate `condition` prepends in one window's row (None: nothing).

    `row` is a table row (``ralm.eval.ppl.perplexity.score_rows``); `chosen` is the pick of a condition that
    chooses first. Only a condition that ``reads_every_candidate`` reads the row's LM scores.
    """
    cands = row["candidates"]
    if condition.kind in (NO_RETRIEVAL, CONTEXT_MATCHED) or not cands:
        return None
    if condition.chooses_first:
        return chosen
    if condition.kind == BM25:
        return 0
    if condition.kind == RANDOM:
        return random_pick(seed, row["window"], len(cands))
    if condition.kind == BM25_ABOVE:
        return 0 if max(c["bm25"] for c in cands) >= condition.threshold else None
    if condition.kind == ZERO_SHOT:
        return best_first([c["rank_logprob"] for c in cands])[0]
    best = first_smallest([c["nll"] for c in cands])
    if condition.kind == ORACLE_OR_NONE and row["no_passage_nll"] <= cands[best]["nll"]:
        return None
    return best


@dataclass(frozen=True)
class RowPlan:
    """The LM rows one window needs: the no-passage row, the context-matched one and the candidates (by
    BM25 rank) to score."""

    bare: bool
    candidates: tuple[int, ...]
    rank_tokens: bool = False
    """The candidate rows also score the ranking tokens y' (same-LM zero-shot is among the conditions)."""
    matched: bool = False
    """The no-passage row with the context cut by BM25's top-1 passage's length (``no-retrieval-matched``)."""

    @property
    def rows(self) -> int:
        return int(self.bare) + int(self.matched) + len(self.candidates)


def plan_rows(
    conditions: Sequence[Condition],
    row: dict,
    chosen: Mapping[str, int | None],
    *,
    seed: int = 0,
    baselines: bool = False,
) -> RowPlan:
    """Which LM rows `conditions` need for one window.

    `row` is the window's unscored row (``perplexity.blank_row``: the candidates with their BM25 scores);
    `chosen` maps the names of conditions that choose first to their pick. With `baselines` (a comparison
    table) the no-passage row and every candidate are scored whatever the conditions, since every
    condition is compared with no retrieval, BM25 and the oracle.
    """
    count = len(row["candidates"])
    if count == 0:
        return RowPlan(bare=True, candidates=())
    every = baselines or any(c.reads_every_candidate for c in conditions)
    plain = [c for c in conditions if not c.reads_every_candidate and c.kind != CONTEXT_MATCHED]
    picks = {pick(c, row, chosen.get(c.name), seed) for c in plain}
    bare = baselines or None in picks or any(c.kind == ORACLE_OR_NONE for c in conditions)
    wanted = tuple(range(count)) if every else tuple(sorted(p for p in picks if p is not None))
    matched = any(c.kind == CONTEXT_MATCHED for c in conditions)
    return RowPlan(bare, wanted, rank_tokens=any(c.ranks for c in conditions), matched=matched)
