"""Reading `ralm train`'s checkpoints (a Lightning file or a DeepSpeed folder) without running their code.

A checkpoint is a pickle, and unpickling may call any function it names: loading one must not run code it
was not given as code. Every load here is ``torch.load(weights_only=True)``, which rebuilds tensors and
plain containers only, plus the exact types allow-listed below; a checkpoint that names anything else is
refused, naming what it holds, before any of it is built.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import tempfile
from collections.abc import Iterator

import torch

from ralm.config_types import (
    HalfOpenUnitInterval,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
)
from ralm.errors import RalmInputError

CHECKPOINT_GLOBALS = (PositiveInt, NonNegativeInt, PositiveFloat, NonNegativeFloat, HalfOpenUnitInterval)
"""What a `ralm train` checkpoint holds beyond what ``weights_only`` builds anyway (tensors, their storages,
``OrderedDict``, plain containers and numbers): the constrained numbers of the option groups (int and float
subclasses; ``ralm.config_types``), which a run from the command line or a YAML file passes on as parsed.
They reach the module's hyper-parameters, the optimizer's parameter groups (``lr``, ``weight_decay``) and
early stopping's state (``patience``). Lightning 2.x writes the hyper-parameters as ``dict(hparams)`` (not
its ``AttributeDict``) and the module adds torch's RNG state, a tensor; tests/test_rerank_checkpoints.py
trains from the command line and checks that its checkpoints name no other type."""


@contextlib.contextmanager
def allowed_checkpoint_types() -> Iterator[None]:
    """Inside, ``torch.load(weights_only=True)`` also builds ``CHECKPOINT_GLOBALS``: around Lightning's own
    load when a run resumes (torch >= 2.6 loads with weights_only by default)."""
    with _allowing(CHECKPOINT_GLOBALS):
        yield


def _deepspeed_globals() -> list:
    """What DeepSpeed's ZeRO-2 shards hold beyond tensors (seen in real ones, bf16/fp32 and fp16): its loss
    scaler (a record of the scale: static, or dynamic under fp16), its ZeRO-stage enum and its fragment
    addresses (two integers). DeepSpeed is imported only to read a folder."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]


def read_checkpoint(path: str) -> dict:
    """A Lightning checkpoint file (or DeepSpeed checkpoint folder, converted) as a dict on the CPU."""
    if os.path.isdir(path):  # DeepSpeed writes a folder of shards
        return read_zero_checkpoint(path)
    try:
        with allowed_checkpoint_types():
            checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except FileNotFoundError:
        raise RalmInputError(f"{path}: no such checkpoint") from None
    except Exception as err:  # a truncated or foreign file: pickle, zip and torch each raise their own
        if isinstance(err, pickle.UnpicklingError):  # weights_only refuses what it would have to build
            _refuse_unsafe(path, [path], CHECKPOINT_GLOBALS)
        raise RalmInputError(f"{path}: not a readable PyTorch checkpoint ({type(err).__name__})") from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise RalmInputError(f"{path}: not a Lightning checkpoint (no 'state_dict')")
    return checkpoint


def read_zero_checkpoint(path: str) -> dict:
    """A DeepSpeed ZeRO checkpoint folder (``latest`` + a tag folder of shards) consolidated to fp32 by
    DeepSpeed's own ``zero_to_fp32`` (through Lightning's converter, which keeps the hyper-parameters)."""
    if not os.path.isfile(os.path.join(path, "latest")):
        raise RalmInputError(f"{path}: a folder but not a DeepSpeed checkpoint (no 'latest' file)")
    try:
        from lightning.pytorch.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict

        allowed = [*CHECKPOINT_GLOBALS, *_deepspeed_globals()]  # the client state holds the hparams
    except ModuleNotFoundError:
        raise RalmInputError(
            f"{path}: a DeepSpeed checkpoint needs deepspeed to export (pip install 'ralm[deepspeed]')"
        ) from None
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        # (redirected: its "Saving fp32 state dict to <tmp>" names a file that is about to go)
        try:
            with _weights_only_loads(allowed):
                checkpoint = convert_zero_checkpoint_to_fp32_state_dict(path, os.path.join(tmp, "fp32.pt"))
        except pickle.UnpicklingError:
            shards = [os.path.join(d, f) for d, _, files in os.walk(path) for f in files if f.endswith(".pt")]
            _refuse_unsafe(path, sorted(shards), allowed)
            raise RalmInputError(f"{path}: not a readable DeepSpeed checkpoint (UnpicklingError)") from None
    return {**checkpoint, "hyper_parameters": checkpoint.get("hyper_parameters", {})}


@contextlib.contextmanager
def _weights_only_loads(allowed: list) -> Iterator[None]:
    """Every load inside, DeepSpeed's and Lightning's too (which ask for full unpickling), is weights-only
    with `allowed`: torch reads ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` on each call, overriding its caller."""
    before = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        with _allowing(allowed):
            yield
    finally:
        if before is None:
            del os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"]
        else:
            os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = before


def _refuse_unsafe(path: str, files: list[str], allowed) -> None:
    """A RalmInputError naming the types `files` hold that loading would have to build (and run), when
    there are any; otherwise returns and the caller reports the file as unreadable."""
    with _allowing(allowed):
        unsafe = sorted({name for f in files for name in _unsafe_globals(f)})
    if unsafe:
        raise RalmInputError(
            f"{path}: holds pickled objects of types ralm does not load ({', '.join(unsafe)}); "
            "a checkpoint is read with torch.load(weights_only=True), which builds tensors and plain "
            "containers only, so that loading one runs no code. Only load checkpoints `ralm train` wrote"
        ) from None


def _allowing(types) -> contextlib.AbstractContextManager:
    """torch's allow-list of `types` for the loads inside (torch 2.4 has no such context: its list gains
    them for the process)."""
    if hasattr(torch.serialization, "safe_globals"):
        return torch.serialization.safe_globals(list(types))
    torch.serialization.add_safe_globals(list(types))
    return contextlib.nullcontext()


def _unsafe_globals(path: str) -> list[str]:
    """The types the checkpoint file names that weights_only would refuse to build (torch >= 2.5)."""
    find = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)
    try:
        return find(path) if find else []
    except Exception:  # not a zip checkpoint: the caller's own error stands
        return []


def check_compatible(path: str, hyper_parameters: dict, expected: dict) -> None:
    """A checkpoint made with another encoder or input rule cannot be resumed into this run."""
    if not hyper_parameters:
        raise RalmInputError(f"{path}: not a `ralm train` checkpoint (no hyper-parameters)")
    # Checkpoints from before the prior (or the anchor) existed lack the key and were trained without it.
    missing = {"bm25_prior": False, "abstain_anchor": "zero"}
    for key in ("encoder_name", "abstain", "max_length", "max_prefix_tokens", "bm25_prior", "abstain_anchor"):
        if key in expected and hyper_parameters.get(key, missing.get(key)) != expected[key]:
            raise RalmInputError(
                f"{path}: checkpoint has {key}={hyper_parameters.get(key)!r}, "
                f"this run asks for {expected[key]!r}"
            )
