"""``specreason bench``: run modes over a dataset into a folder, resumably; ``bench report DIR``.

::

    specreason bench --profile cpu --dataset gsm8k --limit 20 --modes base,specreason
    specreason bench --draft-url URL --base-url URL --dataset my.jsonl --threshold 5,7,9
    specreason bench report runs/bench-gsm8k-20250101-120000

Everything is validated before a server starts. The folder (``--out``) gets ``results.jsonl``,
``runs.jsonl``, ``meta.json``, ``summary.md``, ``summary.json`` and two PNG plots; rerunning
with the same ``--out`` skips the (mode, threshold, score method, problem) already done.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ...config import SpecReasonConfig, add_config_flags, config_default
from ...errors import ConfigError
from ...judges.registry import judge_specs, threshold_field
from ...serving.profiles import load_profile
from ..agreement.report import add_parser as add_agreement_parser
from ..agreement.report import run as run_agreement
from ..judges.command import add_parser as add_judges_parser
from ..judges.command import run_judges
from ..load.command import add_parser as add_load_parser
from ..load.command import run_load
from ..oldflags import add_old_spelling
from ..shared.datasets import Problem, add_dataset_flags, is_file_dataset, problems_of
from ..shared.flags import add_progress_flag
from ..shared.meta import MetaFile
from ..shared.modes import (
    AGREE_MODES,
    DEFAULT_SD_VARIANT,
    MODES,
    ROUTER_MODES,
    SCORE_METHODS,
    SPECREASON_MODES,
    Run,
    expand_runs,
    group_by_variant,
    parse_agree_rules,
    parse_field_thresholds,
    parse_judges,
    parse_modes,
    parse_score_methods,
    parse_steps_ahead,
    parse_taus,
    parse_thresholds,
)
from ..shared.results import RESULTS, RUNS, JsonlAppender, ResultKey, done_keys, read_records
from ..shared.servers import ServerSource, add_server_flags, api_key_of
from .report import write_report
from .runner import BENCH_DEFAULTS, GENERATION_FIELDS, BenchSettings, Sinks, run_group

JUDGE_THRESHOLDS = {
    "likelihood_threshold": "likelihood judge: the base model's log-probability threshold <= 0",
    "confidence_threshold": "confidence judge: the draft model's log-probability threshold <= 0",
    "learned_threshold": "learned judge: the P(harmless) threshold 0-1",
}
"""The threshold fields of the judges other than ``score`` (whose is ``--threshold``): each
is a flag of its own name."""


def add_parser(subparsers: Any) -> None:
    """Add ``bench`` (and ``bench report DIR``) to the ``specreason`` subcommands."""
    p = subparsers.add_parser(
        "bench",
        help="benchmark SpecReason against its baselines",
        description="Benchmark SpecReason against its baselines (accuracy, latency); resumable.",
    )
    servers = p.add_argument_group("servers")
    add_server_flags(servers, sd=True)
    servers.add_argument(
        "--sd-variant",
        default=DEFAULT_SD_VARIANT,
        help="profile variant for modes sd and specreason+sd (sd: draft_model "
        "speculator; ngram: prompt lookup); runs on different variants "
        "are kept apart in one folder (labelled sd[ngram])",
    )
    servers.add_argument(
        "--router-url",
        help="running Arbitrage router (classifier) server, for mode arbitrage "
        "(default: the profile's [router] server)",
    )
    servers.add_argument(
        "--router-model",
        help="or run this router folder in-process (no server; for machines "
        "without the memory for a third vLLM server)",
    )
    data = p.add_argument_group("problems")
    add_dataset_flags(data, grader=True)
    runs = p.add_argument_group("runs")
    runs.add_argument(
        "--modes",
        default="base,specreason",
        help=f"comma list of {', '.join(MODES)} (default: base,specreason)",
    )
    runs.add_argument(
        "--threshold",
        default=f"{config_default('threshold'):g}",
        help="score judge threshold 0-10; a comma list sweeps (default: "
        f"{config_default('threshold'):g})",
    )
    runs.add_argument(
        "--score-method",
        default=config_default("score_method"),
        help=f"{' or '.join(SCORE_METHODS)}; a comma list sweeps",
    )
    runs.add_argument(
        "--judge",
        default=config_default("judge"),
        help="SpecReason modes: judge name(s), comma list; a+b cascades "
        f"({', '.join(judge_specs())}; default: the library's, {config_default('judge')})",
    )
    for field, what in JUDGE_THRESHOLDS.items():
        flag = "--" + field.replace("_", "-")
        minus = f"; write {flag}=-0.5,-1 for a list" if config_default(field) < 0 else ""
        runs.add_argument(
            flag, help=f"{what}; a comma list sweeps (default {config_default(field)}{minus})"
        )
    add_old_spelling(
        runs,
        "--logprob-threshold",
        "--likelihood-threshold, --confidence-threshold or --learned-threshold",
        dest="logprob_threshold",
        default=None,
    )
    runs.add_argument(
        "--first-n-base-steps",
        type=int,
        default=config_default("first_n_base_steps"),
        help="SpecReason modes: the base model writes the first N steps itself "
        "(the plan), the draft the rest (default 0)",
    )
    runs.add_argument(
        "--agree-rule",
        default=config_default("agree_rule"),
        help="agree modes: agreement rule(s), comma list (default: "
        f"{config_default('agree_rule')})",
    )
    runs.add_argument(
        "--steps-ahead",
        default=str(config_default("steps_ahead")),
        help="agree modes: steps the draft writes ahead in a round; a comma list sweeps "
        f"(default: {config_default('steps_ahead')})",
    )
    runs.add_argument(
        "--config-file",
        metavar="TOML",
        help="SpecReason modes run this config (what `specreason tune` writes): its judge, "
        "threshold, first steps, budget and sampling replace those flags",
    )
    runs.add_argument(
        "--tau",
        default="0.5",
        help="Arbitrage router threshold on p(escalate), 0-1; a comma list sweeps",
    )
    runs.add_argument(
        "--oracle-tau",
        type=float,
        default=0.0,
        help="oracle: escalate when the base step scores this much better",
    )
    add_generation_flags(runs)
    output = p.add_argument_group("output")
    output.add_argument(
        "--out",
        help="result folder; reuse one to resume (default: runs/bench-<dataset>-<timestamp>)",
    )
    output.add_argument(
        "--report-only", action="store_true", help="only regenerate summary and plots of --out"
    )
    add_progress_flag(output)
    sub = p.add_subparsers(dest="bench_command", metavar="{report,judges,agreement,labels,load}")
    report = sub.add_parser("report", help="regenerate summary.md and plots of a result folder")
    report.add_argument("dir", help="the result folder (holding results.jsonl)")
    labels = sub.add_parser(
        "labels",
        help="how noisy a label folder is: split-half agreement of its rollouts and the best "
        "AUROC any judge could reach on it (offline; writes reliability.json)",
    )
    labels.add_argument("dir", help="a folder `specreason label` wrote (holding labels.jsonl)")
    add_judges_parser(sub)
    add_agreement_parser(sub)
    add_load_parser(sub)


def add_generation_flags(group: Any) -> None:
    """Budget, caps, sampling, seed and lookahead flags (``bench``, ``arbitrage label``).

    They are SpecReasonConfig's fields with the benchmark's defaults.
    """
    add_config_flags(group, GENERATION_FIELDS, **BENCH_DEFAULTS)


def generation_settings(args: argparse.Namespace) -> BenchSettings:
    """The :class:`BenchSettings` of the flags of :func:`add_generation_flags` (and family)."""
    return BenchSettings(
        **{name: getattr(args, name) for name in GENERATION_FIELDS},
        family=args.family or load_profile(args.profile).family,
    )


@dataclass(frozen=True)
class Plan:
    """Everything a benchmark will do, checked before any server starts."""

    out: Path
    problems: list[Problem]
    groups: list[tuple[str | None, list[Run]]]
    settings: BenchSettings
    source: ServerSource
    meta_settings: dict[str, Any]


def default_out(dataset: str, now: datetime | None = None) -> Path:
    """``runs/bench-<dataset>-<timestamp>``."""
    name = Path(dataset).stem if is_file_dataset(dataset) else dataset
    return Path("runs") / f"bench-{name}-{(now or datetime.now()):%Y%m%d-%H%M%S}"


def apply_config_file(args: argparse.Namespace) -> SpecReasonConfig | None:
    """Set the run flags from ``--config-file`` (``None`` without one).

    The file's judge, its threshold (the flag of the judge's threshold field: ``--threshold``,
    ``--likelihood-threshold`` ...), the score method, the base model's first steps, the agree
    mode's rule and steps ahead, and the generation fields replace the flags' values.
    """
    if not getattr(args, "config_file", None):
        return None
    config = SpecReasonConfig.from_file(args.config_file)
    args.judge = config.judge
    field = threshold_field(config.judge)
    if field == "threshold":
        args.threshold = f"{config.threshold:g}"
        args.score_method = config.score_method
    elif field is not None:
        setattr(args, field, f"{getattr(config, field):g}")
        args.logprob_threshold = None
    args.first_n_base_steps = config.first_n_base_steps
    args.agree_rule, args.steps_ahead = config.agree_rule, str(config.steps_ahead)
    for name in GENERATION_FIELDS:
        setattr(args, name, getattr(config, name))
    return config


def check_config_file(config: SpecReasonConfig, runs: list[Run], settings: BenchSettings) -> None:
    """ConfigError when a SpecReason run would not run ``config`` exactly (naming the fields)."""
    want = config.as_dict()
    for run in runs:
        if run.mode not in SPECREASON_MODES | AGREE_MODES:
            continue
        got = settings.config(run).as_dict()
        differ = sorted(k for k in want if got[k] != want[k])
        if differ:
            raise ConfigError(
                f"--config-file: the benchmark cannot run {', '.join(differ)} as the file "
                f"sets them (it runs the judge, its threshold, first steps, the agree mode's "
                f"rule and steps ahead, and the generation fields; the rest must be the "
                f'library\'s defaults; a file with verify = "agree" runs as --modes agree)'
            )


def judge_thresholds(args: argparse.Namespace, judges: list[str]) -> dict[str, list[float]]:
    """The thresholds of each field that ``judges`` read besides ``threshold``, checked.

    ``--likelihood-threshold``, ``--confidence-threshold`` and ``--learned-threshold`` feed
    their own field; without one, the deprecated ``--logprob-threshold`` (which fed every
    such judge, so each value must be valid for all), else the field's default. ConfigError
    naming the field otherwise.
    """
    fields = sorted(
        {field for judge in judges if (field := threshold_field(judge)) not in (None, "threshold")}
    )
    old = getattr(args, "logprob_threshold", None)
    out: dict[str, list[float]] = {}
    for field in fields:
        text = getattr(args, field, None)
        if text is None:
            text = old if old is not None else f"{config_default(field):g}"
        out[field] = parse_field_thresholds(text, field)
    return out


def make_plan(args: argparse.Namespace) -> Plan:
    """Parse and validate the flags, load the problems (raises typed errors)."""
    from_file = apply_config_file(args)
    all_runs = expand_runs(
        parse_modes(args.modes),
        parse_thresholds(args.threshold),
        parse_score_methods(args.score_method),
        parse_taus(args.tau),
        args.oracle_tau,
        args.sd_variant,
        parse_judges(args.judge),
        judge_thresholds(args, parse_judges(args.judge)),
        args.first_n_base_steps,
        parse_agree_rules(args.agree_rule),
        parse_steps_ahead(args.steps_ahead),
    )
    source = ServerSource(
        args.profile,
        args.draft_url,
        args.base_url,
        args.sd_base_url,
        args.router_url,
        args.router_model,
        api_key=api_key_of(args),
    )
    groups = group_by_variant(all_runs)
    source.check(
        [variant for variant, _ in groups], router=any(run.mode in ROUTER_MODES for run in all_runs)
    )
    settings = generation_settings(args)
    for run in all_runs:
        settings.config(run)  # raises ConfigError for a bad budget, temperature...
    if from_file is not None:
        check_config_file(from_file, all_runs, settings)
    problems = problems_of(args)
    dataset: dict[str, Any] = {"dataset": args.dataset}
    if is_file_dataset(args.dataset):
        dataset = {
            "dataset": str(Path(args.dataset).resolve()),
            "question_field": args.question_field,
            "answer_field": args.answer_field,
            "id_field": args.id_field,
            "grader": args.grader,
        }
    if from_file is not None:
        dataset["config_file"] = str(args.config_file)
    if args.offset:  # a range of the dataset (absent: from its start, as older folders)
        dataset["offset"] = args.offset
    return Plan(
        Path(args.out) if args.out else default_out(args.dataset),
        problems,
        groups,
        settings,
        source,
        {**dataset, **settings.as_dict()},
    )


def count_done(plan: Plan, done: set[ResultKey]) -> tuple[int, int]:
    """``(already done, total)`` over the plan's (run, problem) pairs."""
    keys = [run.key(p.id) for _, runs in plan.groups for run in runs for p in plan.problems]
    return sum(k in done for k in keys), len(keys)


