"""A pipeline run's stages as typed calls: index -> data-gen -> train (one reranker per seed) -> one
`ralm eval ppl --compare` table per eval set.

Every setting reaches its stage as that stage's own option groups (`LMOptions`, `RetrievalOptions`,
`WindowOptions`, the trainer's groups, ...), built here from the resolved `ScaleSettings`; nothing is turned
into a string and parsed again (``commands.sh`` is rendered from these objects, for the user). Output folders
are keyed by the stage's fingerprint (``ralm.pipeline.stage_keys``): its typed arguments, the input files by
their contents and an earlier stage's work by that stage's fingerprint (`StagePlan.produced`, collected in
`known` as the plan goes), so an edited file or setting gets a fresh folder, and the same ones find the old
whatever the run folder is called or where it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ralm.eval.ppl.compare import COMPARE_FILE
from ralm.eval.ppl.options import FUTURE, QueryOptions
from ralm.eval.ppl.outputs import RESULTS_FILE
from ralm.lm.options import LMOptions, WindowOptions
from ralm.pipeline.labels import NO_LM_PREFIX, TRAINED_PREFIX, demo_conditions
from ralm.pipeline.scale import ScaleSettings
from ralm.pipeline.stage_arguments import DataGenArguments, EvalPplArguments, IndexArguments, TrainArguments
from ralm.pipeline.stage_keys import Identities, identities_of, stage_fingerprint
from ralm.pipeline.stages import StagePlan
from ralm.pipeline.texts import PipelineTexts
from ralm.rerank.export_record import EXPORT_FOLDER, NO_LM_EXPORT_FOLDER
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.passage_forms import CONTINUATION, RETRIEVED, PassageForm


@dataclass(frozen=True)
class ForwardRow:
    """A forward-looking retrieval row beside an eval set's table: BM25's top-1 on the same windows (one
    `ralm eval ppl` of that condition), with another passage form or query."""

    name: str
    """The row's name in the report."""
    slug: str
    """Its part of the stage's key and folder name."""
    passage_form: PassageForm | None = None
    query: QueryOptions | None = None

    @property
    def is_bound(self) -> bool:
        """It reads the targets (a query for the true next tokens): a bound, not a method."""
        return self.query is not None and self.query.query_form == FUTURE


FORWARD_ROWS = (
    ForwardRow("BM25, continuation passage", "continuation", passage_form=CONTINUATION),
    ForwardRow("BM25, the paper's passage", "retrieved", passage_form=RETRIEVED),
    ForwardRow("bound: BM25 for the next tokens", "future-query", query=QueryOptions(query_form=FUTURE)),
)
"""Beside BM25's top-1 for the past query in the run's passage form: BM25's top-1 in the other passage form
(the passage continued past its best sentence, ``ralm.retrieval.passage_forms``, or the paper's passage as
retrieved), and the bound a query for the true next stride tokens sets (it reads the targets: how much a
better query could gain on this text)."""


STACKED_PRIOR_LR = 0.0
"""The stacked reranker keeps the LM's rule fixed (its sharpness a and abstention bias b, fitted on the
training prefixes) and learns only the encoder's correction. Chosen on the dev book Mark: with its scalars
free (`--prior-lr` 1e-2), seed 0's selected correction retrieved in 2% of Mark's windows against the rule's
40% (+7.5% [+4.2, +11.3] against the rule on Mark's 112 retrieving windows), a loss the training books'
decision prefixes could not see; with them fixed no seed's selection moved past step 0 (docs/results.md,
"The stacked reranker")."""


def forward_rows(passage_form: PassageForm) -> tuple[ForwardRow, ...]:
    """The rows a run in `passage_form` adds: a passage-form row only where its form is not the run's own
    (the table's BM25 row is that one)."""
    return tuple(row for row in FORWARD_ROWS if row.passage_form != passage_form)


