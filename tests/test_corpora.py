"""Fast tests of ralm.corpora's parsers on small inputs built here, with expected values written by hand."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from ralm.corpora.bible import books_from_verses
from ralm.corpora.quiz import expand, logical_lines, parse_quiz, split_fields
from ralm.corpora.sword import Verse, osis_to_text, read_ztext
from ralm.corpora.texts import parse_fortunes, parse_wordnet_line, strip_rest
from ralm.errors import RalmInputError


def write_ztext(folder: Path, testament: str, blocks: list[list[str | None]]) -> None:
    """A zText testament: `blocks` of slots (None = empty slot), slot order = the index order."""
    bzz, bzs, bzv = bytearray(), bytearray(), bytearray()
    for block_number, slots in enumerate(blocks):
        raw = bytearray()
        for slot in slots:
            data = (slot or "").encode()
            bzv += struct.pack("<IIH", block_number, len(raw), len(data))
            raw += data
        packed = zlib.compress(bytes(raw))
        bzs += struct.pack("<III", len(bzz), len(packed), len(raw))
        bzz += packed
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{testament}.bzz").write_bytes(bytes(bzz))
    (folder / f"{testament}.bzs").write_bytes(bytes(bzs))
    (folder / f"{testament}.bzv").write_bytes(bytes(bzv))


def _book(osis: str, chapters: list[list[str | None]], back_matter: str = "") -> list[str | None]:
    slots: list[str | None] = [
        f'<div osisID="{osis}" sID="b{osis}" type="book"/><title type="main">Book {osis}</title>'
    ]
    for number, verses in enumerate(chapters, 1):
        slots.append(f'<chapter n="{number}" osisID="{osis}.{number}" sID="{osis}.{number}"/>')
        slots += verses
    last = next(i for i in range(len(slots) - 1, -1, -1) if slots[i])
    slots[last] += (
        f'<chapter eID="{osis}.{len(chapters)}"/>'
        f'<div eID="b{osis}" osisID="{osis}" type="book"/>{back_matter}'
    )
    return slots


@pytest.fixture
def tiny_module(tmp_path) -> Path:
    folder = tmp_path / "mod"
    header = [None, '<milestone type="x-importer"/>']  # module heading (empty) and testament heading
    gen = _book(
        "Gen",
        [
            [
                'In the <w lemma="strong:H7225">beginning</w> God created.'
                '<note placement="foot">A footnote.</note>',
                "And the earth was void; &amp; dark.",
            ],
            [
                None,
                '<title canonical="true" type="psalm">A Song.</title> '
                "Thus the heavens<title>Editorial</title> were finished.",
            ],
        ],
    )
    exod = _book("Exod", [["Now these are the names."]], back_matter=" Glossary: not scripture.")
    # One block for the headings, then one block per book, as BlockType=BOOK modules do.
    write_ztext(folder, "ot", [header, gen, exod])
    write_ztext(
        folder, "nt", [header, _book("Matt", [["The book of the generation.", "Abraham begat Isaac."]])]
    )
    return folder


def test_read_ztext_gives_verses_with_their_numbers(tiny_module):
    verses = list(read_ztext(tiny_module))
    assert verses == [
        Verse("Gen", 1, 1, "In the beginning God created."),
        Verse("Gen", 1, 2, "And the earth was void; & dark."),
        # Verse 1 of chapter 2 is an empty slot: the next one is still verse 2.
        Verse("Gen", 2, 2, "A Song. Thus the heavens were finished."),
        Verse("Exod", 1, 1, "Now these are the names."),
        Verse("Matt", 1, 1, "The book of the generation."),
        Verse("Matt", 1, 2, "Abraham begat Isaac."),
    ]
    assert verses[2].osis_id == "Gen.2.2"


def test_books_join_verses_and_chapters(tiny_module):
    books = books_from_verses(read_ztext(tiny_module))
    assert [b["id"] for b in books] == ["Gen", "Exod", "Matt"]
    assert [b["title"] for b in books] == ["Genesis", "Exodus", "Matthew"]
    assert books[0]["text"] == (
        "In the beginning God created. And the earth was void; & dark.\n"
        "A Song. Thus the heavens were finished."
    )


def test_read_ztext_rejects_a_folder_without_a_module(tmp_path):
    with pytest.raises(RalmInputError, match="not a SWORD zText module"):
        list(read_ztext(tmp_path))


def test_read_ztext_rejects_a_truncated_index(tiny_module):
    (tiny_module / "ot.bzv").write_bytes((tiny_module / "ot.bzv").read_bytes()[:-3])
    with pytest.raises(RalmInputError, match="ot.bz"):
        list(read_ztext(tiny_module))


def test_osis_to_text_spacing_around_tags():
    markup = (
        '<w>God</w>, <q who="x">“<w>Let</w> there be light,”</q> '
        "<lb/>and <divineName>Lord</divineName> (sic) ."
    )
    assert osis_to_text(markup) == "God, “Let there be light,” and Lord (sic)."


@pytest.mark.parametrize(
    ("pattern", "spellings"),
    [
        ("cap{ital}", ["capital", "cap"]),
        ("Cal{if{ornia}}|CA", ["California", "Calif", "Cal", "CA"]),
        ("Andorra la V[ell|iej]a", ["Andorra la Vella", "Andorra la Vieja"]),
        ("{G{eorge} }Washington", ["George Washington", "G Washington", "Washington"]),
        # "{-| }" offers "-", " " or nothing at each of two places, the first place varying slowest.
        (
            "forget{-| }me{-| }not",
            [
                "forget-me-not",
                "forget-me not",
                "forget-menot",
                "forget me-not",
                "forget me not",
                "forget menot",
                "forgetme-not",
                "forgetme not",
                "forgetmenot",
            ],
        ),
        (
            "To be{,} or not to be{\\:}",
            ["To be, or not to be:", "To be, or not to be", "To be or not to be:", "To be or not to be"],
        ),
    ],
)
def test_expand_quiz_fields(pattern, spellings):
    assert expand(pattern) == spellings


def test_parse_quiz_joins_continued_lines_and_keeps_escaped_colons():
    text = "bard:To be{,} or not to be{\\:}:\\\nHamlet\nH:1:1.008:Hydrogen\n\n"
    assert logical_lines(text) == ["bard:To be{,} or not to be{\\:}:Hamlet", "H:1:1.008:Hydrogen"]
    assert split_fields("a\\:b:c") == ["a\\:b", "c"]
    records = parse_quiz(
        "H:1:1.008:Hydrogen\nHe:2:4.003:Hel{ium}\n", ["symbol", "number", "weight", "element"]
    )
    assert records == [
        {"symbol": ["H"], "number": ["1"], "weight": ["1.008"], "element": ["Hydrogen"]},
        {"symbol": ["He"], "number": ["2"], "weight": ["4.003"], "element": ["Helium", "Hel"]},
    ]
    with pytest.raises(RalmInputError, match="elements:1: 2 fields"):
        parse_quiz("H:1\n", ["symbol", "number", "weight"], "elements")


def test_parse_wordnet_line():
    line = (
        "00002137 03 n 02 abstraction 0 abstract_entity 0 010 @ 00001740 n 0000 | a general concept formed "
        "by extracting common features from specific examples  "
    )
    assert parse_wordnet_line(line, "noun") == {
        "id": "noun-00002137",
        "title": "abstraction, abstract entity",
        "text": "a general concept formed by extracting common features from specific examples",
    }
    adjective = (
        "00001740 00 a 01 able(a) 0 005 = 05207437 n 0000 | (usually followed by `to') having the means"
    )
    assert parse_wordnet_line(adjective, "adj")["title"] == "able"
    assert parse_wordnet_line("  1 This software and database is being provided", "noun") is None


def test_parse_fortunes():
    text = "1 + 1 = 3, for large values of 1.\n%\nTwo\n\tlines\n%\n%\n"
    assert parse_fortunes(text, "science") == [
        {"id": "science-0", "title": "science", "text": "1 + 1 = 3, for large values of 1."},
        {"id": "science-1", "title": "science", "text": "Two\n\tlines"},
    ]


def test_strip_rest():
    source = (
        ":mod:`nis` --- Interface to Sun's NIS\n=====================================\n\n"
        ".. module:: nis\n   :platform: Unix\n\nThe :func:`match` call returns ``bytes``; see `PEP 594 "
        "<https://peps.python.org/pep-0594/>`_ and *the* **docs**.\n"
    )
    assert strip_rest(source) == (
        "nis --- Interface to Sun's NIS\n\nThe match call returns bytes; see PEP 594 and the docs."
    )
