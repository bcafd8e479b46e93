"""QA metrics against values worked out by hand (SQuAD normalisation, token F1, LCS, has-answer)."""

from __future__ import annotations

import pytest

from ralm.eval.qa.metrics import (
    best_token_overlap,
    exact_match,
    extract_answer,
    has_answer,
    normalize_answer,
    rouge_l,
    score_answer,
    token_overlap,
    yes_no_accuracy,
)


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an  Apple,  a day ", "apple day"),
        ("Theatre of the Absurd", "theatre of absurd"),  # "the" only as a whole word
        ("U.S.A.", "usa"),
        ("A", ""),
    ],
)
def test_normalize_answer(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_takes_the_best_gold():
    assert exact_match("the Paris.", ["London", "paris"]) == 1.0
    assert exact_match("Paris, France", ["paris"]) == 0.0
    assert exact_match("", ["a"]) == 1.0  # both normalise to the empty string


def test_token_overlap_by_hand():
    # prediction tokens: [barack, obama, was, president]; gold: [obama] -> common 1
    o = token_overlap("Barack Obama was the president", "Obama")
    assert (o.precision, o.recall) == (0.25, 1.0)
    assert o.f1 == pytest.approx(2 * 0.25 * 1.0 / 1.25)
    # repeated tokens count by multiplicity: pred [new, new, york], gold [new, york, city] -> common 2
    o = token_overlap("new new york", "New York City")
    assert (o.precision, o.recall, o.f1) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    assert token_overlap("cat", "dog").f1 == 0.0


def test_best_token_overlap_picks_highest_f1_gold():
    best = best_token_overlap("john smith", ["smith", "john smith jr"])
    # vs "smith": p=1/2 r=1 f1=2/3; vs "john smith jr": p=1 r=2/3 f1=0.8 -> the second wins
    assert (best.precision, best.recall, best.f1) == pytest.approx((1.0, 2 / 3, 0.8))


def test_extract_answer():
    assert extract_answer("Versace was born in Italy. So the answer is Reggio Calabria.") == "Reggio Calabria"
    assert extract_answer(" Paris\nQ: next") == "Paris"
    assert extract_answer("First answer is a. Final answer is: b.\nmore") == "b"


def test_yes_no_accuracy():
    assert yes_no_accuracy("Yes.", ["yes"]) == 1.0
    assert yes_no_accuracy("no, it sinks", ["yes"]) == 0.0
    assert yes_no_accuracy("maybe", ["no"]) == 0.0


def test_rouge_l_by_hand():
    # pred [the, cat, sat, on, the, mat] vs ref [the, cat, lay, on, a, mat]: LCS = the cat on mat = 4
    # p = 4/6, r = 4/6, f = 4/6
    assert rouge_l("The cat sat on the mat.", ["the cat lay on a mat"]) == pytest.approx(4 / 6)
    # best over golds: an identical reference gives 1
    assert rouge_l("a b c", ["x y", "a b c"]) == pytest.approx(1.0)
    assert rouge_l("", ["a"]) == 0.0


def test_has_answer_is_normalised_containment():
    assert has_answer(["Iron\nA metallic element, atomic number 26."], ["26"]) == 1.0
    assert has_answer(["The capital is Tirana."], ["tirana", "x"]) == 1.0
    assert has_answer(["nothing here"], ["Tirana"]) == 0.0


def test_score_answer_tasks():
    s = score_answer("Paris is big. So the answer is Paris.", ["paris"])
    assert (s["answer"], s["em"], s["f1"]) == ("Paris", 1.0, 1.0)
    s = score_answer("Pears float. So the answer is yes.", ["yes"], task="yesno")
    assert s["accuracy"] == 1.0
    # ASQA: two disambiguations, the generation names one of them -> EM 1/2
    s = score_answer(
        "The 2003 film was directed by Gore Verbinski.",
        ["Gore Verbinski", "Rob Marshall"],
        task="long",
        long_answers=["Gore Verbinski directed the first film"],
        answer_groups=[["Gore Verbinski"], ["Rob Marshall"]],
    )
    assert s["em"] == 0.5
    assert 0.0 < s["rouge_l"] < 1.0
