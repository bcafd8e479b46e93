"""`ralm retrieve`: batch-search an index, write a TREC run plus JSONL with passage texts.

ralm retrieve --index idx/ --queries queries.tsv --k 16 --output run.trec [--threads 4]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ralm.cli.command_args import call_with_args, parser_for
from ralm.config_types import PositiveInt, check_arguments
from ralm.progress import progress
from ralm.retrieval.index import open_index, open_options
from ralm.retrieval.run_files import RunWriter, read_queries


def retrieve(
    index: Path,
    queries: Path,
    output: Path,
    k: PositiveInt = 16,
    threads: PositiveInt = 1,
    batch_size: PositiveInt = 1000,
    jsonl_output: Path | None = None,
    passages: Path | None = None,
    tag: str = "ralm",
    device: str = "auto",
) -> dict:
    """Search every query and write the results.

    Args:
        index: Index folder built by `ralm index`.
        queries: Queries as TSV (qid<TAB>query) or JSONL ({"qid", "query"}).
        output: TREC run file to write (qid Q0 docid rank score tag).
        k: Passages per query.
        threads: Search threads (bm25s, pyserini batch_search, faiss).
        batch_size: Queries per search call (the paper's code used 1000).
        jsonl_output: JSONL run with passage texts; default: `output` with the suffix .jsonl.
        passages: Passages file the index was built from, when it moved since (its hash is checked).
        tag: Run tag in the last TREC column.
        device: Dense indexes only: auto, cpu or cuda (query encoder and FAISS GPU index).
    """
    check_arguments(retrieve, locals())
    pairs = read_queries(queries)
    # Only a backend that runs a model takes a device (BM25 runs on the CPU).
    options = {"device": device} if device != "auto" and "device" in open_options(index) else {}
    retriever = open_index(index, passages, **options)
    jsonl_output = jsonl_output or Path(output).with_suffix(".jsonl")
    writer = RunWriter(output, jsonl_output, tag=tag, expected_qids=[qid for qid, _ in pairs])
    todo = pairs[writer.done :]
    started, ok = time.perf_counter(), False
    try:
        with progress(len(pairs), initial=writer.done, desc="retrieve", unit="query") as bar:
            for start in range(0, len(todo), batch_size):
                batch = todo[start : start + batch_size]
                hits = retriever.search([q for _, q in batch], k, threads=threads)
                for (qid, query), found in zip(batch, hits, strict=True):
                    writer.add(qid, query, found)
                writer.flush()  # a killed run resumes after the last whole batch
                bar.update(len(batch))
        ok = True
    finally:
        writer.close(ok)
    seconds = time.perf_counter() - started
    summary = {
        "queries": len(pairs),
        "resumed_after": writer.done,
        "k": k,
        "seconds": round(seconds, 3),
        "queries_per_second": round(len(todo) / max(seconds, 1e-9), 1),
        "backend": retriever.meta["backend"],
        "trec_run": str(output),
        "jsonl_run": str(jsonl_output),
    }
    print(
        f"retrieve: {len(todo)} queries, top-{k} from {retriever.meta['backend']} index {index} "
        f"in {seconds:.2f} s ({summary['queries_per_second']} queries/s, {threads} thread(s)) "
        f"-> {output}, {jsonl_output}",
        file=sys.stderr,
    )
    return summary


def build_parser():
    return parser_for(retrieve, prog="ralm retrieve", renamed={"out": "output", "jsonl_out": "jsonl_output"})


def main(argv: list[str] | None = None) -> None:
    call_with_args(retrieve, build_parser(), argv)


if __name__ == "__main__":
    main()
