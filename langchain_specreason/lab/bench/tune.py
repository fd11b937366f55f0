"""``specreason tune``: the fastest setting for your pair that answers like the base model.

::

    specreason tune --profile cpu --dev-count 20 --heldout-count 10 --out runs/tune-cpu
    specreason tune --draft-url URL --base-url URL [--sd-base-url URL] --out runs/tune

1. **Dev** (a seeded sample of GSM8K *train*, or ``--dataset FILE``): the base model alone,
   vLLM's ``sd`` (when the profile has the variant or ``--sd-base-url`` is given), and every
   SpecReason setting of the grid (judge x threshold x the base model's first steps, with and
   without ``sd``). Settings replay the calls they share (:mod:`.replay`; greedy, no
   lookahead), so a setting costs only the calls where it decides differently. A setting
   is dropped as soon as it has more wrong answers than the choice rule allows
   (:func:`max_wrong`): it could no longer be chosen, so its other problems are not run.
2. **Choice** (:func:`choose`): the fastest setting whose dev accuracy is within
   ``--max-accuracy-loss`` of the base model's (default 0: not below it). If it is not faster
   than ``sd`` (or none qualifies) the recommendation is ``sd`` alone, said plainly.
3. **Held-out** (another range of the same shuffle, disjoint): base, ``sd`` and the chosen
   setting, to report the choice on problems it was not chosen on. Runs on one server
   variant are interleaved per problem; the plain and ``sd`` base servers run one after the
   other (one server start per variant: :class:`Started`).
4. ``tuned.toml``: every knob of the chosen setting (``SpecReasonConfig.from_file`` /
   ``ChatSpecReason(config_file=...)`` load it) and the evidence; ``pareto.png``.

Latency here is the sum of a run's server-call seconds (``server_s``), the same measure for
every mode; results are appended to ``results.jsonl`` and a rerun resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ...config import SpecReasonConfig, config_default, judge_settings
from ...endpoint import endpoint_pair
from ...errors import ConfigError
from ...judges.registry import parse_judge
from ...serving.profiles import load_profile
from .datasets import Problem, load_problems
from .modes import DEFAULT_SD_VARIANT, SD_MODES, Run, parse_agree_rules, parse_steps_ahead
from .replay import ReplayEndpoint
from .results import JsonlAppender, read_records
from .runner import BenchSettings, Solver
from .servers import ServerPair, ServerSource, add_server_flags, api_key_of

RESULTS = "results.jsonl"
TUNED = "tuned.toml"
NO_SD = {
    True: " (sd not measured: give --sd-base-url, a base server with speculative decoding)",
    False: " (sd not measured: the profile has no sd variant)",
}


@dataclass(frozen=True)
class Measured:
    """One mode's or setting's results on a problem set, in problem order."""

    name: str
    correct: tuple[bool, ...]
    latency: tuple[float, ...]
    settings: dict[str, Any] | None = None
    """The SpecReason knobs of a setting (``None``: base or sd)."""
    sd: bool = False

    @property
    def accuracy(self) -> float:
        """Share answered right."""
        return sum(self.correct) / len(self.correct) if self.correct else 0.0

    @property
    def mean_s(self) -> float:
        """Mean latency (seconds of server calls) per problem."""
        return math.fsum(self.latency) / len(self.latency) if self.latency else math.inf


@dataclass(frozen=True)
class Choice:
    """What ``tune`` recommends, and why."""

    recommend: str
    """``specreason``, ``sd`` or ``base``."""
    setting: Measured | None
    reason: str


def choose(
    base: Measured, sd: Measured | None, candidates: Sequence[Measured], max_loss: float = 0.0
) -> Choice:
    """The fastest candidate within ``max_loss`` of the base model's accuracy, if it beats sd.

    ``sd`` qualifies by the same accuracy rule; when it is faster than every qualifying
    candidate (or no candidate qualifies) ``sd`` is recommended; without a qualifying ``sd``
    and candidate, the base model alone.
    """
    floor = base.accuracy - max_loss - 1e-9
    eligible = [c for c in candidates if c.accuracy >= floor]
    best = min(eligible, key=lambda c: c.mean_s) if eligible else None
    sd_ok = sd is not None and sd.accuracy >= floor
    if best is not None and (not sd_ok or (sd is not None and best.mean_s < sd.mean_s)):
        return Choice(
            "specreason",
            best,
            f"{best.name}: accuracy {best.accuracy:.0%} (base {base.accuracy:.0%}), "
            f"{best.mean_s:.1f} s a problem against base {base.mean_s:.1f} s"
            + (f" and sd {sd.mean_s:.1f} s" if sd is not None else " (sd not measured)"),
        )
    if sd_ok and sd is not None:
        why = (
            "no SpecReason setting keeps the base model's accuracy"
            if best is None
            else f"the fastest setting that keeps the accuracy ({best.name}, {best.mean_s:.1f} s)"
            f" is not faster than sd ({sd.mean_s:.1f} s)"
        )
        return Choice("sd", None, f"use sd alone: {why}")
    return Choice(
        "base",
        None,
        "use the base model alone: neither sd nor any SpecReason "
        "setting kept its accuracy on the dev problems",
    )


def max_wrong(base: Measured, max_loss: float = 0.0) -> int:
    """Most wrong answers on the dev set a setting may have and still be chosen.

    The same rule as :func:`choose`: accuracy at least the base model's minus ``max_loss``.
    """
    n = len(base.correct)
    return n - math.ceil(n * (base.accuracy - max_loss) - 1e-9)


def wrong_counts(records: Sequence[dict[str, Any]], split: str) -> dict[Run, int]:
    """Wrong answers so far per run on ``split``."""
    out: dict[Run, int] = {}
    for r in records:
        if r.get("split") == split:
            run = Run.of(r)
            out[run] = out.get(run, 0) + (not r["correct"])
    return out


@dataclass(frozen=True)
class Grid:
    """The settings searched."""

    judges: tuple[str, ...]
    thresholds: tuple[float, ...]
    first_steps: tuple[int, ...]
    with_sd: tuple[bool, ...]
    agree_rules: tuple[str, ...] = ()
    """The ``agree`` mode's settings: each rule at each ``steps_ahead`` (none: not searched)."""
    steps_ahead: tuple[int, ...] = ()

    def runs(self) -> list[Run]:
        """One bench run per setting (thresholds on the judge's own scale)."""
        out = [
            Run(
                "agree+sd" if sd else "agree",
                variant=DEFAULT_SD_VARIANT if sd else None,
                agree_rule=rule,
                steps_ahead=n,
            )
            for rule, n, sd in itertools.product(self.agree_rules, self.steps_ahead, self.with_sd)
        ]
        for judge, t, n, sd in itertools.product(
            self.judges, self.thresholds, self.first_steps, self.with_sd
        ):
            parse_judge(judge)
            out.append(
                Run(
                    "specreason+sd" if sd else "specreason",
                    t,
                    None,
                    DEFAULT_SD_VARIANT if sd else None,
                    judge,
                    n,
                )
            )
        return out


