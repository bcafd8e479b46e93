"""`ralm data-gen`: reranker training data, sharded and resumable; `ralm data-gen merge` joins shards.

ralm data-gen --documents train.jsonl --index idx/ --lm gpt2 --output data/rerank [--limit 100]
torchrun --nproc-per-node 8 -m ralm data-gen ...         # each rank takes every 8th shard
ralm data-gen ... --num-shards 2 --shard-id 1            # one slice, e.g. one job of a cluster array
ralm data-gen merge --output data/rerank                 # when shards ran as separate jobs
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import ralm
from ralm.atomic_files import ensure_writable_dir, write_json_atomic
from ralm.command_args import call_with_args, parser_for
from ralm.config_types import NonNegativeInt, PositiveInt, check_fields
from ralm.data_gen.generate import GenerationSettings, check_corpus_matches_index, shard_rows
from ralm.data_gen.merge import merge_shards, missing_shards
from ralm.data_gen.metadata import read_json, refuse_if_different, run_config
from ralm.data_gen.prefixes import sample_prefixes, tokenize_documents
from ralm.data_gen.schema import FORMAT, METADATA_FILE
from ralm.data_gen.scoring import PassageTokens
from ralm.data_gen.shards import ShardStore, check_world, plan_shards, shards_for_worker, worker_from_env
from ralm.data_gen.summary import format_summary
from ralm.errors import RalmInputError
from ralm.progress import progress as progress_bar

# Prefixes whose candidates are checked against their own document's text before the first shard.
_AGREEMENT_SAMPLE = 64


@dataclass
class Sampling:
    num_prefixes: PositiveInt = 300_000
    """Prefixes to sample (the paper: 300,000 from WikiText-103's training set)."""
    stride: PositiveInt = 4
    """s: target length in tokens; prefixes end on multiples of it."""
    query_tokens: PositiveInt = 32
    """ℓ: the BM25 query is the last ℓ prefix tokens; no prefix ends inside a document's first ℓ tokens."""
    min_prefix_tokens: NonNegativeInt = 32
    """Shortest prefix (in tokens) that may be sampled; the effective floor is max(ℓ, this)."""
    seed: NonNegativeInt = 0
    """Seed of the prefix sample."""
    limit: PositiveInt | None = None
    """Only the first LIMIT prefixes of the sample (a quick look)."""

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def prefix_floor(self) -> int:
        """The shortest prefix sampled: no query may reach before the document's start."""
        return max(self.query_tokens, self.min_prefix_tokens)


@dataclass
class Candidates:
    k: PositiveInt = 16
    """BM25 candidates per prefix."""
    allow_same_doc: bool = False
    """Keep passages of the prefix's own document (excluded by default; recorded in the metadata)."""
    retrieval_threads: PositiveInt = 1
    """Threads for BM25 batch search."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class Scoring:
    max_length: PositiveInt = 1024
    """LM input length (passage + prefix + target); capped at the LM's own context."""
    max_passage_tokens: NonNegativeInt = 256
    """Passages are cut to this many tokens."""
    device: str = "auto"
    """auto: cuda when available, else cpu."""
    dtype: str = "auto"
    """auto: bf16 on a GPU that computes it natively, else fp32; config: the model config's dtype, as the
    authors' eval_lm.py loads it (fp16 for OPT); or fp32, bf16, fp16."""

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class Sharding:
    num_shards: PositiveInt | None = None
    """Shards to cut the sample into (default: one per PREFIXES_PER_SHARD prefixes)."""
    shard_id: NonNegativeInt | None = None
    """Run only this shard (default: all, or every WORLD_SIZE-th from RANK under torchrun)."""
    prefixes_per_shard: PositiveInt = 1000
    """Shard size when --num-shards is not given; a killed run loses at most one shard per process."""
    keep_shards: bool = False
    """Keep shards/ after merging."""

    def __post_init__(self) -> None:
        check_fields(self)


# Defaults of the argument groups (never mutated; the parser builds fresh instances from the command line).
_DEFAULT_SAMPLING, _DEFAULT_CANDIDATES, _DEFAULT_SCORING, _DEFAULT_SHARDING = (
    Sampling(),
    Candidates(),
    Scoring(),
    Sharding(),
)


def data_gen(
    documents: str,
    index: str,
    lm: str,
    output: str,
    passages: str | None = None,
    gguf_file: str | None = None,
    exclude: list[str] | None = None,
    sampling: Sampling = _DEFAULT_SAMPLING,
    candidates: Candidates = _DEFAULT_CANDIDATES,
    scoring: Scoring = _DEFAULT_SCORING,
    sharding: Sharding = _DEFAULT_SHARDING,
    progress: bool = True,
) -> dict:
    """Score BM25 candidates of sampled training prefixes with a frozen LM (reranker training data).

    Args:
        documents: Training documents (JSONL, folder of .txt, or datasets folder), as for `ralm index`.
        index: Index folder built by `ralm index` from the retrieval corpus.
        lm: Hugging Face id, model folder, or .gguf file of the frozen LM.
        output: Dataset folder (shards are kept under OUTPUT/shards until merged).
        passages: The index's passages file, to check the index is not stale (optional).
        gguf_file: GGUF file name inside the LM folder, if any.
        exclude: Titles or doc ids of training documents to leave out (the evaluation documents: no
            prefix of theirs may train or validate the reranker); `re:PATTERN` leaves out every document
            whose id or title the regular expression matches in full, as `ralm passages --exclude`.
            Recorded in the metadata with the ids left out.
        progress: Show progress bars.
    """
    rank, world_size = worker_from_env(os.environ)
    check_world(sharding.num_shards, sharding.shard_id, rank, world_size)  # before any GPU work
    out = Path(output)
    ensure_writable_dir(out)
    retriever, model, max_length = _open_inputs(index, passages, lm, gguf_file, sampling, scoring)
    excluded: dict = {"rules": list(exclude or [])}
    corpus, sample, num_examples, num_shards = _sample(
        documents, model, sampling, sharding, world_size, progress, excluded
    )
    settings = _settings(sampling, candidates, max_length, scoring.max_passage_tokens, retriever.meta,
                         num_examples=num_examples, num_shards=num_shards)  # fmt: skip
    config, meta = _describe_run(documents, model, retriever, corpus, sample, settings, limit=sampling.limit,
                                 excluded=excluded)  # fmt: skip
    meta_path = out / METADATA_FILE
    if meta_path.exists():
        found = read_json(meta_path)
        refuse_if_different(meta_path, config, found.get("config", {}))
        if found.get("complete"):
            print(f"{out}: already complete\n{format_summary(found.get('summary', {}))}")
            return found
    else:
        write_json_atomic(meta_path, meta, sort_keys=True, default=str)

    store = ShardStore(out)
    store.prepare(config)
    mine = shards_for_worker(plan_shards(num_examples, num_shards), sharding.shard_id, rank, world_size)
    todo = [s for s in mine if not store.is_complete(s)]
    context = _ShardContext(documents, corpus, sample, retriever, model, settings, store, config)
    rate = _score_shards(context, todo, progress)
    print(
        f"{len(todo)} shard(s) written by this process, {len(mine) - len(todo)} already complete; {rate:.1f} pairs/s"
    )
    return _merge_when_complete(out, meta, config, sharding.keep_shards)


def _open_inputs(index: str, passages: str | None, lm: str, gguf_file: str | None, sampling: Sampling,
                 scoring: Scoring):  # fmt: skip
    """(retriever, model, max_length): the index (checked not empty) and the LM (checked to fit a row)."""
    from ralm.lm.loading import load_lm
    from ralm.retrieval.index import open_index

    retriever = open_index(index, passages) if passages else open_index(index)
    if int(retriever.meta.get("num_passages", 0)) < 1:
        raise RalmInputError(f"{index}/ralm_index.json: num_passages is missing or zero")
    model = load_lm(lm, device=scoring.device, dtype=scoring.dtype, gguf_file=gguf_file)
    max_length = min(scoring.max_length, model.max_length)
    needed = scoring.max_passage_tokens + sampling.query_tokens + sampling.stride
    if max_length < needed:
        raise RalmInputError(
            f"--max-length: the LM holds {max_length} tokens, less than max_passage_tokens {scoring.max_passage_tokens}"
            f" + query_tokens {sampling.query_tokens} + stride {sampling.stride} = {needed}; lower --max-passage-tokens"
        )
    return retriever, model, max_length


def _sample(documents: str, model, sampling: Sampling, sharding: Sharding, world_size: int, progress: bool,
            excluded: dict):  # fmt: skip
    """(corpus, sample, num_examples, num_shards): the tokenized documents (those ``excluded["rules"]``
    do not name; `excluded` gets the counts) and the prefix sample."""
    from ralm.retrieval.passages import describe_exclusion, filter_documents, read_documents

    kept = filter_documents(read_documents(documents), excluded["rules"], excluded)
    corpus = tokenize_documents(kept, model.encode_batch, progress=progress)
    if excluded["rules"]:
        print(
            f"data-gen: --exclude left out {describe_exclusion(excluded, 'training documents')}", flush=True
        )
    floor = sampling.prefix_floor
    sample = sample_prefixes(corpus.lengths, sampling.stride, floor, sampling.num_prefixes, sampling.seed)
    num_examples = min(len(sample.doc), sampling.limit or len(sample.doc))
    if num_examples == 0:
        raise RalmInputError(
            f"{documents}: no document is long enough for a {floor}-token prefix and a {sampling.stride}-token target"
        )
    # Under a launcher, a multiple of the world size, so every process gets as many shards.
    num_shards = sharding.num_shards or world_size * max(
        1, math.ceil(num_examples / sharding.prefixes_per_shard / world_size)
    )
    if num_shards > num_examples:
        raise RalmInputError(f"--num-shards: {num_shards} shards for only {num_examples} prefixes")
    return corpus, sample, num_examples, num_shards


def _settings(sampling: Sampling, candidates: Candidates, max_length: int, max_passage_tokens: int,
              index_meta: dict, *, num_examples: int, num_shards: int) -> GenerationSettings:  # fmt: skip
    """The run's settings, resolved once (``exclude_same_doc`` is the negation of --allow-same-doc)."""
    return GenerationSettings(
        stride=sampling.stride, query_tokens=sampling.query_tokens, k=candidates.k,
        min_prefix_tokens=sampling.prefix_floor, max_length=max_length, max_passage_tokens=max_passage_tokens,
        seed=sampling.seed, num_prefixes=sampling.num_prefixes, num_examples=num_examples, num_shards=num_shards,
        exclude_same_doc=not candidates.allow_same_doc, num_passages=int(index_meta["num_passages"]),
        retrieval_threads=candidates.retrieval_threads,
    )  # fmt: skip


# The metadata repeats these values of ``config`` at its top level, under their documented names
# (docs/formats.md §4).
_META_FROM_CONFIG = ("tokenizer", "s", "l", "k", "seed", "max_length", "max_passage_tokens", "num_prefixes",
                     "num_examples", "exclude_same_doc", "index_hash")  # fmt: skip


def _describe_run(documents, model, retriever, corpus, sample, settings: GenerationSettings, *,
                  limit: int | None, excluded: dict) -> tuple[dict, dict]:  # fmt: skip
    """(config, meta): what the rows depend on (a resume must match it) and the dataset's metadata file."""
    config = run_config(
        lm=model.name, tokenizer=str(getattr(model.tokenizer, "name_or_path", "")),
        dtype=str(model.dtype).removeprefix("torch."), documents_sha256=corpus.texts_sha256,
        index_meta=retriever.meta, **settings.recorded(),
    )  # fmt: skip
    if model.bos_id is not None:  # passages start with the tokenizer's BOS (eval_lm.py): part of the rows
        config["passage_bos"] = model.bos_id
    meta = {
        "format": FORMAT, "config": config, "lm": model.name, **{key: config[key] for key in _META_FROM_CONFIG},
        "limit": limit, "index": retriever.meta, "documents": str(documents),
        "documents_available_prefixes": sample.available, "documents_skipped_too_short": sample.skipped_docs,
        "documents_total": len(corpus.doc_ids), "ralm_version": ralm.__version__, "complete": False,
        # What --exclude left out before sampling, as <passages>.excluded.json records it for the index
        # (documents_total counts the documents kept).
        "excluded": excluded,
    }  # fmt: skip
    return config, meta


@dataclass
class _ShardContext:
    """What every shard of one run is scored with."""

    documents: str
    corpus: object
    sample: object
    retriever: object
    model: object
    settings: GenerationSettings
    store: ShardStore
    config: dict


def _score_shards(ctx: _ShardContext, todo: list, progress: bool) -> float:
    """Score and write each shard of `todo` (the first one checks the corpus against the index); pairs/s."""

    def check_documents(docs: list[int], hits) -> None:
        docs, hits = docs[:_AGREEMENT_SAMPLE], hits[:_AGREEMENT_SAMPLE]
        texts = [ctx.model.decode(ctx.corpus.tokens(d).tolist()) for d in docs]
        check_corpus_matches_index(ctx.documents, texts, [ctx.corpus.doc_ids[d] for d in docs], hits)

    token_cache = PassageTokens(ctx.model, ctx.settings.max_passage_tokens)
    total_pairs = sum(s.stop - s.start for s in todo) * ctx.settings.k
    bar = progress_bar(
        total_pairs, unit="pair", desc="score candidates", disable=not progress, smoothing=0.05
    )
    pairs, seconds = 0, 0.0
    for n, shard in enumerate(todo):
        first_check = check_documents if n == 0 and ctx.settings.exclude_same_doc else None
        rows, counts = shard_rows(shard, ctx.sample, ctx.corpus, ctx.retriever, ctx.model, token_cache,
                                  ctx.settings, on_prefix=bar.update, check_documents=first_check)  # fmt: skip
        ctx.store.write(shard, rows, {"config": ctx.config, **counts})
        pairs, seconds = pairs + counts["pairs"], seconds + counts["seconds"]
    bar.total = bar.n  # short candidate lists make fewer pairs than planned
    bar.close()
    return pairs / seconds if seconds else float("nan")


def _merge_when_complete(out: Path, meta: dict, config: dict, keep_shards: bool) -> dict:
    """Merge when every shard is written; else say what is missing (other workers may still run)."""
    missing = missing_shards(out, config)
    if missing:
        merged_meanwhile = read_json(
            out / METADATA_FILE
        )  # another worker may have merged (and removed shards)
        if merged_meanwhile.get("complete"):
            print(f"{out}: merged by another process\n{format_summary(merged_meanwhile.get('summary', {}))}")
            return merged_meanwhile
        print(
            f"{len(missing)} shard(s) still missing (other workers?); `ralm data-gen merge --output {out}` joins them"
        )
        return {**meta, "missing_shards": missing}
    return merge(str(out), keep_shards) or meta


def print_warnings(summary: dict) -> None:
    """Say plainly what the summary's numbers mean when they are bad news for retrieval."""
    gain = summary.get("gain_bm25_top1_over_no_retrieval")
    if isinstance(gain, float) and gain < 0:
        print(
            f"data-gen: warning: BM25's top passage LOWERS the target's log-prob on average ({gain:+.3f} nats/token "
            "against no retrieval); train with --abstain so the reranker can decline to retrieve"
        )
    copies = summary.get("candidates_copying_target", 0)
    if copies:
        print(
            f"data-gen: note: {copies} candidate(s) ({summary.get('candidates_copying_target_rate', 0):.1%}) hold "
            "8 consecutive tokens of their prefix's target: copies of the training text in the corpus?"
        )


def merge(output: str, keep_shards: bool = False) -> dict | None:
    """Join the shards of a `ralm data-gen` run into the final dataset.

    Args:
        output: The run's output folder.
        keep_shards: Keep shards/ after merging.
    """
    final = merge_shards(output, keep_shards)
    if final is None:
        print(f"another process is merging the shards (if none is, remove {output}/.merge.lock)")
    else:
        print(f"{output}: {final['summary']['examples']} examples\n{format_summary(final['summary'])}")
        print_warnings(final["summary"])
    return final


def build_parser():
    description = (
        "Score BM25 candidates of sampled training prefixes with a frozen LM (reranker training data). "
        "`ralm data-gen merge --output DIR` joins shards that ran as separate jobs."
    )
    return parser_for(data_gen, description=description, prog="ralm data-gen")


def build_merge_parser():
    return parser_for(merge, prog="ralm data-gen merge")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "merge":
        call_with_args(merge, build_merge_parser(), argv[1:])
    else:
        call_with_args(data_gen, build_parser(), argv)
