"""Answer metrics for open-domain QA and FLARE (pure functions over strings).

Normalisation is SQuAD's (lower case, drop punctuation, drop the articles a/an/the, squeeze whitespace),
the rule the RALM paper's ODQA exact match and FLARE's 2WikiMultihopQA metrics use. With several gold
answers a prediction gets the best score over them, as in the SQuAD and DPR evaluation scripts.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
_ANSWER_IS = re.compile(r"answer is[:\s]*", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in golds))


@dataclass(frozen=True)
class TokenOverlap:
    """Bag-of-tokens precision, recall and F1 of a prediction against one gold answer."""

    precision: float
    recall: float
    f1: float


def token_overlap(prediction: str, gold: str) -> TokenOverlap:
    """SQuAD token F1 (with its precision and recall) between normalised prediction and gold."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        # Both empty counts as a match; one empty as a miss (the SQuAD v2 convention).
        same = float(pred_tokens == gold_tokens)
        return TokenOverlap(same, same, same)
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return TokenOverlap(0.0, 0.0, 0.0)
    precision = common / len(pred_tokens)
    recall = common / len(gold_tokens)
    return TokenOverlap(precision, recall, 2 * precision * recall / (precision + recall))


def best_token_overlap(prediction: str, golds: Sequence[str]) -> TokenOverlap:
    """The gold answer with the highest F1 gives all three numbers (as FLARE's 2WikiMultihopQA scoring)."""
    if not golds:
        return TokenOverlap(0.0, 0.0, 0.0)
    return max((token_overlap(prediction, g) for g in golds), key=lambda o: o.f1)


def extract_answer(generation: str) -> str:
    """The text after the last "answer is" (chain-of-thought outputs), else the first line."""
    matches = list(_ANSWER_IS.finditer(generation))
    if matches:
        tail = generation[matches[-1].end() :]
    else:
        tail = generation.strip()
    line = tail.strip().split("\n", 1)[0].strip()
    return line[:-1].strip() if line.endswith(".") else line


def yes_no(text: str) -> str | None:
    """ "yes" or "no" when the (extracted) answer starts with one of them, else None."""
    words = normalize_answer(text).split()
    if words and words[0] in ("yes", "no"):
        return words[0]
    return None


def yes_no_accuracy(prediction: str, golds: Sequence[str]) -> float:
    """StrategyQA accuracy: the prediction's yes/no equals the gold's (no yes/no in the output is wrong)."""
    answer = yes_no(prediction)
    return float(answer is not None and any(answer == yes_no(g) for g in golds))


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, one row at a time)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _rouge_tokens(text: str) -> list[str]:
    # rouge-score's default tokenizer: lower case, runs of [a-z0-9], no stemming.
    return re.findall(r"[a-z0-9]+", text.lower())


def rouge_l(prediction: str, golds: Sequence[str]) -> float:
    """ROUGE-L F1 (sentence-level LCS, beta = 1) against the best gold, as rouge-score's ``rougeL``."""
    pred = _rouge_tokens(prediction)
    best = 0.0
    for gold in golds:
        ref = _rouge_tokens(gold)
        lcs = _lcs_length(pred, ref) if pred and ref else 0
        if lcs:
            p, r = lcs / len(pred), lcs / len(ref)
            best = max(best, 2 * p * r / (p + r))
    return best


_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# What precedes a word that opens a sentence: the text's start, a sentence end or a new line (each maybe
# followed by opening quotes or brackets), or an opening quotation mark (quoted speech opens a sentence).
_SENTENCE_START = re.compile(r"(?:(?:^|[.!?][\"'’”)\]]*\s+|\n\s*)[\"'“‘(\[]*|[“‘]|(?:^|\s)[\"'])$")


def names(text: str) -> set[str]:
    """The names of `text`: capitalised words of two letters or more that do not open a sentence (so
    "Then" after a full stop or opening a quotation is no name, "Solomon" anywhere else is; the text's
    first word opens a sentence). A possessive's apostrophe ends the
    word ("Yahweh’s" is "Yahweh")."""
    found = set()
    for match in _WORD.finditer(text):
        word = match.group()
        if len(word) > 1 and word[0].isupper() and not _SENTENCE_START.search(text[: match.start()]):
            found.add(word)
    return found


def name_recall(generation: str, reference: str) -> float | None:
    """The share of the reference's names (``names``) that the generation contains as whole words, case
    kept; None when the reference has no name (the example then has no name recall)."""
    wanted = names(reference)
    if not wanted:
        return None
    have = set(_WORD.findall(generation))
    return len(wanted & have) / len(wanted)


def has_answer(passages: Sequence[str], golds: Sequence[str]) -> float:
    """1.0 when a normalised passage contains a normalised gold answer as a substring.

    This is the rule of the RALM authors' ``eval_qa.py`` (``text_has_answer``), applied to the passages
    shown to the LM rather than to the whole prompt (the question itself never counts as evidence).
    """
    gold_norms = [g for g in (normalize_answer(a) for a in golds) if g]
    return float(any(g in normalize_answer(p) for p in passages for g in gold_norms))


def score_answer(
    generation: str,
    answers: Sequence[str],
    task: str = "short",
    long_answers: Sequence[str] = (),
    answer_groups: Sequence[Sequence[str]] = (),
) -> dict:
    """Per-example scores of a generation for its task (``short``, ``yesno``, ``long`` or ``continuation``).

    ``continuation`` scores the whole generation against the one reference (the true continuation):
    ROUGE-L F1, SQuAD token F1 (with its precision and recall) and ``name_recall``; it has no EM.

    The answer is the text after "answer is" (else the first line); EM, F1, precision and recall compare it
    with the gold short answers. ``yesno`` adds StrategyQA accuracy; ``long`` adds ROUGE-L of the whole
    generation against the long answers, and its EM is ASQA's: the share of disambiguated questions (answer
    groups) with any short answer contained in the generation.
    """
    if task == "continuation":
        overlap = token_overlap(generation, answers[0])
        return {
            "rouge_l": rouge_l(generation, answers),
            "f1": overlap.f1,
            "precision": overlap.precision,
            "recall": overlap.recall,
            "name_recall": name_recall(generation, answers[0]),
        }
    answer = extract_answer(generation)
    overlap = best_token_overlap(answer, answers)
    scores = {
        "answer": answer,
        "em": exact_match(answer, answers),
        "f1": overlap.f1,
        "precision": overlap.precision,
        "recall": overlap.recall,
    }
    if task == "yesno":
        scores["accuracy"] = yes_no_accuracy(answer, answers)
    if task == "long":
        groups = answer_groups or [[a] for a in answers]
        found = [has_answer([generation], g) for g in groups]
        scores["em"] = sum(found) / len(found) if found else 0.0
        scores["rouge_l"] = rouge_l(generation, long_answers or answers)
    return scores
