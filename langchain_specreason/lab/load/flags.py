"""``specreason bench load``'s flags: parsed and checked into a :class:`LoadPlan`.

Everything is validated before any server starts: replica counts, request and concurrency
counts, servers given by URL or a profile's (and its variants, with ``--modes``), and the
runs' own settings (a model is built against unreachable URLs, so a bad budget or judge fails
here, with no call made).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
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
from ..bench.runner import BenchSettings
from ..probe.report import load_sd_prediction
from ..shared.datasets import Problem
from ..shared.flags import NO_PROGRESS_HELP, add_judge_flag, add_output_flags
from ..shared.modes import Run
from ..shared.servers import add_api_key_flag, api_key_of
from .modes import (
    CORES,
    DEFAULT_CORES,
    DEFAULT_LOADS,
    LOAD_MODES,
    mode_run,
    parse_load_modes,
    variant_of,
)

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
    "sample_interval": 1.0,
}
"""The load benchmark's defaults: short greedy seeded runs, so N=1 fits a 2-core machine."""


def add_parser(subparsers: Any) -> None:
    """Add ``bench load``."""
    p = subparsers.add_parser(
        "load",
        help="modes under concurrent load (--modes), or ChatSpecReason through 1 vs N "
        "replicas per role",
        description="With --modes: every mode at every load (--concurrency 1,2,4,8) on the "
        "same problems, one server block per base-server variant; per cell the answers, "
        "latency, throughput, goodput and the servers' own counters, against base at the same "
        "load. Without: ChatSpecReason through 1 vs N replicas per role, per replica count "
        "start the servers, send the requests at once, stop them. Both resumable.",
    )
    servers = p.add_argument_group("servers")
    servers.add_argument(
        "--profile", default="cpu", help="serve profile whose servers are started (default: cpu)"
    )
    servers.add_argument(
        "--replicas",
        help="comma list of replica counts per role, run in order, one set "
        "of servers at a time (default: 1,2); with --draft-url/"
        "--base-url a single value, only a label for the results; not with --modes",
    )
    servers.add_argument(
        "--draft-url",
        help="measure this running draft server (or router) instead of "
        "starting the profile's; needs --base-url",
    )
    servers.add_argument(
        "--base-url", help="measure this running base server (or router); needs --draft-url"
    )
    for variant in ("sd", "sd-dyn"):
        servers.add_argument(
            f"--{variant}-base-url",
            help=f"with --modes and --draft-url/--base-url: the running base server of "
            f"variant {variant} (mode {variant})",
        )
    add_api_key_flag(servers)
    servers.add_argument("--family", help="prompt family (default: the profile's)")
    load = p.add_argument_group("load")
    load.add_argument(
        "--modes",
        help=f"compare these modes across loads, comma list of {', '.join(LOAD_MODES)} "
        "(without it: ChatSpecReason across replica counts)",
    )
    load.add_argument(
        "--requests",
        type=int,
        default=LOAD_DEFAULTS["requests"],
        help="requests per cell (mode at a load) or per replica count: one run each on "
        "--dataset problems from --offset, the same problems in every cell (default: "
        f"{LOAD_DEFAULTS['requests']})",
    )
    load.add_argument(
        "--offset",
        type=int,
        default=0,
        help="skip the first N problems of --dataset (--offset 200 --requests 16: 201-216)",
    )
    load.add_argument(
        "--dataset",
        default=DATASET,
        choices=["gsm8k", "gsm8k-train"],
        help="the problems: GSM8K test (gsm8k), or GSM8K train (gsm8k-train) to choose a "
        f"setting on dev problems before a test table (default: {DATASET})",
    )
    load.add_argument(
        "--concurrency",
        help="requests in flight at most; with --modes a comma list of loads (default: "
        f"{DEFAULT_LOADS}), else one number (default: all the requests)",
    )
    load.add_argument(
        "--probe",
        metavar="SUMMARY",
        help="--modes: a `specreason probe` summary.json measured with an sd server; its "
        "predicted sd speed-up over base at each load (t_b(N) / t_s(N)) goes beside the "
        "measured sd cells in summary.md",
    )
    load.add_argument(
        "--cores",
        choices=CORES,
        default=DEFAULT_CORES,
        help="--modes with the profile's servers: 'profile' keeps every server on its "
        "profile's cores, the pair's split, as earlier readings were measured (a block whose "
        "modes need no draft starts the base alone, on its own cores); 'mode' runs each mode "
        "as it would be deployed: base, sd and sd-dyn in blocks of the base alone on the "
        "whole machine (plain base apart from specreason and agree's pair). One folder holds "
        f"one setting (default: {DEFAULT_CORES})",
    )
    load.add_argument(
        "--sample-interval",
        type=float,
        default=LOAD_DEFAULTS["sample_interval"],
        help="--modes: seconds between two readings of the servers' requests running and "
        "waiting during a cell (default: 1)",
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
        "--threshold",
        type=float,
        help="--modes: the judge mode's threshold on its judge's own scale (the config field "
        "of the judge: threshold, likelihood_threshold...; default: the library's)",
    )
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


