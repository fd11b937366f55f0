"""`specreason demo`: answer one question with SpecReason, then with the base model alone.

Starts the profile's servers (fetching the models first) unless ``--draft-url`` and
``--base-url`` are given, prints each step as it is accepted or rewritten, and the time against
the base model alone on the same question, budget and sampling.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any, cast

from ..baselines import single_model
from ..config import DEFAULT_JUDGE, SpecReasonConfig, add_config_flags, judge_settings
from ..endpoint import endpoint_pair
from ..errors import ConfigError
from ..events import Event
from ..graph import create_specreason_graph
from ..serving.launcher import Launcher
from ..serving.profiles import load_profile
from ..stats import SpecReasonStats
from .console import print_event

DEFAULT_QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether in April and May?"
)


def add_parser(sub: Any) -> None:
    """The ``demo`` sub-command's flags."""
    demo = sub.add_parser("demo", help="answer one question with SpecReason and the base alone")
    demo.add_argument(
        "--profile", default="cpu", help="serve profile name or TOML path (default: cpu)"
    )
    demo.add_argument("--variant", help="profile variant (e.g. sd, ngram, eagle3)")
    demo.add_argument("--draft-url", help="use this running draft server (OpenAI base URL)")
    demo.add_argument("--base-url", help="use this running base server (OpenAI base URL)")
    demo.add_argument("--question", default=DEFAULT_QUESTION)
    demo.add_argument(
        "--judge",
        default=DEFAULT_JUDGE,
        help=f"judge (default {DEFAULT_JUDGE}; see `specreason bench judges`)",
    )
    demo.add_argument(
        "--threshold",
        type=float,
        help="the judge's threshold on its own scale (default: the judge's)",
    )
    add_config_flags(demo, ["budget", "temperature"], budget=1024, temperature=0.0)


async def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; returns the process exit code."""
    if bool(args.draft_url) != bool(args.base_url):
        raise ConfigError("give both --draft-url and --base-url, or neither")
    profile = load_profile(args.profile, variant=args.variant)
    with contextlib.ExitStack() as stack:
        if args.draft_url:
            urls = {"draft": args.draft_url, "base": args.base_url}
        else:
            print(
                f"starting the {profile.name} servers ({profile.description}); the first "
                "start fetches the models and compiles, a few minutes...",
                flush=True,
            )
            launcher = stack.enter_context(Launcher(profile, echo=True))
            urls = launcher.urls
        draft, base = endpoint_pair(urls["draft"], urls["base"])
        config = SpecReasonConfig(
            **judge_settings(args.judge, args.threshold),
            budget=args.budget,
            temperature=args.temperature,
            seed=0,
        )
        graph = create_specreason_graph(draft, base, config=config, family=profile.family)
        messages: list[Any] = [("user", args.question)]
        print(
            f"\nquestion: {args.question}\n\nSpecReason (draft {await draft.model_name()}, "
            f"base {await base.model_name()}, judge {config.judge}, threshold "
            f"{config.judge_threshold()}):",
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
        print(f"\nanswer:\n{state['answer'].strip()}\n", flush=True)
        print("base model alone, same question and settings...", flush=True)
        alone = await single_model(base, messages, config)
        print(f"\nbase alone answered:\n{alone.text.strip()}\n")
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
    return 0 if state.get("answer", "").strip() else 1
