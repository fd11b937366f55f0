"""``specreason bench load``: ChatSpecReason under concurrent load, through 1 vs N replicas.

::

    specreason bench load --profile cpu-test --replicas 1,2 --requests 16 --out runs/load-cpu
    specreason bench load --profile cpu --replicas 1,2,4 --requests 32 --concurrency 8
    specreason bench load --draft-url URL --base-url URL --replicas 2 --out runs/load-gpu

For each replica count N, in order, the profile's servers are started with N replicas per role
(N=1: the plain draft/base pair; N>1: N servers per role behind one ``vllm-router`` per role),
then ``--requests`` ChatSpecReason runs on the first GSM8K test problems are sent at once (at
most ``--concurrency`` in flight), then the servers are stopped before the next N: only one
set runs at a time. With ``--draft-url``/``--base-url`` the running servers are measured
instead and the single ``--replicas`` value only labels the results.

Each run carries its own routing key (ChatSpecReason sets one per run), so behind a router
every call of one run lands on one replica. The folder (``--out``) gets ``results.jsonl`` (one
line per request), ``meta.json``, ``summary.md``, ``summary.json`` and ``latency.png``.
Rerunning with the same ``--out`` skips the replica counts whose requests are all there and
reruns a partly done count whole (concurrency is what is measured, so its old lines go).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from langchain_core.messages import HumanMessage
from pydantic import SecretStr
from tqdm import tqdm

from ...chat_model import ChatSpecReason
from ...config import DEFAULT_JUDGE
from ...errors import ConfigError
from ...judges.registry import judge_specs
from ...serving.launcher import Launcher
from ...serving.profiles import load_profile
from ...serving.replicas import check_replicas, plan_replicas, router_executable
from .datasets import Problem, load_problems
from .grading import grade
from .meta import MetaFile
from .prompts import build_prompt
from .report import fmt, percentile, settings_lines
from .results import JsonlAppender, read_records
from .servers import ServerPair, add_api_key_flag, api_key_of

RESULTS = "results.jsonl"
SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"
LATENCY_PLOT = "latency.png"
DATASET = "gsm8k"

LOAD_DEFAULTS: dict[str, Any] = {
    "requests": 16,
    "budget": 256,
    "step_max_tokens": 64,
    "answer_max_tokens": 128,
    "temperature": 0.0,
    "seed": 0,
    "judge": DEFAULT_JUDGE,
    "timeout": 600.0,
}
"""The load benchmark's defaults: short greedy seeded runs, so N=1 fits a 2-core machine."""

CPU_NOTE = (
    "Note: replicas add compute only when each has its own device. On a CPU machine all N "
    "replicas of a role share the same cores; on a 2-core machine they cannot add compute, "
    "so there the numbers show the router's overhead and how the requests are scheduled, "
    "not scale-out."
)


