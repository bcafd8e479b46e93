"""The texts a pipeline run reads (`PipelineTexts`): the retrieval corpus, the training text and the eval
sets, and the user's own files checked before any work (`user_texts`, `check_user_texts`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralm.errors import RalmInputError


@dataclass(frozen=True)
class PipelineTexts:
    """Paths of the text files the stages read, and what they hold (for the report)."""

    corpus: Path
    train: Path
    evals: dict[str, Path]
    """Eval sets by name, each scored in its own table: the demo's test split has ``related`` (text the corpus
    retells: retrieval should help), ``unrelated`` (the same domain, not retold: it should not) and, in the
    full demo, ``foreign`` (another domain, which the corpus cannot inform); a user's run has one,
    ``eval``."""
    description: dict
    exclude: tuple[str, ...] = ()
    """Titles, ids or ``re:`` patterns the index stage leaves out of the corpus (``ralm index --exclude``)."""
    train_exclude: tuple[str, ...] = ()
    """The same for the training text (``ralm data-gen --exclude``): `ralm run`'s eval documents and
    --exclude (``ralm.pipeline.held_out``); the demo's presets write training files without them."""

    @property
    def eval(self) -> Path:
        """The first eval set (a user's run has only one)."""
        return next(iter(self.evals.values()))


def check_user_texts(texts: PipelineTexts, min_eval_words: int = 0) -> int:
    """Read the whole eval text (RalmInputError names the file and line of a bad one; the corpus and the
    training text are read by ``held_out.leave_out_eval_documents``), so nothing fails hours into a run.
    It must hold at least `min_eval_words` words (one window with retrieval needs a query and a target
    after the first window); returns its word count."""
    from ralm.eval.ppl.eval_text import read_eval_text

    words = len(read_eval_text(texts.eval).split())
    if words < min_eval_words:
        raise RalmInputError(
            f"--eval-text {texts.eval}: {words} words; at least {min_eval_words} are needed for one window "
            "with retrieval (a query and a target after the first window)"
        )
    return words


def user_texts(
    corpus: str, train: str | None, eval_text: str, exclude: tuple[str, ...] = ()
) -> PipelineTexts:
    """The user's own files: retrieval corpus, optional training documents (default: the corpus), eval text,
    and what to exclude from the corpus and the training text (titles, ids or ``re:`` patterns); the eval
    documents' own copies are added by ``held_out.leave_out_eval_documents``."""
    for option, value in (("--corpus", corpus), ("--train-text", train), ("--eval-text", eval_text)):
        if value is not None and not Path(value).exists():
            raise RalmInputError(f"{option} {value}: no such file or folder")
    left_out = "minus the eval documents and --exclude"
    return PipelineTexts(
        Path(corpus),
        Path(train or corpus),
        {"eval": Path(eval_text)},
        {
            "corpus": f"{corpus} (yours), {left_out}",
            "train": f"{train or corpus} (yours), {left_out}",
            "eval": f"{eval_text} (yours)",
        },
        exclude=tuple(exclude),
        train_exclude=tuple(exclude),
    )
