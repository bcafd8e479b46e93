"""A real offline QA set: BSD quiz facts as questions, WordNet 3.0 glosses as the retrieval corpus.

Both come from Debian packages through ``ralm.corpora`` (``bsdgames``, ``wordnet-base``). WordNet's noun
synsets name many of the answers: "iron, Fe, atomic number 26" is a synset's title and "the capital and
largest city of Albania" the gloss of "Tirana, Albanian capital", so BM25 over the glosses finds evidence
that a small LM does not hold by heart (docs/assets.md: atomic numbers 0.17 closed book, 0.47 with a passage).
Used by the slow tests and ``bench/flare.py``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from ralm.atomic_files import write_jsonl_atomic
from ralm.eval.qa.data import QAExample

# (quiz file, field asked about, field answered, question template)
QUIZZES = {
    "elements": ("elements", "element", "number", "What is the atomic number of {}?"),
    "europe": ("europe", "European", "capital", "What is the capital of {}?"),
    "africa": ("africa", "African", "capital", "What is the capital of {}?"),
    "america": ("america", "American", "capital", "What is the capital of {}?"),
    "asia": ("asia", "Asian", "capital", "What is the capital of {}?"),
    "state": ("state", "state", "capital", "What is the capital of the state of {}?"),
}

SHOTS = (("What is the capital of France?", "Paris"), ("What is the atomic number of carbon?", "6"))
"""The two exemplars of every quiz QA run; their questions are left out of the question set."""


def quiz_examples(name: str, every: int = 1, offset: int = 0) -> list[QAExample]:
    """Questions from one quiz file (every `every`-th record from `offset`), with all accepted answers."""
    from ralm.corpora.quiz import quiz_pairs

    file, ask, answer, template = QUIZZES[name]
    pairs = quiz_pairs(file, ask, answer)[offset::every]
    subject = (lambda s: s.lower()) if name == "elements" else (lambda s: s)
    return [QAExample(f"{name}-{s}", template.format(subject(s)), list(a)) for s, a in pairs]


def quiz_qa_set(split: str) -> list[QAExample]:
    """The quiz QA set (FLARE's offline benchmark): every question of the QUIZZES files but the exemplars',
    de-duplicated by question, the files interleaved (so a ``--limit`` prefix mixes the files, though not
    evenly: with six files and every third question in dev, a short prefix can miss a kind), split by
    position: every third question is ``dev`` (for choosing settings, e.g. theta), the rest ``test`` (for
    reporting); ``all`` is both. Both splits hold every file."""
    if split not in ("dev", "test", "all"):
        raise ValueError(f"split must be dev, test or all, got {split!r}")
    shots = {q for q, _ in SHOTS}
    seen: dict[str, QAExample] = {}
    for row in itertools.zip_longest(*(quiz_examples(name) for name in QUIZZES)):
        for ex in row:
            if ex is not None and ex.question not in shots:
                seen.setdefault(ex.question, ex)
    examples = list(seen.values())
    if split == "all":
        return examples
    return [ex for i, ex in enumerate(examples) if (i % 3 == 0) == (split == "dev")]


def write_examples(examples: list[QAExample], path: str | Path) -> Path:
    """The examples as ralm's QA JSONL ({id, question, answers})."""
    path = Path(path)
    write_jsonl_atomic(
        path, ({"id": ex.id, "question": ex.question, "answers": ex.answers} for ex in examples)
    )
    return path


def wordnet_noun_index(out_dir: str | Path) -> tuple[Path, Path]:
    """Passages (one per noun synset: title = its words, text = its gloss) and a bm25s index over them.

    Reused when already built in `out_dir` (the index checks the passages file's hash).
    """
    from ralm.corpora.texts import wordnet_glosses
    from ralm.retrieval.backends import BM25S
    from ralm.retrieval.index import build_index
    from ralm.retrieval.passages import split_passages, write_passages

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    passages, index = out_dir / "wordnet_nouns.jsonl", out_dir / "wordnet_nouns_index"
    if not passages.exists():
        write_passages(split_passages(d for d in wordnet_glosses() if d["id"].startswith("noun-")), passages)
    build_index(passages, index, backend=BM25S)
    return passages, index
