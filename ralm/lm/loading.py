"""Load a frozen causal LM (Hugging Face id, local folder, or GGUF file) with device and dtype chosen at run
time.

A GGUF file (the offline SmolLM2 of docs/assets.md) is dequantised once and cached as an ordinary Hugging Face
folder under ``$RALM_CACHE`` (default ``~/.cache/ralm``), keyed by the file's SHA-256, so later loads take
seconds instead of the 12-18 s dequantisation. Nothing here assumes GPT-2: BOS, padding and vocabulary all
come from the model's own config and tokenizer.

A load writes one line to stderr ("loaded SmolLM2-135M-Instruct (GGUF Q4_1, de-quantised and cached as
fp32) in 14 s; runs as fp32 on cpu"); piped to a file, the libraries' own bars are off (``ralm.progress``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ralm.atomic_files import publish_first, write_text_atomic
from ralm.devices import resolve_device, resolve_dtype
from ralm.errors import RalmInputError
from ralm.fingerprints import file_sha256
from ralm.lm import hf_forward
from ralm.lm.special_tokens import SpecialTokens, check_special_tokens, input_lead
from ralm.progress import library_bars_quiet_in_logs, module_bar_quiet_in_logs, save_pretrained_quietly


def default_special_prefix(tokenizer) -> tuple[int, ...]:
    """The special tokens the tokenizer puts before a text when it encodes with its defaults (BOS for Gemma,
    LLaMA and OPT; nothing for GPT-2 and SmolLM2): the ids that ``tokenizer(text)`` holds before
    ``tokenizer(text, add_special_tokens=False)``. Read off two probe texts rather than assumed from
    ``bos_token_id``, so a tokenizer that adds more than a BOS (or adds nothing although it names a BOS) is
    taken as it is; anything a tokenizer appends after the text is not an input's start and is ignored. Where
    the text's own ids differ between the two encodings, the leading special ids count; probes that disagree
    keep their common start (with a warning)."""
    specials = set(getattr(tokenizer, "all_special_ids", None) or ())
    prefixes = []
    for probe in ("a", "The end."):
        with_specials = list(tokenizer(probe, verbose=False)["input_ids"])
        plain = list(tokenizer(probe, add_special_tokens=False, verbose=False)["input_ids"])
        starts = range(len(with_specials) - len(plain) + 1)
        at = next((i for i in starts if with_specials[i : i + len(plain)] == plain), None)
        if at is None:
            at = next((i for i, t in enumerate(with_specials) if t not in specials), len(with_specials))
        prefixes.append(tuple(with_specials[:at]))
    first, second = prefixes
    common = 0
    while common < min(len(first), len(second)) and first[common] == second[common]:
        common += 1
    if first != second:
        print(
            f"warning: the tokenizer puts {list(first)} and {list(second)} before two texts; every input "
            f"starts with their common part {list(first[:common])}",
            file=sys.stderr,
        )
    return first[:common]


def config_dtype(folder: str) -> torch.dtype:
    """The dtype the model's config names (``dtype``, formerly ``torch_dtype``), as eval_lm.py loads a model;
    fp32 when the config names none (GPT-2)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder)
    named = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if named is None:
        return torch.float32
    return named if isinstance(named, torch.dtype) else getattr(torch, str(named).removeprefix("torch."))


def _context_length(config: Any) -> int | None:
    """The model's positional limit from its config, under whichever name the architecture uses."""
    for name in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