@dataclass(frozen=True)
class PipelinePlan:
    """Every stage of one run, in order."""

    index: StagePlan
    data_gen: StagePlan
    trains: tuple[StagePlan, ...]
    evals: tuple[StagePlan, ...]
    """One per eval set, in the order of `PipelineTexts.evals`."""
    forwards: tuple[tuple[str, ForwardRow, StagePlan], ...] = ()
    """(eval set, row, stage) for each eval set's forward-looking rows (``FORWARD_ROWS``)."""

    @property
    def stages(self) -> list[StagePlan]:
        return [self.index, self.data_gen, *self.trains, *self.evals, *(stage for *_, stage in self.forwards)]

    @property
    def passages(self) -> Path:
        return Path(f"{self.index.output}.passages.jsonl")


def lm_options(lm: str, settings: ScaleSettings, dtype: str) -> LMOptions:
    """The frozen LM of data-gen and eval (`dtype` resolved: ``fastest`` measured on this machine)."""
    return LMOptions(model=lm, dtype=dtype, max_length=settings.max_length)


def training_precision(dtype: str) -> dict[str, str]:
    """The reranker's training precision follows the LM's resolved dtype: bf16 (``fastest`` found the CPU
    computes it natively and faster, or the user asked for it) trains in ``bf16-mixed`` (autocast; weights and
    optimizer in fp32), measured 1.4x faster per training stage than fp32 here, with the same export decision
    (bench/RESULTS.md); otherwise ralm's rule
    (``ralm.devices.training_precision``: bf16-mixed on a native-bf16 GPU, else 32-true)."""
    return {"precision": "bf16-mixed"} if dtype == "bf16" else {}


def window_options(settings: ScaleSettings) -> WindowOptions:
    return WindowOptions(settings.stride, settings.query_tokens, settings.max_passage_tokens)


def plan_pipeline(
    run_dir: Path,
    texts: PipelineTexts,
    lm: str,
    encoder: str,
    settings: ScaleSettings,
    dtype: str,
    thresholds: Mapping[str, float] | None = None,
) -> PipelinePlan:
    """Every stage of a run. `thresholds` (rule -> its value fitted on the data-gen rows, so known only
    after that stage) add the threshold rules (`bm25-above`, `zero-shot-above`) to the eval's conditions."""
    index = index_stage(run_dir, texts, settings)
    passages = str(Path(f"{index.output}.passages.jsonl"))
    retrieval = RetrievalOptions(index=str(index.output), passages=passages, k=settings.k)
    known = index.produced()
    data_gen = _data_gen_stage(run_dir, texts, retrieval, lm_options(lm, settings, dtype), settings, known)
    known |= data_gen.produced()
    trains = tuple(
        _train_stage(run_dir, data_gen.output, encoder, settings, s, dtype, known)
        for s in settings.train_seeds
    )
    for train in trains:
        known |= train.produced()
        known[str(no_lm_export(train))] = f"train {train.fingerprint} no-lm export"
    trained = {f"{TRAINED_PREFIX}{s}": t.output for s, t in zip(settings.train_seeds, trains, strict=True)}
    trained |= {
        f"{NO_LM_PREFIX}{s}": no_lm_export(t) for s, t in zip(settings.train_seeds, trains, strict=True)
    }
    evals = tuple(
        eval_stage(
            run_dir,
            name,
            path,
            retrieval,
            lm_options(lm, settings, dtype),
            settings,
            trained,
            thresholds,
            key="eval" if len(texts.evals) == 1 else f"eval {name}",
            known=known,
        )
        for name, path in texts.evals.items()
    )
    forwards = tuple(
        (
            name,
            row,
            forward_stage(
                run_dir, name, path, retrieval, lm_options(lm, settings, dtype), settings, row, known
            ),
        )
        for name, path in texts.evals.items()
        for row in forward_rows(settings.passage_form)
    )
    return PipelinePlan(index, data_gen, trains, evals, forwards)