def add_parser(subparsers: Any) -> None:
    """Add ``bench load``."""
    p = subparsers.add_parser(
        "load",
        help="ChatSpecReason under concurrent load, through 1 vs N replicas per role",
        description="ChatSpecReason under concurrent load, through 1 vs N replicas per role: "
        "per replica count, start the servers, send the requests at once, stop "
        "them; resumable.",
    )
    servers = p.add_argument_group("servers")
    servers.add_argument(
        "--profile", default="cpu", help="serve profile whose servers are started (default: cpu)"
    )
    servers.add_argument(
        "--replicas",
        default="1,2",
        help="comma list of replica counts per role, run in order, one set "
        "of servers at a time (default: 1,2); with --draft-url/"
        "--base-url a single value, only a label for the results",
    )
    servers.add_argument(
        "--draft-url",
        help="measure this running draft server (or router) instead of "
        "starting the profile's; needs --base-url",
    )
    servers.add_argument(
        "--base-url", help="measure this running base server (or router); needs --draft-url"
    )
    add_api_key_flag(servers)
    servers.add_argument("--family", help="prompt family (default: the profile's)")
    load = p.add_argument_group("load")
    load.add_argument(
        "--requests",
        type=int,
        default=LOAD_DEFAULTS["requests"],
        help="requests per replica count, all sent at once: one ChatSpecReason "
        "run each on the first R GSM8K test problems (default: "
        f"{LOAD_DEFAULTS['requests']})",
    )
    load.add_argument(
        "--concurrency", type=int, help="requests in flight at most (default: all of them)"
    )
    gen = p.add_argument_group("generation")
    gen.add_argument(
        "--budget",
        type=int,
        default=LOAD_DEFAULTS["budget"],
        help=f"token budget of a run (default: {LOAD_DEFAULTS['budget']})",
    )
    gen.add_argument(
        "--step-max-tokens",
        type=int,
        default=LOAD_DEFAULTS["step_max_tokens"],
        help=f"cap on one step (default: {LOAD_DEFAULTS['step_max_tokens']})",
    )
    gen.add_argument(
        "--answer-max-tokens",
        type=int,
        default=LOAD_DEFAULTS["answer_max_tokens"],
        help=f"cap on the answer (default: {LOAD_DEFAULTS['answer_max_tokens']})",
    )
    gen.add_argument(
        "--temperature",
        type=float,
        default=LOAD_DEFAULTS["temperature"],
        help="sampling temperature (default: 0)",
    )
    gen.add_argument(
        "--seed", type=int, default=LOAD_DEFAULTS["seed"], help="sampling seed (default: 0)"
    )
    gen.add_argument(
        "--judge",
        default=LOAD_DEFAULTS["judge"],
        help=f"judge name ({', '.join(judge_specs())}); a+b cascades (default: {DEFAULT_JUDGE})",
    )
    gen.add_argument(
        "--timeout",
        type=float,
        default=LOAD_DEFAULTS["timeout"],
        help="seconds one server call may take, judge calls included: under "
        "load a call waits behind the other requests' (default: 600)",
    )
    output = p.add_argument_group("output")
    output.add_argument(
        "--out",
        help="result folder; reuse one to resume (default: runs/load-<profile>-<timestamp>)",
    )
    output.add_argument("--no-progress", action="store_true", help="no progress bar")


def parse_replicas(text: str) -> list[int]:
    """Replica counts of a comma list (``"1,2"``), in order; ConfigError unless positive ints."""
    items = [part.strip() for part in str(text).split(",")]
    if not any(items):
        raise ConfigError("--replicas needs at least one replica count, such as 1,2")
    counts: list[int] = []
    for item in items:
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(
                f"--replicas must be a comma list of positive integers, such as "
                f"1,2; {item!r} is not an integer"
            ) from None
        if value < 1:
            raise ConfigError(f"--replicas must be positive integers, got {value}")
        check_replicas(value)
        if value in counts:
            raise ConfigError(f"--replicas names {value} twice")
        counts.append(value)
    return counts


@dataclass(frozen=True)
class LoadPlan:
    """Everything a load benchmark will do, checked before any server starts."""

    out: Path
    replicas: list[int]
    requests: int
    concurrency: int
    profile: str
    model_settings: dict[str, Any]
    """ChatSpecReason fields of every request (budget, temperature, judge, family...)."""
    draft_url: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)

    @property
    def explicit(self) -> bool:
        """True when running servers are measured (given by URL)."""
        return bool(self.draft_url)

    @property
    def meta_settings(self) -> dict[str, Any]:
        """What every session of one folder must share (``meta.json``; replicas may grow)."""
        return {
            "dataset": DATASET,
            "split": "test",
            "requests": self.requests,
            "concurrency": self.concurrency,
            "servers": "given by URL" if self.explicit else f"profile {self.profile}",
            **self.model_settings,
        }


def default_out(profile: str, now: datetime | None = None) -> Path:
    """``runs/load-<profile>-<timestamp>``."""
    return Path("runs") / f"load-{profile}-{(now or datetime.now()):%Y%m%d-%H%M%S}"


