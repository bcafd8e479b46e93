"""`ralm run`'s stage plan: every stage gets its settings as the stage's own typed groups, and the command
line written to commands.sh parses back (with the stage's own parser) to exactly those objects."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ralm.cli.command_args import parse
from ralm.cli.command_render import command_line
from ralm.cli.commands import PIPELINE_STAGES
from ralm.cli.main import load_command
from ralm.config_types import left_at_default
from ralm.demo.flare_demo import QUICK_FLARE, flare_stage
from ralm.eval.ppl.conditions import Condition
from ralm.fingerprints import fingerprint
from ralm.lm.options import LMOptions
from ralm.pipeline.plan import forward_rows, plan_pipeline
from ralm.pipeline.scale import QUICK, ScaleOptions, resolve_scale
from ralm.pipeline.stage_arguments import STAGE_ARGUMENTS, DataGenArguments
from ralm.pipeline.stage_keys import keyed_arguments
from ralm.pipeline.stages import STAGE_FUNCTIONS, StagePlan, StageRunner, _option_names, stage_function
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
    return {name: getattr(init, name) for name in stage.arguments.keywords()}


def _same(given, parsed) -> bool:
    if isinstance(given, dict):  # a ClassGroup (the trainer's keyword arguments): the given ones
        return all(parsed[key] == value for key, value in given.items())
    if isinstance(given, Path) or isinstance(parsed, Path):
        return str(given) == str(parsed)
    return given == parsed


def test_every_rendered_stage_command_parses_back_to_its_typed_arguments(tmp_path, texts):
    settings = resolve_scale(True, ScaleOptions(k=3, train_seeds=[0, 1]))
    plan = plan_pipeline(
        tmp_path / "run", texts, "my-lm", "my-encoder", settings, "bf16", thresholds={"bm25-above": 1.25}
    )
    # `ralm demo --flare`'s stage, on the same index.
    retrieval = plan.data_gen.arguments.retrieval
    lm = plan.data_gen.arguments.lm
    known = plan.index.produced()
    flare = flare_stage(
        tmp_path / "run", "dev", texts.corpus, "flare", 0.25, lm, retrieval, QUICK_FLARE, known
    )
    continued = dataclasses.replace(QUICK_FLARE, passage_form="continuation")
    flare_continued = flare_stage(
        tmp_path / "run", "dev", texts.corpus, "flare", 0.25, lm, retrieval, continued, known
    )
    # the passage form joins the key only when set: `ralm demo --flare`'s finished runs keep theirs
    assert flare.fingerprint == _main_fingerprint(flare) != flare_continued.fingerprint
    assert "--passage-form continuation" in " ".join(flare_continued.command)
    stages = [*plan.stages, flare, flare_continued]
    assert {stage.words for stage in stages} == set(STAGE_FUNCTIONS)
    for stage in stages:
        parsed = _parsed(stage)
        for name, given in stage.arguments.keywords().items():
            assert _same(given, parsed[name]), (stage.key, name, given, parsed[name])


def test_k_and_the_input_length_reach_data_gen_and_eval_as_typed_groups(tmp_path, texts):
    settings = resolve_scale(True, ScaleOptions(k=7, max_length=400, max_passage_tokens=100))
    plan = plan_pipeline(tmp_path / "run", texts, "my-lm", "my-encoder", settings, "fp32")
    for stage in (plan.data_gen, *plan.evals):
        assert stage.arguments.retrieval == RetrievalOptions(
            index=str(plan.index.output), passages=str(plan.passages), k=7
        )
        assert stage.arguments.lm == LMOptions(model="my-lm", dtype="fp32", max_length=400)
        assert stage.arguments.window.max_passage_tokens == 100
    # The rendered data-gen line carries them under the options a user types.
    command = plan.data_gen.command
    assert command[command.index("--k") + 1] == "7" and command[command.index("--max-length") + 1] == "400"
    assert command[command.index("--lm") + 1] == "my-lm"


def test_a_misspelled_stage_argument_fails_where_the_stage_is_planned(tmp_path, texts):
    plan = plan_pipeline(tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, "fp32")
    with pytest.raises(TypeError, match="candidates"):
        dataclasses.replace(plan.data_gen.arguments, candidates=3)
    with pytest.raises(TypeError, match="documents"):  # a forgotten one too
        DataGenArguments(**{k: v for k, v in plan.data_gen.arguments.keywords().items() if k != "documents"})


@pytest.mark.parametrize("arguments", STAGE_ARGUMENTS, ids=lambda cls: cls.__name__)
def test_every_stage_argument_is_a_parameter_of_its_function(arguments):
    """The fields are the function's parameters (a misspelled field would fail only when the stage runs);
    a value given only on resuming is None otherwise, the function's default, so commands.sh omits it."""
    parameters = inspect.signature(stage_function(arguments.words)).parameters
    fields = {f.name: f for f in dataclasses.fields(arguments)}
    assert set(fields) <= set(parameters)
    for name in arguments.unkeyed() - arguments.written():
        assert fields[name].default is None and parameters[name].default is None


