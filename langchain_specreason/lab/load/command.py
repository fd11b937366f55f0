"""``specreason bench load``: modes across load, or ChatSpecReason through 1 vs N replicas.

::

    specreason bench load --profile cpu --modes base,sd,sd-dyn,specreason,agree \\
        --concurrency 1,2,4,8 --requests 16 --offset 200 --out runs/load-modes-cpu
    specreason bench load --draft-url URL --base-url URL --modes base,specreason \\
        --concurrency 1,2 --requests 2 --out runs/load-modes
    specreason bench load --profile cpu-test --replicas 1,2 --requests 16 --out runs/load-cpu
    specreason bench load --draft-url URL --base-url URL --replicas 2 --out runs/load-gpu

With ``--modes`` (:mod:`.cells`, :mod:`.modes_report`): every mode at every load on the same
GSM8K test problems, one server block per base-server variant (plain, ``sd``, ``sd-dyn``);
per cell the answers, McNemar and the paired speed-up against ``base`` at that load, latency
p50/p90, completion tokens/s, goodput, the servers' counters before and after, requests running
and waiting sampled. Files: ``results.jsonl`` (one line per request), ``cells.jsonl`` (one line
per cell), ``meta.json``, ``summary.md``, ``summary.json``, ``latency_goodput.png``; a rerun
with the same ``--out`` skips the complete cells and reruns a partly done one whole.

Without ``--modes``: for each replica count N, in order, the profile's servers are started with
N replicas per role (N=1: the plain draft/base pair; N>1: N servers per role behind one
``vllm-router`` per role), then ``--requests`` ChatSpecReason runs on the first GSM8K test
problems are sent at once (at most ``--concurrency`` in flight), then the servers are stopped
before the next N: only one set runs at a time. With ``--draft-url``/``--base-url`` the running
servers are measured instead and the single ``--replicas`` value only labels the results.

Each run carries its own routing key (ChatSpecReason sets one per run), so behind a router
every call of one run lands on one replica. The folder (``--out``) gets ``results.jsonl`` (one
line per request), ``meta.json``, ``summary.md``, ``summary.json`` and ``latency.png``.
Rerunning with the same ``--out`` skips the replica counts whose requests are all there and
reruns a partly done count whole (concurrency is what is measured, so its old lines go).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from langchain_core.messages import HumanMessage
from tqdm import tqdm

from ...chat_model import ChatSpecReason
from ...serving.launcher import Launcher
from ...serving.profiles import load_profile
from ..shared.datasets import Problem, load_problems
from ..shared.grading import grade
from ..shared.meta import MetaFile
from ..shared.prompts import build_prompt
from ..shared.results import JsonlAppender, read_records
from ..shared.servers import ServerPair, announce_start
from .batch import Sink, progress_bar, send_all
from .flags import LoadPlan, build_model, make_plan
from .flags import add_parser as add_parser  # `bench load`'s flags, imported from here
from .flags import parse_replicas as parse_replicas
from .report import RESULTS, write_load_report
from .report import render_markdown as render_markdown
from .report import summarise as summarise
from .resume import done_keys, drop_keys, partial_keys

# -- resume -------------------------------------------------------------------------------


def replicas_of(record: Mapping[str, Any]) -> int:
    """The replica count a result line belongs to."""
    return int(record["replicas"])


def done_replicas(records: Iterable[dict[str, Any]], requests: int) -> set[int]:
    """Replica counts whose ``requests`` requests (indexes 0..R-1) all have a result line."""
    return done_keys(records, requests, replicas_of)


def partial_replicas(records: Iterable[dict[str, Any]], requests: int) -> set[int]:
    """Replica counts with some result lines but not all: rerun whole."""
    return partial_keys(records, requests, replicas_of)


def drop_replicas(path: Path, counts: set[int]) -> int:
    """Remove the lines of replica counts ``counts`` from ``path`` (atomically); how many."""
    return drop_keys(path, counts, replicas_of)


# -- one batch ----------------------------------------------------------------------------


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def result_fields(message: Any, problem: Problem) -> dict[str, Any]:
    """What a result line keeps of an answer: tokens, step counts, grade."""
    out: dict[str, Any] = {}
    usage = getattr(message, "usage_metadata", None) or {}
    out["completion_tokens"] = _int_or_none(usage.get("output_tokens"))
    stats = (getattr(message, "response_metadata", None) or {}).get("specreason") or {}
    for key in ("steps_accepted", "steps_rewritten"):
        if key in stats:
            out[key] = _int_or_none(stats[key])
    text = message.text if isinstance(getattr(message, "text", None), str) else str(message.content)
    got = grade(problem.grader, text, problem.gold)
    out.update(prediction=got.prediction, correct=got.correct)
    return out


async def run_batch(
    model: ChatSpecReason,
    problems: Sequence[Problem],
    replicas: int,
    concurrency: int,
    sink: Sink,
    bar: tqdm | None = None,
) -> list[dict[str, Any]]:
    """Send one request per problem at once, ``concurrency`` in flight at most.

    Each result line is written to ``sink`` as its answer (or error) comes; latency runs from
    the send (past the semaphore) to the answer, ``started_s``/``ended_s`` from the batch's
    start. Returns the lines in request order.
    """

    async def ask(index: int, problem: Problem) -> Any:
        return await model.ainvoke([HumanMessage(build_prompt(problem))])

    def line(index: int, problem: Problem, message: Any, exc: Exception | None) -> dict[str, Any]:
        record: dict[str, Any] = {"replicas": replicas, "request": index, "problem_id": problem.id}
        if exc is not None:
            record.update(
                ok=False,
                error={"type": type(exc).__name__, "message": str(exc)[:500]},
                correct=False,
            )
        else:
            record.update(ok=True, error=None, **result_fields(message, problem))
        return record

    return await send_all(problems, concurrency, ask, line, sink, bar)


# -- servers ------------------------------------------------------------------------------


class Servers(Protocol):
    """A draft and a base URL to send to, and how to describe them in ``meta.json``."""

    @property
    def draft_url(self) -> str:
        """OpenAI base URL of the draft server (or router)."""
        ...

    @property
    def base_url(self) -> str:
        """OpenAI base URL of the base server (or router)."""
        ...

    @property
    def api_key(self) -> str | None:
        """The key the clients send."""
        ...

    async def describe(self) -> dict[str, Any]:
        """URLs and served models, for ``meta.json``."""
        ...


@contextlib.asynccontextmanager
async def open_servers(
    plan: LoadPlan, replicas: int
) -> AsyncIterator[tuple[Servers, dict[str, Any]]]:
    """The servers of one replica count for the block: given by URL, or started and stopped.

    Yields them and extra facts for ``meta.json`` (replica count, the replicas' URLs).
    """
    if plan.explicit:
        assert plan.draft_url and plan.base_url
        yield (
            ServerPair(None, plan.draft_url, plan.base_url, api_key=plan.api_key),
            {"replicas": replicas, "replicas_label_only": True},
        )
        return
    profile = load_profile(plan.profile)
    launcher = Launcher(profile, replicas=replicas, api_key=plan.api_key)
    announce_start(
        f"bench load: starting the {profile.name} servers with {replicas} replica(s) per role",
        launcher,
    )
    with launcher:
        pair = ServerPair(
            None, launcher.urls["draft"], launcher.urls["base"], profile, api_key=launcher.api_key
        )
        yield pair, {"replicas": replicas, "replica_urls": launcher.replica_urls}
    print(f"bench load: stopped the {replicas}-replica servers", file=sys.stderr, flush=True)


OpenServers = Callable[
    [LoadPlan, int], contextlib.AbstractAsyncContextManager[tuple[Servers, dict[str, Any]]]
]
MakeModel = Callable[[Servers, LoadPlan], ChatSpecReason]


def make_model(servers: Servers, plan: LoadPlan) -> ChatSpecReason:
    """The ChatSpecReason of ``plan``'s settings on ``servers``."""
    return build_model(servers.draft_url, servers.base_url, servers.api_key, plan.model_settings)


async def execute(
    plan: LoadPlan,
    problems: Sequence[Problem],
    *,
    open_servers: OpenServers = open_servers,
    make_model: MakeModel = make_model,
    progress: bool = True,
) -> list[Path]:
    """Run every replica count not yet done, one set of servers at a time; write the report."""
    problems = plan.first_problems(problems)
    meta = MetaFile(plan.out, plan.meta_settings)
    meta.save()
    path = plan.out / RESULTS
    records = read_records(path)
    done = done_replicas(records, plan.requests)
    partial = partial_replicas(records, plan.requests)
    todo = [n for n in plan.replicas if n not in done]
    for n in plan.replicas:
        if n in done:
            print(
                f"bench load: {n} replica(s): all {plan.requests} requests already in "
                f"{path}, skipped",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"bench load: replica counts to run: {', '.join(map(str, todo)) or 'none'}; "
        f"{plan.requests} requests each, {plan.concurrency} in flight; results in "
        f"{plan.out}",
        file=sys.stderr,
        flush=True,
    )
    correct = 0
    with progress_bar(len(todo) * plan.requests, progress) as bar:
        for n in todo:
            if n in partial:
                dropped = drop_replicas(path, {n})
                print(
                    f"bench load: {n} replica(s) partly done: {dropped} old line(s) "
                    "dropped, rerun whole",
                    file=sys.stderr,
                    flush=True,
                )
            async with open_servers(plan, n) as (servers, facts):
                meta.add_servers({**await servers.describe(), **facts})
                model = make_model(servers, plan)
                bar.set_postfix_str(f"{n} replica(s)")
                with JsonlAppender(path) as sink:
                    got = await run_batch(model, problems, n, plan.concurrency, sink, bar)
                correct += sum(bool(r.get("correct")) for r in got)
    meta.finish(correct)
    return write_load_report(plan.out)


async def run_load(args: argparse.Namespace) -> int:
    """``specreason bench load``: returns the process exit code."""
    plan = make_plan(args)
    problems = load_problems(plan.dataset, limit=plan.requests, seed=args.seed, offset=plan.offset)
    if plan.modes:
        from .cells import execute_modes

        paths = await execute_modes(plan, problems, progress=not args.no_progress)
    else:
        paths = await execute(plan, problems, progress=not args.no_progress)
    for path in paths:
        print(path)
    return 0