def index_stage(run_dir: Path, texts: PipelineTexts, settings: ScaleSettings) -> StagePlan:
    arguments = IndexArguments(
        documents=texts.corpus,
        passage_words=settings.passage_words,
        passage_stride=settings.passage_stride,
        exclude=list(texts.exclude) or None,
        overwrite=True,
    )
    # Keyed by the corpus's contents, not its name: an edited file gets a fresh folder.
    draft = StagePlan("index", arguments, run_dir, identities=identities_of([texts.corpus], {}))
    index_dir = run_dir / f"index-{draft.fingerprint[:8]}"
    arguments = replace(arguments, output=index_dir, passages=Path(f"{index_dir}.passages.jsonl"))
    return replace(draft, arguments=arguments, output=index_dir)


def _data_gen_stage(
    run_dir: Path,
    texts: PipelineTexts,
    retrieval: RetrievalOptions,
    lm: LMOptions,
    settings: ScaleSettings,
    known: Identities,
) -> StagePlan:
    from ralm.data_gen.options import SamplingOptions, ShardingOptions

    # `ralm run`: the eval documents and --exclude leave the training text too (ralm.pipeline.held_out).
    arguments = DataGenArguments(
        documents=str(texts.train),
        lm=lm,
        retrieval=retrieval,
        exclude=list(texts.train_exclude) or None,
        sampling=SamplingOptions(num_prefixes=settings.num_prefixes),
        window=window_options(settings),
        sharding=ShardingOptions(prefixes_per_shard=settings.prefixes_per_shard),
        passage_form=settings.passage_form,
    )
    inputs = identities_of([texts.train, retrieval.index, retrieval.passages, lm.model], known)
    draft = StagePlan("data-gen", arguments, run_dir, identities=inputs)
    data_dir = run_dir / f"rerank-data-{draft.fingerprint[:8]}"
    return replace(draft, arguments=replace(arguments, output=str(data_dir)), output=data_dir)