def measured(
    records: Sequence[dict[str, Any]],
    run: Run,
    problems: Sequence[Problem],
    settings: dict[str, Any] | None = None,
) -> Measured | None:
    """The run's results on ``problems`` (``None`` until every problem has one)."""
    key = {r["problem_id"]: r for r in records if Run.of(r) == run}
    if any(p.id not in key for p in problems):
        return None
    rows = [key[p.id] for p in problems]
    return Measured(
        run.label,
        tuple(bool(r["correct"]) for r in rows),
        tuple(float(r["server_s"]) for r in rows),
        settings,
        sd=run.mode in SD_MODES,
    )


class Started:
    """The servers of one variant at a time, each started once.

    Started when first needed and kept up until another variant is needed or :meth:`close`;
    a resumed tune starts none it does not need.
    """

    def __init__(self, source: ServerSource) -> None:
        self.source = source
        self._stack: contextlib.ExitStack | None = None
        self._variant: str | None = None
        self._pair: ServerPair | None = None
        self.starts = 0
        """How many times servers were started."""

    def pair(self, variant: str | None) -> ServerPair:
        """The running servers of ``variant`` (stopping another variant's first)."""
        if self._pair is not None and self._variant == variant:
            return self._pair
        self.close()
        self._stack = contextlib.ExitStack()
        self._pair = self._stack.enter_context(self.source.servers(variant))
        self._variant = variant
        self.starts += 1
        return self._pair

    def close(self) -> None:
        """Stop the running servers, if any."""
        if self._stack is not None:
            self._stack.close()
        self._stack, self._pair = None, None


