"""`ralm run`'s stage plan: every stage gets its settings as the stage's own typed groups, and the command
line written to commands.sh parses back (with the stage's own parser) to exactly those objects."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ralm.cli import load_command
from ralm.command_args import parse
from ralm.lm.options import LMOptions
from ralm.pipeline.plan import plan_pipeline
from ralm.pipeline.scale import QUICK, ScaleOptions, resolve_scale
from ralm.pipeline.stages import STAGE_FUNCTIONS, StagePlan
from ralm.pipeline.texts import PipelineTexts
from ralm.retrieval.options import RetrievalOptions


@pytest.fixture
def texts(tmp_path) -> PipelineTexts:
    for name in ("corpus.jsonl", "train.jsonl", "eval.txt"):
        (tmp_path / name).write_text('{"id": "a", "title": "A", "text": "words"}\n')
    return PipelineTexts(
        tmp_path / "corpus.jsonl",
        tmp_path / "train.jsonl",
        {"eval": tmp_path / "eval.txt"},
        {},
        exclude=("re:held-.*",),
        train_exclude=("re:held-.*", "B"),
    )


def _parsed(stage: StagePlan) -> dict:
    """The arguments the stage's own command-line parser reads off its rendered command."""
    parser = load_command(" ".join(stage.words)).build_parser()
    _, init = parse(parser, stage.command[len(stage.words) :])
    return {name: getattr(init, name) for name in stage.arguments}


def _same(given, parsed) -> bool:
    if isinstance(given, dict):  # a ClassGroup (the trainer's keyword arguments): the given ones
        return all(parsed[key] == value for key, value in given.items())
    if isinstance(given, Path) or isinstance(parsed, Path):
        return str(given) == str(parsed)
    return given == parsed


def test_every_rendered_stage_command_parses_back_to_its_typed_arguments(tmp_path, texts):
    settings = resolve_scale(True, ScaleOptions(k=3, train_seeds=[0, 1]))
    plan = plan_pipeline(tmp_path / "run", texts, "my-lm", "my-encoder", settings, "bf16", threshold=1.25)
    assert {stage.words for stage in plan.stages} == set(STAGE_FUNCTIONS)
    for stage in plan.stages:
        parsed = _parsed(stage)
        for name, given in stage.arguments.items():
            assert _same(given, parsed[name]), (stage.key, name, given, parsed[name])


def test_k_and_the_input_length_reach_data_gen_and_eval_as_typed_groups(tmp_path, texts):
    settings = resolve_scale(True, ScaleOptions(k=7, max_length=400, max_passage_tokens=100))
    plan = plan_pipeline(tmp_path / "run", texts, "my-lm", "my-encoder", settings, "fp32")
    for stage in (plan.data_gen, *plan.evals):
        assert stage.arguments["retrieval"] == RetrievalOptions(
            index=str(plan.index.output), passages=str(plan.passages), k=7
        )
        assert stage.arguments["lm"] == LMOptions(model="my-lm", dtype="fp32", max_length=400)
        assert stage.arguments["window"].max_passage_tokens == 100
    # The rendered data-gen line carries them under the options a user types.
    command = plan.data_gen.command
    assert command[command.index("--k") + 1] == "7" and command[command.index("--max-length") + 1] == "400"
    assert command[command.index("--lm") + 1] == "my-lm"


def test_a_stage_with_an_argument_its_function_lacks_fails_when_rendered(tmp_path, texts):
    plan = plan_pipeline(tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, "fp32")
    broken = dataclasses.replace(plan.data_gen, arguments={**plan.data_gen.arguments, "candidates": 3})
    with pytest.raises(TypeError, match="data_gen\\(\\) has no parameter candidates"):
        _ = broken.command


def test_ralm_run_offers_no_bible_options():
    parser = load_command("run").build_parser()
    assert not [key for key in parser.ralm_option_names.keys if "books" in key]


@pytest.mark.parametrize(("dtype", "precision"), [("bf16", "bf16-mixed"), ("fp32", None), ("auto", None)])
def test_the_reranker_trains_in_bf16_mixed_exactly_when_the_lm_runs_in_bf16(
    tmp_path, texts, dtype, precision
):
    # "auto" (a GPU) leaves the precision to ralm's rule, which picks bf16-mixed on a native-bf16 GPU.
    plan = plan_pipeline(tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, dtype)
    (train,) = plan.trains
    assert train.arguments["trainer"].get("precision") == precision
    command = train.command
    assert ("--trainer.precision" in command) == (precision is not None)
    assert _parsed(train)["trainer"].get("precision") == precision
