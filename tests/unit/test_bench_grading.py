"""Grading of known right and wrong replies: GSM8K numbers, MATH via math-verify, letters."""

from __future__ import annotations

import pytest

from langchain_specreason.lab.shared.grading import (
    extract_letter,
    grade,
    grade_choice,
    grade_math,
    grade_number,
    last_number,
    same_number,
)

GSM8K_REPLY = (
    "Janet's ducks lay 16 eggs and she uses 3 + 4 = 7.\n\n"
    "She sells 16 - 7 = 9 eggs at $2 each.\n\nThe answer is 18."
)


@pytest.mark.parametrize(
    ("reply", "gold", "prediction", "correct"),
    [
        (GSM8K_REPLY, "18", "18", True),
        (GSM8K_REPLY, "20", "18", False),
        ("The farm makes $1,234,567 a year. The answer is 1,234,567.", "1234567", "1234567", True),
        ("So 3-2 = 1, then the answer is -5.", "-5", "-5", True),
        ("The answer is 18.00", "18", "18.00", True),
        ("The answer is 0.5.", ".5", "0.5", True),
        ("I cannot tell.", "5", None, False),
    ],
)
def test_gsm8k_last_number(reply, gold, prediction, correct):
    graded = grade_number(reply, gold)
    assert graded.prediction == prediction
    assert graded.correct is correct


def test_last_number_and_numeric_equality():
    assert last_number("12 apples and 30 pears, 42 in all.") == "42"
    assert last_number("total: 10,000 dollars") == "10000"
    assert last_number("no digits") is None
    assert same_number("7", "7.0") and not same_number("7", "8")
    assert not same_number("seven", "7")


@pytest.mark.parametrize(
    ("reply", "gold", "correct"),
    [
        (
            "So the polar form is $\\boxed{(3, \\frac{\\pi}{2})}$.",
            "\\left( 3, \\frac{\\pi}{2} \\right)",
            True,
        ),
        ("Thus $\\boxed{\\dfrac{14}{3}}$.", "\\frac{14}{3}", True),
        ("Thus $\\boxed{4.666}$.", "\\frac{14}{3}", False),
        ("We get \\boxed{p - q}.", "p - q", True),
        ("We get \\boxed{p + q}.", "p - q", False),
        ("The answer is $\\boxed{0.5}$", "\\frac{1}{2}", True),
        ("I am not sure.", "3", False),
    ],
)
def test_math_is_checked_by_math_verify(reply, gold, correct):
    assert grade_math(reply, gold).correct is correct


def test_math_prediction_is_the_extracted_answer():
    graded = grade_math("Adding up, $\\boxed{42}$.", "42")
    assert graded.prediction == "42" and graded.correct


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("The answer is B.", "B"),
        ("Therefore the answer is (C).", "C"),
        ("**Answer:** A", "A"),
        ("Answer: D", "D"),
        ("so we pick $\\boxed{C}$", "C"),
        ("Not (A), not (B), so (D).", "D"),
        ("The answer is a mystery to me.", None),
        ("No idea.", None),
    ],
)
def test_extract_letter(reply, letter):
    assert extract_letter(reply) == letter


def test_choice_grading():
    assert grade_choice("Reasoning...\n\nThe answer is C.", "C").correct
    assert not grade_choice("The answer is A.", "C").correct
    assert not grade_choice("no letter", "C").correct


def test_grade_dispatches_by_grader():
    assert grade("number", "The answer is 12.", "12").correct
    assert grade("math", "\\boxed{12}", "12").correct
    assert grade("choice", "The answer is B.", "B").correct
    assert not grade("choice", "The answer is B.", "A").correct