async def execute(plan: Plan, *, progress: bool = True) -> int:
    """Run the plan's unfinished (run, problem) pairs, then write the report."""
    meta = MetaFile(plan.out, plan.meta_settings)
    meta.save()
    done = done_keys(read_records(plan.out / RESULTS))
    finished, total = count_done(plan, done)
    print(
        f"bench: {total} (run, problem) pairs, {finished} already done; results in {plan.out}",
        file=sys.stderr,
        flush=True,
    )
    solved = 0
    with (
        JsonlAppender(plan.out / RESULTS) as results,
        JsonlAppender(plan.out / RUNS) as runs,
        tqdm(
            total=total,
            initial=finished,
            desc="bench",
            unit="problem",
            disable=not progress,
            dynamic_ncols=True,
        ) as bar,
    ):
        for variant, group in plan.groups:
            if all(run.key(p.id) in done for run in group for p in plan.problems):
                continue
            router = any(run.mode in ROUTER_MODES for run in group)
            with plan.source.servers(variant, router=router) as pair:
                meta.add_servers(await pair.describe())
                solved += await run_group(
                    pair, group, plan.problems, done, plan.settings, Sinks(results, runs, bar)
                )
    meta.finish(solved)
    return solved


def print_report(out: Path) -> int:
    """Regenerate and list the report files of ``out``."""
    for path in write_report(out):
        print(path)
    return 0


async def run(args: argparse.Namespace) -> int:
    """``specreason bench``: returns the process exit code."""
    if getattr(args, "bench_command", None) == "report":
        return print_report(Path(args.dir))
    if getattr(args, "bench_command", None) == "judges":
        return await run_judges(args)
    if getattr(args, "bench_command", None) == "agreement":
        return run_agreement(args)
    if getattr(args, "bench_command", None) == "labels":
        from ..labels.reliability import write_reliability

        print(write_reliability(Path(args.dir)).format())
        return 0
    if getattr(args, "bench_command", None) == "load":
        return await run_load(args)
    if args.report_only:
        if not args.out:
            raise ConfigError("--report-only needs --out DIR (the folder to summarise)")
        return print_report(Path(args.out))
    plan = make_plan(args)
    await execute(plan, progress=not args.no_progress)
    return print_report(plan.out)