def test_each_pipeline_stage_has_its_arguments_record():
    assert [cls.words for cls in STAGE_ARGUMENTS] == list(PIPELINE_STAGES)


def test_only_a_resumed_training_call_continues_from_the_last_checkpoint(tmp_path, texts, monkeypatch):
    from ralm.pipeline import stages

    plan = plan_pipeline(tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, "fp32")
    (train,) = plan.trains
    assert "last" not in train.command  # commands.sh: the call a fresh run makes
    calls = []
    monkeypatch.setattr(stages, "stage_function", lambda words: lambda **given: calls.append(given))
    train.call(resuming=False)
    train.call(resuming=True)
    assert [call["ckpt_path"] for call in calls] == [None, "last"]
    assert calls[0] | {"ckpt_path": "last"} == calls[1]
    resumed = dataclasses.replace(train, arguments=train.arguments.resumed())
    assert resumed.fingerprint == train.fingerprint


def test_a_stage_rendered_with_an_argument_its_function_lacks_fails():
    """The renderer's own check, for arguments built by hand."""
    function = stage_function(("data-gen",))
    with pytest.raises(TypeError, match="data_gen\\(\\) has no parameter candidates"):
        command_line(function, {"candidates": 3}, _option_names(("data-gen",)))


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
    assert train.arguments.trainer.get("precision") == precision
    command = train.command
    assert ("--trainer.precision" in command) == (precision is not None)
    assert _parsed(train)["trainer"].get("precision") == precision


def _keys(plan) -> dict[str, tuple[str, str]]:
    """Each stage's fingerprint and the name of the folder (or file) it writes."""
    return {
        stage.key: (stage.fingerprint, stage.output.relative_to(plan.index.output.parent).parts[0])
        for stage in plan.stages
    }


def test_stage_keys_name_no_place_so_a_moved_or_respelled_run_folder_keeps_them(tmp_path, texts, monkeypatch):
    settings = resolve_scale(True, ScaleOptions(k=3, train_seeds=[0, 1]))
    plan = plan_pipeline(
        tmp_path / "run", texts, "my-lm", "my-encoder", settings, "fp32", thresholds={"bm25-above": 1.25}
    )
    for stage in plan.stages:
        assert stage.places(tmp_path / "run") == [], stage.key
    monkeypatch.chdir(tmp_path)
    relative = PipelineTexts(
        Path(texts.corpus.name),
        Path(texts.train.name),
        {"eval": Path("eval.txt")},
        {},
        texts.exclude,
        texts.train_exclude,
    )
    respelled = plan_pipeline(
        Path("run"), relative, "my-lm", "my-encoder", settings, "fp32", thresholds={"bm25-above": 1.25}
    )
    moved = plan_pipeline(
        tmp_path / "elsewhere" / "moved", texts, "my-lm", "my-encoder", settings, "fp32", {"bm25-above": 1.25}
    )
    assert _keys(respelled) == _keys(plan) == _keys(moved)
    assert len({fingerprint for fingerprint, _ in _keys(plan).values()}) == len(plan.stages)


