"""The evaluation text of ``ralm eval ppl``: one string, tokenized once.

- a ``datasets`` folder (``save_to_disk``): rows of the text field joined as eval_lm.py joins WikiText,
  ``"".join(x or " \\n")`` (WikiText rows carry their own newlines; empty rows become " \\n");
- JSONL (``.jsonl``, or any file whose lines start with ``{``, ``.json`` included): one document per line with
  a text field; documents joined by a blank line (they usually carry no trailing newline, and gluing two
  documents' words together would invent tokens); bad lines are worded as every ralm reader words them
  (``ralm.jsonl``);
- anything else: a UTF-8 text file, read as is.

``read_eval_documents`` also gives where each JSONL document starts in the joined string, so the compare
table's block bootstrap never draws a block across two documents. A ``datasets`` folder and a text file
are one document (WikiText's rows are lines, not articles).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralm.errors import RalmInputError
from ralm.jsonl import looks_like_jsonl, read_jsonl


@dataclass(frozen=True)
class EvalText:
    """The evaluation text, its tokens under the evaluated LM, and both word divisors."""

    path: str
    sha256: str
    tokens: tuple[int, ...]
    words: int
    words_eval_lm: int
    text_tokens: int = 0
    """Tokens of the whole text before ``--max-tokens`` cut it (what was scored is reported against it)."""
    document_starts: tuple[int, ...] = (0,)
    """Token index at which each document starts ((0,): one document, or boundaries not known)."""


def _from_dataset(path: Path, field: str) -> str:
    from datasets import load_from_disk

    data = load_from_disk(str(path))
    if hasattr(data, "keys") and not hasattr(data, "column_names"):  # a DatasetDict: take its only/test split
        splits = list(data.keys())
        data = data["test"] if "test" in splits else data[splits[0]] if len(splits) == 1 else None
        if data is None:
            raise RalmInputError(
                f"{path}: a dataset with splits {splits} and no 'test' split; point at one split"
            )
    if field not in data.column_names:
        raise RalmInputError(f"{path}: dataset has no column {field!r} (columns: {data.column_names})")
    return "".join(x if x else " \n" for x in data[field])


DOCUMENT_SEPARATOR = "\n\n"


def _from_jsonl(path: Path, field: str) -> tuple[str, tuple[int, ...]]:
    texts = []
    for lineno, row in read_jsonl(path):
        if not isinstance(row.get(field), str):
            raise RalmInputError(f"{path}:{lineno}: missing string field {field!r}")
        texts.append(row[field])
    starts, offset = [], 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + len(DOCUMENT_SEPARATOR)
    return DOCUMENT_SEPARATOR.join(texts), tuple(starts) or (0,)


def read_eval_text(path: str | Path, field: str = "text") -> str:
    """The whole evaluation text; an empty or whitespace-only text is a ``RalmInputError``."""
    return read_eval_documents(path, field)[0]


def read_eval_documents(path: str | Path, field: str = "text") -> tuple[str, tuple[int, ...]]:
    """The whole evaluation text and the character offset at which each of its documents starts."""
    path = Path(path)
    if not path.exists():
        raise RalmInputError(f"{path}: evaluation text not found")
    starts: tuple[int, ...] = (0,)
    if path.is_dir():
        text = _from_dataset(path, field)
    elif looks_like_jsonl(path):  # by content: a .json file of one object per line is JSONL too
        text, starts = _from_jsonl(path, field)
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise RalmInputError(f"{path}: not UTF-8 text (byte {err.start})") from None
    if not text.strip():
        raise RalmInputError(f"{path}: the evaluation text is empty")
    return text, starts


def word_counts(text: str) -> dict[str, int]:
    """Both word divisors: whitespace-separated words, and eval_lm.py's ``text.count(" ")``."""
    return {"words": len(text.split()), "words_eval_lm": text.count(" ")}
