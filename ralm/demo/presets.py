"""The Bible demo's dev and test books (`BookSplit`, one per scale) and their options (``--dev-books``, ...).

Test text by a rule fixed before any test number was looked at: *related* books are those whose events other
books of the canon narrate in parallel from their first chapter on (2 Chronicles retells 1-2 Kings),
*unrelated* books those whose events no other book narrates (Ruth, Jonah, Philippians). The dev book, Mark,
is retold by Matthew and Luke. Every dev and test book is out of the corpus (every translation) and the
training text. The pipeline's scales themselves are in ``ralm.pipeline.scale``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class BookSplit:
    """The Bible demo's books by role, as OSIS ids."""

    dev_books: tuple[str, ...]
    related_books: tuple[str, ...]
    unrelated_books: tuple[str, ...]

    @property
    def test_books(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.related_books + self.unrelated_books))

    @property
    def heldout_books(self) -> tuple[str, ...]:
        """Books kept out of the retrieval corpus (every translation) and the training text: dev and test."""
        return tuple(dict.fromkeys(self.dev_books + self.test_books))


QUICK_BOOKS = BookSplit(dev_books=("Mark",), related_books=("2Chr",), unrelated_books=("Ruth",))
FULL_BOOKS = replace(QUICK_BOOKS, unrelated_books=("Ruth", "Jonah", "Phil"))


@dataclass
class BookOptions:
    """Change the Bible demo's books; unset options keep the scale's."""

    dev_books: list[str] | None = None
    """World English Bible books for choosing settings (`--split dev`); never reported, never retrieved."""
    related_books: list[str] | None = None
    """Test books whose events other books retell (retrieval should help); never retrieved or trained on."""
    unrelated_books: list[str] | None = None
    """Test books whose events no other book tells (retrieval should not help; the reranker must abstain)."""


def resolve_books(quick: bool, options: BookOptions) -> BookSplit:
    """The scale's books with every set option applied."""
    books = QUICK_BOOKS if quick else FULL_BOOKS
    changes = {f.name: tuple(v) for f in fields(options) if (v := getattr(options, f.name)) is not None}
    return replace(books, **changes)


def describe_books(books: BookSplit) -> str:
    return "  ".join(f"{f.name}={','.join(getattr(books, f.name))}" for f in fields(books))
