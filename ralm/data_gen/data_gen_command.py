"""`ralm data-gen`: reranker training data, sharded and resumable; `ralm data-gen merge` joins shards.

ralm data-gen --documents train.jsonl --index idx/ --lm gpt2 --output data/rerank [--limit 100]
torchrun --nproc-per-node 8 -m ralm data-gen ...         # each rank takes every 8th shard
ralm data-gen ... --num-shards 2 --shard-id 1            # one slice, e.g. one job of a cluster array
ralm data-gen merge --output data/rerank                 # when shards ran as separate jobs
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ralm.atomic_files import ensure_writable_dir, write_json_atomic
from ralm.cli.command_args import call_with_args, parser_for
from ralm.data_gen.generate import ShardContext, score_shards
from ralm.data_gen.inputs import check_input_fits, open_candidates_index, sample_documents
from ralm.data_gen.label_statistics import format_summary
from ralm.data_gen.merge import merge_shards, missing_shards
from ralm.data_gen.metadata import describe_run, read_json, refuse_if_different
from ralm.data_gen.options import SamplingOptions, ShardingOptions, resolve_settings
from ralm.data_gen.schema import METADATA_FILE
from ralm.data_gen.shards import ShardStore, check_world, plan_shards, shards_for_worker, worker_from_env
from ralm.lm.options import LMOptions, WindowOptions
from ralm.retrieval.options import RetrievalOptions
from ralm.retrieval.passage_forms import RETRIEVED, PassageForm

__all__ = ["SamplingOptions", "ShardingOptions", "build_parser", "data_gen", "main", "merge"]

# Defaults of the argument groups (never mutated; the parser builds fresh instances from the command line).
_LM, _RETRIEVAL, _WINDOW = LMOptions(), RetrievalOptions(), WindowOptions()
_SAMPLING, _SHARDING = SamplingOptions(), ShardingOptions()

# Former option names (on the command line and as YAML keys) -> their names in the shared groups. Each
# leaf spelling (--stride, --k, --max-length, ...) still works; --retrieval-threads is now --threads.
RENAMED = {
    "sampling.stride": "window.stride",
    "sampling.query_tokens": "window.query_tokens",
    "candidates.k": "retrieval.k",
    "candidates.retrieval_threads": "retrieval.threads",
    "candidates.allow_same_doc": "allow_same_doc",
    "scoring.max_length": "lm.max_length",
    "scoring.max_passage_tokens": "window.max_passage_tokens",
    "scoring.device": "lm.device",
    "scoring.dtype": "lm.dtype",
}


def data_gen(
    documents: str,
    output: str,
    lm: LMOptions = _LM,
    retrieval: RetrievalOptions = _RETRIEVAL,
    exclude: list[str] | None = None,
    allow_same_doc: bool = False,
    sampling: SamplingOptions = _SAMPLING,
    window: WindowOptions = _WINDOW,
    passage_form: PassageForm = RETRIEVED,
    sharding: ShardingOptions = _SHARDING,
    progress: bool = True,
) -> dict:
    """Score BM25 candidates of sampled training prefixes with a frozen LM (reranker training data).

    Args:
        documents: Training documents (JSONL, folder of .txt, or datasets folder), as for `ralm index`.
        output: Dataset folder (shards are kept under OUTPUT/shards until merged).
        lm: The frozen LM (``--lm`` is short for ``--lm.model``) and its input length.
        retrieval: The index built by `ralm index` from the retrieval corpus, and the BM25 candidates per
            prefix (``--k``).
        exclude: Titles or doc ids of training documents to leave out (the evaluation documents: no
            prefix of theirs may train or validate the reranker); `re:PATTERN` leaves out every document
            whose id or title the regular expression matches in full, as `ralm passages --exclude`.
            Recorded in the metadata with the ids left out.
        allow_same_doc: Keep passages of the prefix's own document among its candidates (excluded by
            default; recorded in the metadata).
        sampling: How many prefixes, from which seed, and the shortest prefix.
        window: s (the target length), ℓ (the query length) and the passage cut, as `ralm eval ppl` has them.
        passage_form: What each candidate hands the LM, as `ralm eval ppl --passage-form` has it: the passage
            (retrieved) or its continuation from the sentence that best matches the query into the next
            passage of its document (continuation); recorded when it is not retrieved.
        sharding: Shards and which of them this process writes.
        progress: Show progress bars.
    """
    lm.require()
    retrieval.require()
    rank, world_size = worker_from_env(os.environ)
    check_world(sharding.num_shards, sharding.shard_id, rank, world_size)  # before any GPU work
    out = Path(output)
    ensure_writable_dir(out)
    retriever = open_candidates_index(retrieval)
    model = lm.load()
    input_length = lm.input_length(model.context_length)
    check_input_fits(input_length, window)
    excluded: dict = {"rules": list(exclude or [])}
    sampled = sample_documents(
        documents,
        model,
        sampling,
        window,
        sharding,
        world_size=world_size,
        progress=progress,
        excluded=excluded,
    )
    settings = resolve_settings(
        sampling,
        window,
        retrieval,
        allow_same_doc=allow_same_doc,
        input_length=input_length,
        num_passages=int(retriever.meta["num_passages"]),
        num_examples=sampled.num_examples,
        num_shards=sampled.num_shards,
        passage_form=passage_form,
    )
    config, meta = describe_run(
        documents, model, retriever.meta, sampled, settings, limit=sampling.limit, excluded=excluded
    )
    finished = _start_or_resume(out, config, meta)
    if finished is not None:
        return finished
    store = ShardStore(out)
    store.prepare(config)
    context = ShardContext(
        documents, sampled.corpus, sampled.sample, retriever, model, settings, store, config
    )
    _write_my_shards(context, sharding.shard_id, rank, world_size, progress)
    return _merge_when_complete(out, meta, config, sharding.keep_shards)


def _write_my_shards(
    ctx: ShardContext, shard_id: int | None, rank: int, world_size: int, progress: bool
) -> None:
    """Score and write this process's shards (--shard-id's, or its rank's share) that are not complete yet."""
    shards = plan_shards(ctx.settings.num_examples, ctx.settings.num_shards)
    mine = shards_for_worker(shards, shard_id, rank, world_size)
    todo = [s for s in mine if not ctx.store.is_complete(s)]
    rate = score_shards(ctx, todo, progress)
    print(
        f"{len(todo)} shard(s) written by this process, {len(mine) - len(todo)} already complete; "
        f"{rate:.1f} pairs/s"
    )


