"""Public-domain English Bibles from Debian's SWORD packages, as verses or one document per book.

Books carry their OSIS id ("Gen", "Matt") as document id and a canonical English title, the same in every
translation, so the King James Bible (retrieval corpus) and the World English Bible (training and held-out
text) align book by book.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from ralm.corpora.debian import fetch_package
from ralm.corpora.sword import Verse, read_ztext
from ralm.errors import RalmInputError

# name -> Debian package holding the SWORD module.
BIBLES: dict[str, str] = {"kjv": "sword-text-kjv", "web": "sword-text-web"}

# The 66 books both translations share, in canonical order, with their usual English titles.
CANON: dict[str, str] = {
    "Gen": "Genesis",
    "Exod": "Exodus",
    "Lev": "Leviticus",
    "Num": "Numbers",
    "Deut": "Deuteronomy",
    "Josh": "Joshua",
    "Judg": "Judges",
    "Ruth": "Ruth",
    "1Sam": "1 Samuel",
    "2Sam": "2 Samuel",
    "1Kgs": "1 Kings",
    "2Kgs": "2 Kings",
    "1Chr": "1 Chronicles",
    "2Chr": "2 Chronicles",
    "Ezra": "Ezra",
    "Neh": "Nehemiah",
    "Esth": "Esther",
    "Job": "Job",
    "Ps": "Psalms",
    "Prov": "Proverbs",
    "Eccl": "Ecclesiastes",
    "Song": "Song of Solomon",
    "Isa": "Isaiah",
    "Jer": "Jeremiah",
    "Lam": "Lamentations",
    "Ezek": "Ezekiel",
    "Dan": "Daniel",
    "Hos": "Hosea",
    "Joel": "Joel",
    "Amos": "Amos",
    "Obad": "Obadiah",
    "Jonah": "Jonah",
    "Mic": "Micah",
    "Nah": "Nahum",
    "Hab": "Habakkuk",
    "Zeph": "Zephaniah",
    "Hag": "Haggai",
    "Zech": "Zechariah",
    "Mal": "Malachi",
    "Matt": "Matthew",
    "Mark": "Mark",
    "Luke": "Luke",
    "John": "John",
    "Acts": "Acts",
    "Rom": "Romans",
    "1Cor": "1 Corinthians",
    "2Cor": "2 Corinthians",
    "Gal": "Galatians",
    "Eph": "Ephesians",
    "Phil": "Philippians",
    "Col": "Colossians",
    "1Thess": "1 Thessalonians",
    "2Thess": "2 Thessalonians",
    "1Tim": "1 Timothy",
    "2Tim": "2 Timothy",
    "Titus": "Titus",
    "Phlm": "Philemon",
    "Heb": "Hebrews",
    "Jas": "James",
    "1Pet": "1 Peter",
    "2Pet": "2 Peter",
    "1John": "1 John",
    "2John": "2 John",
    "3John": "3 John",
    "Jude": "Jude",
    "Rev": "Revelation",
}


def module_dir(root: Path) -> Path:
    """The single zText module folder inside an unpacked ``sword-text-*`` package."""
    found = sorted(p for p in (root / "usr/share/sword/modules/texts/ztext").glob("*") if p.is_dir())
    if len(found) != 1:
        raise RalmInputError(
            f"{root}: expected one SWORD zText module under usr/share/sword/modules/texts/ztext"
        )
    return found[0]


@functools.lru_cache(maxsize=4)
def _verses(name: str) -> tuple[Verse, ...]:
    if name not in BIBLES:
        raise RalmInputError(f"bible name {name!r}: choose one of {', '.join(sorted(BIBLES))}")
    return tuple(read_ztext(module_dir(fetch_package(BIBLES[name]))))


def _keep(book: str, apocrypha: bool) -> bool:
    return apocrypha or book in CANON


def bible_verses(name: str, *, apocrypha: bool = False) -> list[dict]:
    """Every verse of Bible `name` ("kjv", "web"):
    {id "Gen.1.1", title "Genesis 1:1", text, book, chapter, verse}.

    Books outside the 66 shared ones (the WEB's deuterocanon) only with ``apocrypha=True``.
    """
    return [
        {
            "id": v.osis_id,
            "title": f"{CANON.get(v.book, v.book)} {v.chapter}:{v.verse}",
            "text": v.text,
            "book": v.book,
            "chapter": v.chapter,
            "verse": v.verse,
        }
        for v in _verses(name)
        if _keep(v.book, apocrypha)
    ]


def books_from_verses(verses: Iterable[Verse]) -> list[dict]:
    """One document per book: verses joined by spaces, one line per chapter; in first-seen book order."""
    chapters: dict[str, dict[int, list[str]]] = {}
    for v in verses:
        chapters.setdefault(v.book, {}).setdefault(v.chapter, []).append(v.text)
    return [
        {
            "id": book,
            "title": CANON.get(book, book),
            "text": "\n".join(" ".join(c) for c in by_chapter.values()),
        }
        for book, by_chapter in chapters.items()
    ]


def bible_books(name: str, *, apocrypha: bool = False) -> list[dict]:
    """Bible `name` ("kjv", "web") as one {id (OSIS "Gen"), title ("Genesis"), text} per book, canonical
    order."""
    return books_from_verses(v for v in _verses(name) if _keep(v.book, apocrypha))
