"""The demo's texts, from offline assets (docs/assets.md): the King James Bible as retrieval corpus and the
World English Bible split by book into training and held-out text (Debian `sword-text-kjv` /
`sword-text-web`), or the Python 3.11 documentation. The models are the pipeline's defaults
(``ralm.pipeline.models``); `ralm run` takes the user's own texts instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ralm.atomic_files import write_jsonl_atomic
from ralm.errors import RalmInputError
from ralm.pipeline.texts import PipelineTexts

if TYPE_CHECKING:
    from ralm.demo.presets import BookSplit


def check_bible_books(books: BookSplit) -> None:
    """The dev and test books must be OSIS ids of the canon (checked before anything is fetched or
    written)."""
    from ralm.corpora import CANON

    options = {
        "--dev-books": books.dev_books,
        "--related-books": books.related_books,
        "--unrelated-books": books.unrelated_books,
    }
    for option, names in options.items():
        unknown = [b for b in names if b not in CANON]
        if unknown or not names:
            raise RalmInputError(
                f"{option} {list(unknown or names)}: give OSIS book ids such as Mark, Ruth, Jonah "
                f"(one of {', '.join(CANON)})"
            )


def bible_texts(
    data_dir: Path, books: BookSplit, split: str = "test", foreign: bool = False
) -> PipelineTexts:
    """The King James Bible as retrieval corpus, the World English Bible's other books for training, and
    the split's books for evaluation: the dev books (one set), or the related and the unrelated test books
    (two sets, each scored in its own table), with `foreign` a third: text the corpus cannot inform
    (``foreign_rows``).

    Both translations file a book under its OSIS id ("Mark"), so one id names a book in every version:
    the index stage excludes the dev and test books from the corpus by id (``ralm index --exclude``), and
    data-gen's own-document rule drops a training book's King James text from its own candidates.
    """
    from ralm.corpora import bible_books

    check_bible_books(books)
    kjv, web = bible_books("kjv"), bible_books("web")
    held = set(books.heldout_books)
    train = [d for d in web if d["id"] not in held]
    by_id = {d["id"]: d for d in web}
    sets = (
        {"dev": books.dev_books}
        if split == "dev"
        else {"related": books.related_books, "unrelated": books.unrelated_books}
    )
    scored = {name: [by_id[b] for b in books] for name, books in sets.items()}
    corpus, train_path = data_dir / "kjv_books.jsonl", data_dir / "web_train_books.jsonl"
    evals = {name: data_dir / f"web_{name}_books.jsonl" for name in sets}
    if foreign and split == "test":
        scored["foreign"] = foreign_rows("bible")
        evals["foreign"] = data_dir / "foreign_python_docs.jsonl"
    for path, rows in ((corpus, kjv), (train_path, train), *((evals[n], scored[n]) for n in scored)):
        if not _same_jsonl(path, rows):
            write_jsonl_atomic(path, rows, ensure_ascii=False)

    def words(rows: list[dict]) -> int:
        return sum(len(r["text"].split()) for r in rows)

    kept = [d for d in kjv if d["id"] not in held]
    description = {
        "corpus": f"King James Bible minus the dev and test books ({', '.join(books.heldout_books)}): "
        f"{len(kept)} books, {words(kept):,} words (Debian sword-text-kjv)",
        "train": "World English Bible minus the dev and test books: "
        f"{len(train)} books, {words(train):,} words",
        "eval": "; ".join(
            f"{name}: {FOREIGN_SOURCE['bible'] if name == 'foreign' else 'World English Bible'} "
            f"{', '.join(d['id'] for d in rows)} ({words(rows):,} words)"
            for name, rows in scored.items()
        ),
    }
    return PipelineTexts(corpus, train_path, evals, description, exclude=tuple(books.heldout_books))


FOREIGN_SOURCE = {"bible": "Python 3.11 tutorial pages", "python-docs": "World English Bible"}
"""What each domain's *foreign* set is: the other domain's unrelated test text."""


def foreign_rows(domain: str) -> list[dict]:
    """A domain's *foreign* test set: text its corpus cannot inform, by a rule fixed before any of its
    numbers: the other domain's unrelated test text. For the Bible, the Python tutorial pages the
    python-docs domain holds out as unrelated (PYTHON_DOCS); for the Python documentation, the Bible's full
    unrelated books (Ruth, Jonah, Philippians) in the World English Bible. Neither corpus holds the other
    domain's text, so nothing needs excluding; the report's copy rate checks it."""
    if domain == "bible":
        from ralm.corpora import python_docs

        by_id = {d["id"]: d for d in python_docs()}
        return [by_id[i] for i in PYTHON_DOCS["unrelated"]]
    from ralm.corpora import bible_books
    from ralm.demo.presets import FULL_BOOKS

    by_id = {d["id"]: d for d in bible_books("web")}
    return [by_id[b] for b in FULL_BOOKS.unrelated_books]


PYTHON_DOCS = {
    "corpus": ("library/",),
    "train": ("howto/", "faq/", "reference/", "extending/", "using/"),
    "dev": ("tutorial/errors", "tutorial/modules"),
    "related": ("tutorial/stdlib", "tutorial/stdlib2"),
    "unrelated": (
        "tutorial/appetite",
        "tutorial/interpreter",
        "tutorial/interactive",
        "tutorial/appendix",
        "tutorial/whatnow",
    ),
}
"""The second domain: page ids (prefixes for corpus and train) of the Python 3.11 documentation (Debian
python3.11-doc) per role. The library reference is the retrieval corpus; the HOWTOs, FAQ, language
reference, extending and usage guides train the reranker; tutorial pages are held out: dev pages choose,
test pages are reported. By the same rule as the Bible's, fixed before any test number: *related* pages
tour library modules the corpus documents (the standard library tour); *unrelated* pages are about the
tutorial and the interactive interpreter, which the library reference does not document."""


def python_docs_texts(data_dir: Path, split: str = "test", foreign: bool = False) -> PipelineTexts:
    """The Python documentation split by section (PYTHON_DOCS): a domain far from the Bible; with `foreign`
    (test split) a third set, text this corpus cannot inform (``foreign_rows``)."""
    from ralm.corpora import python_docs

    docs = python_docs()
    sets = ("dev",) if split == "dev" else ("related", "unrelated")

    def pages(prefixes: tuple[str, ...]) -> list[dict]:
        return [d for d in docs if d["id"].startswith(prefixes)]

    by_id = {d["id"]: d for d in docs}
    roles = {
        "corpus": pages(PYTHON_DOCS["corpus"]),
        "train": pages(PYTHON_DOCS["train"]),
        **{name: [by_id[i] for i in PYTHON_DOCS[name]] for name in sets},
    }
    if foreign and split == "test":
        roles["foreign"] = foreign_rows("python-docs")
        sets = (*sets, "foreign")
    paths = {role: data_dir / f"python_docs_{role}.jsonl" for role in roles}
    for role, rows in roles.items():
        if not _same_jsonl(paths[role], rows):
            write_jsonl_atomic(paths[role], rows, ensure_ascii=False)

    def words(rows: list[dict]) -> int:
        return sum(len(r["text"].split()) for r in rows)

    description = {
        "corpus": f"Python 3.11 library reference: {len(roles['corpus'])} pages, "
        f"{words(roles['corpus']):,} words (Debian python3.11-doc)",
        "train": "Python 3.11 HOWTOs, FAQ, language reference, extending and using guides: "
        f"{len(roles['train'])} pages, {words(roles['train']):,} words",
        "eval": "; ".join(
            f"{name}: {FOREIGN_SOURCE['python-docs'] if name == 'foreign' else 'Python tutorial pages'} "
            f"{', '.join(d['id'] for d in roles[name])} ({words(roles[name]):,} words)"
            for name in sets
        ),
    }
    return PipelineTexts(paths["corpus"], paths["train"], {n: paths[n] for n in sets}, description)


def _same_jsonl(path: Path, rows: list[dict]) -> bool:
    """True when `path` already holds exactly these rows (a rerun leaves files, and their hashes, alone)."""
    if not path.is_file():
        return False
    expected = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return path.read_text(encoding="utf-8") == expected
