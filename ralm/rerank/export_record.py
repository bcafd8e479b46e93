"""``ralm_reranker.json``, the record of an exported reranker, as one typed value checked where it is built.

The export writes it (``ralm.rerank.export``) and every reader (``PredictiveReranker``, ``ralm eval ppl``'s
choosers, the hub upload) loads it with ``RerankerExport.read``: each field is checked in one place, and a
bad file fails with a RalmInputError naming the file and the field. ``to_json`` writes what the export has
always written (the same keys in the same order; ``threshold`` and ``rank_tokens`` only under the decision
that needs them), so an export read and written again is byte-identical. Fields this ralm does not know are
ignored on reading, as are the missing fields of older exports (their defaults: ``decision`` ``trained``, no
BM25 prior, no abstention).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from ralm.errors import RalmInputError
from ralm.passage_rules import EXPORTABLE, RULES, TRAINED
from ralm.rerank.inputs import INPUT_FORMAT, PRIOR_RULE

RERANKER_FORMAT = "ralm-reranker/1"
RERANKER_FILE = "ralm_reranker.json"
EXPORT_FOLDER = "reranker"
"""``ralm train OUTPUT/reranker``: the decided export."""
NO_LM_EXPORT_FOLDER = "reranker-no-lm"
"""``ralm train OUTPUT/reranker-no-lm``: the best rule that reads no frozen LM at rerank time
(``--no-lm-export``)."""
DECISIONS = tuple(reversed(EXPORTABLE))
"""What the export decision chose (ralm.train.decision): ``bm25``: BM25's order, whatever the model
scores; ``bm25-above``: BM25's order when the best BM25 score is at least ``threshold``, else no passage;
``no-retrieval``: never prepend a passage; ``zero-shot``: the LM's own score of the prefix's last
``rank_tokens`` tokens after each candidate, which needs the LM (``ralm eval ppl`` plays it; ``order``
refuses); ``zero-shot-above``: that candidate when its score beats the same tokens' with no passage by at
least ``threshold`` nats, else no passage (the LM too)."""
ANCHORS = ("zero", "top")
"""What the empty passage's score adds to f(x, "") + b + c * t under the prior: nothing, or BM25's top-1
prior w * z_top (``ralm.train.lit_module``, which trains with it)."""
ABSTAIN_FIELDS = ("abstain_bias", "abstain_weight", "bm25_top_mean", "bm25_top_std")
"""The empty passage's score under the prior: f(x, "") + abstain_bias + abstain_weight * t, with
t = (best BM25 score of the group - bm25_top_mean) / bm25_top_std (training statistics)."""
DECISION_FIELDS = ("threshold", "rank_tokens")
"""The fields a decision's rule may need (``ExportForm.needs``): written only under that decision."""
IN_EVERY_FILE = ("format", "input_format", "max_length", "max_prefix_tokens")
"""The fields every export since the format's first has written: a file without one is refused."""
_PRIOR_SHAPE = f"null or {{'rule': {PRIOR_RULE!r}, 'weight': number}}"


