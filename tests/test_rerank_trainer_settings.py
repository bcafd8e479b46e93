"""`ralm train`'s trainer group is pl.Trainer's own signature: --print_config shows every setting with the
value ralm uses, a setting given on the command line reaches the Trainer, ralm's own ones are refused."""

from __future__ import annotations

import dataclasses
import inspect

import lightning.pytorch as pl
import pytest
import yaml

from ralm.cli.command_args import parse
from ralm.errors import RalmInputError
from ralm.train.fit import NOT_MODULE_ARGUMENTS, build_trainer, module_hparams, resolve_hardware
from ralm.train.lit_module import RerankerModule
from ralm.train.settings import (
    TRAINER_LINKS,
    TRAINER_SKIPPED,
    EncoderOptions,
    LoaderOptions,
    OptimOptions,
    trainer_settings,
)
from ralm.train.train_command import build_parser, main


def test_print_config_shows_every_trainer_setting_with_ralms_values(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--print_config"])
    assert exit_.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    every = set(inspect.signature(pl.Trainer.__init__).parameters) - {"self"}
    # ralm builds the skipped ones; max_steps is optim.max_steps (linked: the LR schedule's length too)
    assert set(printed["trainer"]) == every - set(TRAINER_SKIPPED) - set(TRAINER_LINKS)
    assert set(TRAINER_SKIPPED) | set(TRAINER_LINKS) <= every  # the skip list names real arguments
    trainer = printed["trainer"]
    assert trainer["max_epochs"] == 1 and trainer["num_sanity_val_steps"] == 0
    assert trainer["use_distributed_sampler"] is False and trainer["gradient_clip_val"] == 1.0
    assert trainer["log_every_n_steps"] == 50 and trainer["enable_model_summary"] is False
    assert trainer["deterministic"] is None and trainer["accelerator"] == "auto"  # Lightning's own defaults
    assert "accelerator" not in printed["run"] and "accumulate" not in printed["optim"]  # not written twice


def test_a_trainer_option_on_the_command_line_reaches_the_trainer(tmp_path):
    argv = [
        "--data",
        "d",
        "--output",
        str(tmp_path),
        "--accelerator",
        "cpu",
        "--devices",
        "1",
        "--max-steps",
        "6",
        "--warmup-steps",
        "1",
        "--val-every",
        "2",
        "--trainer.limit_val_batches",
        "0.5",
        "--log-every-n-steps",
        "3",
        "--gradient-clip-val",
        "0.5",
        "--accumulate-grad-batches",
        "2",
        "--precision",
        "bf16-mixed",
        "--reload_dataloaders_every_n_epochs",
        "4",
    ]
    _, init = parse(build_parser(), argv)
    settings = trainer_settings(init.trainer.as_dict(), init.optim)
    accelerator, precision = resolve_hardware(settings)
    hardware = {"accelerator": accelerator, "precision": precision, "strategy": settings["strategy"]}
    trainer = build_trainer(init.run, settings, hardware, str(tmp_path), [], [])
    assert trainer.limit_val_batches == 0.5 and trainer.reload_dataloaders_every_n_epochs == 4
    assert trainer.log_every_n_steps == 3 and trainer.gradient_clip_val == 0.5
    assert trainer.accumulate_grad_batches == 2 and trainer.precision == "bf16-mixed"
    assert trainer.max_steps == 6 and trainer.max_epochs == 1 and trainer.num_sanity_val_steps == 0
    assert trainer.val_check_interval == 4  # run.val_every optimizer steps, in micro-batches


def test_building_the_trainer_prints_no_lightning_banner(tmp_path, caplog):
    """Lightning's info banners ("GPU available: ...", the litlogger tip) would sit in every piped log of
    `ralm train` and `ralm demo`; ralm's own lines say what matters. Its warnings still show."""
    import logging

    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.pytorch.accelerators.cuda"):
        logging.getLogger(name).setLevel(logging.INFO)  # as a fresh process has them
    _, init = parse(build_parser(), ["--data", "d", "--output", str(tmp_path), "--accelerator", "cpu"])
    settings = trainer_settings(init.trainer.as_dict(), init.optim)
    hardware = {"accelerator": "cpu", "precision": "32-true", "strategy": settings["strategy"]}
    with caplog.at_level(logging.INFO):  # what would reach a log (pytest's handler stands in for Lightning's)
        build_trainer(init.run, settings, hardware, str(tmp_path), [], [])
    text = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    assert "GPU available" not in text and "litlogger" not in text, text


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("--out-dir", "--output"),
        ("--run.devices", "--trainer.devices"),
        ("--log-every", "--log-every-n-steps"),
        ("--grad-clip", "--gradient-clip-val"),
        ("--progress-bar", "--enable-progress-bar"),
        ("--max-length", "--max-pair-tokens"),  # the LM's input elsewhere; here the reranker's pair
        ("--encoder.max-length", "--encoder.max-pair-tokens"),
    ],
)
def test_a_former_option_name_is_refused_naming_the_new_one(old, new, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--data", "d", old, "1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert old in err and new in err


def test_trainer_settings_from_python_keep_ralms_own():
    optim = OptimOptions(max_steps=8, warmup_steps=2)
    settings = trainer_settings({"devices": 2, "deterministic": True}, optim)
    assert settings["devices"] == 2 and settings["max_steps"] == 8 and settings["max_epochs"] == 1
    assert trainer_settings({"precision": "auto"}, optim)["precision"] is None  # ralm's rule
    with pytest.raises(RalmInputError, match="trainer.callbacks: set by ralm"):
        trainer_settings({"callbacks": []}, optim)
    with pytest.raises(RalmInputError, match="trainer.max_steps=9: it is optim.max_steps"):
        trainer_settings({"max_steps": 9}, optim)
    with pytest.raises(RalmInputError, match="trainer.fast_dev_run=True"):
        trainer_settings({"fast_dev_run": True}, optim)


def test_constraints_live_in_the_types():
    with pytest.raises(
        RalmInputError, match=r"--batch-size \(LoaderOptions.batch_size\): must be > 0, got 0"
    ):
        LoaderOptions(batch_size=0)
    with pytest.raises(RalmInputError, match="val_fraction.*got 1.5"):
        LoaderOptions(val_fraction=1.5)
    with pytest.raises(RalmInputError, match="optim.warmup_steps=5: must be between 0 and max_steps"):
        OptimOptions(warmup_steps=5, max_steps=2)
    with pytest.raises(RalmInputError, match="encoder.max_prefix_tokens=600"):
        EncoderOptions(max_prefix_tokens=600)


def test_the_modules_keyword_arguments_are_the_settings_fields_of_their_names():
    hparams = module_hparams(
        EncoderOptions(name="enc"),
        OptimOptions(lr=3e-4),
        abstain=True,
        bm25_prior=False,
        zero_shot_prior=False,
    )
    accepted = set(inspect.signature(RerankerModule.__init__).parameters) - {"self"}
    # the BM25 standardisation and the starts (threshold rule, zero-shot rule) come from the data
    from_data = {"bm25_top_mean", "bm25_top_std", "abstain_anchor", "abstain_init", "zero_shot_init"}
    assert set(hparams) == accepted - from_data
    assert hparams["encoder_name"] == "enc" and hparams["lr"] == 3e-4 and hparams["abstain"] is True


def test_a_field_the_module_cannot_place_is_an_error_not_dropped():
    """A new option the module has no argument for would change nothing in the run and be missing from every
    checkpoint: module_hparams names it instead of dropping it."""

    @dataclasses.dataclass
    class WiderOptimOptions(OptimOptions):
        label_smoothing: float = 0.1

    with pytest.raises(
        TypeError, match=r"WiderOptimOptions\.label_smoothing is not a keyword argument of RerankerModule"
    ):
        module_hparams(EncoderOptions(name="enc"), WiderOptimOptions())
    with pytest.raises(TypeError, match=r"flag\.lr is given twice"):
        module_hparams(EncoderOptions(name="enc"), OptimOptions(), lr=1.0)
    # the one listed field reaches the module under its other name
    assert "EncoderOptions.name" in NOT_MODULE_ARGUMENTS
    assert module_hparams(EncoderOptions(name="enc"), OptimOptions())["encoder_name"] == "enc"


def test_precision_auto_is_ralms_rule_and_accumulation_must_be_a_positive_count(capsys):
    from ralm.cli.command_args import normalize_argv

    parser = build_parser()
    argv = ["--data", "d", "--output", "o", "--precision", "auto", "--max-steps", "10", "--warmup-steps", "1"]
    cfg = parser.parse_args(normalize_argv(parser, argv))
    optim = OptimOptions(max_steps=10, warmup_steps=1)
    assert trainer_settings(cfg.trainer.as_dict(), optim)["precision"] is None  # resolved at run time
    with pytest.raises(RalmInputError, match=r"^--accumulate-grad-batches: must be > 0, got 0$"):
        trainer_settings({"accumulate_grad_batches": 0}, optim)
