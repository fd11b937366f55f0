"""``specreason tune --concurrency N``: the problems N at a time, and the load named in the advice.

**What runs N at a time.** Every run tune compares (the base model alone, ``sd``, each setting
of the grid, ``agree`` ...) is a batch of its own: its problems are sent with at most N in
flight, the next sent as one ends (:func:`~..load.batch.send_all`, the batching of ``specreason
bench load``), one run after another. The servers then see N requests of one setting at once,
as an app that serves N users with that setting would, on dev and on the held-out problems
alike. At N = 1 (the default) tune runs as it always has: one problem at a time, the runs of a
server variant interleaved per problem, and its output unchanged. At N > 1 the runs of a
variant go one after another, so the load is one setting's.

**What is ranked: per-request latency**, the mean over problems of a run's seconds of server
calls (``server_s``), each call timed while N were in flight; the same measure as at N = 1,
now under load. Not the batch's wall time, because:

* at a fixed load N in a closed loop (each of N users sends the next request when the last is
  answered), the problems answered per second are N / mean latency (Little's law): at one load,
  ranking by mean per-request latency *is* ranking by throughput, and among settings that keep
  the base model's accuracy (the choice rule), by goodput (right answers per minute);
* a finite batch's wall time adds a tail (its last problems run with fewer than N in flight)
  and hangs on its slowest problem: on 20 dev problems at 4 at once the tail is a large share;
* settings replay the calls they share (:mod:`.replay`): a replayed call takes no wall time,
  so a setting's wall time would depend on which settings ran before it, while its
  ``server_s`` is the same whether a call was made or replayed.

The mean, not the median or p90 that ``bench load`` also reports: Little's law ties the mean
to throughput, and tail latencies on 20 dev problems rest on two or three of them.

The wall time and goodput of the batches that replayed nothing (the base model, ``sd``, every
held-out run) are written beside the ranking in ``tune.json`` (``load.wall``), for a reader
who serves a fixed backlog rather than N steady users.

**Replay under load** is an approximation: a shared call keeps the seconds it took in the
first setting's batch (N in flight); a later setting's own calls are made while its other
problems replay in no time and free their places, so its batch keeps N problems making calls
while N are left that decide differently from the first setting. A setting that differs on
fewer problems makes its own calls at a lower load, and they are a small part of its
latency. The held-out runs replay nothing: the evidence beside the choice is measured at N.

A setting dropped for too many wrong answers (:func:`~.grid.max_wrong`) takes no new problem;
the ones already in flight finish and count. A folder holds one load: resuming it at another
is refused (:func:`check_one_load`).

**A probe's load.** ``--probe SUMMARY`` rules settings out by the probe's ceilings; a summary
that records the load they were read at (``probe.load``, a whole number) is compared with N,
and one without it was read one stream at a time (the probe's ceilings read its one-stream
decode speeds). When the two differ, tune says so (:func:`probe_note`) and goes on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ...errors import ConfigError
from ..load.batch import send_all
from ..load.cells import Solves
from ..load.flags import parse_counts
from ..shared.datasets import Problem
from ..shared.modes import Run
from .grid import Choice

RANKED_BY = "mean per-request latency (seconds of server calls per problem)"
"""What tune ranks settings by at every load (the module's docstring says why)."""

_SKIPPED = "_skipped"  # a result line marked so is not kept (a dropped setting's problem)


def parse_concurrency(text: object) -> int:
    """``--concurrency``: one whole number >= 1 (ConfigError in one line otherwise)."""
    [value, *more] = parse_counts(
        str(text),
        "--concurrency",
        empty="needs a number of requests at once, such as 4",
        not_int="must be a whole number of requests at once, such as 4; {item!r} is not one",
        too_small="must be at least 1, got {value}",
    )
    if more:
        raise ConfigError(
            f"--concurrency {text!r}: tune chooses at one load; run it once per load "
            "(`specreason bench load --modes` compares loads)"
        )
    return value


def measured_with(concurrency: int) -> str:
    """The load in words: ``measured with 4 requests at once``."""
    if concurrency == 1:
        return "measured one request at a time"
    return f"measured with {concurrency} requests at once"


def at_load(choice: Choice, concurrency: int) -> Choice:
    """``choice`` whose reason names the load (unchanged at 1: tune's output as before)."""
    if concurrency == 1:
        return choice
    return replace(choice, reason=f"{choice.reason} ({measured_with(concurrency)})")


def check_one_load(records: Iterable[dict[str, Any]], concurrency: int, out: Path) -> None:
    """ConfigError if ``out``'s results were measured at another load (a folder holds one)."""
    other = sorted({int(r.get("concurrency", 1)) for r in records} - {concurrency})
    if other:
        then = ", ".join(measured_with(n).removeprefix("measured ") for n in other)
        raise ConfigError(
            f"{out} holds tune results {then}; --concurrency {concurrency} needs another --out "
            "(a tune folder holds one load)"
        )


def probe_load(path: str | Path) -> object:
    """A probe summary's ``probe.load``: the load its ceilings were read at (``None``: none).

    A probe written before ``specreason probe --load`` records none: its ceilings were read
    from one-stream decode speeds. An unreadable file is ``None`` here (the tune table's
    reader has said what is wrong with it).
    """
    try:
        probe = json.loads(Path(path).read_text(encoding="utf-8"))["probe"]
        return probe.get("load") if isinstance(probe, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def probe_note(path: str | Path, concurrency: int) -> dict[str, Any] | None:
    """What tune says when ``--probe``'s load is not ``concurrency`` (``None``: the same).

    ``{"summary", "load", "note"}``: the file, the load it records (``None``: none, so one
    stream) and a sentence for the terminal and ``tune.json``.
    """
    load = probe_load(path)
    whole = isinstance(load, int) and not isinstance(load, bool) and load >= 1
    if (load is None and concurrency == 1) or (whole and load == concurrency):
        return None
    if load is None:
        what = "records no load (its ceilings were read one stream at a time)"
    elif whole and isinstance(load, int):
        what = f"was {measured_with(load)}"
    else:
        what = f"records a load tune cannot read ({load!r})"
    return {
        "summary": str(path),
        "load": load,
        "note": f"--probe {path} {what} but this tune is {measured_with(concurrency)}: the "
        "ceilings that rule settings out are from another load",
    }


async def solve_at_once(
    groups: Sequence[tuple[Run, Sequence[Problem]]],
    solvers: Mapping[Run, Solves],
    concurrency: int,
    *,
    fields: Mapping[str, Any],
    dropped: Callable[[Run], bool],
    keep: Callable[[Run, dict[str, Any]], None],
    bar: tqdm[Any] | None = None,
) -> None:
    """Each run's problems, ``concurrency`` in flight at most, one run after another.

    A result line is the bench's line, ``fields`` (split, variant ...), the load
    (``concurrency``, ``batch``: when this run's batch started) and the batch's times
    (``latency_s``, ``started_s``, ``ended_s``); ``keep`` gets each as it comes. A run
    ``dropped`` takes no new problem. A failed problem ends the tune once the problems in
    flight have finished (they are kept: a rerun resumes after them).
    """
    for run, problems in groups:
        await _batch(run, problems, solvers[run], concurrency, fields, dropped, keep, bar)


async def _batch(
    run: Run,
    problems: Sequence[Problem],
    solver: Solves,
    concurrency: int,
    fields: Mapping[str, Any],
    dropped: Callable[[Run], bool],
    keep: Callable[[Run, dict[str, Any]], None],
    bar: tqdm[Any] | None,
) -> None:
    failed: list[Exception] = []
    load = {"concurrency": concurrency, "batch": datetime.now(UTC).isoformat()}

    async def ask(index: int, problem: Problem) -> dict[str, Any] | None:
        if failed or dropped(run):
            return None
        return await solver.solve(problem)

    def line(
        index: int, problem: Problem, solved: dict[str, Any] | None, exc: Exception | None
    ) -> dict[str, Any]:
        if exc is not None:
            failed.append(exc)
        if solved is None:
            return {_SKIPPED: True}
        return {**solved, **fields, **load}

    class Kept:
        def write(self, record: dict[str, Any]) -> None:
            if _SKIPPED not in record:
                keep(run, record)

    await send_all(problems, concurrency, ask, line, Kept(), bar)
    if failed:
        raise failed[0]


def walls(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``"split: run" ->`` its batch's wall time and goodput, for the batches not replayed.

    ``{"problems", "right", "wall_s", "per_minute", "mean_s"}``: ``wall_s`` from the first
    send to the last answer, ``per_minute`` right answers per minute of it, ``mean_s`` the
    ranked per-request latency. A run measured in more than one batch (a resumed tune) has
    ``wall_s`` and ``per_minute`` ``None``: its batches ran at different times.
    """
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if "batch" in r and not r.get("replayed"):
            rows.setdefault(f"{r['split']}: {Run.of(r).label}", []).append(r)
    out = {}
    for name, got in rows.items():
        right = sum(bool(r["correct"]) for r in got)
        wall = None
        if len({r["batch"] for r in got}) == 1:
            wall = max(r["ended_s"] for r in got) - min(r["started_s"] for r in got)
        out[name] = {
            "problems": len(got),
            "right": right,
            "wall_s": wall,
            "per_minute": right / wall * 60 if wall else None,
            "mean_s": math.fsum(float(r["server_s"]) for r in got) / len(got),
        }
    return out


def load_section(
    records: Iterable[dict[str, Any]], concurrency: int, probe: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``tune.json``'s ``load``: the load, what is ranked, the batches' wall times, the probe.

    ``None`` at one request at a time with nothing to say of a probe (tune's output as before).
    """
    if concurrency == 1 and probe is None:
        return None
    out: dict[str, Any] = {
        "concurrency": concurrency,
        "text": measured_with(concurrency),
        "ranked_by": RANKED_BY,
    }
    if concurrency > 1:
        out["wall"] = walls(records)
    if probe is not None:
        out["probe"] = probe
    return out


__all__ = [
    "RANKED_BY",
    "at_load",
    "check_one_load",
    "load_section",
    "measured_with",
    "parse_concurrency",
    "probe_load",
    "probe_note",
    "solve_at_once",
    "walls",
]
