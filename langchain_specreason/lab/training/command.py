"""``specreason arbitrage label|train``: make router training data, then the router.

::

    specreason arbitrage label --profile cpu --dataset gsm8k-train --limit 40 --out runs/labels
    specreason arbitrage train --dataset runs/labels --out ~/.cache/langchain-specreason/routers/cpu

Flags follow ``specreason bench``: ``--profile`` or ``--draft-url/--base-url``, ``--dataset``,
``--limit``, ``--out``. Labelling resumes in the same ``--out``; training writes a Hugging
Face folder that vLLM serves as a classifier (the profile's ``[router]`` server).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ...arbitrage.features import ROUTER_MAX_TOKENS
from ...errors import ConfigError
from ..bench.command import add_generation_flags
from ..shared.datasets import add_dataset_flags
from ..shared.flags import add_progress_flag
from ..shared.servers import add_server_flags, api_key_of


def add_parser(subparsers: Any) -> None:
    """Add ``arbitrage label`` and ``arbitrage train`` to the ``specreason`` subcommands."""
    p = subparsers.add_parser("arbitrage", help="label steps and train the Arbitrage router")
    sub = p.add_subparsers(dest="arbitrage_command", required=True)

    label = sub.add_parser("label", help="run the oracle over problems; write labelled steps")
    add_server_flags(label)
    add_dataset_flags(label, default="gsm8k-train")
    label.add_argument(
        "--out", help="label folder; reuse one to resume (default: runs/labels-<dataset>)"
    )
    label.add_argument(
        "--tau",
        type=float,
        default=0.0,
        help="the oracle keeps the base step when it scores this much better",
    )
    label.add_argument(
        "--score-method",
        default="average",
        choices=["average", "greedy"],
        help="how the base model's score is read (default: average)",
    )
    label.add_argument(
        "--scorer",
        default="score",
        choices=["score", "likelihood"],
        help="what rates the draft and the base step: the base model's 0-9 "
        "score (default) or its log-probability of the step",
    )
    label.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="problems labelled at once (the servers batch them; default 1)",
    )
    add_generation_flags(label)
    add_progress_flag(label)

    train = sub.add_parser("train", help="fine-tune the router on labelled steps")
    train.add_argument(
        "--dataset", required=True, help="labels.jsonl, or the folder `arbitrage label` wrote"
    )
    train.add_argument("--limit", type=int, help="only the first N labelled steps")
    train.add_argument("--out", help="router folder (default: the profile's router:NAME folder)")
    train.add_argument("--profile", default="cpu", help="names the default --out (default: cpu)")
    train.add_argument(
        "--base-model",
        default="smollm2-135m",
        help="catalog name or folder to start from (default: smollm2-135m)",
    )
    train.add_argument(
        "--margin",
        type=float,
        default=0.0,
        help="label 1 (escalate) when the advantage exceeds this",
    )
    train.add_argument("--epochs", type=int, default=3)
    train.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    train.add_argument("--learning-rate", type=float, default=5e-5)
    train.add_argument("--batch-size", type=int, default=8)
    train.add_argument(
        "--held-out",
        type=float,
        default=0.2,
        help="share of problems held out for model selection (default: 0.2)",
    )
    train.add_argument(
        "--max-tokens",
        type=int,
        default=ROUTER_MAX_TOKENS,
        help="tokens the router reads, cut from the left (default: "
        f"{ROUTER_MAX_TOKENS}); recorded in router.json for serving",
    )
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: faster than 2 on a shared 2-core box)",
    )
    add_progress_flag(train)


async def run(args: argparse.Namespace) -> int:
    """``specreason arbitrage ...``: returns the process exit code."""
    if args.arbitrage_command == "label":
        return await _label(args)
    return _train(args)


async def _label(args: argparse.Namespace) -> int:
    from ...endpoint import endpoint_pair
    from ..bench.command import generation_settings
    from ..shared.datasets import is_file_dataset, problems_of
    from ..shared.modes import Run
    from ..shared.servers import ServerSource
    from .label import label_problems

    settings = generation_settings(args)
    config = settings.config(Run("oracle", args.tau, args.score_method))
    source = ServerSource(args.profile, args.draft_url, args.base_url, api_key=api_key_of(args))
    problems = problems_of(args)
    name = Path(args.dataset).stem if is_file_dataset(args.dataset) else args.dataset
    out = Path(args.out) if args.out else Path("runs") / f"labels-{name}"
    print(f"label: {len(problems)} problems; labels in {out}", file=sys.stderr, flush=True)
    with source.servers(None) as pair:
        summary = await label_problems(
            *endpoint_pair(pair.draft_url, pair.base_url, api_key=pair.api_key),
            problems,
            out,
            config=config,
            family=settings.family,
            score_method=args.score_method,
            scorer=args.scorer,
            tau=args.tau,
            concurrency=args.concurrency,
            progress=not args.no_progress,
        )
    print(summary.format())
    return 0


def _train(args: argparse.Namespace) -> int:
    from ...serving.catalog import CATALOG
    from ...serving.fetch import fetch
    from ...serving.launcher import router_dir
    from ..shared.perproblem import LABELS
    from .labels_file import load_labels
    from .train import train_router

    path = Path(args.dataset)
    if path.is_dir():
        path = path / LABELS
    labels = load_labels(path)
    if args.limit is not None:
        if args.limit <= 0:
            raise ConfigError(f"--limit must be a positive integer, got {args.limit}")
        labels = labels[: args.limit]
    base_model = (
        Path(fetch(args.base_model)) if args.base_model in CATALOG else Path(args.base_model)
    )
    if not base_model.is_dir():
        raise ConfigError(
            f"--base-model {args.base_model!r} is neither a catalog model nor a folder"
        )
    out = Path(args.out) if args.out else router_dir(args.profile)
    report = train_router(
        labels,
        out,
        base_model=base_model,
        margin=args.margin,
        epochs=args.epochs,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        held_out=args.held_out,
        seed=args.seed,
        max_tokens=args.max_tokens,
        threads=args.threads,
        progress=not args.no_progress,
    )
    print(report.format())
    return 0
