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

from ...config import add_settings_flags
from ...errors import ConfigError
from ..bench.command import add_generation_flags
from ..shared.datasets import add_dataset_flags
from ..shared.flags import add_progress_flag
from ..shared.servers import add_server_flags, api_key_of
from .settings import OracleSettings, TrainSettings


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
    add_settings_flags(label, OracleSettings)
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
    add_settings_flags(train, TrainSettings, threads=1)  # 1: faster than 2 beside vLLM
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
    oracle = OracleSettings.from_args(args)
    config = settings.config(Run("oracle", oracle.tau, oracle.score_method))
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
            settings=oracle,
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

    settings = TrainSettings.from_args(args)  # a bad flag is refused before any file is read
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
        settings=settings,
        progress=not args.no_progress,
    )
    print(report.format())
    return 0
