"""`specreason demo`: one question with SpecReason, the base model alone and vLLM's ``sd``.

Starts the profile's servers (fetching the models first) unless ``--draft-url`` and
``--base-url`` are given, prints each step as it is accepted or rewritten, then the base model
alone on the same question, budget and sampling. Then the pair is stopped and the base server
is started again as the profile's ``sd`` variant (the draft model speculating tokens inside
it: vLLM's own speculative decoding), which answers the same question; with running servers,
``--sd-base-url`` gives that server instead. The plain pair and the ``sd`` base do not fit in
the ``cpu`` profile's memory together, so the ``sd`` run costs a server start: the demo prints
what it added.

It runs the setting the benchmark measured on the ``cpu`` pair (:data:`MEASURED`: the
``[specreason]`` section of ``benchmarks/tune-cpu/tuned.toml``, which
``benchmarks/test-cpu-r3`` ran) and the benchmark's prompt for a numeric answer, grades each
answer against the gold one (``--gold``; the default question's is 72), and closes with what
``specreason tune`` recommends for the pair and the figure behind it (:data:`VERDICTS`). One
question, one run each: a demonstration, not a benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..baselines import SingleModelRun, single_model
from ..config import SpecReasonConfig, add_config_flags, judge_settings
from ..endpoint import OpenAIEndpoint, endpoint_pair
from ..errors import ConfigError, ServeError
from ..events import Event
from ..graph import create_specreason_graph
from ..lab.shared.datasets import Problem
from ..lab.shared.grading import grade_number
from ..lab.shared.prompts import build_prompt
from ..serving.launcher import Launcher
from ..serving.profiles import Profile, load_profile
from ..stats import SpecReasonStats
from .console import print_event

DEFAULT_QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May?"
)
DEFAULT_GOLD = "72"
"""The default question's answer (GSM8K train: 48 + 24)."""

MEASURED: dict[str, Any] = {
    "judge": "arithmetic+likelihood",
    "likelihood_threshold": -0.55,
    "logprob_aggregate": "mean",
    "first_n_base_steps": 0,
    "budget": 1024,
    "step_max_tokens": 256,
    "answer_max_tokens": 512,
    "lookahead": False,
    "temperature": 0.0,
    "seed": 0,
}
"""The SpecReason setting measured on the ``cpu`` pair: ``benchmarks/tune-cpu/tuned.toml``'s
``[specreason]`` section (tune ran its grid at these settings; ``benchmarks/test-cpu-r3`` ran
the file). ``--judge``, ``--threshold``, ``--budget`` and ``--temperature`` override it."""

SD_VARIANT = "sd"
"""The profile variant whose base server runs vLLM's ``draft_model`` speculator."""

VERDICTS: dict[str, str] = {
    "cpu": (
        "tune's verdict on the `cpu` pair: use `sd` — 1.88x the base model "
        "(paired 95% 1.84-1.92), "
        "the same 40 replies (21/40 right), GSM8K test 101-140, one session (BENCHMARKS.md); "
        "no SpecReason setting kept the base model's accuracy on GSM8K train"
    ),
}
"""What ``specreason tune`` recommends for each profile's pair and the measured figure behind
it (``benchmarks/test-cpu-r3``, ``benchmarks/tune-cpu``)."""

NOT_A_BENCHMARK = (
    "one question, one run each: a demonstration, not a benchmark (BENCHMARKS.md has the "
    "measured figures)"
)


def add_parser(sub: Any) -> None:
    """The ``demo`` sub-command's flags."""
    demo = sub.add_parser(
        "demo",
        help="answer one question with SpecReason, the base model alone and vLLM's sd",
    )
    demo.add_argument(
        "--profile", default="cpu", help="serve profile name or TOML path (default: cpu)"
    )
    demo.add_argument("--variant", help="profile variant SpecReason runs on (e.g. sd, ngram)")
    demo.add_argument("--draft-url", help="use this running draft server (OpenAI base URL)")
    demo.add_argument("--base-url", help="use this running base server (OpenAI base URL)")
    demo.add_argument(
        "--sd-base-url",
        help="with --draft-url/--base-url: a running base server with vLLM's speculator, "
        "for the sd comparison (without it, sd is not run)",
    )
    demo.add_argument(
        "--no-sd",
        action="store_true",
        help="skip the sd comparison (it restarts the base server: minutes on CPU)",
    )
    demo.add_argument("--question", default=DEFAULT_QUESTION)
    demo.add_argument(
        "--gold",
        help=f"the right answer, a number (default: {DEFAULT_GOLD} for the default question; "
        "none for another: answers are not graded)",
    )
    demo.add_argument(
        "--judge",
        default=MEASURED["judge"],
        help=f"judge (default {MEASURED['judge']}, as measured; see `specreason bench judges`)",
    )
    demo.add_argument(
        "--threshold",
        type=float,
        help="the judge's threshold on its own scale (default: the measured "
        f"{MEASURED['likelihood_threshold']} for the likelihood judge, else the judge's)",
    )
    add_config_flags(
        demo,
        ["budget", "temperature"],
        budget=MEASURED["budget"],
        temperature=MEASURED["temperature"],
    )