def test_a_setting_or_an_input_changes_the_keys_of_its_stage_and_of_the_stages_after_it(tmp_path, texts):
    def keys(k: int = 3) -> dict[str, str]:
        settings = resolve_scale(True, ScaleOptions(k=k))
        plan = plan_pipeline(
            tmp_path / "run", texts, "my-lm", "my-encoder", settings, "fp32", thresholds={"bm25-above": 1.25}
        )
        return {stage.key: stage.fingerprint for stage in plan.stages}

    first = keys()
    changed = keys(k=4)  # data-gen's and eval's option: the index stays, and so do the forward rows,
    # which read BM25's top-1 alone (k = 1)
    forwards = ["forward eval continuation", "forward eval future-query"]  # BM25's rows beside the eval
    assert [s for s in first if first[s] != changed[s]] == ["data-gen", "train", "eval"]
    texts.evals["eval"].write_text("other words\n")  # only the evals read it
    assert [s for s in first if first[s] != keys()[s]] == ["eval", *forwards]
    texts.corpus.write_text(
        '{"id": "b", "title": "B", "text": "other words"}\n'
    )  # the index feeds every stage
    assert [s for s in first if first[s] == keys()[s]] == []


def test_the_key_reads_no_command_line(tmp_path, texts, monkeypatch):
    """Renaming an option (or its spelling on the command line) leaves every key as it was."""
    plan = plan_pipeline(
        tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, "fp32", thresholds={"bm25-above": 1.25}
    )
    expected = [stage.fingerprint for stage in plan.stages]

    def no_command_line(*_):
        raise AssertionError("a stage key rendered a command line")

    monkeypatch.setattr("ralm.cli.command_render.command_line", no_command_line)
    monkeypatch.setattr("ralm.pipeline.stages._option_names", no_command_line)
    again = plan_pipeline(
        tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, "fp32", thresholds={"bm25-above": 1.25}
    )
    assert [stage.fingerprint for stage in again.stages] == expected


def test_a_finished_stage_is_found_under_the_name_another_seed_count_gave_it(tmp_path, texts):
    """A one-seed run names its training stage "train", a run of several seeds "train seed 0": the same
    stage (same fingerprint, same folder), reused."""
    run_dir = tmp_path / "run"
    one = plan_pipeline(run_dir, texts, "my-lm", "my-encoder", resolve_scale(True, ScaleOptions()), "fp32")
    two = plan_pipeline(
        run_dir, texts, "my-lm", "my-encoder", resolve_scale(True, ScaleOptions(train_seeds=[0, 1])), "fp32"
    )
    (train,), (seed0, seed1) = one.trains, two.trains
    assert (train.key, seed0.key) == ("train", "train seed 0") and train.output == seed0.output
    train.output.mkdir(parents=True)
    entry = {"fingerprint": train.fingerprint, "command": train.command, "seconds": 1.0, "reused": False}
    (run_dir / "stages.json").write_text(json.dumps({"train": entry}))
    runner = StageRunner(run_dir)
    assert runner.finished(seed0) == "train" and runner.finished(seed1) is None


