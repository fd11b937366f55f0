"""Draft self-consistency (``bench judges --judge consistency``): readings and the call."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.formats import get_format
from langchain_specreason.lab.judges.command import DEFAULT_MEASURES, MEASURES, Measures
from langchain_specreason.lab.judges.consistency import (
    SAMPLES,
    consistency_scores,
    jaccard,
    numbers_in,
)
from langchain_specreason.lab.judges.data import JudgeExample
from langchain_specreason.lab.judges.labelreport import judge_name


def test_numbers_are_read_as_a_multiset_with_one_spelling():
    assert numbers_in("3 boxes of 12 = 36, then 36 - 5 = 31.0 and 1,200") == Counter(
        {"3": 1, "12": 1, "36": 2, "5": 1, "31": 1, "1200": 1}
    )


def test_jaccard_of_multisets():
    assert jaccard(Counter("aab"), Counter("ab")) == pytest.approx(2 / 3)
    assert jaccard(Counter(), Counter()) == 1.0
    assert jaccard(Counter("a"), Counter("b")) == 0.0


def test_a_step_the_draft_writes_again_scores_one_and_a_changed_number_less():
    step = "He buys 3 boxes of 12 eggs, so 3 * 12 = 36 eggs.\n\n"
    same = consistency_scores(step, [step.strip()] * 4)
    assert same == {"numbers": 1.0, "words": 1.0}
    other = consistency_scores(step, ["He buys 3 boxes of 12 eggs, so 3 * 12 = 38 eggs."] * 4)
    assert other["numbers"] < 1.0 and other["words"] < 1.0


def test_a_step_without_numbers_reads_its_words_for_both():
    got = consistency_scores("First find the total.\n\n", ["First find the sum.", "Add them."])
    assert got["numbers"] == got["words"] < 1.0


def test_no_sample_is_an_error():
    with pytest.raises(ValueError, match="no sample"):
        consistency_scores("x", [])


class ScriptedDraft:
    """A draft endpoint that records its sample request and answers from a script."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.asked: list[tuple[ChatRequest, int]] = []

    async def sample(self, request: ChatRequest, n: int) -> list[Completion]:
        self.asked.append((request, n))
        return [
            Completion(text=t, prompt_tokens=50, completion_tokens=40, cached_tokens=48)
            for t in self.texts[:n]
        ]


def test_the_measure_samples_the_steps_position_on_the_draft_once():
    draft = ScriptedDraft(["So 3 * 12 = 36 eggs."] * 2 + ["So 3 * 12 = 30 eggs."] * 2)
    measures = Measures(draft, draft, get_format("instruct"))  # type: ignore[arg-type]
    example = JudgeExample(
        id="p:0",
        problem_id="p",
        question="A box holds 12 eggs. Tom buys 3 boxes. How many eggs?",
        steps=("Tom buys boxes.\n\n",),
        step="So 3 * 12 = 36 eggs.\n\n",
        kind="harmless",
        position=1,
        original="",
    )
    got = asyncio.run(measures.run("consistency", example))
    ((request, n),) = draft.asked
    assert n == SAMPLES and request.temperature > 0 and request.stop and "\n\n" in request.stop
    assert request.continue_final and "Tom buys boxes." in str(request.messages)
    assert "So 3 * 12" not in str(request.messages)  # the step itself is what is sampled
    assert got["scores"]["numbers"] == pytest.approx((1 + 1 + 0.5 + 0.5) / 4)
    assert got["prompt_tokens"] == 50 and got["cached_tokens"] == 48


def test_consistency_is_measured_only_when_asked_and_named_by_its_reading():
    assert MEASURES["consistency"] == "draft" and "consistency" not in DEFAULT_MEASURES
    assert judge_name("consistency (numbers)") == "consistency[numbers]"
    assert judge_name("consistency (words)") == "consistency[words]"
    assert judge_name("likelihood (mean)") == "likelihood"


def test_every_measure_has_its_costs_in_the_label_report():
    from langchain_specreason.lab.judges.labelreport import JUDGE_NAMES

    assert set(JUDGE_NAMES) == set(MEASURES)
