"""Helpers for the data-gen tests (imported by them; no conftest): a corpus on disk and a bm25s index of
it, the module fixture `corpus`, the options and runners the data-gen command tests share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ralm.cli.command_args import parse
from ralm.cli.main import main as ralm_main
from ralm.data_gen.data_gen_command import build_parser
from ralm.retrieval.index import build_index
from ralm.retrieval.passages import split_passages, write_passages


def write_corpus(
    folder: Path, documents: list[dict], id_prefix: str = "", words: int = 100, stride: int | None = None
) -> tuple[Path, Path, Path]:
    """documents.jsonl, passages.jsonl (`words`-word passages every `stride` words, doc ids prefixed by
    `id_prefix`) and a bm25s index."""
    folder.mkdir(parents=True, exist_ok=True)
    docs_path, passages_path, index_dir = (
        folder / "documents.jsonl",
        folder / "passages.jsonl",
        folder / "index",
    )
    with open(docs_path, "w") as f:
        for d in documents:
            f.write(json.dumps(d) + "\n")
    renamed = [{**d, "id": id_prefix + d["id"]} for d in documents]
    write_passages(split_passages(renamed, words=words, stride=stride), passages_path)
    build_index(passages_path, index_dir, backend="bm25s")
    return docs_path, passages_path, index_dir


def cli_args(docs: Path, index: Path, lm: Path, output: Path, **options) -> list[str]:
    """Command-line arguments for `ralm data-gen` (option names with hyphens, as a user types them)."""
    args = [
        "--documents",
        str(docs),
        "--index",
        str(index),
        "--lm",
        str(lm),
        "--output",
        str(output),
        "--progress",
        "false",
    ]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def single_thread_env() -> dict:
    """Environment for child runs: one BLAS thread (the same kernels as the in-process reference), offline."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def spawn(args: list[str]) -> subprocess.Popen:
    """`python -m ralm data-gen ARGS` in a fresh child process (the real CLI, imports and all)."""
    return subprocess.Popen(
        [sys.executable, "-m", "ralm", "data-gen", *args],
        env=single_thread_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _child(args: list[str], log: str, env: dict) -> None:
    import torch

    os.environ.update(env)
    from ralm.cli.main import main

    torch.set_num_threads(1)
    code = 0
    with open(log, "w", buffering=1) as f:
        sys.stdout = sys.stderr = f  # the test runner's capture objects are not this process's to use
        try:
            main(["data-gen", *args])
        except SystemExit as err:
            code = err.code if isinstance(err.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        f.flush()
    os._exit(code)  # skip the parent's (pytest's) exit handlers


def fork(args: list[str], log: Path, env: dict | None = None):
    """`ralm data-gen ARGS` in a forked child: a separate process (own pid, killable) that skips the
    seconds of importing torch again. Its stdout and stderr go to `log`; `env` is added to its environment."""
    import multiprocessing

    proc = multiprocessing.get_context("fork").Process(target=_child, args=(args, str(log), env or {}))
    proc.start()
    return proc


# `ralm data-gen`'s required options, and a command line's parsed namespace (test_data_gen_options_*).
REQUIRED = ["--documents", "d.jsonl", "--index", "idx", "--lm", "gpt2", "--output", "out"]


def _parsed(argv: list[str]) -> dict:
    _, init = parse(build_parser(), argv)
    return {k: v for k, v in vars(init).items() if k != "config" and not k.startswith("__")}


# ---------------------------------------------------- shared by test_data_gen_command_*

OPTIONS = {
    "num_prefixes": 40,
    "k": 4,
    "stride": 4,
    "query_tokens": 16,
    "min_prefix_tokens": 16,
    "max_length": 96,
    "max_passage_tokens": 40,
    "seed": 1,
}
SHORT_DOCS = [{"id": f"short{i}", "title": "short", "text": "Too short to sample."} for i in range(3)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, real_documents):
    return write_corpus(tmp_path_factory.mktemp("corpus"), real_documents + SHORT_DOCS)


def run_in_process(argv: list[str]) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ralm_main(["data-gen", *argv])
    finally:
        torch.set_num_threads(threads)


def _data_gen(docs, index, lm, out, **options):
    from ralm.cli.command_args import parse
    from ralm.data_gen.data_gen_command import build_parser

    _, init = parse(build_parser(), cli_args(docs, index, lm, out, **{**OPTIONS, **options}))
    from ralm.data_gen.data_gen_command import data_gen

    kwargs = {k: v for k, v in vars(init).items() if k != "config" and not k.startswith("__")}
    return data_gen(**kwargs)
