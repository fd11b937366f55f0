"""Solve every problem in every run, one at a time, appending one result line per problem.

SpecReason runs go through :func:`~..graph.create_specreason_graph` (the only implementation
of the loop); the single-model runs through :func:`~..baselines.single_model`, with the same
prompt, sampling and budget. Problems run one after the other so that latencies are not
disturbed by each other. Around each problem the servers' own ``/metrics`` counters are read,
so each result carries what the servers saw (requests, prefix-cache queries and hits).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.messages import HumanMessage
from tqdm import tqdm

from ...arbitrage.local import LocalClassifier
from ...baselines import SingleModelRun, single_model
from ...config import SpecReasonConfig, judge_settings
from ...endpoint import Endpoint, OpenAIEndpoint, endpoint_pair
from ...errors import ConfigError, ContextLengthError, EndpointError
from ...formats import get_format, to_openai_messages
from ...graph import create_specreason_graph
from ...judges import BaseModelScorer, Judge
from ...state import Decision, StepRecord
from ...stats import SpecReasonStats
from ..shared.datasets import Problem
from ..shared.grading import grade
from ..shared.modes import GRAPH_MODES, SPECREASON_MODES, Run
from ..shared.prompts import build_prompt
from ..shared.results import JsonlAppender, ResultKey
from ..shared.servers import ServerPair, reset_prefix_cache, served_router_folder
from .metrics import (
    CACHE_HITS,
    CACHE_QUERIES,
    GENERATION_TOKENS,
    PROMPT_TOKENS,
    REQUESTS,
    ServerCounters,
    scrape,
)
from .prefill import judge_prefill_floor
from .rounds import round_records

COUNTERS = {
    "requests": REQUESTS,
    "prompt_tokens": PROMPT_TOKENS,
    "generation_tokens": GENERATION_TOKENS,
    "prefix_cache_queries": CACHE_QUERIES,
    "prefix_cache_hits": CACHE_HITS,
}
"""The server counters recorded per problem and per run (our names: vLLM's names)."""


class StepTrace(TypedDict):
    """One step of a graph run, as a result line's ``steps`` list records it."""

    decision: Decision
    score: float | None
    """The judge's score (``None``: not judged, e.g. a base step)."""


GENERATION_FIELDS = (
    "budget",
    "step_max_tokens",
    "answer_max_tokens",
    "temperature",
    "seed",
    "lookahead",
)
"""The :class:`~langchain_specreason.config.SpecReasonConfig` fields a benchmark fixes for
all its runs."""
BENCH_DEFAULTS: dict[str, Any] = {
    "budget": 1024,
    "step_max_tokens": 256,
    "answer_max_tokens": 512,
    "temperature": 0.0,
    "seed": 0,
    "lookahead": True,
}
"""The benchmark's own defaults for those fields: short, greedy and seeded, so a run is
repeatable on two CPU cores (the library's defaults suit a long reasoning model)."""


@dataclass(frozen=True)
class BenchSettings:
    """Settings shared by every run of a benchmark (a resumed run must use the same)."""

    budget: int = BENCH_DEFAULTS["budget"]
    step_max_tokens: int = BENCH_DEFAULTS["step_max_tokens"]
    answer_max_tokens: int = BENCH_DEFAULTS["answer_max_tokens"]
    temperature: float = BENCH_DEFAULTS["temperature"]
    seed: int = BENCH_DEFAULTS["seed"]
    family: str = "instruct"
    lookahead: bool = BENCH_DEFAULTS["lookahead"]
    """SpecReason modes draft the next step while the judge reads (``--no-lookahead``: not)."""

    def config(self, run: Run) -> SpecReasonConfig:
        """The SpecReason config of ``run`` (baselines use its budget and sampling)."""
        extra: dict[str, Any] = {}
        if run.mode in SPECREASON_MODES:
            extra.update(
                judge_settings(run.judge or "score", run.threshold),
                first_n_base_steps=run.first_n_base_steps,
            )
        if run.agree_rule is not None:
            extra.update(verify="agree", agree_rule=run.agree_rule)
        if run.steps_ahead is not None:
            extra["steps_ahead"] = run.steps_ahead
        if run.score_method is not None:
            extra["score_method"] = run.score_method
        return SpecReasonConfig(
            **{name: getattr(self, name) for name in GENERATION_FIELDS}, **extra
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for ``meta.json``)."""
        return asdict(self)


def baseline_stats(alone: SingleModelRun, wall_s: float, *, by_draft: bool) -> SpecReasonStats:
    """Stats of a single-model reply: its time counts as ``draft`` or as ``answer`` time."""
    return SpecReasonStats(
        steps_drafted=0,
        steps_accepted=0,
        steps_rewritten=0,
        steps_base=0,
        steps_dropped=0,
        draft_tokens=alone.tokens if by_draft else 0,
        base_tokens=0 if by_draft else alone.tokens,
        judge_calls=0,
        judge_prompt_tokens=0,
        judge_cached_tokens=0,
        trace_tokens=alone.tokens,
        answer_tokens=0,
        draft_s=alone.seconds if by_draft else 0.0,
        judge_s=0.0,
        rewrite_s=0.0,
        answer_s=0.0 if by_draft else alone.seconds,
        wall_s=wall_s,
        stop="budget" if alone.finish_reason == "length" else "end",
    )


def failed_stats(wall_s: float) -> SpecReasonStats:
    """Stats of a problem that could not be answered (its prompt does not fit)."""
    return SpecReasonStats.from_state({}, wall_s=wall_s)


def mode_judge(
    run: Run,
    base: Endpoint,
    router: OpenAIEndpoint | LocalClassifier | None,
    settings: BenchSettings,
    router_folder: Path | None = None,
) -> Judge | None:
    """The judge of the arbitrage and oracle modes (``None``: the config's, via make_judge)."""
    from ...arbitrage.oracle import OracleJudge
    from ...arbitrage.router import RouterJudge

    if run.mode == "arbitrage":
        if router is None:
            raise ConfigError(
                "mode arbitrage needs a router server: give --router-url, or a "
                "profile with a [router] section"
            )
        tau = run.threshold if run.threshold is not None else 0.5
        if isinstance(router, LocalClassifier):
            return RouterJudge.from_folder(router, router.folder, tau=tau)
        # the router's input settings travel in router.json beside the served weights
        if router_folder is not None:
            return RouterJudge.from_folder(router, router_folder, tau=tau)
        return RouterJudge(router, tau=tau)
    if run.mode == "oracle":
        scorer = BaseModelScorer(base, get_format(settings.family), score_method="average")
        return OracleJudge(base, scorer, tau=run.threshold or 0.0)
    return None


@dataclass(frozen=True)
class Answered:
    """What one problem's run gave: the reply, its cost, each step's verdict, the floor."""

    reply: str
    stats: SpecReasonStats
    steps: list[StepTrace] = field(default_factory=list)
    judge_floor_tokens: int | None = None
    """The judge calls' prefill floor (see :mod:`.prefill`); ``None``: not a base judge."""
    rounds: list[dict[str, Any]] | None = None
    """The ``agree`` mode's rounds (:func:`.rounds.round_records`); ``None``: other modes."""


class Solver:
    """Answers problems in one run over one draft and one base endpoint."""

    def __init__(
        self,
        run: Run,
        draft: Endpoint,
        base: Endpoint,
        settings: BenchSettings,
        router: OpenAIEndpoint | LocalClassifier | None = None,
        router_folder: Path | None = None,
    ):
        self.run = run
        self.base = base
        self.family = settings.family
        self.config = settings.config(run)
        self.endpoint = draft if run.mode == "draft" else base
        self.graph = (
            create_specreason_graph(
                draft,
                base,
                config=self.config,
                family=settings.family,
                judge=mode_judge(run, base, router, settings, router_folder),
            )
            if run.mode in GRAPH_MODES
            else None
        )

    async def answer(self, prompt: str) -> Answered:
        """The reply to ``prompt``, its cost (wall time included), and each step's verdict."""
        messages = [{"role": "user", "content": prompt}]
        start = time.perf_counter()
        if self.graph is not None:
            state = await self.graph.ainvoke({"messages": [HumanMessage(prompt)]})
            wall = time.perf_counter() - start
            steps = [StepTrace(decision=s["decision"], score=s["score"]) for s in state["steps"]]
            floor = await self.prefill_floor(messages, state["steps"])  # off the clock
            return Answered(
                state["answer"],
                SpecReasonStats.from_state(state, wall_s=wall),
                steps,
                floor,
                round_records(state["steps"]) if self.config.verify == "agree" else None,
            )
        alone = await single_model(self.endpoint, messages, self.config)
        wall = time.perf_counter() - start
        return Answered(alone.text, baseline_stats(alone, wall, by_draft=self.run.mode == "draft"))

    async def prefill_floor(
        self, messages: list[dict[str, Any]], steps: Sequence[StepRecord]
    ) -> int | None:
        """The judge calls' prefill floor (SpecReason's base-model judge on a vLLM server)."""
        if (
            self.run.mode not in SPECREASON_MODES
            or self.run.judge is not None
            or not isinstance(self.base, OpenAIEndpoint)
        ):
            return None  # the floor of the score judge's calls
        return await judge_prefill_floor(
            self.base, to_openai_messages(messages), get_format(self.family), steps
        )

    async def solve(self, problem: Problem) -> dict[str, Any]:
        """One result line: the run, the problem, the grade, the stats and the reply."""
        error = None
        start = time.perf_counter()
        try:
            got = await self.answer(build_prompt(problem))
        except ContextLengthError as exc:  # this problem cannot run here; the others can
            got, error = Answered("", failed_stats(time.perf_counter() - start)), str(exc)
        reply, stats = got.reply, got.stats
        graded = grade(problem.grader, reply, problem.gold)
        return {
            "mode": self.run.mode,
            "threshold": self.run.threshold,
            "setting": self.run.setting,
            "score_method": self.run.score_method,
            "problem_id": problem.id,
            "judge": self.config.judge if self.run.mode in SPECREASON_MODES else None,
            "logprob_aggregate": self.config.logprob_aggregate
            if self.run.mode in SPECREASON_MODES and self.run.judge
            else None,
            "first_n_base_steps": self.run.first_n_base_steps or None,
            "agree_rule": self.run.agree_rule,
            "steps_ahead": self.run.steps_ahead,
            "config": self.config.as_dict(),
            "correct": graded.correct,
            "prediction": graded.prediction,
            "gold": problem.gold,
            "grader": problem.grader,
            "latency_s": stats.wall_s,
            **stats.as_dict(),
            "judge_floor_tokens": got.judge_floor_tokens,
            "steps": got.steps,
            "rounds": got.rounds,
            "error": error,
            "reply": reply,
            "finished_at": datetime.now(UTC).isoformat(),
        }


async def snapshot(url: str) -> ServerCounters | None:
    """A server's counters now (``None`` when its ``/metrics`` cannot be read)."""
    try:
        return await scrape(url)
    except (EndpointError, ValueError):
        return None


def counter_delta(
    after: ServerCounters | None, before: ServerCounters | None
) -> dict[str, float] | None:
    """The recorded counters' growth between two snapshots (``None`` if one is missing)."""
    if after is None or before is None:
        return None
    diff = after - before
    return {name: diff[metric] for name, metric in COUNTERS.items()}


def hit_rate(delta: dict[str, float] | None) -> float | None:
    """Prefix-cache hit rate of a counters delta (``None``: no queries or no counters)."""
    if not delta or not delta.get("prefix_cache_queries"):
        return None
    return delta["prefix_cache_hits"] / delta["prefix_cache_queries"]


@dataclass
class Sinks:
    """Where a group writes: the two JSONL files and the progress bar."""

    results: JsonlAppender
    runs: JsonlAppender
    bar: tqdm[Any]


async def run_group(
    pair: ServerPair,
    runs: Sequence[Run],
    problems: Sequence[Problem],
    done: set[ResultKey],
    settings: BenchSettings,
    sinks: Sinks,
    *,
    endpoints: tuple[Endpoint, Endpoint] | None = None,
    metrics: bool = True,
) -> int:
    """Solve the problems of each run not yet in ``done``; returns how many were solved."""
    draft, base = endpoints or endpoint_pair(pair.draft_url, pair.base_url, api_key=pair.api_key)
    router: OpenAIEndpoint | LocalClassifier | None = None
    router_folder: Path | None = None
    if pair.router_url:
        router = OpenAIEndpoint(pair.router_url, name="router", api_key=pair.api_key)
        router_folder = await served_router_folder(router, api_key=pair.api_key)
    elif pair.router_model:
        router = LocalClassifier(pair.router_model)
    solved = 0
    warned = False
    pairs = interleaved(runs, problems, done)
    if not pairs:
        return 0
    solvers = {run: Solver(run, draft, base, settings, router, router_folder) for run in runs}
    counts = {run: 0 for run in runs}
    started, clock = datetime.now(UTC).isoformat(), time.perf_counter()
    first = now = await _snapshots(pair, metrics)
    for problem, run in pairs:
        solver = solvers[run]
        sinks.bar.set_postfix_str(run.label)
        counts[run] += 1
        cold = await _reset_caches(pair) if metrics else None
        if cold is False and not warned:
            warned = True
            tqdm.write(
                "bench: a server does not offer /reset_prefix_cache (start it with "
                "VLLM_SERVER_DEV_MODE=1); problems run with whatever earlier runs "
                "left in the prefix caches (recorded as prefix_cache_reset=false)",
                file=sys.stderr,
            )
        record = await solver.solve(problem)
        after = await _snapshots(pair, metrics)
        record["prefix_cache_reset"] = cold
        record["variant"] = pair.variant
        record["server"] = {role: counter_delta(after[role], now[role]) for role in after}
        record["base_prefix_cache_hit_rate"] = hit_rate(record["server"]["base"])
        sinks.results.write(record)
        done.add(run.key(problem.id))
        sinks.bar.update(1)
        solved += 1
        now = after
    for run in runs:  # the session's counters: the runs interleaved in it share them
        if counts[run]:
            record = _run_record(run, pair, counts[run], started, clock, first, now)
            record["config"] = solvers[run].config.as_dict()
            record["interleaved_with"] = [r.label for r in runs if counts[r] and r != run]
            sinks.runs.write(record)
    return solved


def interleaved(
    runs: Sequence[Run], problems: Sequence[Problem], done: set[ResultKey]
) -> list[tuple[Problem, Run]]:
    """The unfinished (problem, run) pairs, problem-major, the run order rotated per problem.

    Every run answers a problem before the next problem starts, so a drift of the host's
    speed during the session falls on all runs alike; the rotation spreads the first slot
    (after the cache reset) over the runs. Resuming skips what is in ``done`` and keeps the
    order of the rest.
    """
    out: list[tuple[Problem, Run]] = []
    for index, problem in enumerate(problems):
        shift = index % len(runs) if runs else 0
        for run in [*runs[shift:], *runs[:shift]]:
            if run.key(problem.id) not in done:
                out.append((problem, run))
    return out


async def _reset_caches(pair: ServerPair) -> bool:
    """Empty both servers' prefix caches before a problem.

    ``False`` when a running server refused; a server that is not there (the draft of an
    ``sd`` run may be stopped) holds no cache and does not count.
    """
    results = [
        await reset_prefix_cache(url, api_key=pair.api_key)
        for url in (pair.draft_url, pair.base_url)
    ]
    return False not in results and True in results


async def _snapshots(pair: ServerPair, metrics: bool) -> dict[str, ServerCounters | None]:
    if not metrics:
        return {"draft": None, "base": None}
    return {"draft": await snapshot(pair.draft_url), "base": await snapshot(pair.base_url)}


def _run_record(
    run: Run,
    pair: ServerPair,
    problems: int,
    started: str,
    clock: float,
    first: dict[str, ServerCounters | None],
    last: dict[str, ServerCounters | None],
) -> dict[str, Any]:
    server = {role: counter_delta(last[role], first[role]) for role in last}
    return {
        "mode": run.mode,
        "threshold": run.threshold,
        "setting": run.setting,
        "score_method": run.score_method,
        "variant": pair.variant,
        "draft_url": pair.draft_url,
        "base_url": pair.base_url,
        "problems": problems,
        "started_at": started,
        "seconds": time.perf_counter() - clock,
        "server": server,
        "base_prefix_cache_hit_rate": hit_rate(server["base"]),
    }
