"""A Python copy of Lucene's default English analyzer, so bm25s ranks like Pyserini (docs/assets.md).

Lucene's chain is StandardTokenizer -> EnglishPossessiveFilter -> LowerCaseFilter -> StopFilter(English)
-> PorterStemFilter. This copy: trailing possessive 's stripped, Lucene's 33 English stop words, Porter
stemming via PyStemmer with tokens of two characters or fewer left as they are (Lucene skips them too).

Tokens follow StandardTokenizer's word-break rules (Unicode UAX #29) more closely than the pattern
docs/assets.md measured (``\\w+(?:['.]\\w+)*``): letters stay joined across ``. ' ’ :`` ("u.s", "don’t",
"c:char"), digits across ``. , ; '`` ("1,024", "3.14"), but a dot between a letter and a digit or underscore
breaks ("p._asdict" -> "p", "_asdict"), and underscore-only runs are no word. On 8,432 lines of
standard-library docstrings this matched Lucene's analyzer on 99.8% of lines (the docs/assets.md pattern:
98.6%); what remains is mostly Porter variants ("possibly": Lucene "possibl", Snowball's porter "possibli").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import Stemmer

_LETTER, _DIGIT = r"[^\W\d_]", r"\d"
TOKEN_PATTERN = (
    rf"\w+(?:(?:(?<={_LETTER})[.'\u2019:](?={_LETTER})|(?<={_DIGIT})[.,;'\u2019](?={_DIGIT}))\w+)*"
)

# org.apache.lucene.analysis.en.EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
LUCENE_ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
assert len(LUCENE_ENGLISH_STOPWORDS) == 33

ANALYZER_SETTINGS = {
    "name": "lucene-english-compatible/2",
    "token_pattern": TOKEN_PATTERN,
    "possessive": "strip trailing 's",
    "lowercase": True,
    "stopwords": "lucene-english-33",
    "stemmer": "porter (PyStemmer), tokens of <= 2 chars unstemmed",
}


class LuceneEnglishAnalyzer:
    """Text -> terms. Keeps a cache from surface token to term: corpora repeat words, stemming is the cost."""

    def __init__(self) -> None:
        self._token = re.compile(TOKEN_PATTERN)
        self._stemmer = Stemmer.Stemmer("porter")
        self._cache: dict[str, str | None] = {}

    def _term(self, token: str) -> str | None:
        """The indexed term for a lower-cased token, or None for a stop word."""
        word = token
        if word.endswith(("'s", "\u2019s")):
            word = word[:-2]
        if not word.strip("_") or word in LUCENE_ENGLISH_STOPWORDS:
            return None
        return word if len(word) <= 2 else self._stemmer.stemWord(word)

    def terms(self, text: str) -> list[str]:
        """Analyzed terms of `text`, in order, repeats kept (term frequencies matter for BM25)."""
        cache = self._cache
        out = []
        for token in self._token.findall(text.lower()):
            term = cache.get(token, "")
            if term == "":
                term = cache[token] = self._term(token)
            if term is not None:
                out.append(term)
        return out

    def batch(self, texts: Iterable[str]) -> list[list[str]]:
        return [self.terms(t) for t in texts]
