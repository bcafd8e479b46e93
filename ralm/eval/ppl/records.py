"""The records of ``ralm eval ppl``'s engine, as typed as the files they are written to (docs/formats.md §6).

- `WindowScores`: one line of a ``--compare`` table (``candidates.jsonl``): a window's no-passage and
  context-matched NLLs, the log-prob of y' with no passage and its candidates' `CandidateScores`, in BM25
  order (None: not scored). The condition registry's pick rules read it.
- `WindowRecord`: one line of a condition's ``windows.jsonl``: the window, the NLL it was scored with and
  the passage, if any, that was prepended.

``to_json`` gives the line's object with the keys in the fields' order, which is the files' order (so the
files are byte for byte what the dicts of earlier versions wrote); ``from_json`` reads one back (a resumed
run's finished lines).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CandidateScores:
    """One candidate of a window in the table: its passage, BM25 score and what the LM gave it."""

    id: str
    bm25: float | None
    nll: float | None = None
    """The targets' NLL with this passage prepended."""
    rank_logprob: float | None = None
    """The ranking tokens' log-probability with it (same-LM zero-shot only)."""
    copies_target: bool | None = None
    """The passage holds an 8-token run of the window's targets (``ralm.retrieval.overlap``)."""


@dataclass
class WindowScores:
    """A window's line of the comparison table: the LM rows the planner asked for (``plan_rows``)."""

    window: int
    target_start: int
    num_targets: int
    no_passage_nll: float | None = None
    matched_nll: float | None = None
    """No passage, the context cut as BM25's top-1 passage cuts it (``no-retrieval-matched``)."""
    no_passage_rank_logprob: float | None = None
    """The ranking tokens' log-probability with no passage (scored in the no-passage row's forward when
    the candidates' y' is): what the zero-shot rule's best candidate must beat to be prepended
    (``zero-shot-above``)."""
    candidates: list[CandidateScores] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, record: dict) -> WindowScores:
        candidates = [CandidateScores(**c) for c in record["candidates"]]
        return cls(**{**record, "candidates": candidates})


@dataclass(frozen=True)
class WindowRecord:
    """A window as one condition scored it: a line of its ``windows.jsonl``."""

    window: int
    begin: int
    end: int
    target_start: int
    num_targets: int
    nll: float
    query: str | None
    """The BM25 query (None: the condition makes none)."""
    chosen_rank: int | None
    """The prepended candidate's BM25 rank (None: no passage)."""
    passage_id: str | None
    copies_target: bool

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, record: dict) -> WindowRecord:
        return cls(**record)


@dataclass(frozen=True)
class Counts:
    """results.json ``counts``: the text, the windows and what the condition prepended."""

    tokens: int
    text_tokens: int
    """The whole text's tokens (``tokens`` is the evaluated part: ``--max-tokens``)."""
    scored_tokens: int
    words: int
    words_eval_lm: int
    windows: int
    retrieving_windows: int
    """Windows whose query found a candidate (``windows.retrieving_windows``)."""
    windows_with_passage: int
    resumed_windows: int
    copy_windows: int = 0
    """Windows given a passage that holds 8 consecutive tokens of the text from their targets on
    (``windows.jsonl``'s ``copies_target``): what a comparison table's statistics count too, so a run of one
    condition says it as well."""


@dataclass(frozen=True)
class Metrics:
    """results.json ``metrics``: perplexities with the honest divisors and eval_lm.py's, and the retrieval
    rate (``outputs.perplexity_metrics``)."""

    total_nll: float
    scored_tokens: int
    token_ppl: float | None
    word_ppl: float | None
    token_ppl_eval_lm: float | None
    word_ppl_eval_lm: float | None
    windows: int
    retrieval_rate: float


@dataclass
class PointResults:
    """One condition's ``results.json`` at one point (docs/formats.md §6)."""

    format: str
    config: dict
    counts: Counts
    metrics: Metrics
    timings: dict
    comparison: dict | None = None
    """``--compare`` only: its statistics against both baselines (``compare_stats.condition_statistics``)."""

    def to_json(self) -> dict:
        """The file's object, keys in its order (``comparison`` last, and only under ``--compare``)."""
        record = {
            "format": self.format,
            "config": self.config,
            "counts": asdict(self.counts),
            "metrics": asdict(self.metrics),
            "timings": self.timings,
        }
        if self.comparison is not None:
            record["comparison"] = self.comparison
        return record