def parse_counts(
    text: str,
    flag: str,
    *,
    empty: str,
    not_int: str,
    too_small: str,
    check: Callable[[int], object] | None = None,
) -> list[int]:
    """Distinct whole numbers >= 1 of a comma list, in order; ConfigError naming ``flag``.

    The messages follow ``flag``: ``empty`` for no number, ``not_int`` (``{item}``) for an
    item that is not an integer, ``too_small`` (``{value}``) for one below 1; ``check`` may
    refuse a value further before it is kept.
    """
    items = [part.strip() for part in str(text).split(",")]
    if not any(items):
        raise ConfigError(f"{flag} {empty}")
    counts: list[int] = []
    for item in items:
        try:
            value = int(item)
        except ValueError:
            raise ConfigError(f"{flag} {not_int.format(item=item)}") from None
        if value < 1:
            raise ConfigError(f"{flag} {too_small.format(value=value)}")
        if check is not None:
            check(value)
        if value in counts:
            raise ConfigError(f"{flag} names {value} twice")
        counts.append(value)
    return counts


def parse_replicas(text: str) -> list[int]:
    """Replica counts of a comma list (``"1,2"``), in order; ConfigError unless positive ints."""
    return parse_counts(
        text,
        "--replicas",
        empty="needs at least one replica count, such as 1,2",
        not_int="must be a comma list of positive integers, such as 1,2; {item!r} is not an "
        "integer",
        too_small="must be positive integers, got {value}",
        check=check_replicas,
    )


def parse_loads(text: str, *, flag: str = "--concurrency") -> list[int]:
    """Loads of a comma list (``"1,2,4,8"``), in order; ConfigError unless distinct ints >= 1."""
    return parse_counts(
        text,
        flag,
        empty="needs at least one load, such as 1,2,4,8",
        not_int="must be a comma list of whole numbers, such as 1,2,4,8; {item!r} is not one",
        too_small="must be at least 1, got {value}",
    )


@dataclass(frozen=True)
class LoadPlan:
    """Everything a load benchmark will do, checked before any server starts.

    With :attr:`modes` it compares modes across :attr:`loads` (one server block per base
    variant); without, ChatSpecReason across :attr:`replicas` at :attr:`concurrency`.
    """

    out: Path
    replicas: list[int]
    requests: int
    concurrency: int
    profile: str
    model_settings: dict[str, Any]
    """The runs' settings (budget, temperature, judge, family...)."""
    draft_url: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    modes: tuple[str, ...] = ()
    """``--modes``: the modes compared (empty: the replica comparison)."""
    loads: tuple[int, ...] = ()
    """``--modes``: the loads (requests in flight at most), in order."""
    offset: int = 0
    variant_urls: Mapping[str, str] = field(default_factory=dict)
    """With URLs: the base server of each variant (``sd``, ``sd-dyn``)."""
    sample_interval: float = LOAD_DEFAULTS["sample_interval"]
    dataset: str = DATASET
    """``gsm8k`` (test) or ``gsm8k-train`` (dev: where settings are chosen)."""
    probe: Path | None = None
    """``--probe``: a probe's ``summary.json`` whose ``sd`` prediction the report shows (it is
    not a setting the folder's sessions share: a resume may give another or none)."""
    cores: str = DEFAULT_CORES
    """``--cores``: ``profile`` (every server on its profile's cores) or ``mode`` (a base that
    runs alone on the whole machine); one folder holds one (:func:`.resume.check_cores`)."""

    def first_problems(self, problems: Sequence[Problem]) -> list[Problem]:
        """The ``requests`` problems every cell (or replica count) runs; ConfigError if fewer."""
        if len(problems) < self.requests:
            raise ConfigError(
                f"--requests {self.requests}: the dataset has only {len(problems)} problems "
                "from --offset"
            )
        return list(problems[: self.requests])

    @property
    def explicit(self) -> bool:
        """True when running servers are measured (given by URL)."""
        return bool(self.draft_url)

    @property
    def runs(self) -> dict[str, Run]:
        """``--modes``: the bench run of each mode (the judge mode at the plan's judge)."""
        return {
            mode: mode_run(mode, self.model_settings["judge"], self.model_settings.get("threshold"))
            for mode in self.modes
        }

    @property
    def bench_settings(self) -> BenchSettings:
        """``--modes``: the bench's settings of every run (budget, caps, sampling, family)."""
        s = self.model_settings
        return BenchSettings(
            budget=s["budget"],
            step_max_tokens=s["step_max_tokens"],
            answer_max_tokens=s["answer_max_tokens"],
            temperature=s["temperature"],
            seed=s["seed"],
            family=s["family"],
        )

    @property
    def meta_settings(self) -> dict[str, Any]:
        """What every session of one folder must share (``meta.json``).

        Replica counts, and with ``--modes`` the modes and loads, may grow.
        """
        split = "train" if self.dataset.endswith("-train") else "test"
        out: dict[str, Any] = {"dataset": self.dataset.removesuffix("-train"), "split": split}
        if self.offset:  # absent: from the start, as older folders
            out["offset"] = self.offset
        out["requests"] = self.requests
        if self.modes:
            out["compare"] = "modes"
        else:
            out["concurrency"] = self.concurrency
        out["servers"] = "given by URL" if self.explicit else f"profile {self.profile}"
        if self.cores != DEFAULT_CORES:  # absent: the profile's cores, as older folders
            out["cores"] = self.cores
        return {**out, **self.model_settings}


