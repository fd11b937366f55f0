"""The agreement rules on worked examples, and how a rule registers."""

from __future__ import annotations

import json

import pytest

from langchain_specreason import SpecReasonConfig
from langchain_specreason.agreement import make_rule, quantities, rule_specs
from langchain_specreason.errors import ConfigError
from langchain_specreason.lab.agreement.report import read_rule, write_report

SETTINGS = SpecReasonConfig().as_dict()


def agree(rule: str, draft: str, base: str) -> bool:
    return make_rule(rule, SETTINGS).agree(draft, base).agree


def test_quantities_are_read_in_digits_and_words_and_normalised():
    assert quantities("1. **Weight at 7 weeks:** 6 pounds") == ["7", "6"]  # list marker out
    assert quantities("300 kg - 380 kg = -80 kg") == ["300", "380", "-80"]
    assert quantities("$1,200.50 or 5.0 or .5") == ["1200.5", "5", "0.5"]
    assert quantities("twenty-four apples and three hundred and five pears") == ["24", "305"]


def test_result_agrees_on_the_same_result_written_differently():
    assert agree("result", "So 48 / 2 = 24 clips.", "Half of 48 is 24.")
    assert agree("result", "She has twelve apples left.", "12 apples remain.")


def test_quantities_keep_separate_numbers_apart():
    """The review's readings (round 5, F10): words joined only where a number continues, a
    comma as a thousands mark only between groups of three, a lone "one" not a quantity."""
    assert quantities("He has five and six apples.") == ["5", "6"]
    assert quantities("between two and three hours") == ["2", "3"]
    assert quantities("the numbers 1,2,3") == ["1", "2", "3"]
    assert quantities("Let us solve this one step at a time.") == []
    assert quantities("one thousand two hundred and thirty-four") == ["1234"]
    assert quantities("one hundred and 1,250 and twenty one") == ["100", "1250", "21"]


def test_result_catches_a_wrong_quantity_written_in_words():
    assert not agree("result", "So she has thirteen apples.", "So she has 12 apples.")
    assert not agree("numbers", "So she has thirteen apples.", "So she has 12 apples.")


def test_a_sign_is_a_difference():
    assert not agree("result", "300 - 380 = -80 kg", "380 - 300 = 80 kg")


def test_numbers_compares_the_set_and_result_the_last():
    draft, base = "3 * 4 = 12, plus 2", "2 + 3 * 4 = 12"
    assert agree("numbers", draft, base)
    assert not agree("result", draft, base)  # ends on 2 against 12


def test_steps_without_numbers_agree_by_their_words():
    plan = "To solve this, we find the cost of the apples first."
    same_plan = "To solve this, we first find the cost of the apples."
    other = "Let's use Python code to ensure accuracy."
    assert agree("result", plan, same_plan)
    assert not agree("result", plan, other)
    assert not agree("result", plan, "The apples cost 5 dollars.")  # numbers vs none
    strict = make_rule("result", {**SETTINGS, "agree_overlap": 1.0})
    assert not strict.agree(plan, same_plan + " Then").agree


def test_text_is_the_same_text_up_to_case_and_punctuation():
    assert agree("text", "So, 12 apples!\n\n", "so 12 apples")
    assert not agree("text", "So 12 apples", "Thus 12 apples")


def test_unknown_rule_is_a_config_error_listing_the_rules():
    with pytest.raises(ConfigError, match=r"unknown agreement rule 'magic'.*result, numbers, text"):
        SpecReasonConfig(agree_rule="magic")
    assert list(rule_specs()) == ["result", "numbers", "text"]
    assert all(spec.description for spec in rule_specs().values())


def test_the_rule_report_counts_kept_and_harmful(tmp_path):
    rows = [
        {"step": "a = 5", "base_step": "so 5", "harmful": False},
        {"step": "b = 6", "base_step": "so 6", "harmful": True},
        {"step": "c = 7", "base_step": "so 8", "harmful": True},
        {"step": "d = 9", "base_step": "so 1", "harmful": False},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pairs = [(r["step"], r["base_step"], r["harmful"]) for r in rows]
    reading = read_rule("result", pairs, SETTINGS)
    assert (reading.kept, reading.harmful_kept, reading.harmful) == (2, 1, 2)
    assert reading.harmful_kept_share == 0.5
    text = write_report(labels, tmp_path / "out", ["result", "text"], SpecReasonConfig())
    assert "| `result` | 2/4 | 50.0%" in text
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [r["rule"] for r in summary["rules"]] == ["result", "text"]
    assert summary["rules"][1]["kept"] == 0