def demo_config(args: argparse.Namespace) -> SpecReasonConfig:
    """The measured setting (:data:`MEASURED`) with the flags' changes."""
    fields = {k: v for k, v in MEASURED.items() if k != "judge"}
    fields.update(
        judge_settings(args.judge, args.threshold),
        budget=args.budget,
        temperature=args.temperature,
    )
    return SpecReasonConfig(**fields)


def is_measured(config: SpecReasonConfig) -> bool:
    """Whether ``config`` is the measured setting (every field of :data:`MEASURED`)."""
    values = config.as_dict()
    return all(values[k] == v for k, v in MEASURED.items())


def gold_of(args: argparse.Namespace) -> str | None:
    """The gold answer: ``--gold``, or the default question's; ``None``: not graded."""
    if args.gold is not None:
        return str(args.gold)
    return DEFAULT_GOLD if args.question == DEFAULT_QUESTION else None


@dataclass(frozen=True)
class Answered:
    """One way of answering the question: its reply and seconds."""

    name: str
    text: str
    seconds: float


@dataclass(frozen=True)
class SdOutcome:
    """The ``sd`` comparison: its answer, or why it did not run; the time it added."""

    answered: Answered | None
    note: str
    """How it ran (server start, seconds added to the demo) or why not."""


def verdict_of(profile_name: str) -> str:
    """What tune recommends for the profile's pair, or how to find out."""
    return VERDICTS.get(
        profile_name,
        f"no tune verdict is measured for the {profile_name} pair: run `specreason tune` on it "
        "(README, 'Tuning a setting for your pair')",
    )


def summary_lines(
    rows: Sequence[Answered],
    gold: str | None,
    *,
    profile_name: str,
    measured: bool,
    sd_note: str,
) -> list[str]:
    """The closing lines of the demo.

    Each answer, right or not, its seconds against the base model's; what ``sd`` cost; tune's
    verdict for the pair; that one question is no benchmark.
    """
    base = next((r for r in rows if r.name == "base model alone"), None)
    lines = ["", f"{'':<18} {'answer':>8}  {'right?':<7} {'seconds':>8}  vs base alone"]
    for row in rows:
        grade = grade_number(row.text, gold) if gold is not None else None
        answer = grade.prediction if grade else None
        right = "–" if grade is None else ("yes" if grade.correct else "no")
        ratio = f"{base.seconds / row.seconds:.2f}x" if base and row.seconds > 0 else "–"
        lines.append(f"{row.name:<18} {answer or '–':>8}  {right:<7} {row.seconds:>8.1f}  {ratio}")
    lines.append(f"gold answer: {gold}" if gold is not None else "no gold answer given: not graded")
    lines.append(f"sd: {sd_note}")
    if not measured:
        lines.append("settings: changed by flags, not the setting the benchmark measured")
    lines += [verdict_of(profile_name), NOT_A_BENCHMARK]
    return lines


@contextlib.contextmanager
def pair_urls(args: argparse.Namespace, profile: Profile) -> Iterator[dict[str, str]]:
    """The draft and base URLs: given, or the profile's servers, started for the block."""
    if args.draft_url:
        yield {"draft": args.draft_url, "base": args.base_url}
        return
    print(
        f"starting the {profile.name} servers ({profile.description}); the first "
        "start fetches the models and compiles, a few minutes...",
        flush=True,
    )
    with Launcher(profile, echo=True) as launcher:
        yield launcher.urls


