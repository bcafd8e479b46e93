"""`ralm index`: build a bm25s, pyserini or faiss index from passages (or from raw documents).

ralm index --passages passages.jsonl --output idx/                      # bm25s, the default
ralm index --documents docs.jsonl --output idx/ --exclude '[test-doc]'  # runs `ralm passages` first
ralm index --passages passages.jsonl --output idx-lucene/ --backend pyserini --threads 4
ralm index --config configs/index/faiss_minilm.yaml --passages passages.jsonl --output idx-dense/
ralm index --prebuilt wikipedia-dpr-100w --output idx-wiki/ --exclude-file data/wikitext103/eval_titles.txt
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from ralm.cli.command_args import call_with_args, parser_for
from ralm.config_types import PositiveInt
from ralm.errors import RalmInputError
from ralm.retrieval.backends import BUILT, DEFAULT, BuiltBackend, backend_class
from ralm.retrieval.index import build_index
from ralm.retrieval.passages_command import make_passages, read_exclude_file


@dataclass
class Bm25Options:
    k1: float = 0.9
    """BM25 k1 (the paper's Pyserini setting)."""
    b: float = 0.4
    """BM25 b (the paper's Pyserini setting)."""


@dataclass
class DenseOptions:
    encoder: str | None = None
    """Hugging Face encoder id or local folder (faiss backend)."""
    pooling: Literal["mean", "cls"] = "mean"
    """Mean over tokens (RETRO's BERT retriever) or the first token's vector (DPR-style CLS)."""
    normalize: bool = False
    """L2-normalise embeddings, so inner product is cosine (sentence-transformers models expect it)."""
    encoder_max_length: int = 256
    """Dense encoder tokens per passage or query (the LM's input length is `--max-length` elsewhere)."""
    batch_size: int = 32
    """Passages per encoder forward pass."""
    shard_size: int = 4096
    """Passages per saved embedding shard; a killed build resumes at the first missing shard."""
    device: str = "auto"
    """auto (cuda if visible, else cpu), cpu or cuda."""
    gpu_index: bool = False
    """Require a GPU FAISS index (errors without a GPU and a GPU FAISS build)."""


# Former option names (one name, one meaning across commands: --stride is the retrieval stride s).
RENAMED = {
    "index_dir": "output",
    "words": "passage_words",
    "stride": "passage_stride",
    "dense.max_length": "dense.encoder_max_length",
}

_DEFAULT_BM25, _DEFAULT_DENSE = Bm25Options(), DenseOptions()  # never mutated


def make_index(
    output: Path,
    passages: Path | None = None,
    documents: Path | None = None,
    backend: BuiltBackend = DEFAULT,
    passage_words: PositiveInt = 100,
    passage_stride: PositiveInt | None = None,
    exclude: list[str] | None = None,
    exclude_file: Path | None = None,
    threads: PositiveInt = 1,
    overwrite: bool = False,
    bm25: Bm25Options = _DEFAULT_BM25,
    dense: DenseOptions = _DEFAULT_DENSE,
    prebuilt: str | None = None,
) -> dict:
    """Build a retrieval index folder (engine files + ralm_index.json).

    Args:
        output: Index folder to create (built as OUTPUT.partial, renamed when complete).
        passages: Passages JSONL (from `ralm passages`). Written here when `documents` is given.
        documents: Raw documents to split first (JSONL, folder of .txt, or datasets dir).
        backend: bm25s (default), pyserini (Lucene, needs Java 21) or faiss (dense).
        passage_words: Words per passage when splitting `documents`.
        passage_stride: Words between passage starts when splitting `documents` (default:
            `passage_words`, no overlap).
        exclude: Titles or doc ids to leave out when splitting `documents`.
        exclude_file: File with one title or doc id per line to leave out.
        threads: Indexing threads (pyserini).
        overwrite: Replace an existing index folder built from something else.
        prebuilt: A Pyserini prebuilt index name (wikipedia-dpr-100w: the paper's Dec 2018 Wikipedia) or a
            local Lucene index folder, used as is; `exclude`/`exclude_file` then name titles whose passages
            are never returned (the evaluation articles). No passages file is written.
    """
    if prebuilt is not None:
        return _link_prebuilt(prebuilt, output, passages, documents, exclude, exclude_file, bm25, overwrite)
    if documents is not None:
        passages = passages or Path(f"{output}.passages.jsonl")
        make_passages(
            documents,
            passages,
            passage_words=passage_words,
            exclude=exclude,
            exclude_file=exclude_file,
            passage_stride=passage_stride,
        )
    elif passages is None:
        raise RalmInputError("passages: give --passages FILE (or --documents to split raw documents first)")
    # Each backend gets the options it takes (its class says which); the others' keep their defaults.
    given = {**asdict(bm25), "threads": threads, **asdict(dense)}
    takes = backend_class(backend, "--backend", BUILT).build_options
    options = {name: value for name, value in given.items() if name in takes}
    meta = build_index(passages, output, backend=backend, overwrite=overwrite, **options)
    print(
        f"index: {meta['backend']} index of {meta['num_passages']} passages from {passages} in {output} "
        f"({meta.get('build_seconds', 0):.1f} s)",
        file=sys.stderr,
    )
    return meta


def _link_prebuilt(prebuilt, output, passages, documents, exclude, exclude_file, bm25, overwrite) -> dict:
    from ralm.retrieval.prebuilt import link_prebuilt

    if passages is not None or documents is not None:
        raise RalmInputError("--prebuilt: the index brings its own passages; drop --passages/--documents")
    titles = list(exclude or []) + (read_exclude_file(exclude_file) if exclude_file else [])
    meta = link_prebuilt(prebuilt, Path(output), titles, k1=bm25.k1, b=bm25.b, overwrite=overwrite)
    print(
        f"index: prebuilt {meta['prebuilt']} ({meta['num_passages']:,} passages) in {output}, "
        f"{len(meta['excluded_titles'])} title(s) excluded at search time",
        file=sys.stderr,
    )
    return meta


def build_parser():
    return parser_for(make_index, prog="ralm index", renamed=RENAMED)


def main(argv: list[str] | None = None) -> None:
    call_with_args(make_index, build_parser(), argv)


if __name__ == "__main__":
    main()
