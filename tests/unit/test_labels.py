"""Rollout labels: grading, advantage and harm arithmetic on scripted endpoints."""

from __future__ import annotations

import pytest

from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.errors import ConfigError
from langchain_specreason.formats import get_format
from langchain_specreason.lab.labels.rollout import (
    DraftTrace,
    RolloutSettings,
    advantage,
    is_harmful,
    label_step,
    label_trace,
    same_step,
    success_rate,
)
from langchain_specreason.lab.labels.run import sample_problems
from langchain_specreason.lab.shared.datasets import Problem

PROBLEM = Problem("p1", "Tom has 3 apples and buys 4 more. How many?", "7", "number")
CONVERSATION = [{"role": "user", "content": PROBLEM.question}]


class RolloutServer:
    """Writes a fixed base step; each rollout's answer depends on the step it follows."""

    name = "base"

    def __init__(self, base_step: str, answers: dict[str, list[str]]) -> None:
        self.base_step = base_step
        self.answers = answers  # last step of the trace -> the n rollout texts
        self.samples: list[tuple[ChatRequest, int]] = []
        self.steps: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.steps.append(request)
        return Completion(
            text=self.base_step, finish_reason="stop", stop_reason="\n\n", completion_tokens=6
        )

    async def sample(self, request: ChatRequest, n: int) -> list[Completion]:
        self.samples.append((request, n))
        last = " ".join(request.messages[-1]["content"].split("\n\n")[-2].split())
        texts = self.answers[last]
        assert len(texts) == n
        return [
            Completion(text=t, finish_reason="stop", completion_tokens=10 * n if i == 0 else 0)
            for i, t in enumerate(texts)
        ]


def test_rate_advantage_and_harm() -> None:
    assert success_rate([True, False, True, True]) == 0.75
    assert success_rate([]) == 0.0
    assert advantage(0.25, 0.75) == 0.5
    assert advantage(0.75, 0.25) == -0.5
    assert is_harmful(0.25, 0.75, 0.5)  # exactly the gap counts
    assert not is_harmful(0.5, 0.75, 0.5)
    assert not is_harmful(1.0, 0.0, 0.5)  # a draft step better than the base's is harmless
    assert same_step("a  b\n\n", "a b")
    assert not same_step("3 + 4 = 7", "3 + 4 = 8")


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="m: Input should be greater than or equal to 1"):
        RolloutSettings(m=0)
    with pytest.raises(ConfigError, match="harmful_gap"):
        RolloutSettings(harmful_gap=0)


async def test_a_wrong_draft_step_is_labelled_harmful() -> None:
    server = RolloutServer(
        "3 + 4 = 7 apples.",
        {
            "3 + 4 = 8 apples.": [
                "The answer is 8.",
                "The answer is 8.",
                "So 7. The answer is 7.",
                "The answer is 8.",
            ],
            "3 + 4 = 7 apples.": ["The answer is 7."] * 4,
        },
    )
    row = await label_step(
        server,
        PROBLEM,
        CONVERSATION,
        get_format("instruct"),
        ["Tom starts with 3.\n\n"],
        "3 + 4 = 8 apples.\n\n",
        RolloutSettings(m=4),
    )
    assert row["draft_correct"] == [False, False, True, False]
    assert row["base_correct"] == [True] * 4
    assert (row["draft_rate"], row["base_rate"], row["advantage"]) == (0.25, 1.0, 0.75)
    assert row["harmful"] is True
    assert row["base_step"] == "3 + 4 = 7 apples.\n\n"  # the delimiter put back
    # the base step continues the same prefix, greedy; rollouts are sampled, n=m, no stop
    assert server.steps[0].temperature == 0.0 and server.steps[0].stop == ["\n\n"]
    assert server.steps[0].messages[-1]["content"] == "Tom starts with 3.\n\n"
    assert [(r.temperature, r.stop, n) for r, n in server.samples] == [(0.7, None, 4)] * 2
    assert row["rollout_tokens"] == 40 + 40 + 6


async def test_the_same_step_shares_its_rollouts() -> None:
    server = RolloutServer(
        "3 + 4 = 7 apples.",
        {"3 + 4 = 7 apples.": ["The answer is 7.", "The answer is 6.", "7", "The answer is 7."]},
    )
    row = await label_step(
        server,
        PROBLEM,
        CONVERSATION,
        get_format("instruct"),
        [],
        "3 +  4 = 7 apples.\n\n",
        RolloutSettings(m=4),
    )
    assert row["same_step"] is True and len(server.samples) == 1
    assert row["advantage"] == 0.0 and row["harmful"] is False
    # the trace head is graded with the rollout: a rollout with no number of its own is not
    # credited with the prefix's numbers unless the last number is right
    assert row["draft_correct"] == [True, False, True, True]


async def test_label_trace_labels_at_most_max_steps_in_order() -> None:
    answers = {s: ["The answer is 7."] * 2 for s in ("a.", "b.", "c.", "same.")}
    server = RolloutServer("same.", answers)
    trace = DraftTrace(
        ["a.\n\n", "b.\n\n", "c.\n\n"], [[-0.1], None, [-0.2, -0.3]], ["delimiter"] * 3
    )
    rows = await label_trace(
        server,
        PROBLEM,
        CONVERSATION,
        get_format("instruct"),
        trace,
        RolloutSettings(m=2, max_steps=2),
    )
    assert [r["step_index"] for r in rows] == [0, 1]
    assert rows[1]["steps"] == ["a.\n\n"] and rows[1]["step"] == "b.\n\n"
    assert rows[0]["draft_logprobs"] == [-0.1] and rows[1]["draft_logprobs"] is None
    assert all(r["question"] == PROBLEM.question and r["gold"] == "7" for r in rows)


def test_samples_are_seeded_and_disjoint() -> None:
    problems = [Problem(str(i), "q", "1", "number") for i in range(50)]
    dev = sample_problems(problems, seed=3, offset=0, count=20)
    held = sample_problems(problems, seed=3, offset=20, count=10)
    assert dev == sample_problems(problems, seed=3, offset=0, count=20)
    assert not {p.id for p in dev} & {p.id for p in held}
    assert [p.id for p in dev] != [str(i) for i in range(20)]
    with pytest.raises(ConfigError, match="past its end"):
        sample_problems(problems, seed=3, offset=45, count=10)


def test_the_label_flags_are_the_rollout_fields() -> None:
    from langchain_specreason.cli import build_parser

    args = build_parser().parse_args(["label", "--out", "x"])
    assert RolloutSettings.from_args(args) == RolloutSettings()
    args = build_parser().parse_args(
        ["label", "--out", "x", "--rollout-max-tokens", "64", "--m", "2", "--harmful-gap", "1"]
    )
    settings = RolloutSettings.from_args(args)
    assert (settings.max_tokens, settings.m, settings.harmful_gap) == (64, 2, 1.0)
    assert settings.step_max_tokens == 512  # not a flag of `label`: the field's default
    with pytest.raises(SystemExit):
        build_parser().parse_args(["label", "--out", "x", "--max-tokens", "64"])