def _start_or_resume(out: Path, config: dict, meta: dict) -> dict | None:
    """Write the metadata of a new run, or check a resumed one's config; a complete run's metadata."""
    meta_path = out / METADATA_FILE
    if not meta_path.exists():
        write_json_atomic(meta_path, meta, sort_keys=True, default=str)
        return None
    found = read_json(meta_path)
    refuse_if_different(meta_path, config, found.get("config", {}))
    if not found.get("complete"):
        return None
    print(f"{out}: already complete\n{format_summary(found.get('summary', {}))}")
    return found


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
            f"{len(missing)} shard(s) still missing (other workers?); "
            f"`ralm data-gen merge --output {out}` joins them"
        )
        return {**meta, "missing_shards": missing}
    return merge(str(out), keep_shards) or meta


def print_warnings(summary: dict) -> None:
    """Say plainly what the summary's numbers mean when they are bad news for retrieval."""
    gain = summary.get("gain_bm25_top1_over_no_retrieval")
    if isinstance(gain, float) and gain < 0:
        print(
            "data-gen: warning: BM25's top passage LOWERS the target's log-prob on average "
            f"({gain:+.3f} nats/token against no retrieval); "
            "train with --abstain so the reranker can decline to retrieve"
        )
    copies = summary.get("candidates_copying_target", 0)
    if copies:
        print(
            f"data-gen: note: {copies} candidate(s) "
            f"({summary.get('candidates_copying_target_rate', 0):.1%}) hold "
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
    return parser_for(data_gen, description=description, prog="ralm data-gen", renamed=RENAMED)


def build_merge_parser():
    return parser_for(merge, prog="ralm data-gen merge")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "merge":
        call_with_args(merge, build_merge_parser(), argv[1:])
    else:
        call_with_args(data_gen, build_parser(), argv)