def default_out(profile: str, now: datetime | None = None) -> Path:
    """``runs/load-<profile>-<timestamp>``."""
    return Path("runs") / f"load-{profile}-{(now or datetime.now()):%Y%m%d-%H%M%S}"


def _one_concurrency(text: str | None, requests: int) -> int:
    if text is None:
        return requests
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConfigError(
            f"--concurrency {text!r}: without --modes it is one number (requests in flight)"
        ) from None
    if value < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {value}")
    return value


def _variant_urls(args: argparse.Namespace, modes: list[str], explicit: bool) -> dict[str, str]:
    given = {
        variant: url
        for variant, url in (
            ("sd", getattr(args, "sd_base_url", None)),
            ("sd-dyn", getattr(args, "sd_dyn_base_url", None)),
        )
        if url
    }
    if given and not (modes and explicit):
        raise ConfigError(
            "--sd-base-url and --sd-dyn-base-url go with --modes and --draft-url/--base-url"
        )
    if explicit:
        for mode in modes:
            variant = variant_of(mode)
            if variant is not None and variant not in given:
                raise ConfigError(
                    f"mode {mode} needs a base server of variant {variant}: give "
                    f"--{variant}-base-url, or drop --draft-url/--base-url to let the "
                    "benchmark start the profile's servers"
                )
    return given


def make_plan(args: argparse.Namespace) -> LoadPlan:
    """Parse and validate the flags (typed errors), without starting or calling anything."""
    modes = parse_load_modes(args.modes) if args.modes is not None else []
    if modes and args.replicas is not None and parse_replicas(args.replicas) != [1]:
        raise ConfigError(
            "--modes measures one server per role: --replicas goes with the replica "
            "comparison (without --modes)"
        )
    replicas = parse_replicas("1" if modes else args.replicas or "1,2")
    if args.requests is None or args.requests < 1:
        raise ConfigError(f"--requests must be at least 1, got {args.requests}")
    if args.offset is None or args.offset < 0:
        raise ConfigError(f"--offset must be a whole number >= 0, got {args.offset}")
    loads: list[int] = []
    if modes:
        loads = parse_loads(args.concurrency or DEFAULT_LOADS)
        if max(loads) > args.requests:
            raise ConfigError(
                f"--concurrency {max(loads)} with --requests {args.requests}: at most "
                f"{args.requests} requests can be in flight; give more requests"
            )
        concurrency = loads[0]
    else:
        concurrency = _one_concurrency(args.concurrency, args.requests)
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
            f"{args.replicas or '1,2 (the default)'}"
        )
    variant_urls = _variant_urls(args, modes, explicit)
    profile = load_profile(args.profile)  # raises for an unknown profile
    if not explicit:
        for n in replicas:
            if n > 1:
                plan_replicas(profile, n)  # ports, pool size (ConfigError)
        if any(n > 1 for n in replicas):
            router_executable()  # ServeError when vllm-router is not installed
        for variant in dict.fromkeys(variant_of(m) for m in modes):
            if variant is not None:
                load_profile(args.profile, variant=variant)  # ServeError naming the variants
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
    if getattr(args, "threshold", None) is not None:
        if not modes:
            raise ConfigError("--threshold goes with --modes (the judge mode's threshold)")
        settings["threshold"] = args.threshold
    if args.sample_interval is None or args.sample_interval <= 0:
        raise ConfigError(f"--sample-interval must be positive, got {args.sample_interval}")
    cores = getattr(args, "cores", None) or DEFAULT_CORES
    if cores != DEFAULT_CORES:
        if not modes:
            raise ConfigError(f"--cores {cores} goes with --modes (the servers of each mode)")
        if explicit:
            raise ConfigError(
                f"--cores {cores}: servers given by URL run on the cores they were started "
                "with; drop --draft-url/--base-url to let the benchmark start the profile's"
            )
    probe = getattr(args, "probe", None)
    if probe is not None:
        if not modes:
            raise ConfigError("--probe goes with --modes (it predicts the sd cells)")
        load_sd_prediction(probe)  # ConfigError: unreadable, not a probe, or no sd server
    plan = LoadPlan(
        Path(args.out) if args.out else default_out(args.profile),
        replicas,
        args.requests,
        concurrency,
        args.profile,
        settings,
        args.draft_url,
        args.base_url,
        api_key_of(args),
        tuple(modes),
        tuple(loads),
        args.offset,
        variant_urls,
        args.sample_interval,
        args.dataset,
        Path(probe) if probe is not None else None,
        cores,
    )
    # raises ConfigError for a bad budget, temperature, judge, threshold... (no call is made)
    if modes:
        for run in plan.runs.values():
            plan.bench_settings.config(run)
    else:
        build_model("http://draft.invalid/v1", "http://base.invalid/v1", None, settings)
    return plan


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
