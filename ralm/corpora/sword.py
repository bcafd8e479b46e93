"""Read a SWORD zText Bible module (the format of Debian's `sword-text-*` packages) into plain verses.

Per testament (``ot``, ``nt``) a module has three files:
- ``.bzs``: one (offset, size, uncompressed size) uint32 little-endian triple per zlib-compressed block of
  ``.bzz`` (with ``BlockType=BOOK`` a block is a book);
- ``.bzv``: one 10-byte record (block uint32, offset uint32, size uint16) per verse slot, in the module's
  versification order: module heading, testament heading, then per book an introduction slot and per
  chapter a heading slot (verse 0) followed by its verses;
- ``.bzz``: the blocks, whose decompressed bytes hold each slot's OSIS XML at (offset, size).

Rather than carrying versification tables, the reader follows the OSIS ``<chapter osisID="Gen.1"/>`` marker
that starts each chapter-heading slot: the slots after it are verses 1, 2, ... of that chapter, which is
exactly SWORD's layout, whatever the versification (KJV uses "KJV", the World English Bible "NRSVA").
"""

from __future__ import annotations

import html
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ralm.errors import RalmInputError

_BLOCK = struct.Struct("<III")  # offset, size, uncompressed size
_SLOT = struct.Struct("<IIH")  # block, offset, size
# The chapter's start marker (its end marker, with eID, closes the chapter's last verse).
_CHAPTER = re.compile(r'<chapter\b(?=[^>]*\bsID=)[^>]*\bosisID="([^".]+)\.(\d+)"')
# A book's start marker (its end marker, with eID, sits in the book's last verse).
_BOOK = re.compile(r'<div\b(?=[^>]*\bsID=)[^>]*\btype="book"')
# Footnotes, and headings added by editors (canonical psalm superscriptions are text and stay).
_NOTE = re.compile(r"<note\b[^>]*?(?:/>|>.*?</note>)", re.S)
# What follows a book's end marker in its last slot is back matter (the WEB appends its glossary there).
_BOOK_END = re.compile(r'<div\b(?=[^>]*\beID=)[^>]*\btype="book"[^>]*>.*', re.S)
_EDITORIAL_TITLE = re.compile(r'<title\b(?![^>]*canonical="true")[^>]*?(?:/>|>.*?</title>)', re.S)
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Verse:
    book: str
    """OSIS book id ("Gen", "Matt"): the same in every module, so books of two translations align."""
    chapter: int
    verse: int
    text: str

    @property
    def osis_id(self) -> str:
        return f"{self.book}.{self.chapter}.{self.verse}"


def osis_to_text(markup: str) -> str:
    """Plain text of one slot's OSIS XML: drop notes and editorial headings, then every tag."""
    text = _BOOK_END.sub(" ", markup)
    text = _NOTE.sub(" ", text)
    text = _EDITORIAL_TITLE.sub(" ", text)
    text = _TAG.sub(" ", text)
    text = html.unescape(text)
    # Tags sat between words and punctuation ("God</w>, the"): remove the space they leave before marks.
    text = re.sub(r"\s+([,.;:!?)\]’”])", r"\1", _SPACE.sub(" ", text))
    text = re.sub(r"([(\[‘“])\s+", r"\1", text)
    return text.strip()


def _read_testament(module_dir: Path, testament: str) -> Iterator[tuple[int, str]]:
    """(slot number, markup) per non-empty slot, in order. Missing files mean no such testament."""
    bzs, bzv, bzz = (module_dir / f"{testament}.{ext}" for ext in ("bzs", "bzv", "bzz"))
    if not bzv.exists():
        return
    blocks_raw, slots_raw, data = bzs.read_bytes(), bzv.read_bytes(), bzz.read_bytes()
    if len(blocks_raw) % _BLOCK.size or len(slots_raw) % _SLOT.size:
        raise RalmInputError(f"{bzs}: size is not a whole number of records; not a SWORD zText module")
    blocks = [_BLOCK.unpack_from(blocks_raw, i) for i in range(0, len(blocks_raw), _BLOCK.size)]
    cache: dict[int, bytes] = {}
    for i in range(0, len(slots_raw), _SLOT.size):
        block, offset, size = _SLOT.unpack_from(slots_raw, i)
        if size == 0:
            continue
        if block >= len(blocks):
            raise RalmInputError(f"{bzv}: record {i // _SLOT.size} points at block {block} of {len(blocks)}")
        if block not in cache:
            cache.clear()  # blocks are read in order; keep one book in memory
            start, length, usize = blocks[block]
            try:
                cache[block] = zlib.decompress(data[start : start + length])
            except zlib.error as err:
                raise RalmInputError(f"{bzz}: block {block} does not decompress ({err})") from None
        yield i // _SLOT.size, cache[block][offset : offset + size].decode("utf-8", errors="replace")


def read_ztext(module_dir: Path | str) -> Iterator[Verse]:
    """Every non-empty verse of a zText module folder (``.../ztext/engkjv2006eb``), OT then NT."""
    module_dir = Path(module_dir)
    if not any((module_dir / f"{t}.bzv").exists() for t in ("ot", "nt")):
        raise RalmInputError(f"{module_dir}: no ot.bzv or nt.bzv; not a SWORD zText module folder")
    for testament in ("ot", "nt"):
        book, chapter, heading_slot = None, 0, 0
        for slot, markup in _read_testament(module_dir, testament):
            heading = _CHAPTER.search(markup)
            if heading:
                # A chapter-heading slot (verse 0): slot heading_slot + n holds verse n, empty or not.
                book, chapter, heading_slot = heading.group(1), int(heading.group(2)), slot
                continue
            if chapter == 0 or _BOOK.search(markup):
                # A book introduction, or the module and testament headings before the first book.
                chapter = 0
                continue
            text = osis_to_text(markup)
            if text:
                yield Verse(book, chapter, slot - heading_slot, text)
