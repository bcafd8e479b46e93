"""ralm.corpora on the real Debian packages (fetched once into the shared cache; slow on a fresh machine).

Expected values come from the texts themselves as published: the KJV has 31,102 verses in 1,189 chapters
of 66 books; Genesis 1:1 and John 11:35 are quoted from the printed editions; atomic numbers and capitals
are common knowledge.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from ralm.corpora import (
    CANON,
    bible_books,
    bible_verses,
    fetch_package,
    fortunes,
    python_docs,
    quiz,
    quiz_pairs,
    wordnet_glosses,
)

pytestmark = pytest.mark.slow


def test_kjv_verses_are_complete_and_clean():
    verses = bible_verses("kjv")
    assert len(verses) == 31102
    assert len({(v["book"], v["chapter"]) for v in verses}) == 1189
    by_id = {v["id"]: v for v in verses}
    assert by_id["Gen.1.1"]["text"] == "In the beginning God created the heaven and the earth."
    assert by_id["John.11.35"]["text"] == "Jesus wept."
    assert by_id["John.11.35"]["title"] == "John 11:35"
    assert by_id["Rev.22.21"]["text"] == "The grace of our Lord Jesus Christ be with you all. Amen."
    assert not any("<" in v["text"] or ">" in v["text"] for v in verses)


def test_web_books_align_with_kjv_books():
    kjv, web = bible_books("kjv"), bible_books("web")
    assert [b["id"] for b in kjv] == [b["id"] for b in web] == list(CANON)
    assert [b["title"] for b in web][:2] == ["Genesis", "Exodus"]
    mark = {b["id"]: b for b in web}["Mark"]["text"]
    assert mark.startswith("The beginning of the Good News of Jesus Christ, the Son of God.")
    # Footnotes are gone and the glossary after Revelation is not scripture.
    rev = {b["id"]: b for b in web}["Rev"]["text"]
    assert rev.endswith("Amen.") and "Abaddon" not in rev.split("Amen.")[-1]
    words = sum(len(b["text"].split()) for b in kjv)
    assert 780_000 < words < 800_000  # docs/assets.md: 794k words
    web_all = bible_books("web", apocrypha=True)
    assert {"Tob", "Sir", "1Macc"} <= {b["id"] for b in web_all}


def test_quiz_elements_and_capitals():
    elements = quiz("elements")
    assert len(elements) == 103
    numbers = dict(quiz_pairs("elements", "element", "number"))
    assert numbers["Hydrogen"] == ["1"] and numbers["Oxygen"] == ["8"] and numbers["Gold"] == ["79"]
    capitals = dict(quiz_pairs("europe", "European", "capital"))
    assert "Paris" in capitals["France"] and "Vienna" in capitals["Austria"]


def test_wordnet_and_fortunes_and_python_docs():
    glosses = wordnet_glosses()
    assert len(glosses) == 117659  # WordNet 3.0 synsets: 82115 noun, 13767 verb, 18156 adj, 3621 adv
    entity = next(g for g in glosses if g["id"] == "noun-00001740")
    assert entity["title"] == "entity" and entity["text"].startswith("that which is perceived or known")
    quotes = fortunes()
    assert len(quotes) > 10_000 and all(q["text"].strip() for q in quotes)
    assert len({q["id"] for q in quotes}) == len(quotes)
    docs = {d["id"]: d for d in python_docs()}
    assert "library/json" in docs and "json" in docs["library/json"]["text"]
    assert ":func:`" not in docs["library/json"]["text"]


def test_real_apt_refetches_a_corrupt_cached_package(tmp_path):
    root = fetch_package("fortunes", cache=tmp_path)
    manifest = json.loads((tmp_path / "debs/fortunes.json").read_text())
    deb = tmp_path / "debs" / manifest["filename"]
    deb.write_bytes(deb.read_bytes()[: deb.stat().st_size // 2])
    assert fetch_package("fortunes", cache=tmp_path) == root
    assert hashlib.sha256(deb.read_bytes()).hexdigest() == manifest["sha256"]
    assert (root / "usr/share/games/fortunes/science").is_file()


def _shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@pytest.mark.parametrize("domain", ["bible", "python-docs"])
def test_the_full_demo_foreign_set_is_the_other_domains_unrelated_text_and_shares_nothing(tmp_path, domain):
    from ralm.demo.assets import PYTHON_DOCS, bible_texts, python_docs_texts
    from ralm.demo.presets import FULL_BOOKS

    texts = (
        bible_texts(tmp_path, FULL_BOOKS, "test", foreign=True)
        if domain == "bible"
        else python_docs_texts(tmp_path, "test", foreign=True)
    )
    assert list(texts.evals) == ["related", "unrelated", "foreign"]
    expected = list(PYTHON_DOCS["unrelated"]) if domain == "bible" else list(FULL_BOOKS.unrelated_books)

    def rows(path) -> list[dict]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    foreign = rows(texts.evals["foreign"])
    assert [d["id"] for d in foreign] == expected
    # No 8-word run of the foreign text in the corpus or the training text (the report's copy test).
    seen = _shingles(" ".join(d["text"] for d in foreign))
    for path in (texts.corpus, texts.train):
        assert not seen & _shingles(" ".join(d["text"] for d in rows(path))), path
    assert list(bible_texts(tmp_path / "q", FULL_BOOKS, "test").evals) == ["related", "unrelated"]
