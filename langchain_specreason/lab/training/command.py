"""``specreason arbitrage label|train``: make router training data, then the router.

::

    specreason arbitrage label --profile cpu --dataset gsm8k-train --limit 40 --out runs/labels
    specreason arbitrage train --dataset runs/labels --out ~/.cache/langchain-specreason/routers/cpu

    # rollout labels of `specreason label` are read as they are (target: the advantage)
    specreason arbitrage cv --dataset benchmarks/labels-cpu/dev --folds 5 --margin 0 --out runs/cv
    specreason arbitrage read --router ROUTER_DIR --dataset benchmarks/labels-cpu/heldout --out F

Flags follow ``specreason bench``: ``--profile`` or ``--draft-url/--base-url``, ``--dataset``,
``--limit``, ``--out``. Labelling resumes in the same ``--out``; training writes a Hugging
Face folder that vLLM serves as a classifier (the profile's ``[router]`` server). ``cv``
trains one router per fold of whole problems and writes every step's out-of-fold
``P(escalate)`` (resumable, a fold at a time); ``read`` reads a saved router on a label file.
Both print the AUROC for harmful steps and the Spearman with the advantage, with 95%
intervals (bootstrap over problems).
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
        "--dataset",
        required=True,
        help="labels.jsonl, or a label folder (`arbitrage label`, or `label`'s rollouts)",
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

    cv = sub.add_parser(
        "cv", help="out-of-fold P(escalate) of every labelled step, folds of whole problems"
    )
    _add_train_flags(cv)
    cv.add_argument("--folds", type=int, default=5, help="folds of whole problems (default: 5)")
    add_settings_flags(cv, TrainSettings, threads=1)
    add_progress_flag(cv)

    read = sub.add_parser("read", help="a saved router's P(escalate) on labelled steps")
    read.add_argument("--router", required=True, help="a folder `arbitrage train` wrote")
    read.add_argument(
        "--dataset", required=True, help="labels.jsonl, or a label folder (`label`, `arbitrage`)"
    )
    read.add_argument("--out", required=True, help="JSONL of the predictions, one line a step")
    read.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")


def _add_train_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset", required=True, help="labels.jsonl, or a label folder (`label`, `arbitrage`)"
    )
    p.add_argument("--out", required=True, help="folder for oof.jsonl and summary.json")
    p.add_argument(
        "--base-model",
        default="smollm2-135m",
        help="catalog name or folder to start from (default: smollm2-135m)",
    )


async def run(args: argparse.Namespace) -> int:
    """``specreason arbitrage ...``: returns the process exit code."""
    if args.arbitrage_command == "label":
        return await _label(args)
    if args.arbitrage_command == "cv":
        return _cv(args)
    if args.arbitrage_command == "read":
        return _read(args)
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


def _base_model(name: str) -> Path:
    from ...serving.catalog import CATALOG
    from ...serving.fetch import fetch

    base_model = Path(fetch(name)) if name in CATALOG else Path(name)
    if not base_model.is_dir():
        raise ConfigError(f"--base-model {name!r} is neither a catalog model nor a folder")
    return base_model


def _cv(args: argparse.Namespace) -> int:
    import json

    from .labels_file import load_labels
    from .train import cross_validate, router_reading

    settings = TrainSettings.from_args(args)
    labels = load_labels(Path(args.dataset))
    out = Path(args.out)
    rows = cross_validate(
        labels,
        out,
        base_model=_base_model(args.base_model),
        settings=settings,
        folds=args.folds,
        progress=not args.no_progress,
    )
    summary = {
        "dataset": args.dataset,
        "base_model": args.base_model,
        "folds": args.folds,
        "settings": settings.model_dump(),
        "out_of_fold": router_reading(rows),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(_format_reading(summary["out_of_fold"]))
    return 0


def _read(args: argparse.Namespace) -> int:
    import json

    from .labels_file import load_labels
    from .train import predict, prediction_line, router_reading

    labels = load_labels(Path(args.dataset))
    probs = predict(Path(args.router), labels, threads=args.threads)
    rows = [prediction_line(step, p) for step, p in zip(labels, probs, strict=True)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    reading = router_reading(rows)
    summary = {"router": args.router, "dataset": args.dataset, "reading": reading}
    out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(_format_reading(reading))
    return 0


def _format_reading(r: dict[str, Any]) -> str:
    def ci(pair: Any) -> str:
        return f"[{pair[0]:.2f}, {pair[1]:.2f}]" if pair else "[n/a]"

    auroc = "n/a" if r["auroc"] is None else f"{r['auroc']:.3f}"
    rho = "n/a" if r["spearman"] is None else f"{r['spearman']:.3f}"
    return (
        f"{r['steps']} steps of {r['problems']} problems, {r['harmful']} harmful: "
        f"AUROC (harmful) {auroc} {ci(r['auroc_95'])}, "
        f"Spearman (advantage) {rho} {ci(r['spearman_95'])}"
    )


def _train(args: argparse.Namespace) -> int:
    from ...serving.launcher import router_dir
    from .labels_file import load_labels
    from .train import train_router

    settings = TrainSettings.from_args(args)  # a bad flag is refused before any file is read
    labels = load_labels(Path(args.dataset))
    if args.limit is not None:
        if args.limit <= 0:
            raise ConfigError(f"--limit must be a positive integer, got {args.limit}")
        labels = labels[: args.limit]
    base_model = _base_model(args.base_model)
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