class RecordError(ValueError):
    """A field that is not what docs/formats.md §5 says; the loader adds the file's path."""


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class BM25Prior:
    """``bm25_prior``: the score is the model's logit plus ``weight`` times the candidate's standardised
    BM25 score; with abstention the empty passage scores by ``ABSTAIN_FIELDS`` instead."""

    rule: str
    weight: float
    abstain_bias: float | None = None
    abstain_weight: float | None = None
    bm25_top_mean: float | None = None
    bm25_top_std: float | None = None
    anchor: str | None = None
    """``top`` or ``zero``; None (absent) in records from before the anchor existed, which read as zero."""

    def __post_init__(self) -> None:
        if self.rule != PRIOR_RULE or not _number(self.weight):
            raise RecordError(f"field 'bm25_prior' must be {_PRIOR_SHAPE}")
        for key in ABSTAIN_FIELDS:
            if getattr(self, key) is not None and not _number(getattr(self, key)):
                raise RecordError(f"field 'bm25_prior.{key}' must be a number")
        if self.anchor is not None and self.anchor not in ANCHORS:
            raise RecordError(f"field 'bm25_prior.anchor' is {self.anchor!r}, expected one of {ANCHORS}")

    @classmethod
    def from_dict(cls, data) -> BM25Prior:
        """The prior of a parsed record (its unknown keys ignored)."""
        if not isinstance(data, dict):
            raise RecordError(f"field 'bm25_prior' must be {_PRIOR_SHAPE}")
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    @property
    def abstention(self) -> dict[str, float] | None:
        """The empty passage's terms (``ABSTAIN_FIELDS``), or None when trained without abstention."""
        if any(getattr(self, key) is None for key in ABSTAIN_FIELDS):
            return None
        return {key: float(getattr(self, key)) for key in ABSTAIN_FIELDS}

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True, kw_only=True)
class ZeroShotPrior:
    """``zero_shot_prior`` (a reranker trained with ``--zero-shot-prior``, the stacked reranker): a
    passage's score is the model's logit plus ``weight`` times the frozen LM's log-prob of the prefix's last
    ``rank_tokens`` tokens y' after that passage; with abstention the empty passage's is the logit plus
    ``weight`` times y''s log-prob with no passage plus ``abstain_bias``."""

    weight: float
    rank_tokens: int
    abstain_bias: float | None = None

    def __post_init__(self) -> None:
        if not _number(self.weight):
            raise RecordError("field 'zero_shot_prior.weight' must be a number")
        if not (_integer(self.rank_tokens) and self.rank_tokens > 0):
            raise RecordError("field 'zero_shot_prior.rank_tokens' must be a positive integer")
        if self.abstain_bias is not None and not _number(self.abstain_bias):
            raise RecordError("field 'zero_shot_prior.abstain_bias' must be a number")

    @classmethod
    def from_dict(cls, data) -> ZeroShotPrior:
        """The prior of a parsed record (its unknown keys ignored)."""
        if not isinstance(data, dict):
            raise RecordError(
                "field 'zero_shot_prior' must be null or {'weight': number, 'rank_tokens': int}"
            )
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True, kw_only=True)
class RerankerExport:
    """``ralm_reranker.json`` (docs/formats.md §5): its fields in the file's order, checked on construction
    (a RecordError names the field; ``from_json`` and ``read`` add the file)."""

    format: str = RERANKER_FORMAT
    base_model: str | None = None
    max_length: int
    max_prefix_tokens: int
    input_format: str = INPUT_FORMAT
    abstain: bool = False
    """Trained with the empty passage as a candidate: callers offer it too."""
    bm25_prior: BM25Prior | None = None
    zero_shot_prior: ZeroShotPrior | None = None
    """Trained with ``--zero-shot-prior``: scoring needs the frozen LM's y' log-probs (written only then)."""
    decision: str = TRAINED
    threshold: float | None = None
    """The ``bm25-above`` decision's T, or the ``zero-shot-above`` decision's M (only under those)."""
    rank_tokens: int | None = None
    """The y' length of the ``zero-shot`` and ``zero-shot-above`` decisions (only under those)."""
    decision_evidence: dict = field(default_factory=dict)
    loss: str | None = None
    trained_on: dict = field(default_factory=dict)
    checkpoint: str | None = None
    """The exported checkpoint's file name; None: the folder holds no weights."""
    metrics: dict = field(default_factory=dict)
    ralm_version: str | None = None

    def __post_init__(self) -> None:
        if self.format != RERANKER_FORMAT:
            raise RecordError(f"field 'format' is {self.format!r}, expected {RERANKER_FORMAT!r}")
        if self.input_format != INPUT_FORMAT:
            raise RecordError(
                f"field 'input_format' is {self.input_format!r}, this ralm reads {INPUT_FORMAT!r}"
            )
        for key in ("max_length", "max_prefix_tokens"):
            if not _integer(getattr(self, key)):
                raise RecordError(f"field {key!r} must be an integer")
        if not isinstance(self.abstain, bool):
            raise RecordError("field 'abstain' must be true or false")
        if self.bm25_prior is not None and not isinstance(self.bm25_prior, BM25Prior):
            raise RecordError(f"field 'bm25_prior' must be {_PRIOR_SHAPE}")
        if self.bm25_prior is not None and self.abstain:
            for key in ABSTAIN_FIELDS:
                if getattr(self.bm25_prior, key) is None:
                    raise RecordError(f"field 'bm25_prior.{key}' must be a number (abstain is true)")
        if self.zero_shot_prior is not None:
            if not isinstance(self.zero_shot_prior, ZeroShotPrior):
                raise RecordError("field 'zero_shot_prior' must be an object")
            if self.bm25_prior is not None:
                raise RecordError("fields 'bm25_prior' and 'zero_shot_prior' are two starts: one at most")
            if self.abstain and self.zero_shot_prior.abstain_bias is None:
                raise RecordError("field 'zero_shot_prior.abstain_bias' must be a number (abstain is true)")
        if self.decision not in DECISIONS:
            raise RecordError(f"field 'decision' is {self.decision!r}, expected one of {DECISIONS}")
        needs = self.needs
        if "threshold" in needs and not _number(self.threshold):
            raise RecordError(f"field 'threshold' must be a number (the decision is {self.decision})")
        if "rank_tokens" in needs and not (_integer(self.rank_tokens) and self.rank_tokens > 0):
            raise RecordError(
                f"field 'rank_tokens' must be a positive integer (the decision is {self.decision})"
            )

    @property
    def needs(self) -> tuple[str, ...]:
        """What a caller needs to play the decision (``ExportForm.needs``): fields, weights or nothing."""
        return RULES[self.decision].export.needs

    @classmethod
    def from_dict(cls, data: dict) -> RerankerExport:
        """The record of a parsed ``ralm_reranker.json``; the format's identity and lengths must be there,
        the other fields default as in an older export."""
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for name in IN_EVERY_FILE:
            values.setdefault(name, None)  # refused by __post_init__, naming the field
        if values.get("bm25_prior") is not None:
            values["bm25_prior"] = BM25Prior.from_dict(values["bm25_prior"])
        if values.get("zero_shot_prior") is not None:
            values["zero_shot_prior"] = ZeroShotPrior.from_dict(values["zero_shot_prior"])
        return cls(**values)

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> RerankerExport:
        """The record in the file `path` (a RalmInputError names the file, and the field that is wrong)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise RalmInputError(f"{path}:{err.lineno}: not valid JSON") from None
        if not isinstance(data, dict):
            raise RalmInputError(f"{path}: not a JSON object")
        try:
            return cls.from_dict(data)
        except RecordError as err:
            raise RalmInputError(f"{path}: {err}") from None

    @classmethod
    def read(cls, folder: str | os.PathLike) -> RerankerExport:
        """The record of the exported folder `folder`; a folder that is not one is a RalmInputError."""
        path = os.path.join(folder, RERANKER_FILE)
        if not os.path.isdir(folder):
            raise RalmInputError(f"{folder}: no such reranker folder")
        if not os.path.exists(path):
            raise RalmInputError(
                f"{folder}: not an exported reranker (no {RERANKER_FILE}; export one with `ralm train`)"
            )
        return cls.from_json(path)

    def to_dict(self) -> dict:
        """The record as the file holds it: every field in order, a decision's own field only under it."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in DECISION_FIELDS and f.name not in self.needs:
                continue
            if f.name == "zero_shot_prior" and value is None:  # exports before it stay byte-identical
                continue
            out[f.name] = value.to_dict() if isinstance(value, BM25Prior | ZeroShotPrior) else value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def write(self, folder: str | os.PathLike) -> None:
        """``folder/ralm_reranker.json`` (the export calls it inside its temporary folder)."""
        Path(folder, RERANKER_FILE).write_text(self.to_json(), encoding="utf-8")