def add_parser(subparsers: Any) -> None:
    """Add ``tune`` to the ``specreason`` subcommands."""
    p = subparsers.add_parser(
        "tune",
        help="find the fastest setting that keeps the base model's accuracy (or say: use sd)",
        description=__doc__.split("\n\n")[0],
    )
    add_server_flags(p, sd=True)
    p.add_argument("--dataset", default="gsm8k-train", help="dev problems (never a test set)")
    p.add_argument("--seed", type=int, default=0, help="seed of the problem shuffle")
    p.add_argument("--dev-count", type=int, default=20)
    p.add_argument("--heldout-count", type=int, default=10)
    p.add_argument(
        "--heldout-offset",
        type=int,
        default=2000,
        help="where the held-out range starts in the shuffle (disjoint from dev)",
    )
    p.add_argument(
        "--judges",
        default="arithmetic+likelihood,likelihood",
        help="comma list of judges to search",
    )
    p.add_argument(
        "--thresholds",
        default="-0.65,-0.55,-0.45",
        help="comma list, on the last judge's scale (same for every judge)",
    )
    p.add_argument("--first-n-base-steps", default="0,2", help="comma list")
    p.add_argument(
        "--agree-rule",
        default=config_default("agree_rule"),
        help="comma list of agreement rules searched in the agree mode ('' for none)",
    )
    p.add_argument(
        "--steps-ahead",
        default="3",
        help="comma list of the agree mode's steps_ahead searched (default 3)",
    )
    p.add_argument(
        "--no-sd-settings",
        action="store_true",
        help="search settings on the plain base server only",
    )
    p.add_argument(
        "--max-accuracy-loss",
        type=float,
        default=0.0,
        help="accuracy below the base model's that is tolerated (default 0)",
    )
    p.add_argument("--budget", type=int, default=1024, help="reasoning tokens (default 1024)")
    p.add_argument("--answer-max-tokens", type=int, default=512)
    p.add_argument(
        "--probe",
        metavar="SUMMARY",
        help="a `specreason probe` summary.json: settings whose speed-up ceiling there is at "
        "most its reference (sd, else the base) are not run",
    )
    p.add_argument("--out", required=True, help="tune folder; reuse it to resume")
    p.add_argument("--no-progress", action="store_true")


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"expected a comma list of numbers, got {text!r}") from None


