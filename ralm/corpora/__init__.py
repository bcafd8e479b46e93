"""Real offline text from Debian packages (docs/assets.md), fetched into a cache without root.

``from ralm.corpora import bible_books, bible_verses, fortunes, wordnet_glosses, quiz, python_docs``.
Every reader returns plain dicts ({id, title, text} for documents). The first call fetches the package
with `apt-get download` (package lists must exist: `apt-get update` once per machine) into
``$RALM_CACHE`` or ``~/.cache/ralm``; later calls use the verified cache and need no network.
"""

from ralm.corpora.bible import BIBLES, CANON, bible_books, bible_verses
from ralm.corpora.debian import PackageFetchError, cache_root, fetch_package
from ralm.corpora.quiz import quiz, quiz_names, quiz_pairs
from ralm.corpora.texts import fortunes, python_docs, wordnet_glosses

__all__ = [
    "BIBLES",
    "CANON",
    "PackageFetchError",
    "bible_books",
    "bible_verses",
    "cache_root",
    "fetch_package",
    "fortunes",
    "python_docs",
    "quiz",
    "quiz_names",
    "quiz_pairs",
    "wordnet_glosses",
]
