"""``specreason label``: step labels from base-model rollouts on a seeded sample of dev problems.

::

    specreason label --profile cpu --dataset gsm8k-train --seed 0 --offset 0 --count 80 \\
        --out benchmarks/labels-cpu/dev
    specreason label --profile cpu --dataset gsm8k-train --seed 0 --offset 1000 --count 40 \\
        --out benchmarks/labels-cpu/heldout

Two ranges of one seeded shuffle are disjoint samples (dev and held-out). Rerun the same
command to resume.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ...config import add_settings_flags
from ..shared.flags import add_output_flags, add_sample_flags
from ..shared.servers import add_server_flags, api_key_of
from .rollout import RolloutSettings

ROLLOUT_FLAGS = ("m", "temperature", "max_tokens", "max_steps", "harmful_gap")
"""The rollout knobs ``label`` takes as flags (``max_tokens`` as ``--rollout-max-tokens``)."""


def add_parser(subparsers: Any) -> None:
    """Add ``label`` to the ``specreason`` subcommands."""
    p = subparsers.add_parser(
        "label",
        help="label draft steps by base-model rollouts "
        "(judge-independent; for `bench judges --labels`)",
    )
    add_server_flags(p)
    add_sample_flags(p, "gsm8k-train (default) or a .jsonl path; never a test split")
    p.add_argument("--offset", type=int, default=0, help="start of the range in the shuffle")
    p.add_argument("--count", type=int, default=80, help="problems in the range")
    add_settings_flags(
        p, RolloutSettings, ROLLOUT_FLAGS, flags={"max_tokens": "--rollout-max-tokens"}
    )
    p.add_argument("--budget", type=int, default=1024, help="draft trace budget (tokens)")
    p.add_argument("--concurrency", type=int, default=2, help="problems in flight")
    add_output_flags(p, "label folder; reuse it to resume", required=True)


async def run(args: argparse.Namespace) -> int:
    """``specreason label``: returns the exit code."""
    from ...endpoint import endpoint_pair
    from ...errors import ConfigError
    from ...serving.profiles import load_profile
    from ..shared.datasets import load_problems
    from ..shared.servers import ServerSource
    from .run import label_problems, sample_problems

    if args.dataset in ("gsm8k", "math500") or "test" in Path(args.dataset).name:
        raise ConfigError(
            f"--dataset {args.dataset}: labels are made on dev problems only "
            "(gsm8k-train or a train file); test problems are for reports"
        )
    settings = RolloutSettings.from_args(args)
    problems = sample_problems(
        load_problems(args.dataset), seed=args.seed, offset=args.offset, count=args.count
    )
    family = args.family or load_profile(args.profile).family
    source = ServerSource(args.profile, args.draft_url, args.base_url, api_key=api_key_of(args))
    out = Path(args.out)
    print(
        f"label: {len(problems)} problems of {args.dataset} (seed {args.seed}, offset "
        f"{args.offset}); labels in {out}",
        file=sys.stderr,
        flush=True,
    )
    with source.servers(None) as pair:
        described = await pair.describe()
        draft, base = endpoint_pair(
            pair.draft_url,
            pair.base_url,
            api_key=pair.api_key,
            timeout=1800.0,
            max_concurrency=None,
        )
        provenance = {
            "dataset": args.dataset,
            "seed": args.seed,
            "offset": args.offset,
            "count": args.count,
            "family": family,
            "draft_model": described["draft"].get("models"),
            "base_model": described["base"].get("models"),
            "profile": described.get("profile"),
        }
        summary = await label_problems(
            draft,
            base,
            problems,
            out,
            settings=settings,
            family=family,
            budget=args.budget,
            concurrency=args.concurrency,
            provenance=provenance,
            progress=not args.no_progress,
        )
    print(summary.format())
    return 0
