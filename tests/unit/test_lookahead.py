"""Lookahead: the draft writes step k+1 while the judge reads step k (``lookahead`` in state)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable

from langchain_specreason import SpecReasonConfig, SpecReasonStats
from langchain_specreason.endpoint import ChatRequest, Completion
from langchain_specreason.graph import create_specreason_graph

from .fakes import ScriptedEndpoint, is_judge, partial_of, score, step

QUESTION = {"messages": [("user", "What is 12*7?")]}


class TimedEndpoint(ScriptedEndpoint):
    """A scripted endpoint whose calls take ``delay(request)`` seconds, with a call log."""

    def __init__(
        self,
        name: str,
        handler: Callable[[ChatRequest], Completion],
        delay: Callable[[ChatRequest], float],
    ) -> None:
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


def score_graph(draft, base, *, lookahead: bool):
    """The graph these tests run: the score judge at threshold 7, temperature 0."""
    return create_specreason_graph(
        draft,
        base,
        config=SpecReasonConfig(judge="score", threshold=7, lookahead=lookahead, temperature=0),
    )


async def timed_run(graph) -> tuple[dict, SpecReasonStats]:
    """One run of ``graph`` on QUESTION: its final state and its stats over the wall time."""
    started = time.perf_counter()
    out = await graph.ainvoke(QUESTION)
    return out, SpecReasonStats.from_state(out, time.perf_counter() - started)


async def run(
    lookahead: bool,
    scores: dict[int, str],
    *,
    end_at: int = 3,
    draft_s: float = 0.0,
    judge_s: float = 0.0,
):
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
    out, stats = await timed_run(score_graph(draft, base, lookahead=lookahead))
    return out, stats, draft, base


async def test_the_trace_is_the_same_with_and_without_lookahead():
    scores = {1: "2", 3: "1"}  # steps 1 and 3 are rewritten
    with_, stats_with, draft_with, _ = await run(True, scores)
    without, stats_without, draft_without, _ = await run(False, scores)
    keys = ("text", "author", "decision", "score", "tokens")
    assert [{k: s[k] for k in keys} for s in with_["steps"]] == [
        {k: s[k] for k in keys} for s in without["steps"]
    ]
    assert [s["decision"] for s in with_["steps"]] == [
        "accepted",
        "rewritten",
        "accepted",
        "rewritten",
    ]
    assert with_["answer"] == without["answer"]
    assert stats_with.steps_accepted == stats_without.steps_accepted == 2
    # without lookahead: one draft call per drafted step. With it, step 1 and step 3 are
    # drafted ahead (and used), and step 2 twice: ahead while step 1 was judged (discarded,
    # step 1 was rewritten), then again. Nothing is drafted after step 3: kept, it would end.
    assert len(draft_without.requests) == 4
    assert len(draft_with.requests) == 5


class GatedEndpoint(ScriptedEndpoint):
    """A scripted endpoint whose calls wait on ``gate(kind, step, call_number)`` before they
    answer; a call's seconds are its real duration. No sleeps: the order is forced."""

    def __init__(
        self,
        name: str,
        handler: Callable[[ChatRequest], Completion],
        gate: Callable[[str, int, int], Awaitable[None]],
    ) -> None:
        super().__init__(name, handler)
        self.gate = gate
        self.started: defaultdict[tuple[str, int], asyncio.Event] = defaultdict(asyncio.Event)
        self.calls: Counter[tuple[str, int]] = Counter()
        self.cancelled: list[int] = []

    async def complete(self, request: ChatRequest) -> Completion:
        key = ("judge" if is_judge(request) else "step", partial_of(request).count("\n\n"))
        self.calls[key] += 1
        self.started[key].set()
        start = time.perf_counter()
        try:
            await self.gate(*key, self.calls[key])
        except asyncio.CancelledError:
            self.cancelled.append(key[1])
            raise
        done = await super().complete(request)
        return dataclasses.replace(done, seconds=time.perf_counter() - start)


async def _started(endpoint: GatedEndpoint, kind: str, index: int) -> None:
    try:
        await asyncio.wait_for(endpoint.started[kind, index].wait(), timeout=5)
    except TimeoutError:
        raise AssertionError(f"{endpoint.name} {kind} {index} never started") from None


def _gated_pair(
    scores: dict[int, str],
    end_at: int,
    draft_gate: Callable[[str, int, int], Awaitable[None]] | None = None,
):
    async def no_wait(kind: str, index: int, call: int) -> None:
        return None

    draft = GatedEndpoint("draft", drafts(end_at), draft_gate or no_wait)

    async def judge_waits_for_the_next_draft(kind: str, index: int, call: int) -> None:
        if kind == "judge" and index < end_at:  # the judge of step i returns only once the
            await _started(draft, "step", index + 1)  # draft of step i+1 has begun

    def base_handler(req: ChatRequest) -> Completion:
        index = partial_of(req).count("\n\n") if not is_judge(req) else None
        if index is None:
            judged = str(req.messages)
            index = max(i for i in range(end_at + 1) if f"D{i}." in judged)
            return score(scores.get(index, "9"))
        return step(f"B{index}.", 7, end=index >= end_at)

    base = GatedEndpoint("base", base_handler, judge_waits_for_the_next_draft)
    return draft, base


async def test_the_next_draft_runs_while_the_judge_reads_and_its_time_is_hidden():
    draft, base = _gated_pair({}, end_at=2)
    out, stats = await timed_run(score_graph(draft, base, lookahead=True))
    # each judge waited for the next draft to start: without lookahead this run would hang
    assert [s["decision"] for s in out["steps"]] == ["accepted", "accepted", "accepted"]
    assert len(draft.requests) == 3  # the last kept step ends the trace: nothing drafted ahead
    assert [s.get("draft_hidden_s", 0.0) > 0 for s in out["steps"]] == [False, True, True]
    assert stats.draft_hidden_s > 0
    # what the run waited for stays within its wall time (hidden seconds are not counted)
    assert stats.server_s <= stats.wall_s


async def test_a_rejected_step_cancels_the_draft_written_ahead():
    never = asyncio.Event()

    async def ahead_of_step_2_hangs(kind: str, index: int, call: int) -> None:
        if index == 2 and call == 1:  # the lookahead, written while step 1 is judged
            await never.wait()

    draft, base = _gated_pair({1: "0"}, end_at=2, draft_gate=ahead_of_step_2_hangs)
    graph = score_graph(draft, base, lookahead=True)
    out = await asyncio.wait_for(graph.ainvoke(QUESTION), timeout=10)
    assert [s["decision"] for s in out["steps"]] == ["accepted", "rewritten", "accepted"]
    assert draft.cancelled == [2]  # the judge rejected step 1: the draft ahead was cancelled
    assert [s["text"] for s in out["steps"]] == ["D0.\n\n", "B1.\n\n", "D2."]


async def test_lookahead_off_never_overlaps_the_two_models():
    _out, stats, draft, base = await run(False, {}, end_at=2, draft_s=0.02, judge_s=0.02)
    spans = sorted([(s, e) for _, _, s, e in draft.log + base.log])
    assert all(prev_end <= start for (_, prev_end), (start, _) in itertools.pairwise(spans))
    assert stats.draft_hidden_s == 0.0
