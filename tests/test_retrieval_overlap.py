"""Copy detection (`ralm.retrieval.overlap`) against a plain string search over the same tokens."""

from __future__ import annotations

import random

from ralm.retrieval.overlap import COPY_TOKENS, copies_span, ngrams


def _by_string(passage, text, start, stop, n=COPY_TOKENS):
    """Independent reference: the token runs as delimited strings, found with `in`."""
    hay = "," + ",".join(map(str, passage)) + ","
    return any(
        "," + ",".join(map(str, text[i : i + n])) + "," in hay
        for i in range(start, min(stop, len(text) - n + 1))
    )


def test_copies_span_agrees_with_a_string_search():
    rng = random.Random(0)
    text = [rng.randrange(30) for _ in range(200)]
    for trial in range(300):
        passage = [rng.randrange(30) for _ in range(rng.randrange(0, 60))]
        if trial % 3 == 0:  # plant a run of the text, of random length and place
            i, length = rng.randrange(190), rng.randrange(5, 12)
            cut = rng.randrange(len(passage) + 1)
            passage = passage[:cut] + text[i : i + length] + passage[cut:]
        start = rng.randrange(200)
        stop = start + rng.choice([4, 32])
        assert copies_span(passage, text, start, stop) == _by_string(passage, text, start, stop), trial
        assert copies_span(ngrams(passage), text, start, stop) == _by_string(passage, text, start, stop)


def test_a_run_may_start_in_the_span_and_reach_past_it():
    text = list(range(100))
    passage = [500, *range(42, 50), 501]  # tokens 42..49 of the text
    assert copies_span(passage, text, 40, 44)  # 4-token span: the run starting at 42 reaches past 44
    assert not copies_span(passage, text, 43, 47)  # no 8-token run of the passage starts at 43..46
    assert not copies_span(passage[:-2], text, 40, 44)  # seven tokens are not a copy
    assert not copies_span([], text, 0, 100)
