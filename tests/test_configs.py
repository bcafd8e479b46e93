"""Every shipped YAML under configs/ parses with its command's own parser (the signature is the schema)."""

import re
from pathlib import Path

import pytest

from ralm.cli.command_args import normalize_argv
from ralm.cli.main import COMMANDS, load_command

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
# A folder is named after its command's words joined by "_" (configs/eval_ppl/ for `ralm eval ppl`).


def _command_for(folder: str) -> str:
    for name in COMMANDS:
        if name.replace(" ", "_").replace("-", "_") == folder.replace("-", "_"):
            return name
    raise AssertionError(f"configs/{folder}/ matches no command in ralm.cli.main.COMMANDS")


YAMLS = sorted(CONFIGS.glob("*/*.yaml"))


def test_configs_exist():
    assert YAMLS, "configs/ ships no YAML"


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_config_parses_with_its_command(path):
    parser = load_command(_command_for(path.parent.name)).build_parser()
    cfg = parser.parse_args(normalize_argv(parser, ["--config", str(path)]))
    # Every key in the file must be a known option (jsonargparse rejects unknown keys), and the parsed
    # namespace must carry the file's values: a group's fields under their dotted keys (or written by their
    # leaf, `index: idx`), a shorthand's value (`lm: gpt2`) in the field it stands for (`lm.model`).
    import yaml

    names = parser.ralm_option_names
    for key, value in _leaf_values(yaml.safe_load(path.read_text())):
        if key in names.shorthands:
            key = f"{key}.{names.shorthands[key]}"
        elif key not in names.keys:
            key = names.leaves.get(key, key)
        assert cfg[key] == value or str(cfg[key]) == str(value), f"{path}: {key}"


def _leaf_values(values: dict, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted key, value) of every non-mapping value in a YAML mapping."""
    found = []
    for key, value in values.items():
        if isinstance(value, dict):
            found += _leaf_values(value, f"{prefix}{key}.")
        else:
            found.append((f"{prefix}{key}", value))
    return found


def test_train_configs_say_what_their_held_out_shares_count():
    """loader.val_fraction and loader.decision_fraction are shares of the prefixes, each taken as whole
    documents (LoaderOptions): a comment that calls either a share of documents misstates what is held out."""
    for path in sorted((CONFIGS / "train").glob("*.yaml")):
        text = path.read_text()
        assert not re.search(r"\d+% of (the )?(source )?documents", text), path.name
        for key in ("val_fraction", "decision_fraction"):
            line = next((x for x in text.splitlines() if x.strip().startswith(f"{key}:")), "")
            assert "share of prefixes" in line and "whole documents" in line, f"{path.name}: {key}: {line!r}"
