"""Each pipeline stage's arguments as a typed record: one frozen dataclass per stage, its fields named and
typed as the stage function's parameters (the function in ``ralm.cli.commands``), holding that stage's own
option groups (`LMOptions`, `RetrievalOptions`, the trainer's groups, ...).

A misspelled or forgotten argument is then a ``TypeError`` where the plan builds the stage, not a wrong key
or a failed call later (tests/test_pipeline_plan.py checks every field is a parameter of its function). The
fields are in the order ``commands.sh`` writes the options, and `keywords` gives them as the mapping the
stage's key hashes (``ralm.pipeline.stage_keys``), so the keys of finished run folders stay what they were.

A field has one of three roles: an argument of the stage's identity (the default); what the stage writes
(`writes`: its output, a cache; left out of the identity and named by a later stage's key through this
stage's fingerprint); or a value given only when a killed run left partial work (`when_resuming`). A field
added after run folders were keyed (``ralm.config_types.added_later``) is part of the identity only when
set.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ralm.config_types import added_later, left_at_default
from ralm.eval.ppl.options import QueryOptions
from ralm.retrieval.passage_forms import RETRIEVED, PassageForm

if TYPE_CHECKING:
    from ralm.data_gen.options import SamplingOptions, ShardingOptions
    from ralm.eval.ppl.conditions import Condition
    from ralm.eval.qa.flare_options import FlareOptions
    from ralm.lm.options import LMOptions, WindowOptions
    from ralm.retrieval.options import RetrievalOptions
    from ralm.train.settings import EncoderOptions, LoaderOptions, OptimOptions, RunOptions

_ROLE = "stage role"
_WRITTEN = "written"
_RESUME = "resume"


def writes() -> Any:
    """A field naming what the stage writes; None in the draft whose fingerprint names the folder."""
    return field(default=None, metadata={_ROLE: _WRITTEN})


def when_resuming(value: Any) -> Any:
    """A field that is None (the function's default, so no option in ``commands.sh``) unless the call
    continues a killed run's partial work, when it is `value`; never part of the identity."""
    return field(default=None, metadata={_ROLE: _RESUME, _RESUME: value})


@dataclass(frozen=True, kw_only=True)
class StageArguments:
    """What every stage's arguments offer the plan and the runner; subclasses are the stages."""

    words: ClassVar[tuple[str, ...]]
    """The command's words (``("eval", "ppl")``): its entry in ``ralm.cli.commands.COMMANDS``."""

    def keywords(self) -> dict[str, Any]:
        """The stage function's keyword arguments, in field order (each value as it is, typed)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def written(cls) -> frozenset[str]:
        """The fields naming what the stage writes."""
        return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get(_ROLE) == _WRITTEN)

    @classmethod
    def unkeyed(cls) -> frozenset[str]:
        """The fields always left out of the stage's identity: what it writes and what only a resumed call
        gets."""
        roles = (_WRITTEN, _RESUME)
        return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get(_ROLE) in roles)

    def unkeyed_now(self) -> frozenset[str]:
        """The fields left out of these arguments' identity: `unkeyed`, and the later fields left at their
        default (``ralm.config_types.added_later``, as in an option group inside them)."""
        return self.unkeyed() | {f.name for f in dataclasses.fields(self) if left_at_default(self, f)}

    def resumed(self) -> Self:
        """These arguments for a call that continues a killed run's partial work."""
        given = {f.name: f.metadata[_RESUME] for f in dataclasses.fields(self) if _RESUME in f.metadata}
        return dataclasses.replace(self, **given)


@dataclass(frozen=True, kw_only=True)
class IndexArguments(StageArguments):
    """``ralm index`` on the corpus: passages split from its documents, then the BM25 index."""

    words: ClassVar[tuple[str, ...]] = ("index",)
    documents: Path
    passage_words: int
    passage_stride: int | None
    exclude: list[str] | None
    overwrite: bool
    output: Path | None = writes()
    passages: Path | None = writes()


@dataclass(frozen=True, kw_only=True)
class DataGenArguments(StageArguments):
    """``ralm data-gen`` on the training text: the frozen LM's scores of each prefix's candidates."""

    words: ClassVar[tuple[str, ...]] = ("data-gen",)
    documents: str
    lm: LMOptions
    retrieval: RetrievalOptions
    exclude: list[str] | None
    sampling: SamplingOptions
    window: WindowOptions
    sharding: ShardingOptions
    passage_form: PassageForm = added_later(RETRIEVED)
    """What each candidate hands the LM (``ralm.retrieval.passage_forms``)."""
    output: str | None = writes()


@dataclass(frozen=True, kw_only=True)
class TrainArguments(StageArguments):
    """``ralm train`` on the data-gen rows: one reranker, one seed."""

    words: ClassVar[tuple[str, ...]] = ("train",)
    data: str
    encoder: EncoderOptions
    loader: LoaderOptions
    optim: OptimOptions
    run: RunOptions
    trainer: dict[str, Any]
    """``pl.Trainer`` keyword arguments over ralm's values (the command's `ClassGroup`)."""
    bm25_prior: bool
    abstain: bool
    seed: int
    margin: float
    no_lm_export: bool = added_later(False)
    """Also export the best rule that reads no frozen LM at rerank time (``reranker-no-lm``)."""
    zero_shot_prior: bool = added_later(False)
    """Start from the LM's zero-shot rule instead of BM25's (the stacked reranker)."""
    output: str | None = writes()
    ckpt_path: str | None = when_resuming("last")
    """A killed run continues from its last checkpoint."""


@dataclass(frozen=True, kw_only=True)
class EvalPplArguments(StageArguments):
    """``ralm eval ppl --compare`` on one eval text: every condition's perplexity from one table (or, with
    no `compare`, BM25's top-1 alone: a forward-looking row, ``ralm.pipeline.plan.forward_stage``)."""

    words: ClassVar[tuple[str, ...]] = ("eval", "ppl")
    text: str
    lm: LMOptions
    window: WindowOptions
    max_tokens: int | None
    retrieval: RetrievalOptions
    retrieval_cache: str | None = writes()
    compare: list[Condition] | None
    print_table: bool
    passage_form: PassageForm = added_later(RETRIEVED)
    """What each candidate hands the LM (``ralm.retrieval.passage_forms``)."""
    query: QueryOptions = added_later(QueryOptions())
    """Each retrieving window's query (``ralm.eval.ppl.queries``)."""
    output: str | None = writes()

    def retrieval_inputs(self) -> dict[str, Any]:
        """What decides the eval's windows and candidates, whatever its conditions: the retrieval cache's
        key, so every eval of the same windows shares one cache."""
        return {
            "text": self.text,
            "lm": self.lm,
            "window": self.window,
            "max_tokens": self.max_tokens,
            "retrieval": self.retrieval,
        }


@dataclass(frozen=True, kw_only=True)
class EvalFlareArguments(StageArguments):
    """``ralm eval flare`` on one set of texts to continue (``ralm demo --flare``): one method's
    generations, scored against the true continuations."""

    words: ClassVar[tuple[str, ...]] = ("eval", "flare")
    data: str
    lm: LMOptions
    retrieval: RetrievalOptions
    format: str
    flare: FlareOptions
    batch_size: int
    passage_form: PassageForm = added_later(RETRIEVED)
    """What each retrieved passage hands the LM (``ralm.retrieval.passage_forms``)."""
    output: str | None = writes()


STAGE_ARGUMENTS: tuple[type[StageArguments], ...] = (
    IndexArguments,
    DataGenArguments,
    TrainArguments,
    EvalPplArguments,
    EvalFlareArguments,
)
"""One per command of ``ralm.cli.commands.PIPELINE_STAGES``, in that order."""
