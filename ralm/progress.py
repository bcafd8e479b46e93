"""Progress that reads well in a terminal and in a log file.

In a terminal (stderr is a tty) every stage shows a tqdm bar. Piped to a file (CI, a cluster job,
``make demo > log``), a bar's carriage-return redraws become hundreds of fragments; there each stage
writes one plain line at most every ``RALM_PROGRESS_SECONDS`` seconds (default 10) with the count, the
rate and the time left, and a last line when it ends::

    score candidates: 1,200/4,800 pair (25%), 41.3 pair/s, 1m27s left
    score candidates: done, 4,800 pair in 1m56s (41.4 pair/s)

``progress(...)`` picks one or the other; both have tqdm's ``update``, ``n``, ``total``, ``close`` and
context-manager interface, which is all the stages use. The libraries' own bars are kept out of logs too
(``library_bars_quiet_in_logs``, ``module_bar_quiet_in_logs``), and saving a model does not import
DeepSpeed for its banner (``save_pretrained_quietly``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

from tqdm.auto import tqdm

ENV_SECONDS = "RALM_PROGRESS_SECONDS"
DEFAULT_SECONDS = 10.0


def line_interval() -> float:
    """Seconds between two progress lines in a log (``RALM_PROGRESS_SECONDS``)."""
    raw = os.environ.get(ENV_SECONDS, "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_SECONDS
    except ValueError:
        return DEFAULT_SECONDS


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class LineProgress:
    """tqdm's interface, printing a whole line every `every` seconds instead of redrawing a bar."""

    def __init__(
        self,
        total: int | None,
        *,
        desc: str,
        unit: str = "it",
        initial: int = 0,
        every: float | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.every = line_interval() if every is None else every
        self.stream, self.clock = stream, clock
        self.postfix = ""
        self._initial = initial
        self._start = self._last = clock()
        self._closed = False

    def _write(self, line: str) -> None:
        print(line, file=self.stream or sys.stderr, flush=True)

    def rate(self) -> float:
        elapsed = self.clock() - self._start
        return (self.n - self._initial) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """The current progress line: count, share, rate, time left."""
        rate = self.rate()
        text = f"{self.desc}: {self.n:,}"
        if self.total:
            text += f"/{self.total:,} {self.unit} ({100 * self.n / self.total:.0f}%)"
        else:
            text += f" {self.unit}"
        text += f", {rate:.1f} {self.unit}/s"
        if self.total and rate > 0:
            text += f", {duration((self.total - self.n) / rate)} left"
        return text + (f", {self.postfix}" if self.postfix else "")

    def update(self, k: int = 1) -> None:
        self.n += k
        now = self.clock()
        if now - self._last >= self.every:
            self._last = now
            self._write(self.line())

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        done = self.n - self._initial
        elapsed = self.clock() - self._start
        rate = f" ({done / elapsed:.1f} {self.unit}/s)" if elapsed > 0 and done else ""
        self._write(f"{self.desc}: done, {self.n:,} {self.unit} in {duration(elapsed)}{rate}")

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def progress(
    total: int | None, *, desc: str, unit: str = "it", initial: int = 0, disable: bool = False, **tqdm_options
):
    """A tqdm bar in a terminal, a ``LineProgress`` in a log, a silent tqdm when `disable`."""
    if disable or is_terminal():
        return tqdm(total=total, desc=desc, unit=unit, initial=initial, disable=disable, **tqdm_options)
    return LineProgress(total, desc=desc, unit=unit, initial=initial)


def track(iterable, *, desc: str, unit: str = "it", total: int | None = None, disable: bool = False):
    """Iterate `iterable` with ``progress`` (tqdm over an iterable, or one line every few seconds)."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    with progress(total, desc=desc, unit=unit, disable=disable) as bar:
        for item in iterable:
            yield item
            bar.update(1)


@contextlib.contextmanager
def library_bars_quiet_in_logs():
    """Within the block, transformers' own bars (``Loading weights``, ``Writing model shards``) are off when
    stderr is not a terminal."""
    from transformers.utils import logging as transformers_logging

    was_on = transformers_logging.is_progress_bar_enabled()
    if was_on and not is_terminal():
        transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()


@contextlib.contextmanager
def module_bar_quiet_in_logs(module, name: str = "tqdm"):
    """Within the block, a library's own plain tqdm (``module.<name>``, e.g. transformers' GGUF
    de-quantisation bar, which no library switch turns off) draws nothing when stderr is not a terminal."""
    original = getattr(module, name, None)
    if original is None or is_terminal():
        yield
        return
    setattr(module, name, functools.partial(original, disable=True))
    try:
        yield
    finally:
        setattr(module, name, original)


def save_pretrained_quietly(model, folder) -> None:
    """``model.save_pretrained(folder)`` with no bar in a log and without importing DeepSpeed.

    ``save_pretrained`` unwraps the model through accelerate's ``extract_model_from_parallel``, which
    imports DeepSpeed whenever it is installed (the dev extra installs it) only to test for a
    ``DeepSpeedEngine`` wrapper: a second of import and DeepSpeed's "Setting accelerator to CPU" banner
    in every command that saves a model, none of which runs DeepSpeed here. The models saved through this
    function are never wrapped by an engine, so accelerate is told DeepSpeed is absent for the call.
    """
    try:
        from accelerate.utils import other
    except ImportError:
        other = None
    original = getattr(other, "is_deepspeed_available", None)
    with library_bars_quiet_in_logs():
        if original is None:
            model.save_pretrained(folder)
            return
        other.is_deepspeed_available = lambda: False
        try:
            model.save_pretrained(folder)
        finally:
            other.is_deepspeed_available = original
