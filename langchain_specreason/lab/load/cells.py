"""``bench load --modes``: run every (mode, load) cell not yet done, one server block at a time.

A cell sends one request per problem, at most ``concurrency`` in flight, each through the
bench's own :class:`~..bench.runner.Solver` (the bench's prompt, budget and grading: ``base``
and ``sd`` answer alone, the judge mode and ``agree`` through the graph). A block whose modes
need no draft starts the base alone (:class:`~.modes.Block`), and the cores its servers run on
(``--cores``) are recorded on every line. Before a cell the block's servers' prefix caches are
emptied (the same problems run in every cell) and their counters read; during it their
requests running and waiting are sampled; after it the counters are read again.
``results.jsonl`` gets one line per request as it ends, ``cells.jsonl`` one line per cell (the
servers' readings). A cell whose requests are all there is skipped; a partly done
cell is rerun whole (its old lines go: concurrency is what is measured).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from ...endpoint import endpoint_pair
from ..bench.metrics import ServerCounters
from ..bench.runner import Solver
from ..shared.datasets import Problem
from ..shared.meta import MetaFile
from ..shared.modes import Run
from ..shared.results import JsonlAppender, read_records
from ..shared.servers import ServerPair, ServerSource, reset_prefix_cache
from .batch import progress_bar, send_all
from .counters import ROLES, Watch, counter_change, gauge_summary
from .flags import LoadPlan
from .modes import Block, Cell, all_cells, plan_blocks
from .modes_report import CELLS, write_modes_report
from .report import RESULTS
from .resume import check_cores, done_keys, drop_keys, partial_keys

KEPT = (
    "run",
    "judge",
    "setting",
    "threshold",
    "agree_rule",
    "steps_ahead",
    "correct",
    "prediction",
    "gold",
    "steps_drafted",
    "steps_accepted",
    "steps_rewritten",
    "steps_base",
    "judge_calls",
    "draft_tokens",
    "base_tokens",
    "trace_tokens",
    "answer_tokens",
    "stop",
)
"""What a request's line keeps of the bench's result line (not the reply, steps or config)."""
NO_DRAFT = "http://no-draft-server.invalid/v1"
"""The draft URL of a solver in a base-only block: its modes never call it (a call fails)."""


# -- resume -------------------------------------------------------------------------------


def done_cells(records: Iterable[dict[str, Any]], requests: int) -> set[Cell]:
    """Cells whose ``requests`` requests (indexes 0..R-1) all have a result line."""
    return done_keys(records, requests, Cell.of)


def partial_cells(records: Iterable[dict[str, Any]], requests: int) -> set[Cell]:
    """Cells with some result lines but not all: rerun whole."""
    return partial_keys(records, requests, Cell.of)


def drop_cells(path: Path, cells: set[Cell]) -> int:
    """Remove the lines of ``cells`` from ``path`` (atomically); how many went."""
    return drop_keys(path, cells, Cell.of)


# -- the world a cell runs in (real servers, or fakes in tests) ---------------------------


class Solves(Protocol):
    """Answers one problem into the bench's result line (:class:`~..bench.runner.Solver`)."""

    async def solve(self, problem: Problem) -> dict[str, Any]:
        """The bench's result line of ``problem``."""
        ...


class Watches(Protocol):
    """The servers' counters now, and their gauges sampled during a block (:class:`Watch`)."""

    async def counters(self) -> dict[str, ServerCounters | None]:
        """Each role's counters now (``None``: unread)."""
        ...

    def sampling(self) -> contextlib.AbstractAsyncContextManager[dict[str, list[dict[str, float]]]]:
        """Gauge samples by role, taken while the block runs."""
        ...


class LoadSolver(Solver):
    """The bench's solver without the judge's prefill floor.

    The floor's ``/tokenize`` calls would add load to the cell it measures.
    """

    async def prefill_floor(self, messages: Any, steps: Any) -> int | None:
        """Not measured under load."""
        return None


@dataclass(frozen=True)
class World:
    """How a plan reaches servers: blocks opened, solvers and watches made, caches emptied."""

    open_block: Callable[[LoadPlan, Block], contextlib.AbstractAsyncContextManager[ServerPair]]
    make_solver: Callable[[ServerPair, Run, LoadPlan], Solves]
    make_watch: Callable[[ServerPair, LoadPlan], Watches]
    reset_caches: Callable[[ServerPair], Any]


