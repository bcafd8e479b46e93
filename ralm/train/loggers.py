"""Training loggers: CSV always, Weights & Biases and TensorBoard on request, decided before any work.

wandb ``auto`` logs when wandb is installed: online when an API key is configured (``WANDB_API_KEY`` or
``wandb login``'s netrc entry) or ``WANDB_MODE`` says how, otherwise **offline**, with one line saying
so and how to upload the run later; ``auto`` never stops a training. wandb ``on`` without a key and
without ``WANDB_MODE`` stops before the model loads, with the fix in the message (wandb's own
``UsageError: No API key configured`` would come after the model loaded).

A wandb run gets the module's hyperparameters and every ``val/`` metric as they are logged, and, at
the end, the summary ``ralm train`` prints (decision, its evidence, best gain recovered).
"""

from __future__ import annotations

import importlib.util
import netrc
import os
import sys
from urllib.parse import urlparse

from lightning.pytorch.loggers import CSVLogger, Logger

from ralm.errors import RalmInputError
from ralm.train.settings import RunOptions

WANDB_PROJECT = "ralm-rerank"


def wandb_api_key_configured(env: dict[str, str] | None = None) -> bool:
    """An API key in the environment or in the netrc file ``wandb login`` writes (for WANDB_BASE_URL's
    host)."""
    env = os.environ if env is None else env
    if env.get("WANDB_API_KEY"):
        return True
    host = urlparse(env.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
    path = env.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return netrc.netrc(path).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def wandb_mode(setting: str, env: dict[str, str] | None = None) -> str | None:
    """None (no wandb), "online", "offline" or "disabled", for ``run.wandb`` = auto / on / off."""
    env = os.environ if env is None else env
    if setting == "off":
        return None
    installed = importlib.util.find_spec("wandb") is not None
    if not installed:
        if setting == "on":
            raise RalmInputError("run.wandb=on: wandb is not installed (pip install 'ralm[wandb]')")
        return None
    mode = env.get("WANDB_MODE", "").strip().lower()
    if mode in ("online", "offline", "disabled", "dryrun", "run"):
        return {"dryrun": "offline", "run": "online"}.get(mode, mode)
    if wandb_api_key_configured(env):
        return "online"
    if setting == "on":
        raise RalmInputError(
            "run.wandb=on: no wandb API key is configured: run `wandb login`, set WANDB_API_KEY, "
            "or set WANDB_MODE=offline to log locally (or use --run.wandb off)"
        )
    return "offline"


def build_loggers(out_dir: str, run: RunOptions) -> list[Logger]:
    """CSV always; wandb per ``wandb_mode``; TensorBoard when asked for. Raises before any model loads."""
    loggers: list[Logger] = [CSVLogger(os.path.join(out_dir, "logs"), name="csv")]
    mode = wandb_mode(run.wandb)
    if mode is not None:
        from lightning.pytorch.loggers import WandbLogger

        if mode == "offline" and run.wandb == "auto" and "WANDB_MODE" not in os.environ:
            print(
                f"wandb: no API key configured, logging offline to {out_dir}/wandb "
                f"(upload later with `wandb sync {out_dir}/wandb/offline-run-*`; --run.wandb off to skip)",
                file=sys.stderr,
            )
        loggers.append(
            WandbLogger(project=WANDB_PROJECT, save_dir=out_dir, offline=mode == "offline", mode=mode)
        )
    if run.tensorboard:
        if (
            importlib.util.find_spec("tensorboard") is None
            and importlib.util.find_spec("tensorboardX") is None
        ):
            raise RalmInputError(
                "run.tensorboard=true: tensorboard is not installed (pip install 'ralm[tensorboard]')"
            )
        from lightning.pytorch.loggers import TensorBoardLogger

        loggers.append(TensorBoardLogger(os.path.join(out_dir, "logs"), name="tensorboard"))
    return loggers


def log_final_summary(loggers: list[Logger], summary: dict) -> None:
    """The end-of-training summary into each wandb run's summary (other loggers keep their own files)."""
    evidence = summary.get("decision_evidence") or {}
    flat = {
        "decision": summary.get("decision"),
        "best_gain_recovered": summary.get("best_gain_recovered"),
        "steps": summary.get("steps"),
        "selection_prefixes": (evidence.get("selection") or {}).get("prefixes"),
        "decision_prefixes": (evidence.get("decision") or {}).get("prefixes"),
    }
    for name, d in (evidence.get("comparisons") or {}).items():
        flat[f"decision/{name}"] = d.get("difference")
        flat[f"decision/{name}/low"] = d.get("low")
        flat[f"decision/{name}/high"] = d.get("high")
        flat[f"decision/{name}/detectable"] = d.get("detectable_difference")
    for logger in loggers:
        if type(logger).__name__ == "WandbLogger":
            logger.experiment.config.update({"ralm": summary.get("config", {})}, allow_val_change=True)
            logger.experiment.summary.update({k: v for k, v in flat.items() if v is not None})
            logger.experiment.finish()
