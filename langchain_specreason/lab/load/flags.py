"""``specreason bench load``'s flags: parsed and checked into a :class:`LoadPlan`.

Everything is validated before any server starts: replica counts, request and concurrency
counts, servers given by URL or a profile's, and ChatSpecReason's own settings (a model is built
against unreachable URLs, so a bad budget or judge fails here, with no call made).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from ...chat_model import ChatSpecReason
from ...config import DEFAULT_JUDGE
from ...errors import ConfigError
from ...serving.profiles import load_profile
from ...serving.replicas import check_replicas, plan_replicas, router_executable
from ..shared.flags import NO_PROGRESS_HELP, add_judge_flag, add_output_flags
from ..shared.servers import add_api_key_flag, api_key_of

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
    for key, what in (
        ("budget", "token budget of a run"),
        ("step_max_tokens", "cap on one step"),
        ("answer_max_tokens", "cap on the answer"),
    ):
        gen.add_argument(
            "--" + key.replace("_", "-"),
            type=int,
            default=LOAD_DEFAULTS[key],
            help=f"{what} (default: {LOAD_DEFAULTS[key]})",
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
    add_judge_flag(gen, "judge name ({judges})", default=LOAD_DEFAULTS["judge"])
    gen.add_argument(
        "--timeout",
        type=float,
        default=LOAD_DEFAULTS["timeout"],
        help="seconds one server call may take, judge calls included: under "
        "load a call waits behind the other requests' (default: 600)",
    )
    output = p.add_argument_group("output")
    add_output_flags(
        output,
        "result folder; reuse one to resume (default: runs/load-<profile>-<timestamp>)",
        progress_help=NO_PROGRESS_HELP,
    )


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