def make_plan(args: argparse.Namespace) -> LoadPlan:
    """Parse and validate the flags (typed errors), without starting or calling anything."""
    replicas = parse_replicas(args.replicas)
    if args.requests is None or args.requests < 1:
        raise ConfigError(f"--requests must be at least 1, got {args.requests}")
    concurrency = args.requests if args.concurrency is None else args.concurrency
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {concurrency}")
    if bool(args.draft_url) != bool(args.base_url):
        raise ConfigError(
            "give both --draft-url and --base-url, or neither (then the "
            "profile's servers are started)"
        )
    explicit = bool(args.draft_url)
    if explicit and len(replicas) != 1:
        raise ConfigError(
            "with --draft-url/--base-url the servers are already running: give "
            "one --replicas value (it only labels the results), not "
            f"{args.replicas}"
        )
    profile = load_profile(args.profile)  # raises for an unknown profile
    if not explicit:
        for n in replicas:
            if n > 1:
                plan_replicas(profile, n)  # ports, pool size (ConfigError)
        if any(n > 1 for n in replicas):
            router_executable()  # ServeError when vllm-router is not installed
    settings = {
        "budget": args.budget,
        "step_max_tokens": args.step_max_tokens,
        "answer_max_tokens": args.answer_max_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
        "judge": args.judge,
        "timeout": args.timeout,
        "family": args.family or profile.family,
    }
    if settings["timeout"] is None or settings["timeout"] <= 0:
        raise ConfigError(f"--timeout must be positive, got {settings['timeout']}")
    # raises ConfigError for a bad budget, temperature, judge... (no call is made)
    build_model("http://draft.invalid/v1", "http://base.invalid/v1", None, settings)
    return LoadPlan(
        Path(args.out) if args.out else default_out(args.profile),
        replicas,
        args.requests,
        concurrency,
        args.profile,
        settings,
        args.draft_url,
        args.base_url,
        api_key_of(args),
    )


def build_model(
    draft_url: str, base_url: str, api_key: str | None, settings: dict[str, Any]
) -> ChatSpecReason:
    """The ChatSpecReason every request of one replica count goes through."""
    extra = dict(settings)
    timeout = extra.pop("timeout", None)
    if timeout is not None:
        extra.update(timeout=timeout, judge_timeout=timeout)
    return ChatSpecReason(
        draft_url=draft_url,
        base_url=base_url,
        api_key=SecretStr(api_key) if api_key else None,
        **extra,
    )


# -- resume -------------------------------------------------------------------------------


def done_replicas(records: Iterable[dict[str, Any]], requests: int) -> set[int]:
    """Replica counts whose ``requests`` requests (indexes 0..R-1) all have a result line."""
    seen: dict[int, set[int]] = {}
    for r in records:
        seen.setdefault(int(r["replicas"]), set()).add(int(r["request"]))
    return {n for n, got in seen.items() if set(range(requests)) <= got}


def partial_replicas(records: Iterable[dict[str, Any]], requests: int) -> set[int]:
    """Replica counts with some result lines but not all: rerun whole."""
    records = list(records)
    return {int(r["replicas"]) for r in records} - done_replicas(records, requests)


def drop_replicas(path: Path, counts: set[int]) -> int:
    """Remove the lines of replica counts ``counts`` from ``path`` (atomically); how many."""
    records = read_records(path)
    keep = [r for r in records if int(r["replicas"]) not in counts]
    if len(keep) == len(records):
        return 0
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8"
    )
    tmp.replace(path)
    return len(records) - len(keep)


# -- one batch ----------------------------------------------------------------------------