async def run_tune(args: argparse.Namespace) -> int:
    """``specreason tune``: returns the exit code."""
    from ..labels.run import sample_problems

    if args.dataset in ("gsm8k", "math500"):
        raise ConfigError(
            "tune reads dev problems only (gsm8k-train or a file); test sets are for reports"
        )
    family = args.family or load_profile(args.profile).family
    source = ServerSource(
        args.profile, args.draft_url, args.base_url, args.sd_base_url, api_key=api_key_of(args)
    )
    has_sd = bool(args.sd_base_url) or (
        not source.explicit and DEFAULT_SD_VARIANT in load_profile(args.profile).variants
    )
    grid = Grid(
        tuple(j.strip() for j in args.judges.split(",") if j.strip()),
        _floats(args.thresholds),
        tuple(int(x) for x in _floats(args.first_n_base_steps)),
        (False, True) if has_sd and not args.no_sd_settings else (False,),
        tuple(parse_agree_rules(args.agree_rule)) if args.agree_rule.strip() else (),
        tuple(parse_steps_ahead(args.steps_ahead)),
    )
    everything = load_problems(args.dataset)
    dev = sample_problems(everything, seed=args.seed, offset=0, count=args.dev_count)
    held = sample_problems(
        everything, seed=args.seed, offset=args.heldout_offset, count=args.heldout_count
    )
    if {p.id for p in dev} & {p.id for p in held}:
        raise ConfigError("the held-out range overlaps the dev range; move --heldout-offset")
    settings = BenchSettings(
        budget=args.budget,
        answer_max_tokens=args.answer_max_tokens,
        temperature=0.0,
        seed=0,
        family=family,
        lookahead=False,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = read_records(out / RESULTS)
    runs = grid.runs()
    if args.probe:
        runs = _probed(runs, args.probe)
    variants: list[str | None] = [None] + ([DEFAULT_SD_VARIANT] if has_sd else [])
    print(
        f"tune: {len(dev)} dev and {len(held)} held-out problems, {len(runs)} settings"
        f"{'' if has_sd else NO_SD[source.explicit]}; in {out}",
        file=sys.stderr,
        flush=True,
    )
    started = Started(source)
    with JsonlAppender(out / RESULTS) as sink, contextlib.closing(started):
        # 1. dev: base, sd, every setting (replaying shared calls)
        for variant in variants:
            group = [r for r in runs if (r.variant is not None) == (variant is not None)]
            base_run = Run("sd", variant=variant) if variant else Run("base")
            await _solve(
                started,
                variant,
                [base_run],
                dev,
                records,
                sink,
                settings,
                split="dev",
                replay=False,
                progress=not args.no_progress,
            )
            base_dev = measured([r for r in records if r["split"] == "dev"], Run("base"), dev)
            await _solve(
                started,
                variant,
                group,
                dev,
                records,
                sink,
                settings,
                split="dev",
                replay=True,
                progress=not args.no_progress,
                drop_after=None
                if base_dev is None
                else max_wrong(base_dev, args.max_accuracy_loss),
            )
        dev_records = [r for r in records if r["split"] == "dev"]
        base = measured(dev_records, Run("base"), dev)
        sd = measured(dev_records, Run("sd", variant=DEFAULT_SD_VARIANT), dev) if has_sd else None
        cands = [
            m
            for r in runs
            if (m := measured(dev_records, r, dev, settings.config(r).as_dict())) is not None
        ]
        assert base is not None
        wrong, limit = wrong_counts(dev_records, "dev"), max_wrong(base, args.max_accuracy_loss)
        dropped = [
            partial(dev_records, r, dev)
            for r in runs
            if measured(dev_records, r, dev) is None and wrong.get(r, 0) > limit
        ]
        for d in dropped:
            print(
                f"tune: dropped {d['name']}: {d['wrong']} wrong in {d['after']} dev problems"
                f" (base {d['base_wrong']}; at most {limit} in all of them keeps the accuracy)",
                file=sys.stderr,
                flush=True,
            )
        choice = choose(base, sd, cands, args.max_accuracy_loss)
        print(f"tune: {choice.reason}", file=sys.stderr, flush=True)
        # 2. held-out: base, sd and the choice, on problems it was not chosen on
        chosen_run = next(
            (r for r in runs if choice.setting and r.label == choice.setting.name), None
        )
        for variant in reversed(variants):  # the servers still up from the dev runs first
            group = [Run("sd", variant=variant) if variant else Run("base")]
            if chosen_run is not None and (chosen_run.variant is not None) == (variant is not None):
                group.append(chosen_run)
            await _solve(
                started,
                variant,
                group,
                held,
                records,
                sink,
                settings,
                split="heldout",
                replay=False,
                progress=not args.no_progress,
            )
    held_records = [r for r in records if r["split"] == "heldout"]
    evidence = _evidence(choice, base, sd, held_records, held, chosen_run, args)
    config = (
        SpecReasonConfig(**choice.setting.settings)
        if choice.setting is not None and choice.setting.settings
        else SpecReasonConfig(**settings.config(Run("base")).as_dict())
    )
    (out / TUNED).write_text(_header(choice) + config.to_toml(evidence), encoding="utf-8")
    (out / "tune.json").write_text(
        json.dumps(
            {
                "choice": choice.recommend,
                "reason": choice.reason,
                "evidence": evidence,
                "dev": [
                    {"name": m.name, "accuracy": m.accuracy, "mean_s": m.mean_s, "sd": m.sd}
                    for m in [base, *([sd] if sd else []), *cands]
                ],
                "dropped": dropped,
                "measured_between": spans(records),
            },
            indent=1,
        )
        + "\n"
    )
    _plot(base, sd, cands, choice, out / "pareto.png", dropped)
    print(f"{choice.recommend}: {choice.reason}")
    print(out / TUNED)
    return 0


async def _solve(
    started: Started,
    variant: str | None,
    runs: Sequence[Run],
    problems: Sequence[Problem],
    records: list[dict[str, Any]],
    sink: JsonlAppender,
    settings: BenchSettings,
    *,
    split: str,
    replay: bool,
    progress: bool,
    drop_after: int | None = None,
) -> None:
    """Run every (run, problem) not yet in ``records``, problem-major.

    ``drop_after``: skip a run's remaining problems once it has more wrong answers than this.
    """
    done = {(r["split"], Run.of(r), r["problem_id"]) for r in records}
    wrong = wrong_counts(records, split)  # kept up to date below

    def dropped(run: Run) -> bool:
        return drop_after is not None and wrong.get(run, 0) > drop_after

    todo = [
        (run, p)
        for p in problems
        for run in runs
        if (split, run, p.id) not in done and not dropped(run)
    ]
    if not todo:
        return
    pair = started.pair(variant)
    draft, base = endpoint_pair(pair.draft_url, pair.base_url, api_key=pair.api_key)
    if replay:
        draft, base = ReplayEndpoint(draft), ReplayEndpoint(base)  # type: ignore[assignment]
    solvers = {run: Solver(run, draft, base, settings) for run in runs}
    with tqdm(
        total=len(todo),
        desc=f"tune {split}{'/' + variant if variant else ''}",
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    ) as bar:
        for run, problem in todo:
            if dropped(run):
                bar.update(1)
                continue
            record = {
                **await solvers[run].solve(problem),
                "split": split,
                "variant": variant,
                "replayed": replay,
            }
            sink.write(record)
            records.append(record)
            wrong[run] = wrong.get(run, 0) + (not record["correct"])
            bar.update(1)


def _probed(runs: list[Run], probe: str) -> list[Run]:
    """``runs`` without the judge-based settings a probe's ceilings rule out (each one said)."""
    from ..probe.ceilings import below_reference, candidate_ceiling, load_tune_table

    table = load_tune_table(probe)
    kept = []
    for run in runs:
        judge, on_sd = run.judge or "score", run.variant is not None
        judged = run.mode in ("specreason", "specreason+sd")
        if judged and below_reference(table, judge, on_sd):
            print(
                f"tune: skipped {run.label}: its ceiling "
                f"{candidate_ceiling(table, judge, on_sd):.2f}x is not above "
                f"{table['reference']:.2f}x ({probe})",
                file=sys.stderr,
                flush=True,
            )
        else:
            kept.append(run)
    return kept


def _header(choice: Choice) -> str:
    """The comment that opens ``tuned.toml``: what tune recommends, in words."""
    if choice.recommend == "specreason":
        return "# specreason tune: this setting (evidence below)\n"
    alone = "vLLM's speculative decoding (sd)" if choice.recommend == "sd" else "the base model"
    return (
        f"# specreason tune recommends {alone} alone, not SpecReason.\n"
        f"# Why: {choice.reason}.\n"
        "# [specreason] holds the settings tune ran with, for reference only.\n"
    )


def spans(records: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """``"split: run" -> [first, last]`` finish times of its records.

    Runs measured in different sessions (a resumed tune) show it here, so a comparison
    across them can say so.
    """
    out: dict[str, list[str]] = {}
    for r in records:
        at = r.get("finished_at")
        if at:
            span = out.setdefault(f"{r['split']}: {Run.of(r).label}", [at, at])
            span[0], span[1] = min(span[0], at), max(span[1], at)
    return out


def partial(
    records: Sequence[dict[str, Any]], run: Run, problems: Sequence[Problem]
) -> dict[str, Any]:
    """A dropped setting on the problems it ran, beside the base model on the same problems."""
    mine = {r["problem_id"]: r for r in records if Run.of(r) == run}
    base = {r["problem_id"]: r for r in records if Run.of(r) == Run("base")}
    ids = [p.id for p in problems if p.id in mine and p.id in base]
    return {
        "name": run.label,
        "sd": run.mode == "specreason+sd",
        "after": len(ids),
        "wrong": sum(not mine[i]["correct"] for i in ids),
        "base_wrong": sum(not base[i]["correct"] for i in ids),
        "mean_s": math.fsum(mine[i]["server_s"] for i in ids) / len(ids) if ids else None,
        "base_mean_s": math.fsum(base[i]["server_s"] for i in ids) / len(ids) if ids else None,
    }


def _evidence(
    choice: Choice,
    base: Measured,
    sd: Measured | None,
    held: Sequence[dict[str, Any]],
    problems: Sequence[Problem],
    chosen: Run | None,
    args: argparse.Namespace,
) -> dict[str, Any]:
    from .stats import mcnemar, paired_ratio

    ev: dict[str, Any] = {
        "recommendation": choice.recommend,
        "reason": choice.reason,
        "dataset": args.dataset,
        "seed": args.seed,
        "dev_problems": args.dev_count,
        "heldout_problems": args.heldout_count,
        "heldout_offset": args.heldout_offset,
        "max_accuracy_loss": args.max_accuracy_loss,
        "latency": "sum of server-call seconds",
        "dev_base_accuracy": base.accuracy,
        "dev_base_s": base.mean_s,
    }
    if sd is not None:
        ev.update(dev_sd_accuracy=sd.accuracy, dev_sd_s=sd.mean_s)
    if choice.setting is not None:
        ev.update(dev_accuracy=choice.setting.accuracy, dev_s=choice.setting.mean_s)
    h_base = measured(held, Run("base"), problems)
    h_sd = measured(held, Run("sd", variant=DEFAULT_SD_VARIANT), problems)
    h_set = measured(held, chosen, problems) if chosen is not None else None
    if h_base is not None:
        ev.update(heldout_base_accuracy=h_base.accuracy, heldout_base_s=h_base.mean_s)
    if h_sd is not None:
        ev.update(heldout_sd_accuracy=h_sd.accuracy, heldout_sd_s=h_sd.mean_s)
        if h_base is not None:
            sd_ratio = paired_ratio(list(h_sd.latency), list(h_base.latency))
            ev.update(
                heldout_sd_speedup_vs_base=[sd_ratio.ratio, sd_ratio.low, sd_ratio.high],
                heldout_sd_mcnemar_p_vs_base=mcnemar(list(h_sd.correct), list(h_base.correct))[2],
            )
    if h_set is not None and h_base is not None:
        ratio = paired_ratio(list(h_set.latency), list(h_base.latency))
        ev.update(
            heldout_accuracy=h_set.accuracy,
            heldout_s=h_set.mean_s,
            heldout_speedup_vs_base=[ratio.ratio, ratio.low, ratio.high],
            heldout_mcnemar_p_vs_base=mcnemar(list(h_set.correct), list(h_base.correct))[2],
        )
        if h_sd is not None:
            vs_sd = paired_ratio(list(h_set.latency), list(h_sd.latency))
            ev["heldout_speedup_vs_sd"] = [vs_sd.ratio, vs_sd.low, vs_sd.high]
    return ev


def _plot(
    base: Measured,
    sd: Measured | None,
    cands: Sequence[Measured],
    choice: Choice,
    path: Path,
    dropped: Sequence[dict[str, Any]] = (),
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for m in cands:
        ax.scatter(m.mean_s, m.accuracy, color="tab:blue" if not m.sd else "tab:purple", s=18)
    for i, d in enumerate(d for d in dropped if d["after"]):
        ax.scatter(
            d["mean_s"],
            1 - d["wrong"] / d["after"],
            facecolors="none",
            edgecolors="tab:purple" if d["sd"] else "tab:blue",
            marker="v",
            s=30,
            label="dropped (on the problems it ran)" if i == 0 else None,
        )
    for ref, colour in ((base, "tab:gray"), (sd, "tab:green")):
        if ref is not None:
            ax.scatter(ref.mean_s, ref.accuracy, color=colour, s=60, marker="s", label=ref.name)
    if choice.setting is not None:
        ax.scatter(
            choice.setting.mean_s,
            choice.setting.accuracy,
            s=140,
            facecolors="none",
            edgecolors="red",
            label=f"chosen: {choice.setting.name}",
        )
    ax.set_xlabel("seconds of server calls per problem (dev)")
    ax.set_ylabel("accuracy (dev)")
    ax.set_title("tune: settings on the dev problems (blue: plain base, purple: with sd)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = [
    "Choice",
    "Grid",
    "Measured",
    "choose",
    "judge_settings",
    "max_wrong",
    "partial",
    "run_tune",
    "spans",
    "wrong_counts",
]