async def run_sd(
    args: argparse.Namespace, messages: list[Any], config: SpecReasonConfig
) -> SdOutcome:
    """The question on a base server with vLLM's speculator, or why it was not run.

    Started servers: after the pair is stopped, the profile's ``sd`` variant is started with
    its base server only (the draft model speculates inside it; the benchmark's ``sd`` mode
    asks this server alone). Its start and answer are the time the comparison adds.
    """
    if args.no_sd:
        return SdOutcome(None, "not run (--no-sd)")
    if args.draft_url:
        if not args.sd_base_url:
            return SdOutcome(
                None,
                "not run: give --sd-base-url (a base server running vLLM's speculator, e.g. "
                "a profile's sd variant: `specreason serve --profile P --variant sd --only "
                "base --base-port PORT`) to compare",
            )
        alone = await single_model(OpenAIEndpoint(args.sd_base_url, name="sd"), messages, config)
        return SdOutcome(Answered("sd", alone.text, alone.seconds), "the server given")
    try:
        profile = load_profile(args.profile, variant=SD_VARIANT)
    except (ConfigError, ServeError) as exc:
        return SdOutcome(None, f"not run: {exc}")
    print(
        f"\nsd: restarting the base server with vLLM's speculator ({SD_VARIANT} variant; the "
        "plain pair and this server do not fit in memory together), a few minutes...",
        flush=True,
    )
    start = time.perf_counter()
    try:
        # the profile's cores: the base alone above ran on its one core in the pair, so the
        # sd line is measured on the same core (a like-for-like speed-up)
        with Launcher(profile, roles=("base",), echo=True, keep_profile_cores=True) as launcher:
            started = time.perf_counter() - start
            alone = await single_model(
                OpenAIEndpoint(launcher.urls["base"], name="sd"), messages, config
            )
    except ServeError as exc:
        return SdOutcome(None, f"not run: the sd server did not start ({exc})")
    added = time.perf_counter() - start
    return SdOutcome(
        Answered("sd", alone.text, alone.seconds),
        f"its server started in {started:.0f} s; the sd comparison added {added:.0f} s to the demo",
    )


def print_specreason_stats(stats: SpecReasonStats, wall: float, alone: SingleModelRun) -> None:
    """SpecReason's steps, tokens and where its seconds went, against the base alone."""
    print(
        f"steps: {stats.steps_accepted} accepted, {stats.steps_rewritten} rewritten, "
        f"{stats.steps_base} by base; draft tokens {stats.draft_tokens}, base tokens "
        f"{stats.base_tokens}; judge prompt tokens {stats.judge_prompt_tokens} "
        f"({stats.judge_cached_tokens} from cache)"
    )
    print(
        f"time: SpecReason {wall:.1f} s (draft {stats.draft_s:.1f}, judge "
        f"{stats.judge_s:.1f}, rewrite {stats.rewrite_s:.1f}, answer "
        f"{stats.answer_s:.1f}, overhead {stats.overhead_s or 0:.2f}; drafting behind the "
        f"judge {stats.draft_hidden_s:.1f}) vs base alone "
        f"{alone.seconds:.1f} s: {alone.seconds / wall:.2f}x",
        flush=True,
    )


async def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; returns the process exit code."""
    if bool(args.draft_url) != bool(args.base_url):
        raise ConfigError("give both --draft-url and --base-url, or neither")
    if args.sd_base_url and not args.draft_url:
        raise ConfigError("--sd-base-url goes with --draft-url and --base-url")
    profile = load_profile(args.profile, variant=args.variant)
    config = demo_config(args)
    gold = gold_of(args)
    prompt = build_prompt(Problem("demo", args.question, gold or "", "number"))
    messages: list[Any] = [("user", prompt)]
    with pair_urls(args, profile) as urls:
        draft, base = endpoint_pair(urls["draft"], urls["base"])
        graph = create_specreason_graph(draft, base, config=config, family=profile.family)
        print(
            f"\nquestion: {args.question}\n\nSpecReason (draft {await draft.model_name()}, "
            f"base {await base.model_name()}, judge {config.judge}, threshold "
            f"{config.judge_threshold()}, lookahead {'on' if config.lookahead else 'off'}, "
            f"budget {config.budget}):",
            flush=True,
        )
        start = time.perf_counter()
        state: dict = {}
        async for mode, chunk in graph.astream(
            {"messages": messages}, stream_mode=["custom", "values"]
        ):
            if mode == "custom":
                print_event(cast(Event, chunk))
            else:
                state = cast(dict, chunk)
        wall = time.perf_counter() - start
        stats = SpecReasonStats.from_state(state, wall_s=wall)
        answer = state.get("answer", "").strip()
        print(f"\nanswer:\n{answer}\n", flush=True)
        print("base model alone, same question and settings...", flush=True)
        alone = await single_model(base, messages, config)
        print(f"\nbase alone answered:\n{alone.text.strip()}\n")
        print_specreason_stats(stats, wall, alone)
    sd = await run_sd(args, messages, config)
    if sd.answered is not None:
        print(f"\nsd answered:\n{sd.answered.text.strip()}", flush=True)
    rows = [
        Answered("SpecReason", answer, wall),
        Answered("base model alone", alone.text, alone.seconds),
    ]
    if sd.answered is not None:
        rows.append(sd.answered)
    lines = summary_lines(
        rows, gold, profile_name=profile.name, measured=is_measured(config), sd_note=sd.note
    )
    print("\n".join(lines), flush=True)
    return 0 if answer else 1