class Sink(Protocol):
    """Where result lines go (:class:`~.results.JsonlAppender`, or a list in tests)."""

    def write(self, record: dict[str, Any]) -> None:
        """Keep one result line."""
        ...


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
    gate = asyncio.Semaphore(concurrency)
    batch_start = time.perf_counter()

    async def one(index: int, problem: Problem) -> dict[str, Any]:
        async with gate:
            sent = time.perf_counter()
            record: dict[str, Any] = {
                "replicas": replicas,
                "request": index,
                "problem_id": problem.id,
            }
            try:
                message = await model.ainvoke([HumanMessage(build_prompt(problem))])
            except Exception as exc:  # a failed request is a result, not the end
                ended = time.perf_counter()
                record.update(
                    ok=False,
                    error={"type": type(exc).__name__, "message": str(exc)[:500]},
                    correct=False,
                )
            else:
                ended = time.perf_counter()
                record.update(ok=True, error=None, **result_fields(message, problem))
            record.update(
                latency_s=ended - sent,
                started_s=sent - batch_start,
                ended_s=ended - batch_start,
                finished_at=datetime.now(UTC).isoformat(),
            )
            sink.write(record)
            if bar is not None:
                bar.update(1)
            return record

    return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(problems))))


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
    print(
        f"bench load: starting the {profile.name} servers with {replicas} replica(s) per "
        f"role (logs: {launcher.log_dir})",
        file=sys.stderr,
        flush=True,
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
    if len(problems) < plan.requests:
        raise ConfigError(
            f"--requests {plan.requests}: the dataset has only {len(problems)} problems"
        )
    problems = list(problems[: plan.requests])
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
    with tqdm(
        total=len(todo) * plan.requests,
        desc="bench load",
        unit="request",
        disable=not progress,
        dynamic_ncols=True,
    ) as bar:
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


# -- summary ------------------------------------------------------------------------------


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or not den:
        return None
    return num / den


def summarise_replicas(replicas: int, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The numbers of one replica count's batch (pure)."""
    ok = [r for r in records if r.get("ok")]
    latencies = [float(r["latency_s"]) for r in ok]
    starts = [float(r["started_s"]) for r in records if r.get("started_s") is not None]
    ends = [float(r["ended_s"]) for r in records if r.get("ended_s") is not None]
    wall = max(ends) - min(starts) if starts and ends else None
    tokens = [r["completion_tokens"] for r in ok if r.get("completion_tokens") is not None]
    correct = sum(bool(r.get("correct")) for r in records)

    def pct(q: float) -> float | None:
        return percentile(latencies, q) if latencies else None

    rpm = _ratio(60.0 * len(ok), wall)
    return {
        "replicas": replicas,
        "requests": len(records),
        "ok": len(ok),
        "failures": len(records) - len(ok),
        "wall_s": wall,
        "requests_per_min": rpm,
        "completion_tokens": sum(tokens) if tokens else None,
        "tokens_per_s": _ratio(float(sum(tokens)), wall) if tokens else None,
        "latency_p50_s": pct(50),
        "latency_p90_s": pct(90),
        "latency_max_s": max(latencies) if latencies else None,
        "correct": correct,
        "accuracy": correct / len(records) if records else None,
        "steps_accepted": sum(r.get("steps_accepted") or 0 for r in ok),
        "steps_rewritten": sum(r.get("steps_rewritten") or 0 for r in ok),
        "errors": sorted(
            {
                f"{r['error']['type']}: {r['error']['message'][:120]}"
                for r in records
                if not r.get("ok") and r.get("error")
            }
        ),
    }


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per replica count (ascending) its numbers, and each count's speed-up over N=1 (pure).

    Speed-up: completed requests per minute of N over those of N=1 (``None`` without N=1).
    """
    by_n: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by_n.setdefault(int(r["replicas"]), []).append(r)
    rows = [summarise_replicas(n, by_n[n]) for n in sorted(by_n)]
    one = next((row for row in rows if row["replicas"] == 1), None)
    speedup = {
        str(row["replicas"]): _ratio(
            row["requests_per_min"], one["requests_per_min"] if one else None
        )
        for row in rows
        if row["replicas"] != 1
    }
    return {"rows": rows, "speedup_over_1": speedup if one else {}}


def render_markdown(summary: dict[str, Any], meta: dict[str, Any] | None = None) -> str:
    """``summary.md`` of :func:`summarise`'s numbers (and ``meta.json``'s settings, if any)."""
    out = ["# Load benchmark: ChatSpecReason through 1 vs N replicas per role", ""]
    lines = settings_lines(meta or {})
    out += [*lines, ""] if lines else []
    out += [
        "| replicas | requests | failures | wall s | requests/min | completion tok/s | "
        "p50 s | p90 s | max s | accuracy |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in summary["rows"]:
        out.append(
            f"| {r['replicas']} | {r['requests']} | {r['failures']} | "
            f"{fmt(r['wall_s'], '.1f')} | {fmt(r['requests_per_min'], '.2f')} | "
            f"{fmt(r['tokens_per_s'], '.1f')} | {fmt(r['latency_p50_s'], '.1f')} | "
            f"{fmt(r['latency_p90_s'], '.1f')} | {fmt(r['latency_max_s'], '.1f')} | "
            f"{r['correct']}/{r['requests']} |"
        )
    out.append("")
    speedup = summary.get("speedup_over_1") or {}
    if speedup:
        out.append(
            "Speed-up over 1 replica (requests/min of N over 1 replica's): "
            + ", ".join(f"N={n}: {fmt(v, '.2f', '×')}" for n, v in speedup.items())
            + "."
        )
    elif any(r["replicas"] != 1 for r in summary["rows"]):
        out.append("Speed-up over 1 replica: no 1-replica run in this folder to compare with.")
    out += [
        "",
        "Wall: first send to last answer of the batch. Requests/min and completion "
        "tok/s count the answered requests over that wall time; latencies (send to "
        "answer) are of the answered requests; a failed request counts as wrong.",
        "",
        CPU_NOTE,
    ]
    errors = [(r["replicas"], e) for r in summary["rows"] for e in r["errors"]]
    if errors:
        out += ["", "Errors:", ""] + [f"- {n} replica(s): {e}" for n, e in errors]
    return "\n".join(out) + "\n"


def plot_latency(records: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Sorted latencies (empirical CDF over all requests sent), one line per replica count.

    ``None`` (and a warning) when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "warning: plots need matplotlib: pip install 'langchain-specreason[bench]'",
            file=sys.stderr,
        )
        return None
    by_n: dict[int, list[float]] = {}
    sent: dict[int, int] = {}
    for r in records:
        n = int(r["replicas"])
        sent[n] = sent.get(n, 0) + 1
        if r.get("ok"):
            by_n.setdefault(n, []).append(float(r["latency_s"]))
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for n in sorted(by_n):
        # share of all the requests sent: with failures the line stops short of 100 %
        values = sorted(by_n[n])
        share = [100 * (i + 1) / sent[n] for i in range(len(values))]
        ax.step(values, share, where="post", marker=".", label=f"{n} replica(s)")
    ax.set_xlabel("latency per request, send to answer (s)")
    ax.set_ylabel("requests answered within (%)")
    ax.set_ylim(0, 105)
    ax.set_xlim(left=0)
    ax.set_title("ChatSpecReason under load: latency by replica count")
    ax.grid(alpha=0.3)
    if by_n:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_load_report(out: Path) -> list[Path]:
    """Write ``summary.md``, ``summary.json`` and ``latency.png`` from ``results.jsonl``."""
    records = read_records(out / RESULTS)
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    summary = summarise(records)
    md, js = out / SUMMARY_MD, out / SUMMARY_JSON
    md.write_text(render_markdown(summary, meta), encoding="utf-8")
    js.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    png = plot_latency(records, out / LATENCY_PLOT)
    return [md, js] + ([png] if png else [])


async def run_load(args: argparse.Namespace) -> int:
    """``specreason bench load``: returns the process exit code."""
    plan = make_plan(args)
    problems = load_problems(DATASET, limit=plan.requests, seed=args.seed)
    for path in await execute(plan, problems, progress=not args.no_progress):
        print(path)
    return 0