def test_the_pipeline_never_imports_the_cli():
    """Planning every stage and rendering its command (commands.sh) reads the command table, not the CLI
    (ralm.cli.main)."""
    code = (
        "import sys, tempfile\n"
        "from pathlib import Path\n"
        "import ralm.pipeline.runner, ralm.pipeline.dtype_check\n"
        "from ralm.pipeline.plan import plan_pipeline\n"
        "from ralm.pipeline.scale import QUICK\n"
        "from ralm.pipeline.texts import PipelineTexts\n"
        "folder = Path(tempfile.mkdtemp())\n"
        "(folder / 'a.txt').write_text('words')\n"
        "texts = PipelineTexts(folder / 'a.txt', folder / 'a.txt', {'e': folder / 'a.txt'}, {})\n"
        "plan = plan_pipeline(folder / 'run', texts, 'lm', 'encoder', QUICK, 'fp32', {'bm25-above': 1.0})\n"
        "print([len(stage.command) for stage in plan.stages])\n"
        "assert 'ralm.cli.main' not in sys.modules, 'ralm.cli.main imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # index, data-gen, train, eval and the two forward-looking rows: each rendered
    assert len(done.stdout.strip().split(",")) == 6


def test_a_key_that_still_names_a_place_in_the_run_folder_is_refused(tmp_path, texts):
    run_dir = tmp_path / "run"
    plan = plan_pipeline(run_dir, texts, "my-lm", "my-encoder", QUICK, "fp32")
    unkeyed = dataclasses.replace(plan.data_gen, identities={})  # the index by its path, not its stage
    assert str(plan.index.output) in unkeyed.places(run_dir)
    with pytest.raises(RuntimeError, match="its key names places in the run folder"):
        StageRunner(run_dir).run(unkeyed)


def _main_keyed(value, identities: dict[str, str]):
    """A value as main keyed it before the conditions were typed (then `compare` was their text): paths by
    their identities, also inside a string (a reranker folder in ``NAME=FOLDER``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # An option-group field added later (``added_later``) and left at its default: as main had none.
        return {
            f.name: _main_keyed(getattr(value, f.name), identities)
            for f in dataclasses.fields(value)
            if not left_at_default(value, f)
        }
    if isinstance(value, dict):
        return {str(k): _main_keyed(v, identities) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_main_keyed(v, identities) for v in value]
    if isinstance(value, str | Path):
        text = str(value)
        if text in identities:
            return identities[text]
        for path in sorted((p for p in identities if os.sep in p), key=len, reverse=True):
            text = text.replace(path, identities[path])
        return text
    return value


def _main_fingerprint(stage: StagePlan) -> str:
    """The stage's key as main computed it, from the arguments main passed (`compare` as its text)."""
    unkeyed = stage.arguments.unkeyed_now()  # a later field left at its default: as main had no such field
    arguments = {name: value for name, value in stage.arguments.keywords().items() if name not in unkeyed}
    if arguments.get("compare") is not None:
        arguments["compare"] = ",".join(c.spec for c in arguments["compare"])
    keyed = _main_keyed(arguments, dict(stage.identities))
    return fingerprint({"command": list(stage.words), "arguments": keyed})


def test_the_eval_stage_takes_typed_conditions_keyed_and_rendered_as_their_text(tmp_path, texts):
    """The eval's conditions are Condition objects; its key is the key of their --compare text (so finished
    run folders stay), and commands.sh spells them as that text, byte for byte."""
    settings = resolve_scale(True, ScaleOptions(k=3, train_seeds=[0, 1]))
    plan = plan_pipeline(
        tmp_path / "run", texts, "my-lm", "my-encoder", settings, "fp32", thresholds={"bm25-above": 1.25}
    )
    (evaluate,) = plan.evals
    conditions = evaluate.arguments.compare
    assert isinstance(conditions, list) and conditions and all(isinstance(c, Condition) for c in conditions)
    seed0, seed1 = (str(train.output) for train in plan.trains)
    text = (
        "no-retrieval,no-retrieval-matched,bm25,random,zero-shot,bm25-above=1.25,"
        f"trained-seed0={seed0},trained-seed1={seed1},no-lm-seed0={Path(seed0).parent / 'reranker-no-lm'},"
        f"no-lm-seed1={Path(seed1).parent / 'reranker-no-lm'},oracle,oracle-or-none"
    )
    command = evaluate.command
    assert command[command.index("--compare") + 1] == text
    assert [c for c in conditions if c.model] == [
        Condition("trained", "trained-seed0", model=seed0),
        Condition("trained", "trained-seed1", model=seed1),
        Condition("trained", "no-lm-seed0", model=str(Path(seed0).parent / "reranker-no-lm")),
        Condition("trained", "no-lm-seed1", model=str(Path(seed1).parent / "reranker-no-lm")),
    ]
    for stage in plan.stages:
        assert stage.fingerprint == _main_fingerprint(stage), stage.key
    # A reranker folder is keyed by the stage that trains it, not by where it is.
    keyed = keyed_arguments(evaluate.arguments.keywords(), evaluate.written, evaluate.identities)
    assert str(tmp_path) not in keyed["compare"] and plan.trains[0].fingerprint in keyed["compare"]


def test_the_bf16_check_passes_typed_conditions_too(tmp_path, texts, monkeypatch):
    from ralm.pipeline import dtype_check

    plan = plan_pipeline(
        tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, "bf16", thresholds={"bm25-above": 1.25}
    )
    (evaluate,) = plan.evals
    ran = []
    monkeypatch.setattr(dtype_check, "read_config", lambda _: {"dtype": "bfloat16", "max_length": 512})
    monkeypatch.setattr(dtype_check, "dtype_change", lambda *_: {})
    runner = type("Runner", (), {"run": lambda self, stage: ran.append(stage) or 0.0})()
    dtype_check.check_dtype(runner, evaluate, QUICK, {})
    (stage,) = ran
    assert stage.arguments.compare == [
        Condition("no-retrieval", "no-retrieval"),
        Condition("bm25", "bm25"),
    ]
    assert stage.command[stage.command.index("--compare") + 1] == "no-retrieval,bm25"
    assert stage.fingerprint == _main_fingerprint(stage)


PINNED_KEYS = {
    "index": "fe26c3a6a4c6375a914d9b4c13a77c5498d14a54c554251e00d69ae29e5501ee",
    "data-gen": "dde951abdd367af90913dd3c51090bca2ab81f0c23ddd5ffdd55c043b5f0c966",
    "train": "9033b4ade4265575b0d70a28a7145a7bbe8d2d8818f5988aee9333f870a6d604",
    "eval": "0206dcd6812f76b256c2b4be645104ae03e99ec1190a593cc025db77dd5b51b5",
    "forward eval continuation": "56f3cb2cda733f238eac580a6bbad3637949b5b0c0bd0d8484a699f0da20303b",
    "forward eval future-query": "47d944335ccf7dad073f9d92f6b1b4dec4ea75220d53cccad30f4636179b1c37",
}
"""Every stage's key for the `texts` fixture at the quick scale. The index's and data-gen's are ralm
0.2.0's; train's (and so the eval's, which reads the trained reranker) changed twice: with the training
settings `optim.rank_weight` and `optim.rank_temperature`, and with `no_lm_export` (each seed's second export,
the best rule with no LM at rerank time, a row of the table): a run folder finished earlier reuses its index
and labels and retrains. The forward-looking rows' stages came later, beside the others' unchanged keys,
and changed once: from one-condition tables (which scored each window's no-passage row too) to plain runs
of BM25's top-1."""


def test_stage_keys_stay_those_of_finished_run_folders(tmp_path, texts):
    """A run folder finished by an earlier version is reused only while each stage's key is the same: a
    change to how arguments are passed or typed must leave these values (and the folder names) alone.
    They change only with a stage's settings themselves (a new option, another default), and then every
    finished run recomputes."""
    plan = plan_pipeline(
        tmp_path / "run", texts, "my-lm", "my-encoder", QUICK, "fp32", thresholds={"bm25-above": 1.25}
    )
    assert {stage.key: stage.fingerprint for stage in plan.stages} == PINNED_KEYS
    (evaluate,) = plan.evals
    assert evaluate.output.parent.name == f"eval-eval-{PINNED_KEYS['eval'][:8]}"
    assert Path(evaluate.arguments.retrieval_cache).name == "retrieval-cache-67c9531b.jsonl"


def test_an_option_group_field_added_later_is_keyed_only_when_set():
    """``added_later`` (``LMOptions.compile``): left at its default, a stage's key holds no trace of the field
    (the pinned keys above stay); set, the key holds it, so a compiled run never reuses an eager run's
    folder."""
    plain = keyed_arguments({"lm": LMOptions(model="m")}, (), {})
    compiled = keyed_arguments({"lm": LMOptions(model="m", compile=True)}, (), {})
    assert "compile" not in plain["lm"]
    assert compiled["lm"] == {**plain["lm"], "compile": True}


def test_the_passage_form_reaches_data_gen_and_eval_and_keys_them_only_when_set(tmp_path, texts):
    """`--passage-form continuation` is a data-gen and an eval argument (commands.sh spells it); left at the
    paper's `retrieved`, the stages keep the keys (and folders) they had before the option existed."""
    run = tmp_path / "run"
    plain = plan_pipeline(run, texts, "my-lm", "my-encoder", QUICK, "fp32", thresholds={"bm25-above": 1.0})
    settings = resolve_scale(True, ScaleOptions(passage_form="continuation"))
    cont = plan_pipeline(run, texts, "my-lm", "my-encoder", settings, "fp32", thresholds={"bm25-above": 1.0})
    for before, after in ((plain.data_gen, cont.data_gen), *zip(plain.evals, cont.evals, strict=True)):
        assert after.arguments.passage_form == "continuation" and before.arguments.passage_form == "retrieved"
        assert "--passage-form continuation" in " ".join(after.command)
        assert "--passage-form" not in " ".join(before.command)
        assert after.fingerprint != before.fingerprint
        assert before.fingerprint == _main_fingerprint(before)  # the key main gave these arguments
    assert cont.index.fingerprint == plain.index.fingerprint  # the index does not read it


def test_the_forward_rows_put_the_other_passage_form_beside_the_table(tmp_path, texts):
    """A run in one passage form gets BM25's top-1 in the other beside its table (the table's BM25 row is its
    own form) and the future-query bound in its own form; each row is one BM25 candidate per window, one LM
    input per retrieving window."""
    run = tmp_path / "run"
    for form, other in (("retrieved", "continuation"), ("continuation", "retrieved")):
        settings = resolve_scale(True, ScaleOptions(passage_form=form))
        plan = plan_pipeline(
            run, texts, "my-lm", "my-encoder", settings, "fp32", thresholds={"bm25-above": 1.0}
        )
        rows = {row.slug: stage for _, row, stage in plan.forwards}
        assert list(rows) == [other, "future-query"]
        assert rows[other].arguments.passage_form == other
        assert rows["future-query"].arguments.passage_form == form
        assert {stage.arguments.retrieval.k for stage in rows.values()} == {1}
        # a plain run of BM25's top-1, no table: it scores no no-passage row (the set's table holds it;
        # tests/test_ppl_compare_table.py counts the rows at the LM)
        assert all(s.arguments.compare is None and "--compare" not in s.command for s in rows.values())
        assert {stage.output.name for stage in rows.values()} == {"results.json"}
        assert [row.slug for row in forward_rows(form)] == list(rows)


def test_the_stacked_option_trains_from_the_zero_shot_rule_and_keys_the_training_only_when_set(
    tmp_path, texts
):
    """`--stacked true`: every seed's `ralm train` starts from the LM's zero-shot rule instead of BM25's, its
    scalars fixed (commands.sh spells the flags); left false, the train stage keeps its key (and folder)."""
    run = tmp_path / "run"
    plain = plan_pipeline(run, texts, "my-lm", "my-encoder", QUICK, "fp32", thresholds={"bm25-above": 1.0})
    settings = resolve_scale(True, ScaleOptions(stacked=True))
    stacked = plan_pipeline(
        run, texts, "my-lm", "my-encoder", settings, "fp32", thresholds={"bm25-above": 1.0}
    )
    for before, after in zip(plain.trains, stacked.trains, strict=True):
        assert (before.arguments.bm25_prior, before.arguments.zero_shot_prior) == (True, False)
        assert (after.arguments.bm25_prior, after.arguments.zero_shot_prior) == (False, True)
        assert "--zero-shot-prior true" in " ".join(after.command)
        assert "--zero-shot-prior" not in " ".join(before.command)
        assert (before.arguments.optim.prior_lr, after.arguments.optim.prior_lr) == (1e-2, 0.0)
        assert "--prior-lr 0.0" in " ".join(after.command)
        assert after.fingerprint != before.fingerprint
        assert before.fingerprint == _main_fingerprint(before)
    assert stacked.data_gen.fingerprint == plain.data_gen.fingerprint  # the labels are the same


def test_the_related_set_and_its_forward_rows_score_related_eval_tokens_and_the_others_eval_tokens(tmp_path):
    """The full demo scores 16,384 tokens of the related set (the text the corpus retells) and 4,096 of the
    others; its forward-looking rows pair window by window with its table, so they score the same text. A
    user's run (one set, ``eval``) and the quick demo score eval_tokens everywhere."""
    for name in ("corpus.jsonl", "train.jsonl", "related.txt", "unrelated.txt"):
        (tmp_path / name).write_text('{"id": "a", "title": "A", "text": "words"}\n')
    sets = {"related": tmp_path / "related.txt", "unrelated": tmp_path / "unrelated.txt"}
    texts = PipelineTexts(tmp_path / "corpus.jsonl", tmp_path / "train.jsonl", sets, {})
    expected = {False: {"related": 16384, "unrelated": 4096}, True: {"related": 2560, "unrelated": 2560}}
    for quick, tokens in expected.items():
        settings = resolve_scale(quick, ScaleOptions())
        plan = plan_pipeline(tmp_path / "run", texts, "lm", "enc", settings, "fp32", thresholds={})
        evals = {name: stage.arguments.max_tokens for name, stage in zip(sets, plan.evals, strict=True)}
        forwards = {name: stage.arguments.max_tokens for name, _, stage in plan.forwards}
        assert evals == forwards == tokens
        assert f"--max-tokens {tokens['related']}" in " ".join(plan.evals[0].command)
    settings = resolve_scale(False, ScaleOptions(related_eval_tokens=8192))
    assert settings.eval_tokens_of("related") == 8192 and settings.eval_tokens_of("eval") == 4096