@dataclass
class FrozenLM:
    """A causal LM in eval mode with gradients off, plus the tokenizer that goes with it: the Hugging Face
    implementation of ``ralm.lm.interface.LanguageModel`` (the only one outside the tests).

    ``context_length`` is the model's own context (callers cap their input at it, e.g. at 1024 as the paper
    did).
    ``encode`` never adds special tokens: In-Context RALM concatenates passage and prefix token lists
    itself, and a BOS in the middle of an input would change what is scored. ``special_prefix`` is what the
    tokenizer puts first by default (a BOS for Gemma, LLaMA, OPT; nothing for GPT-2): every passage starts
    with it, as the authors' eval_lm.py encodes passages (``tokenizer.encode(doc)``, ``encode_passages``).
    ``lead`` is what an input *without* a passage starts with (``special_tokens``, `SPECIAL_TOKENS`): the
    same prefix by default, so that every condition's input starts as the LM expects and conditions differ by
    the passage alone; nothing under ``eval-lm``, where the evaluated text is encoded without special tokens
    as eval_lm.py encodes it (``add_special_tokens=False``), for reproducing its published numbers.
    ``model`` and ``tokenizer`` are for ``ralm.lm`` and the tests; the stages use the protocol's members only.
    """

    model: Any
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    name: str
    context_length: int
    extra: dict = field(default_factory=dict)
    special_prefix: tuple[int, ...] = ()
    special_tokens: SpecialTokens = "every-input"
    compile: bool = False
    """Score through ``torch.compile`` (``LMOptions.compile``); compiled at the first ``logits`` call."""
    _compiled: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        check_special_tokens(self.special_tokens)

    @property
    def lead(self) -> tuple[int, ...]:
        return input_lead(self.special_prefix, self.special_tokens)

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name_or_path", ""))

    @property
    def eos_ids(self) -> set[int]:
        return hf_forward.eos_ids(self.tokenizer, self.model)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` with no special tokens."""
        return list(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` for many texts in one tokenizer call (the fast tokenizers batch in Rust)."""
        if not texts:
            return []
        out = self.tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
        return [list(ids) for ids in out]

    def encode_passages(self, texts: Sequence[str]) -> list[list[int]]:
        """Passages as eval_lm.py encodes them: ``special_prefix`` (a BOS, if the tokenizer adds one)
        first."""
        return [[*self.special_prefix, *ids] for ids in self.encode_batch(texts)]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]] | None:
        """(ids, first character of each token) from the fast tokenizer's offsets of the same encoding."""
        try:
            encoded = self.tokenizer(
                text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
            )
        except (NotImplementedError, ValueError):  # a slow (Python) tokenizer has no offsets
            return None
        return list(encoded["input_ids"]), [start for start, _ in encoded["offset_mapping"]]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` as the tokenizer decodes it (the form queries are made from)."""
        return self.tokenizer.decode(list(ids))

    def logits(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if self.compile and self._compiled is None:
            self._compiled = hf_forward.compiled_for_scoring(self.model, self.device)
        model = self.model if self._compiled is None else self._compiled
        return hf_forward.scored_logits(model, input_ids, positions)

    def start_decoding(self) -> hf_forward.HFDecoding:
        return hf_forward.HFDecoding(self.model)

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])


def compiled_record(model: object) -> dict:
    """The config key a run records when its LM scores through ``torch.compile`` (none otherwise, so eager
    runs' files and resume keys stay as they were)."""
    return {"lm_compiled": True} if getattr(model, "compile", False) else {}


def cache_root() -> Path:
    """Where converted weights are kept: ``$RALM_CACHE`` or ``~/.cache/ralm``."""
    return Path(os.environ.get("RALM_CACHE") or Path.home() / ".cache" / "ralm")


def gguf_cache_folder(gguf_path: Path) -> Path:
    """Where `gguf_path`'s de-quantised copy is kept: named by the file and the start of its SHA-256."""
    return cache_root() / "gguf" / f"{gguf_path.stem}-{file_sha256(gguf_path)[:16]}"


def convert_gguf(gguf_path: Path, target: Path | None = None) -> Path:
    """Dequantise a GGUF file to an fp32 Hugging Face folder once; return the cached folder.

    The folder is written under a temporary name and renamed into place, so a killed conversion leaves
    nothing that a later run would mistake for a finished one, and two concurrent runs cannot mix files.
    """
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise RalmInputError(f"{gguf_path}: GGUF file not found")
    target = target or gguf_cache_folder(gguf_path)
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:  # where transformers 5 de-quantises, with a plain tqdm bar of its own
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        gguf_utils = None
    folder, name = str(gguf_path.parent), gguf_path.name
    with library_bars_quiet_in_logs(), module_bar_quiet_in_logs(gguf_utils):
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The dequantised weights are plain fp32; a stale quantization_config would make from_pretrained
    # try to quantise them again on reload.
    model.config.quantization_config = None
    if getattr(model, "hf_quantizer", None) is not None:  # transformers 5 refuses to save "gguf-quantised"
        model.hf_quantizer = None
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        save_pretrained_quietly(model, tmp)
        tokenizer.save_pretrained(tmp)
        # Losing the race to another process that converted the same file is fine: its folder is kept.
        publish_first(tmp, target, lambda done: (done / "config.json").is_file())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


GGUF_NAME_FILE = "ralm_gguf_name.json"
"""Beside a de-quantised copy: its GGUF's `gguf_name`, read once (parsing a GGUF's metadata, a 262k-token
vocabulary for Gemma, took 5-16 s on a 2-core CPU at every load)."""


def cached_gguf_name(gguf_path: Path, folder: Path) -> tuple[str, str]:
    """`gguf_name` of `gguf_path`, kept in its de-quantised `folder` after the first read."""
    record = folder / GGUF_NAME_FILE
    try:
        name, kind = json.loads(record.read_text())
        return str(name), str(kind)
    except (OSError, ValueError, TypeError):  # not written yet (or damaged): read the GGUF once more
        name, kind = gguf_name(gguf_path)
    try:
        write_text_atomic(str(record), json.dumps([name, kind]))
    except OSError:  # a read-only cache still loads; the name is read again next time
        pass
    return name, kind


def gguf_name(gguf_path: Path) -> tuple[str, str]:
    """(model name, quantisation) for the load line: the file type the GGUF records ("Q4_1"; "" when it
    records none) and the file name without it ("SmolLM2-135M-Instruct")."""
    import gguf

    try:
        field = gguf.GGUFReader(str(gguf_path)).fields.get("general.file_type")
        kind = gguf.LlamaFileType(int(field.contents())).name if field else ""
    except (ValueError, TypeError, OSError):  # an unreadable or unknown file type: the name alone
        kind = ""
    kind = kind.removeprefix("MOSTLY_").removeprefix("ALL_")
    name = (
        re.sub(rf"[._-]{re.escape(kind)}$", "", gguf_path.stem, flags=re.IGNORECASE)
        if kind
        else gguf_path.stem
    )
    return name, kind


def load_line(
    name: str,
    gguf_path: str | None,
    converted: bool,
    dtype: torch.dtype,
    device,
    seconds: float,
    folder: str,
) -> str:
    """The one line a load writes: what was loaded, from where (`folder`: a GGUF's de-quantised copy), how
    long it took, and how it runs."""
    if gguf_path:
        model, kind = cached_gguf_name(Path(gguf_path), Path(folder))
        how = "de-quantised and cached as fp32" if converted else "de-quantised fp32 copy from the cache"
        name = f"{model} (GGUF{' ' + kind if kind else ''}, {how})"
    short = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    took = f"{seconds:.1f}" if seconds < 10 else f"{seconds:.0f}"
    return f"loaded {name} in {took} s; runs as {short.get(dtype, dtype)} on {device}"


def _split_gguf(name_or_path: str, gguf_file: str | None) -> tuple[str, str | None]:
    """Accept ``file.gguf`` as well as ``folder`` + ``gguf_file``; return (folder or id, gguf path or
    None)."""
    if gguf_file is not None:
        path = Path(gguf_file)
        if not path.is_absolute():
            path = Path(name_or_path) / gguf_file
        return name_or_path, str(path)
    if name_or_path.endswith(".gguf"):
        return str(Path(name_or_path).parent), name_or_path
    return name_or_path, None


def load_lm(
    name_or_path: str | os.PathLike,
    *,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
    gguf_file: str | None = None,
    special_tokens: SpecialTokens = "every-input",
    compile: bool = False,
) -> FrozenLM:
    """A frozen causal LM by Hugging Face id, local folder, or GGUF file (converted once and cached).

    SDPA attention is requested (the fast fused kernels on CPU and GPU); an architecture without it falls
    back to its default attention. `special_tokens`: how inputs without a passage start (`FrozenLM.lead`);
    `compile`: score through ``torch.compile`` (``LMOptions.compile``).
    """
    check_special_tokens(special_tokens)
    from transformers import AutoTokenizer

    started = time.perf_counter()
    name_or_path = str(name_or_path)
    _, gguf_path = _split_gguf(name_or_path, gguf_file)
    folder, converted = _model_folder(name_or_path, gguf_path)
    torch_device = resolve_device(device)
    torch_dtype = config_dtype(folder) if dtype == "config" else resolve_dtype(dtype, torch_device)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = _frozen_model(folder, torch_dtype, torch_device)
    context = _context_or_tokenizer_limit(model.config, tokenizer, name_or_path)
    seconds = time.perf_counter() - started
    print(
        load_line(name_or_path, gguf_path, converted, torch_dtype, torch_device, seconds, folder),
        file=sys.stderr,
        flush=True,
    )
    return FrozenLM(
        model=model,
        tokenizer=tokenizer,
        device=torch_device,
        dtype=torch_dtype,
        name=name_or_path,
        context_length=context,
        extra={"folder": folder, "gguf_file": gguf_path},
        special_prefix=default_special_prefix(tokenizer),
        special_tokens=special_tokens,
        compile=compile,
    )


def _model_folder(name_or_path: str, gguf_path: str | None) -> tuple[str, bool]:
    """The Hugging Face folder or hub id to load, and whether a GGUF file was converted for it just now (a
    converted file is cached); a local folder that is missing or has no config.json fails here."""
    converted = False
    if gguf_path:
        if not Path(gguf_path).is_file():
            raise RalmInputError(f"{gguf_path}: GGUF file not found")
        cached = gguf_cache_folder(Path(gguf_path))
        converted = not (cached / "config.json").is_file()
        folder = str(convert_gguf(Path(gguf_path), cached))
    else:
        folder = name_or_path
    # A hub id is "org/name", so only an absolute or ./-relative path is known to be a local folder.
    if not gguf_path and (Path(folder).is_absolute() or folder.startswith(".")) and not Path(folder).exists():
        raise RalmInputError(f"{name_or_path}: model folder not found")
    if Path(folder).is_dir() and not (Path(folder) / "config.json").is_file():
        raise RalmInputError(f"{folder}: not a Hugging Face model folder (no config.json)")
    return folder, converted


def _frozen_model(folder: str, dtype: torch.dtype, device: torch.device):
    """The causal LM with SDPA attention where its architecture has it, on `device`, in eval mode, with no
    gradients."""
    from transformers import AutoModelForCausalLM

    with library_bars_quiet_in_logs():
        try:
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa")
        except (ValueError, ImportError):  # an architecture without an SDPA implementation
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    model.to(device).eval().requires_grad_(False)
    return model


def _context_or_tokenizer_limit(config, tokenizer, name_or_path: str) -> int:
    """The model's context length from its config, else the tokenizer's limit when it is a real one (not
    transformers' huge "no limit" placeholder)."""
    context = _context_length(config)
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if context is None and isinstance(tokenizer_limit, int) and tokenizer_limit < 10**9:
        context = tokenizer_limit
    if context is None:
        raise RalmInputError(f"{name_or_path}: cannot tell the model's context length from its config")
    return context
