"""`specreason tune`: the choice rule on scripted results, the grid, the replaying endpoint."""

from __future__ import annotations

import pytest

from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.errors import ConfigError
from langchain_specreason.lab.bench.replay import ReplayEndpoint
from langchain_specreason.lab.bench.tune import Grid, Measured, choose


def m(name: str, right: int, seconds: float, n: int = 10, sd: bool = False) -> Measured:
    return Measured(
        name,
        tuple([True] * right + [False] * (n - right)),
        (seconds,) * n,
        settings={"judge": name} if name.startswith("spec") else None,
        sd=sd,
    )


BASE = m("base", 6, 100.0)
SD = m("sd", 6, 70.0, sd=True)


def test_the_fastest_setting_that_keeps_the_accuracy_and_beats_sd_is_chosen():
    cands = [m("spec-a", 6, 60.0), m("spec-b", 7, 65.0), m("spec-fast-wrong", 4, 30.0)]
    choice = choose(BASE, SD, cands)
    assert choice.recommend == "specreason" and choice.setting is cands[0]
    assert "60.0 s" in choice.reason and "sd 70.0 s" in choice.reason


def test_no_setting_beats_sd_so_tune_says_use_sd():
    choice = choose(BASE, SD, [m("spec-a", 6, 75.0), m("spec-b", 3, 20.0)])
    assert choice.recommend == "sd" and choice.setting is None
    assert choice.reason.startswith("use sd alone: the fastest setting that keeps the accuracy")
    none_keep = choose(BASE, SD, [m("spec-b", 3, 20.0)])
    assert none_keep.recommend == "sd" and "no SpecReason setting keeps" in none_keep.reason


def test_the_accuracy_tolerance_and_a_missing_sd():
    cands = [m("spec-a", 5, 50.0)]
    assert choose(BASE, None, cands).recommend == "base"  # 5/10 < 6/10, no loss allowed
    tolerant = choose(BASE, None, cands, max_loss=0.1)
    assert tolerant.recommend == "specreason" and "sd not measured" in tolerant.reason
    slow_sd = m("sd", 4, 10.0, sd=True)  # fast but loses accuracy: does not qualify
    assert choose(BASE, slow_sd, [m("spec-a", 6, 90.0)]).recommend == "specreason"


def test_grid_expands_every_setting_and_checks_the_judges():
    grid = Grid(("arithmetic+likelihood",), (-3.0, -2.5), (0, 2), (False, True))
    runs = grid.runs()
    assert len(runs) == 8
    assert {r.mode for r in runs} == {"specreason", "specreason+sd"}
    assert {(r.threshold, r.first_n_base_steps) for r in runs} == {
        (-3.0, 0),
        (-3.0, 2),
        (-2.5, 0),
        (-2.5, 2),
    }
    with pytest.raises(ConfigError, match="unknown judge"):
        Grid(("nope",), (1.0,), (0,), (False,)).runs()


class Counting:
    name = "base"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        return Completion(text=f"reply {self.calls}", seconds=2.5)

    async def stream(self, request: ChatRequest):
        self.calls += 1
        yield Completion(text="a")
        yield Completion(text="", finish_reason="stop", seconds=1.5)

    async def max_model_len(self) -> int:
        return 4096


async def test_replay_answers_a_seen_request_from_memory_with_its_seconds():
    inner = Counting()
    replay = ReplayEndpoint(inner)
    req = ChatRequest([{"role": "user", "content": "x"}], 5)
    first = await replay.complete(req)
    again = await replay.complete(req)
    other = await replay.complete(ChatRequest([{"role": "user", "content": "y"}], 5))
    assert first is again and first.seconds == 2.5 and other.text == "reply 2"
    streamed = [c.text async for c in replay.stream(req)]
    streamed_again = [c.text async for c in replay.stream(req)]
    assert streamed == streamed_again == ["a", ""]
    assert (inner.calls, replay.calls, replay.replayed) == (3, 3, 2)
    assert await replay.max_model_len() == 4096  # everything else passes through