@contextlib.asynccontextmanager
async def open_block(plan: LoadPlan, block: Block) -> AsyncIterator[ServerPair]:
    """The servers of one block: given by URL, or the profile's started and stopped.

    A block whose modes need no draft has the base alone (no draft URL, none started); a
    started lone base keeps its profile's cores unless ``--cores mode``.
    """
    variant = block.variant
    if plan.explicit:
        assert plan.draft_url and plan.base_url
        base = plan.base_url if variant is None else plan.variant_urls[variant]
        draft = plan.draft_url if block.draft else None
        yield ServerPair(variant, draft, base, api_key=plan.api_key)
        return
    source = ServerSource(plan.profile, api_key=plan.api_key)
    with source.servers(
        variant, roles=block.roles, keep_profile_cores=block.keep_profile_cores
    ) as pair:
        yield pair
    print(
        f"bench load: stopped the {block.label} block's servers",
        file=sys.stderr,
        flush=True,
    )


def make_solver(pair: ServerPair, run: Run, plan: LoadPlan) -> Solves:
    """The bench's solver of ``run`` on ``pair`` (every call may wait ``timeout`` s)."""
    timeout = float(plan.model_settings["timeout"])
    draft, base = endpoint_pair(
        pair.urls.get("draft", NO_DRAFT),
        pair.base_url,
        api_key=pair.api_key,
        timeout=timeout,
        judge_timeout=timeout,
    )
    return LoadSolver(run, draft, base, plan.bench_settings)


def make_watch(pair: ServerPair, plan: LoadPlan) -> Watches:
    """The block's servers' ``/metrics``, gauges read every ``plan.sample_interval`` s.

    A block of the base alone has no draft server to read.
    """
    return Watch(pair.urls, interval=plan.sample_interval)


async def reset_caches(pair: ServerPair) -> bool | None:
    """Empty the block's servers' prefix caches: ``True`` done, ``False`` one refused.

    ``None``: no server answered. A block of the base alone has no draft cache to empty.
    """
    got = [await reset_prefix_cache(url, api_key=pair.api_key) for url in pair.urls.values()]
    if False in got:
        return False
    return True if True in got else None


REAL = World(open_block, make_solver, make_watch, reset_caches)


# -- one cell -----------------------------------------------------------------------------


def request_line(
    cell: Cell, index: int, problem: Problem, solved: dict[str, Any] | None, exc: Exception | None
) -> dict[str, Any]:
    """A request's result line (without its times) from the bench's line or the exception."""
    record: dict[str, Any] = {
        "mode": cell.mode,
        "concurrency": cell.concurrency,
        "request": index,
        "problem_id": problem.id,
    }
    if solved is None:
        assert exc is not None
        record.update(
            ok=False,
            error={"type": type(exc).__name__, "message": str(exc)[:500]},
            correct=False,
        )
        return record
    record.update({k: solved.get(k) for k in KEPT if k in solved})
    error = solved.get("error")
    record["ok"] = error is None
    record["error"] = None if error is None else {"type": "ContextLengthError", "message": error}
    record["correct"] = bool(solved.get("correct")) and error is None
    tokens = [solved.get("trace_tokens"), solved.get("answer_tokens")]
    record["completion_tokens"] = (
        sum(t for t in tokens if isinstance(t, int)) if error is None else None
    )
    return record


async def run_cell(
    cell: Cell,
    run: Run,
    solver: Solves,
    problems: Sequence[Problem],
    sink: Any,
    bar: tqdm[Any] | None = None,
    cores: dict[str, str | None] | None = None,
) -> list[dict[str, Any]]:
    """Send one request per problem, ``cell.concurrency`` in flight at most; lines in order.

    Each line goes to ``sink`` as its answer (or error) comes; latency runs from the send
    (past the gate) to the answer, ``started_s``/``ended_s`` from the cell's start. ``cores``:
    the cores each of the block's servers runs on (:attr:`ServerPair.cores`), on every line.
    """

    async def ask(index: int, problem: Problem) -> dict[str, Any]:
        return request_line(cell, index, problem, await solver.solve(problem), None)

    def line(
        index: int, problem: Problem, record: dict[str, Any] | None, exc: Exception | None
    ) -> dict[str, Any]:
        if record is None:
            record = request_line(cell, index, problem, None, exc)
        record.update(run=run.label, variant=run.variant)
        if cores is not None:
            record["cores"] = dict(cores)
        return record

    return await send_all(problems, cell.concurrency, ask, line, sink, bar)


