"""Loading a frozen LM: folders, run-time device/dtype, tokenizer round trips, GGUF conversion cache."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch

from ralm.errors import RalmInputError
from ralm.lm.loading import load_lm, resolve_device, resolve_dtype


def test_load_folder_is_frozen_with_runtime_device_and_dtype(tiny_lm_dir):
    lm = load_lm(tiny_lm_dir)
    expected_device = "cuda" if torch.cuda.is_available() else "cpu"
    assert lm.device.type == expected_device
    assert lm.dtype == resolve_dtype("auto", lm.device)
    assert not lm.model.training
    assert all(not p.requires_grad for p in lm.model.parameters())
    assert lm.context_length == 256  # n_positions of the tiny GPT-2 config
    assert lm.model.config._attn_implementation == "sdpa"


def test_encode_adds_no_special_tokens_and_decodes_back(tiny_lm_dir):
    lm = load_lm(tiny_lm_dir, device="cpu", dtype="float32")
    text = "Return a new list containing all items from the iterable."
    ids = lm.encode(text)
    eos = lm.tokenizer.eos_token_id
    assert ids and eos not in ids
    assert lm.decode(ids) == text
    assert lm.encode_batch([text, "x"]) == [ids, lm.encode("x")]


def test_dtype_override(tiny_lm_dir):
    lm = load_lm(tiny_lm_dir, device="cpu", dtype="bfloat16")
    assert lm.dtype == torch.bfloat16 and next(lm.model.parameters()).dtype == torch.bfloat16


def test_dtype_config_loads_what_the_model_config_names_as_eval_lm_does(tiny_lm_dir, tmp_path):
    """eval_lm.py loads with config.torch_dtype (fp16 for OPT); none named (GPT-2) is fp32."""
    import json
    import shutil

    folder = tmp_path / "fp16-config"
    shutil.copytree(tiny_lm_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("dtype", None), config.pop("torch_dtype", None)
    (folder / "config.json").write_text(json.dumps(config))
    assert load_lm(folder, device="cpu", dtype="config").dtype == torch.float32
    (folder / "config.json").write_text(json.dumps({**config, "torch_dtype": "float16"}))
    assert load_lm(folder, device="cpu", dtype="config").dtype == torch.float16
    assert load_lm(folder, device="cpu").dtype == torch.float32  # auto keeps ralm's rule


def test_resolve_auto_on_cpu_is_fp32():
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(RalmInputError, match="--dtype"):
        resolve_dtype("int3")


def test_folder_without_config_is_input_error(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(RalmInputError, match="config.json"):
        load_lm(tmp_path)
    with pytest.raises(RalmInputError, match="not found"):
        load_lm(tmp_path / "missing")
    with pytest.raises(RalmInputError, match="GGUF file not found"):
        load_lm(tmp_path / "missing.gguf")


@pytest.mark.slow
def test_gguf_is_converted_once_and_reloads_with_identical_logits(smollm2_gguf, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("RALM_CACHE", str(tmp_path))
    lm = load_lm(smollm2_gguf, device="cpu", dtype="float32")
    cached = list((tmp_path / "gguf").iterdir())
    assert len(cached) == 1 and (cached[0] / "config.json").is_file()
    assert json.loads((cached[0] / "config.json").read_text()).get("quantization_config") is None
    assert lm.context_length >= 2048 and lm.tokenizer.bos_token_id not in lm.encode("In the beginning")
    # SmolLM2's tokenizer adds no special tokens: its inputs are the same in both --special-tokens modes.
    assert lm.special_prefix == () and lm.tokenizer("In")["input_ids"] == lm.encode("In")

    # The cached folder gives the same logits as dequantising the GGUF file directly.
    direct = AutoModelForCausalLM.from_pretrained(
        smollm2_gguf.parent, gguf_file=smollm2_gguf.name, dtype=torch.float32
    ).eval()
    ids = torch.tensor([lm.encode("In the beginning God created the heaven and the earth.")])
    with torch.no_grad():
        torch.testing.assert_close(lm.model(ids).logits, direct(ids).logits, rtol=1e-5, atol=1e-4)

    # A second load finds the cache (no second folder, no temporary leftovers).
    load_lm(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name, device="cpu")
    assert [p.name for p in (tmp_path / "gguf").iterdir()] == [cached[0].name]


_LOAD_IN_A_FRESH_PROCESS = """
import sys
from ralm.lm.loading import load_lm
assert "deepspeed" not in sys.modules
lm = load_lm(sys.argv[1], device="cpu", dtype="float32")
print("deepspeed imported:", "deepspeed" in sys.modules, flush=True)
print("logits:", lm.model(**lm.tokenizer("import json", return_tensors="pt")).logits.sum().item())
"""


def test_first_gguf_load_piped_to_a_file_is_one_line_with_no_bars_and_no_deepspeed(tiny_gguf, tmp_path):
    """On a fresh cache the GGUF is de-quantised and saved: piped output gets one line, not the libraries'
    carriage-return bars ("Converting and de-quantizing", "Writing model shards"), and saving does not
    import DeepSpeed (installed by the dev extra) with its "Setting accelerator" banner."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RALM_CACHE": str(tmp_path / "cache"), "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = []
    for _ in range(2):  # the first load converts, the second finds the cache
        log = tmp_path / f"log{len(runs)}.txt"
        with open(log, "w") as out:
            done = subprocess.run(
                [sys.executable, "-c", _LOAD_IN_A_FRESH_PROCESS, str(tiny_gguf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=300,
            )
        text = log.read_text()
        assert done.returncode == 0, text
        runs.append(text)
    first, second = runs
    assert "\r" not in first and "accelerator" not in first, first
    lines = first.splitlines()
    assert "deepspeed imported: False" in lines
    loaded = [line for line in lines if line.startswith("loaded ")]
    assert len(loaded) == 1 and len(lines) == 3, first
    assert re.fullmatch(
        r"loaded Tiny-Llama-Instruct \(GGUF Q4_1, de-quantised and cached as fp32\) in [\d.]+ s; "
        r"runs as fp32 on cpu",
        loaded[0],
    )
    assert "\r" not in second
    assert re.search(
        r"^loaded Tiny-Llama-Instruct \(GGUF Q4_1, de-quantised fp32 copy from the cache\)", second, re.M
    )
    # The cached copy gives the converted model's logits.
    assert second.splitlines()[-1] == lines[-1]


def test_the_load_line_reads_the_gguf_metadata_once_per_cached_copy(tiny_gguf, tmp_path, monkeypatch):
    """Parsing a GGUF's metadata for the load line took 5-16 s for Gemma's: the cached copy keeps the name."""
    import gguf

    from ralm.lm.loading import GGUF_NAME_FILE, gguf_name

    monkeypatch.setenv("RALM_CACHE", str(tmp_path))
    load_lm(tiny_gguf, device="cpu", dtype="float32")
    (folder,) = (tmp_path / "gguf").iterdir()
    assert tuple(json.loads((folder / GGUF_NAME_FILE).read_text())) == gguf_name(tiny_gguf)

    def unreadable(*args, **kwargs):
        raise AssertionError("the GGUF was parsed again")

    monkeypatch.setattr(gguf, "GGUFReader", unreadable)
    lines = []
    monkeypatch.setattr(
        sys, "stderr", type("Sink", (), {"write": lines.append, "flush": lambda self: None})()
    )
    load_lm(tiny_gguf, device="cpu", dtype="float32")
    assert "".join(lines).startswith(
        "loaded Tiny-Llama-Instruct (GGUF Q4_1, de-quantised fp32 copy from the cache)"
    )


@pytest.mark.slow
def test_gemma_inputs_start_with_its_bos(gemma3_gguf):
    """The demo's LM: Gemma's tokenizer puts its BOS first by default, so every passage and, by default,
    every input without one starts with it (ralm.lm.special_tokens)."""
    lm = load_lm(gemma3_gguf, device="cpu", dtype="float32")
    bos = lm.tokenizer.bos_token_id
    assert lm.tokenizer("In the beginning")["input_ids"] == [bos, *lm.encode("In the beginning")]
    assert lm.special_prefix == (bos,) and lm.lead == (bos,)
    assert lm.encode_passages(["In the beginning"])[0][0] == bos
