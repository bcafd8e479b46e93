"""WikiText-103 as the paper uses it: articles for data-gen and the index, the test split for eval.

On the hub (``Salesforce/wikitext``, config ``wikitext-103-raw-v1``) each split is a column ``text`` of
lines: an article starts with a top-level heading row `` = Title = \\n`` (one ``=`` on each side;
sections are `` = = Section = = \\n``), and blank rows ``""`` separate paragraphs. A saved split read
row by row would make every line a "document", headings and blank lines included.

``articles(rows)`` groups the rows into articles ``{"id", "title", "text"}``: the text of an article is its
rows joined exactly as eval_lm.py joins a split (``"".join(x or " \\n")``), so the articles of a split,
concatenated in order, are the very string eval_lm.py scores (tested).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

HUB_ID = "Salesforce/wikitext"
HUB_CONFIG = "wikitext-103-raw-v1"
SPLITS = ("train", "validation", "test")

_TITLE = re.compile(r"^ = (?!=)(.*?) = \n?$")
"""A top-level heading row: " = Title = " (a section heading starts " = = ")."""


def eval_lm_join(rows: Iterable[str]) -> str:
    """The authors' eval_lm.py string of a split: rows concatenated, an empty row read as " \\n"."""
    return "".join(row if row else " \n" for row in rows)


def detokenize_title(title: str) -> str:
    """A WikiText heading in Wikipedia's spelling: WikiText splits punctuation off (``M @-@ 82 ( Michigan
    highway )``, ``Edson 's Ridge``, ``2011 – 12``, ``They Don 't``, ``" Weird Al " Yankovic``), Wikipedia
    (and so the DPR passages' titles) does not (``M-82 (Michigan highway)``, ``Edson's Ridge``,
    ``2011–12``, ``They Don't``, ``"Weird Al" Yankovic``). The result is in Unicode NFC, Wikipedia's own
    form (the RALM authors' exclusion list also carries the NFD spelling of two evaluation titles)."""
    for token, char in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" – ", "–")):
        title = title.replace(token, char)
    title = re.sub(r'" (.*?) "', r'"\1"', title)  # a spaced pair of double quotes, in order
    title = re.sub(r"\( ", "(", title)
    title = re.sub(r" \)", ")", title)
    title = re.sub(r" ('s|'re|'ve|'ll|'m|'d|'t|n't|')(?=\s|$|\))", r"\1", title)
    title = re.sub(r" ([,.;:!?])(?=\s|$)", r"\1", title)
    return unicodedata.normalize("NFC", title)


def article_title(row: str) -> str | None:
    """The title when `row` is a top-level heading (in Wikipedia's spelling), else None."""
    match = _TITLE.match(row)
    return detokenize_title(match.group(1).strip()) if match else None


def articles(rows: Iterable[str], split: str) -> Iterator[dict]:
    """The split's articles in order. The id is the title (Wikipedia's own document identity, which the
    wikipedia-dpr passages carry too, so data-gen's own-document rule keeps an article's Wikipedia passages
    out of its candidates); a repeated title gets `` (2)``, `` (3)``...; no title: ``{split}-{n}``.

    An article runs from its heading row to the row before the next heading; rows before the first
    heading (the hub's one leading blank row) go with the first article.
    """
    title, body, n, seen = None, [], 0, {}

    def article() -> dict:
        name = title or f"{split}-{n}"
        seen[name] = seen.get(name, 0) + 1
        doc_id = name if seen[name] == 1 else f"{name} ({seen[name]})"
        return {"id": doc_id, "title": title or "", "text": eval_lm_join(body)}

    for row in rows:
        heading = article_title(row) if row else None
        if heading is not None:
            if title is not None:
                yield article()
                n, body = n + 1, []
            title = heading
        body.append(row)
    if body:
        yield article()