def _train_stage(
    run_dir: Path,
    data_dir: Path,
    encoder: str,
    settings: ScaleSettings,
    seed: int,
    dtype: str,
    known: Identities,
) -> StagePlan:
    from ralm.train.settings import EncoderOptions, LoaderOptions, OptimOptions, RunOptions

    arguments = TrainArguments(
        data=str(data_dir),
        encoder=EncoderOptions(
            name=encoder,
            max_pair_tokens=settings.max_pair_tokens,
            max_prefix_tokens=settings.max_prefix_tokens,
            attention_dropout=settings.attention_dropout,
        ),
        # The export is decided once, at the end, on documents that chose nothing (neither trained on nor
        # selecting the checkpoint): no LM scoring, only encoder passes, so it gets the larger share (power).
        loader=LoaderOptions(
            batch_size=settings.batch_size,
            val_batch_size=settings.batch_size,
            val_fraction=settings.val_fraction,
            decision_fraction=settings.decision_fraction,
        ),
        # Warmup must end before the last step; a short override run keeps a tenth of its steps for it.
        optim=OptimOptions(
            loss=settings.loss,
            lr=settings.lr,
            head_lr=settings.head_lr,
            warmup_steps=min(settings.warmup_steps, settings.train_steps // 10),
            max_steps=settings.train_steps,
            prior_lr=STACKED_PRIOR_LR if settings.stacked else OptimOptions.prior_lr,
        ),
        run=RunOptions(
            val_every=settings.val_every,
            patience=settings.patience or None,
            save_every=settings.val_every,
            wandb="off",
            keep_checkpoints=False,
        ),
        trainer={"log_every_n_steps": 10, **training_precision(dtype)},
        # Start from a rule and learn corrections: with a few dozen prefixes a reranker trained from a random
        # head ranks far worse than BM25 (measured 13.71 ppl against 10.59 at --quick).
        bm25_prior=not settings.stacked,
        zero_shot_prior=settings.stacked,
        abstain=settings.abstain,
        seed=seed,
        margin=settings.margin,
        # The table shows, beside each seed's export, what a user who cannot run the LM per retrieval gets.
        no_lm_export=True,
    )
    key = "train" if len(settings.train_seeds) == 1 else f"train seed {seed}"
    draft = StagePlan(key, arguments, run_dir, identities=identities_of([data_dir, encoder], known))
    train_dir = run_dir / f"reranker-{draft.fingerprint[:8]}"
    arguments = replace(arguments, output=str(train_dir))
    return replace(draft, arguments=arguments, output=train_dir / EXPORT_FOLDER)


def no_lm_export(train: StagePlan) -> Path:
    """The train stage's second export (``ralm train --no-lm-export``): the best rule that reads no frozen
    LM at rerank time, beside ``reranker``."""
    return Path(train.output).parent / NO_LM_EXPORT_FOLDER


def eval_stage(
    run_dir: Path,
    name: str,
    text: Path,
    retrieval: RetrievalOptions,
    lm: LMOptions,
    settings: ScaleSettings,
    trained: dict[str, Path],
    thresholds: Mapping[str, float] | None,
    key: str,
    known: Identities | None = None,
) -> StagePlan:
    """One eval set's `ralm eval ppl --compare` table: every condition on the same windows and candidates
    (`compare`: the demo's Conditions, a trained reranker's by its exported folder). `known`: the identities
    of earlier stages' work (the index, the rerankers); any other path is keyed by its contents."""
    # One table of k + 2 LM scores per window serves every condition (`--compare`, typed Conditions): the
    # same windows, candidates and scores for each, and each trained seed costs only its encoder passes.
    # The report prints the table, with labels: the stage leaves it out (print_table false).
    arguments = EvalPplArguments(
        text=str(text),
        lm=lm,
        window=window_options(settings),
        max_tokens=settings.eval_tokens_of(name),
        retrieval=retrieval,
        compare=demo_conditions(thresholds, trained),
        print_table=False,
        passage_form=settings.passage_form,
    )
    paths = [text, retrieval.index, retrieval.passages, lm.model, *trained.values()]
    inputs = identities_of(paths, known or {})
    # The retrieval cache serves every eval of the same windows and candidates, whatever the conditions.
    cache_key = stage_fingerprint(arguments.words, arguments.retrieval_inputs(), (), inputs)
    arguments = replace(arguments, retrieval_cache=str(run_dir / f"retrieval-cache-{cache_key[:8]}.jsonl"))
    draft = StagePlan(key, arguments, run_dir, identities=inputs)
    eval_dir = run_dir / f"eval-{name}-{draft.fingerprint[:8]}"
    arguments = replace(arguments, output=str(eval_dir))
    return replace(draft, arguments=arguments, output=eval_dir / COMPARE_FILE)


def forward_stage(
    run_dir: Path,
    name: str,
    text: Path,
    retrieval: RetrievalOptions,
    lm: LMOptions,
    settings: ScaleSettings,
    row: ForwardRow,
    known: Identities,
) -> StagePlan:
    """BM25's top-1 on eval set `name`'s windows with `row`'s passage form or query: one condition, paired
    window by window with the set's table in the report. It shares the set's retrieval cache (keyed by query
    text) and depends on no reranker. It retrieves one candidate (k = 1) and is no comparison table (no
    ``--compare``): each retrieving window costs the LM one input, the passage's, where a one-condition
    table also scored the no-passage row that the set's own table already holds."""
    base = eval_stage(run_dir, name, text, retrieval, lm, settings, {}, None, key="", known=known)
    arguments = replace(
        base.arguments,
        retrieval=replace(retrieval, k=1),
        compare=None,
        passage_form=row.passage_form or settings.passage_form,
        query=row.query or QueryOptions(),
        output=None,
    )
    draft = replace(base, key=f"forward {name} {row.slug}", arguments=arguments)
    folder = run_dir / f"forward-{name}-{row.slug}-{draft.fingerprint[:8]}"
    arguments = replace(arguments, output=str(folder))
    return replace(draft, arguments=arguments, output=folder / RESULTS_FILE)
