"""Readers for the other real texts of docs/assets.md, each from its Debian package, as {id, title, text}
dicts.

- `fortunes()`: short quotes and jokes, an unrelated control text for Bible retrieval;
- `wordnet_glosses()`: one definition per WordNet synset, passages for open-domain QA;
- `python_docs()`: the Python 3.11 documentation sources with light reST markup removed.
"""

from __future__ import annotations

import re

from ralm.corpora.debian import fetch_package

_FORTUNES_DIR = "usr/share/games/fortunes"
_WORDNET_DIR = "usr/share/wordnet"
_WORDNET_POS = ("noun", "verb", "adj", "adv")


def parse_fortunes(text: str, source: str) -> list[dict]:
    """Records of one fortune file (separated by lines holding only ``%``), whitespace kept inside."""
    records = re.split(r"^%[ \t]*$", text, flags=re.M)
    out = []
    for record in records:
        body = record.strip("\n").rstrip()
        if body.strip():
            out.append({"id": f"{source}-{len(out)}", "title": source, "text": body})
    return out


def fortunes() -> list[dict]:
    """Every fortune of Debian's `fortunes` package, {id "science-0", title "science", text}, files sorted."""
    folder = fetch_package("fortunes") / _FORTUNES_DIR
    out = []
    for path in sorted(folder.iterdir()):
        # Each file has a ".dat" index and a ".u8" symlink to itself; read each real text file once.
        if path.suffix in (".dat", ".u8") or path.is_symlink() or not path.is_file():
            continue
        out += parse_fortunes(path.read_text(encoding="utf-8", errors="replace"), path.name)
    return out


def parse_wordnet_line(line: str, pos: str) -> dict | None:
    """One synset line of a WordNet ``data.*`` file as {id "noun-00001740", title "entity", text gloss}.

    Layout: ``offset lex_filenum ss_type w_cnt(hex) word lex_id [word lex_id ...] ... | gloss``.
    License lines start with spaces and give None.
    """
    if not line or line.startswith(" "):
        return None
    head, sep, gloss = line.partition(" | ")
    if not sep:
        return None
    fields = head.split()
    count = int(fields[3], 16)
    # Adjective words may carry a syntactic marker such as "(a)" or "(p)".
    words = [re.sub(r"\(\w+\)$", "", w).replace("_", " ") for w in fields[4 : 4 + 2 * count : 2]]
    return {"id": f"{pos}-{fields[0]}", "title": ", ".join(words), "text": gloss.strip()}


def wordnet_glosses() -> list[dict]:
    """Every WordNet 3.0 synset's gloss (definition and examples), nouns, verbs, adjectives, adverbs."""
    folder = fetch_package("wordnet-base") / _WORDNET_DIR
    out = []
    for pos in _WORDNET_POS:
        with open(folder / f"data.{pos}", encoding="utf-8", errors="replace") as f:
            out += [r for line in f if (r := parse_wordnet_line(line.rstrip("\n"), pos)) is not None]
    return out


_DIRECTIVE = re.compile(r"^\s*\.\. [\w:-]+::.*$|^\s*\.\. _[^:]+:.*$|^\s*:[\w -]+:(?:\s.*)?$")
_UNDERLINE = re.compile(r"^\s*([=\-~^\"'`#*+.])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:+-]+:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`")
_LINK = re.compile(r"`([^`<]*?)\s*<[^>]*>`_+")


def strip_rest(text: str) -> str:
    """Light reST removal: directive and field lines, heading underlines, roles, links and inline marks."""
    lines = [line for line in text.splitlines() if not (_DIRECTIVE.match(line) or _UNDERLINE.match(line))]
    text = "\n".join(lines)
    text = _ROLE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`_*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*\*?([^*\n]+?)\*\*?(?![\w*])", r"\1", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def python_docs() -> list[dict]:
    """The Python 3.11 documentation (Debian `python3.11-doc`), one document per page source."""
    root = fetch_package("python3.11-doc") / "usr/share/doc/python3.11/html/_sources"
    out = []
    for path in sorted(root.rglob("*.rst.txt")):
        raw = path.read_text(encoding="utf-8", errors="replace")
        text = strip_rest(raw)
        if not text:
            continue
        page = str(path.relative_to(root))[: -len(".rst.txt")]
        title = next((line.strip() for line in text.splitlines() if line.strip()), page)
        out.append({"id": page, "title": title, "text": text})
    return out