def cell_line(
    cell: Cell,
    variant: str | None,
    before: dict[str, ServerCounters | None],
    after: dict[str, ServerCounters | None],
    samples: dict[str, list[dict[str, float]]],
    cold: bool | None,
    started_at: str,
    seconds: float,
    cores: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """A cell's line: the servers' counters before, after and their difference, the gauges.

    ``cores``: the cores of each server the block started (``None`` values: not known).
    """
    return {
        "mode": cell.mode,
        "concurrency": cell.concurrency,
        "variant": variant,
        "cores": None if cores is None else dict(cores),
        "started_at": started_at,
        "seconds": seconds,
        "prefix_cache_reset": cold,
        "server": {role: counter_change(before.get(role), after.get(role)) for role in ROLES},
        "gauges": {role: gauge_summary(samples.get(role) or []) for role in ROLES},
    }


# -- the plan -----------------------------------------------------------------------------


async def execute_modes(
    plan: LoadPlan,
    problems: Sequence[Problem],
    *,
    world: World = REAL,
    progress: bool = True,
) -> list[Path]:
    """Run every cell not yet done, one server block at a time; write the report."""
    problems = plan.first_problems(problems)
    check_cores(plan.out, plan.cores)
    meta = MetaFile(plan.out, plan.meta_settings)
    meta.save()
    path, cells_path = plan.out / RESULTS, plan.out / CELLS
    records = read_records(path)
    done = done_cells(records, plan.requests)
    partial = partial_cells(records, plan.requests)
    blocks = plan_blocks(plan.modes, plan.loads, plan.cores)
    todo = [cell for cell in all_cells(blocks) if cell not in done]
    skipped = [cell.label for cell in all_cells(blocks) if cell in done]
    say = f"bench load: cells to run: {', '.join(c.label for c in todo) or 'none'}"
    if skipped:
        say += f"; already in {path}, skipped: {', '.join(skipped)}"
    print(
        f"{say}; {plan.requests} requests each; results in {plan.out}",
        file=sys.stderr,
        flush=True,
    )
    rerun = partial & set(todo)  # a partial cell of a mode or load not asked for stays
    if rerun:
        dropped = drop_cells(path, rerun)
        if cells_path.is_file():
            drop_cells(cells_path, rerun)
        print(
            f"bench load: {', '.join(sorted(c.label for c in rerun))} partly done: "
            f"{dropped} old line(s) dropped, rerun whole",
            file=sys.stderr,
            flush=True,
        )
    runs = plan.runs
    correct = 0
    with progress_bar(len(todo) * plan.requests, progress) as bar:
        for block in blocks:
            block_todo = [cell for cell in block.cells if cell in todo]
            if not block_todo:
                continue
            async with world.open_block(plan, block) as pair:
                meta.add_servers(await pair.describe())
                watch, cores, variant = world.make_watch(pair, plan), pair.cores, block.variant
                for cell in block_todo:
                    bar.set_postfix_str(cell.label)
                    run = runs[cell.mode]
                    solver = world.make_solver(pair, run, plan)
                    cold = await world.reset_caches(pair)
                    before = await watch.counters()
                    started_at, clock = datetime.now(UTC).isoformat(), time.perf_counter()
                    with JsonlAppender(path) as sink:
                        async with watch.sampling() as samples:
                            got = await run_cell(cell, run, solver, problems, sink, bar, cores)
                    seconds = time.perf_counter() - clock
                    after = await watch.counters()
                    with JsonlAppender(cells_path) as cells_sink:
                        cells_sink.write(
                            cell_line(
                                cell,
                                variant,
                                before,
                                after,
                                samples,
                                cold,
                                started_at,
                                seconds,
                                cores,
                            )
                        )
                    correct += sum(bool(r.get("correct")) for r in got)
    meta.finish(correct)
    return write_modes_report(plan.out, plan.probe)
