"""Shared by the tiny `ralm demo` tests (test_demo_tiny_*, test_pipeline_reuse): TINY's scale, the
module's own texts, a run's stage commands, and `ralm demo --quick` on those texts at TINY's scale."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from ralm.demo.demo_command import demo
from ralm.pipeline.plan import forward_rows
from ralm.pipeline.scale import ScaleOptions
from ralm.retrieval.passage_forms import RETRIEVED

# Small enough for two tiny models to run every stage in seconds.
TINY = ScaleOptions(
    eval_tokens=224,
    dtype="fp32",
    train_seeds=[0],
    stride=16,
    query_tokens=16,
    max_length=128,
    max_passage_tokens=32,
    passage_words=30,
    passage_stride=15,
    k=2,
    num_prefixes=8,
    prefixes_per_shard=4,
    train_steps=2,
    batch_size=2,
    warmup_steps=0,
    max_pair_tokens=96,
    max_prefix_tokens=24,
    val_fraction=0.25,
    val_every=1,
)

FORWARDS = [f"forward eval {row.slug}" for row in forward_rows(RETRIEVED)]
"""The forward-looking rows' stages of a run whose one eval set is named "eval" (TINY hands the LM the passage
as retrieved, the scales' default)."""


def stage_commands(run_dir: Path) -> list[list[str]]:
    """The stage commands of a run's commands.sh, each without its leading `PYTHON -m ralm`."""
    lines = [shlex.split(line) for line in (run_dir / "commands.sh").read_text().splitlines()]
    return [words[3:] for words in lines if words[1:3] == ["-m", "ralm"]]


@pytest.fixture(scope="module")
def texts(tmp_path_factory, real_documents) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("demo_texts")
    corpus, held_out = real_documents[:-3], real_documents[-3:]
    paths = {"corpus": folder / "corpus.jsonl", "eval": folder / "held_out.jsonl"}
    for path, docs in ((paths["corpus"], corpus), (paths["eval"], held_out)):
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return paths


def own_data_demo(texts: dict[str, Path], lm_dir: Path, encoder_dir: Path, run_dir: Path, **changes) -> dict:
    """`ralm demo --quick` on the module's own texts at TINY's scale; `changes` replace any argument."""
    arguments = {
        "quick": True,
        "output": str(run_dir),
        "corpus": str(texts["corpus"]),
        "eval_text": str(texts["eval"]),
        "lm": str(lm_dir),
        "encoder": str(encoder_dir),
        "scale": TINY,
    }
    return demo(**{**arguments, **changes})
