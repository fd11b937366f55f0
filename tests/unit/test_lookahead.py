"""Lookahead: the draft writes step k+1 while the judge reads step k (``lookahead`` in state)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from langchain_specreason import SpecReasonConfig, SpecReasonStats
from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.graph import create_specreason_graph

from .fakes import ScriptedEndpoint, is_judge, partial_of, score, step

QUESTION = {"messages": [("user", "What is 12*7?")]}


class TimedEndpoint(ScriptedEndpoint):
    """A scripted endpoint whose calls take ``delay(request)`` seconds, with a call log."""

    def __init__(self, name: str, handler: Callable[[ChatRequest], Completion],
                 delay: Callable[[ChatRequest], float]) -> None:
        super().__init__(name, handler)
        self.delay = delay
        self.log: list[tuple[str, int, float, float]] = []  # (kind, step, start, end)
        self.cancelled: list[int] = []

    async def complete(self, request: ChatRequest) -> Completion:
        kind = "judge" if is_judge(request) else "step"
        index = partial_of(request).count("\n\n")
        start = time.perf_counter()
        try:
            await asyncio.sleep(self.delay(request))
        except asyncio.CancelledError:
            self.cancelled.append(index)
            raise
        self.log.append((kind, index, start, time.perf_counter()))
        return await super().complete(request)


def drafts(end_at: int) -> Callable[[ChatRequest], Completion]:
    def handler(req: ChatRequest) -> Completion:
        index = partial_of(req).count("\n\n")
        return step(f"D{index}.", 5, end=index >= end_at)
    return handler


async def run(lookahead: bool, scores: dict[int, str], *, end_at: int = 3,
              draft_s: float = 0.0, judge_s: float = 0.0):
    def base_handler(req: ChatRequest) -> Completion:
        if is_judge(req):
            # the judged step is the last one of the trace the judge reads
            text = str(req.messages)
            index = max(i for i in range(end_at + 1) if f"D{i}." in text or f"B{i}." in text)
            return score(scores.get(index, "9"))
        index = partial_of(req).count("\n\n")
        return step(f"B{index}.", 7, end=index >= end_at)

    draft = TimedEndpoint("draft", drafts(end_at), lambda r: draft_s)
    base = TimedEndpoint("base", base_handler, lambda r: judge_s if is_judge(r) else 0.0)
    graph = create_specreason_graph(
        draft, base, config=SpecReasonConfig(judge="score",
                                             threshold=7, lookahead=lookahead, temperature=0))
    started = time.perf_counter()
    out = await graph.ainvoke(QUESTION)
    return out, SpecReasonStats.from_state(out, time.perf_counter() - started), draft, base


async def test_the_trace_is_the_same_with_and_without_lookahead():
    scores = {1: "2", 3: "1"}  # steps 1 and 3 are rewritten
    with_, stats_with, draft_with, _ = await run(True, scores)
    without, stats_without, draft_without, _ = await run(False, scores)
    keys = ("text", "author", "decision", "score", "tokens")
    assert [{k: s[k] for k in keys} for s in with_["steps"]] \
        == [{k: s[k] for k in keys} for s in without["steps"]]
    assert [s["decision"] for s in with_["steps"]] == [
        "accepted", "rewritten", "accepted", "rewritten"]
    assert with_["answer"] == without["answer"]
    assert stats_with.steps_accepted == stats_without.steps_accepted == 2
    # without lookahead: one draft call per drafted step. With it, step 1 and step 3 are
    # drafted ahead (and used), and step 2 twice: ahead while step 1 was judged (discarded,
    # step 1 was rewritten), then again. Nothing is drafted after step 3: kept, it would end.
    assert len(draft_without.requests) == 4
    assert len(draft_with.requests) == 5


async def test_the_next_draft_runs_while_the_judge_reads_and_its_time_is_hidden():
    out, stats, draft, base = await run(True, {}, end_at=2, draft_s=0.05, judge_s=0.05)
    assert [s["decision"] for s in out["steps"]] == ["accepted", "accepted", "accepted"]
    judges = [(start, end) for kind, _, start, end in base.log if kind == "judge"]
    judge_of = dict(enumerate(judges))  # judged in step order
    draft_of = {i: (start, end) for kind, i, start, end in draft.log}
    for i in (1, 2):  # step i was drafted before the judge of step i-1 had finished
        assert draft_of[i][0] < judge_of[i - 1][1]
    assert len(draft.requests) == 3  # the last kept step ends the trace: nothing drafted ahead
    assert [s.get("draft_hidden_s", 0.0) > 0 for s in out["steps"]] == [False, True, True]
    assert stats.draft_hidden_s > 0
    # what the run waited for stays within its wall time (hidden seconds are not counted)
    assert stats.server_s <= stats.wall_s


async def test_a_rejected_step_cancels_the_draft_written_ahead():
    # drafting is slow, judging fast: the judge rejects step 1 while step 2 is being drafted
    out, _, draft, _base = await run(True, {1: "0"}, end_at=2, draft_s=0.3, judge_s=0.01)
    assert [s["decision"] for s in out["steps"]] == ["accepted", "rewritten", "accepted"]
    assert draft.cancelled == [2]
    assert [s["text"] for s in out["steps"]] == ["D0.\n\n", "B1.\n\n", "D2."]


async def test_lookahead_off_never_overlaps_the_two_models():
    _out, stats, draft, base = await run(False, {}, end_at=2, draft_s=0.02, judge_s=0.02)
    spans = sorted([(s, e) for _, _, s, e in draft.log + base.log])
    assert all(prev_end <= start for (_, prev_end), (start, _) in itertools.pairwise(spans))
    assert stats.draft_hidden_s == 0.0
