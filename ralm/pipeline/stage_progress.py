"""One line per stage of a pipeline run: ``[run] [stage 3/6] train seed 1: 9m12s elapsed, ~14m left``.

Plain lines, so a terminal and a log (``make demo > log``) read the same; the stages' own progress lines
(``ralm.progress``) come between them.

The time left is the sum of an estimate for each stage not yet finished, the one starting included, and is
printed only for the stages that have a basis (the rest are named as not timed yet, and the sum is then a
lower bound, "over ~"):

- a stage of a kind that has run (or was reused: ``stages.json`` holds the seconds it took when it ran)
  takes the mean of that kind's seconds per unit of size, times its own size: the seeds of one scale train
  the same steps on the same data (size 1), and an eval or forward stage's size is its set's retrieving
  windows over those of eval_tokens (`eval_set_size`: the full demo's related set scores 4x
  the tokens of the others); early stopping can end a seed sooner, so this errs long;
- an eval set before any has run takes data-gen's seconds per LM input times its own LM inputs, by the
  scale's cost model (``ralm.pipeline.scale``): data-gen scores num_prefixes x (k + 1) inputs, an eval set
  about (eval_tokens - max_length) / stride x (k + 2), all of max_length tokens. The README's demo runs
  agree within ~20% (quick: data-gen 88 s, eval sets 81 and 82 s, 0.96 predicted; full: 319 s, 171 and
  147 s, 0.42 predicted); with no eval_tokens (the whole text) there is no such basis.

A reused stage is counted at its kind's time, so a resumed run's estimate errs long too. The bf16 check
joins the count only when it runs: the eval's recorded dtype decides it (``ralm.pipeline.dtype_check``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from ralm.pipeline.scale import ScaleSettings
from ralm.pipeline.stages import StagePlan, StageRunner
from ralm.progress import duration

REPEATED = ("train", "eval", "forward")
"""The stages a run repeats (``ralm.pipeline.plan``: "train seed 1", "eval related", "forward related
continuation"): one kind each."""


def kind(key: str) -> str:
    """A stage's kind: "train seed 1" and "train" are "train", "eval related" is "eval", others their key."""
    first = key.split()[0]
    return first if first in REPEATED else key


def _windows(settings: ScaleSettings, tokens: int) -> float:
    return max(0, tokens - settings.max_length) / settings.stride


def eval_per_data_gen_input(settings: ScaleSettings) -> float | None:
    """An eval set's LM inputs per data-gen LM input (the cost model above), or None without eval_tokens."""
    if not settings.eval_tokens:
        return None
    windows = _windows(settings, settings.eval_tokens)
    return windows * (settings.k + 2) / (settings.num_prefixes * (settings.k + 1))


def eval_set_size(settings: ScaleSettings, eval_set: str) -> float:
    """Eval set `eval_set`'s retrieving windows over those of eval_tokens (1 where either is unknown)."""
    own = settings.eval_tokens_of(eval_set)
    if own is None or not settings.eval_tokens or not _windows(settings, settings.eval_tokens):
        return 1.0
    return _windows(settings, own) / _windows(settings, settings.eval_tokens)


class StageProgress:
    """The planned stages' keys in order, the seconds of those done, and the line that starts each one."""

    def __init__(
        self,
        label: str,
        started: float,
        eval_ratio: float | None,
        keys: Sequence[str] = (),
        clock: Callable[[], float] = time.perf_counter,
        sizes: Mapping[str, float] | None = None,
    ) -> None:
        self.label, self.started, self.eval_ratio = label, started, eval_ratio
        self.keys, self.clock = list(keys), clock
        self.sizes = dict(sizes or {})
        """A stage's size relative to others of its kind (absent: 1; ``eval_set_size``)."""
        # Each kind's seconds per unit of size so far: of the stages that ran, or what a reused one took.
        self.seconds: dict[str, list[float]] = {}

    def estimate(self, key: str) -> float | None:
        """Seconds the stage `key` should take, or None without a basis (the module's docstring)."""
        size = self.sizes.get(key, 1.0)
        done = self.seconds.get(kind(key))
        if done:
            return sum(done) / len(done) * size
        data_gen = self.seconds.get("data-gen")
        if kind(key) == "eval" and data_gen and self.eval_ratio is not None:
            return sum(data_gen) / len(data_gen) * self.eval_ratio * size
        return None

    def start(self, key: str) -> str:
        """The line that starts stage `key` (one not planned, the bf16 check, joins the count)."""
        if key not in self.keys:
            self.keys.append(key)
        position = self.keys.index(key)
        elapsed = duration(self.clock() - self.started)
        line = f"[{self.label}] [stage {position + 1}/{len(self.keys)}] {key}: {elapsed} elapsed"
        return f"{line}, {self._left(self.keys[position:])}"

    def finish(self, key: str, seconds: float) -> None:
        self.seconds.setdefault(kind(key), []).append(seconds / self.sizes.get(key, 1.0))

    def _left(self, remaining: list[str]) -> str:
        estimates = {key: self.estimate(key) for key in remaining}
        known = sum(seconds for seconds in estimates.values() if seconds is not None)
        untimed = list(dict.fromkeys(kind(key) for key, seconds in estimates.items() if seconds is None))
        if not untimed:
            return f"~{duration(known)} left"
        if known:
            return f"over ~{duration(known)} left ({', '.join(untimed)} not timed yet)"
        return f"time left unknown ({', '.join(untimed)} not timed yet)"


class CountingStageRunner(StageRunner):
    """A `StageRunner` that prints `StageProgress`'s line before each stage and records its seconds."""

    def __init__(self, run_dir, progress: StageProgress) -> None:
        super().__init__(run_dir, label=progress.label)
        self.progress = progress

    def run(self, stage: StagePlan) -> float:
        print(self.progress.start(stage.key), flush=True)
        seconds = super().run(stage)
        self.progress.finish(stage.key, seconds)
        return seconds
