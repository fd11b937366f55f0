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
   variant are interleaved per problem (one after another at ``--concurrency`` above 1); the
   plain and ``sd`` base servers run one after the other (one server start per variant:
   :class:`Started`).
4. ``tuned.toml``: every knob of the chosen setting (``SpecReasonConfig.from_file`` /
   ``ChatSpecReason(config_file=...)`` load it) and the evidence; ``pareto.png``.

Latency here is the sum of a run's server-call seconds (``server_s``), the same measure for
every mode; results are appended to ``results.jsonl`` and a rerun resumes.

``--concurrency N`` measures all of it with N requests at once, and the choice, verdict,
``tuned.toml`` and ``tune.json`` name that load (:mod:`.concurrency`: what runs N at a time,
and why the ranking stays per-request latency).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ...config import SpecReasonConfig, add_config_flags, config_default, judge_settings
from ...endpoint import endpoint_pair
from ...errors import ConfigError
from ...serving.profiles import load_profile
from ..bench.runner import BenchSettings, Solver
from ..load.cells import LoadSolver
from ..oldflags import add_old_spelling
from ..shared.datasets import Problem, load_problems
from ..shared.flags import add_command, add_output_flags, add_sample_flags
from ..shared.modes import DEFAULT_SD_VARIANT, Run, parse_agree_rules, parse_steps_ahead
from ..shared.results import JsonlAppender, read_records
from ..shared.servers import ServerPair, ServerSource, add_server_flags, api_key_of
from .concurrency import (
    at_load,
    check_one_load,
    load_section,
    measured_with,
    parse_concurrency,
    probe_note,
    solve_at_once,
)
from .grid import (
    Choice,
    Grid,
    Measured,
    _probed,
    choose,
    max_wrong,
    measured,
    wrong_counts,
)
from .replay import ReplayEndpoint
from .report import _evidence, _header, _plot, partial, spans

RESULTS = "results.jsonl"
TUNED = "tuned.toml"
JUDGE_TIMEOUT_UNDER_LOAD = 600.0
"""A judge call's timeout at ``--concurrency`` above 1 (the endpoint's default for any call)."""
NO_SD = {
    True: " (sd not measured: give --sd-base-url, a base server with speculative decoding)",
    False: " (sd not measured: the profile has no sd variant)",
}


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


TUNE_THRESHOLDS = {
    "threshold": f"{config_default('threshold'):g}",
    "likelihood_threshold": "-0.65,-0.55,-0.45",
    "confidence_threshold": f"{config_default('confidence_threshold'):g}",
    "learned_threshold": f"{config_default('learned_threshold'):g}",
}
"""The threshold values searched by default, per config field (a judge searches its own)."""


def grid_thresholds(args: argparse.Namespace) -> dict[str, tuple[float, ...]]:
    """The values searched per threshold field (each judge at its own field's).

    Each field's flag gives them; the deprecated ``--thresholds`` (one list for every judge,
    on the judge's own scale) replaces the lists of the fields whose flags were left at their
    defaults.
    """
    old = getattr(args, "thresholds", None)
    out = {}
    for field, default in TUNE_THRESHOLDS.items():
        text = getattr(args, field, default)
        if old is not None and text == default:
            text = old
        out[field] = _floats(text)
    return out


def add_parser(subparsers: Any) -> None:
    """Add ``tune`` to the ``specreason`` subcommands."""
    p = add_command(
        subparsers,
        "tune",
        "find the fastest setting that keeps the base model's accuracy (or say: use sd)",
        __doc__,
    )
    add_server_flags(p, sd=True)
    add_sample_flags(p, "dev problems (never a test set)")
    p.add_argument("--dev-count", type=int, default=20)
    p.add_argument("--heldout-count", type=int, default=10)
    p.add_argument(
        "--heldout-offset",
        type=int,
        default=2000,
        help="where the held-out range starts in the shuffle (disjoint from dev)",
    )
    p.add_argument(
        "--judge",
        default="arithmetic+likelihood,likelihood",
        help="comma list of judges to search",
    )
    add_old_spelling(p, "--judges", "--judge", dest="judge")
    for field, default in TUNE_THRESHOLDS.items():
        p.add_argument(
            "--" + field.replace("_", "-"),
            default=default,
            help=f"comma list of {field} values searched for the judges that read it "
            f"(default {default})",
        )
    add_old_spelling(
        p,
        "--thresholds",
        "--likelihood-threshold (or the threshold flag of the judge searched)",
        dest="thresholds",
        default=None,
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
    add_config_flags(p, ["budget", "answer_max_tokens"], budget=1024, answer_max_tokens=512)
    p.add_argument(
        "--probe",
        metavar="SUMMARY",
        help="a `specreason probe` summary.json: settings whose speed-up ceiling there is at "
        "most its reference (sd, else the base) are not run",
    )
    p.add_argument(
        "--concurrency",
        default="1",
        metavar="N",
        help="requests at once: every run's problems are sent N at a time and the choice is "
        "made at that load (default 1: one at a time; a folder holds one load)",
    )
    add_output_flags(p, "tune folder; reuse it to resume", required=True)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"expected a comma list of numbers, got {text!r}") from None


async def run_tune(args: argparse.Namespace) -> int:
    """``specreason tune``: returns the exit code."""
    from ..labels.run import sample_problems

    concurrency = parse_concurrency(getattr(args, "concurrency", 1))
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
        tuple(j.strip() for j in args.judge.split(",") if j.strip()),
        grid_thresholds(args),
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
    check_one_load(records, concurrency, out)
    runs = grid.runs()
    probed = None
    if args.probe:
        runs = _probed(runs, args.probe)
        if (probed := probe_note(args.probe, concurrency)) is not None:
            print(f"tune: {probed['note']}", file=sys.stderr, flush=True)
    variants: list[str | None] = [None] + ([DEFAULT_SD_VARIANT] if has_sd else [])
    print(
        f"tune: {len(dev)} dev and {len(held)} held-out problems, {len(runs)} settings"
        f"{'' if has_sd else NO_SD[source.explicit]}"
        f"{'' if concurrency == 1 else ', ' + str(concurrency) + ' requests at once'}; in {out}",
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
                concurrency=concurrency,
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
                concurrency=concurrency,
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
        choice = at_load(choose(base, sd, cands, args.max_accuracy_loss), concurrency)
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
                concurrency=concurrency,
            )
    held_records = [r for r in records if r["split"] == "heldout"]
    evidence = _evidence(choice, base, sd, held_records, held, chosen_run, args)
    if concurrency > 1:
        evidence.update(
            concurrency=concurrency,
            latency=f"sum of server-call seconds, {measured_with(concurrency)}",
        )
    if probed is not None:
        evidence["probe_load"] = probed["note"]
    config = (
        SpecReasonConfig(**choice.setting.settings)
        if choice.setting is not None and choice.setting.settings
        else SpecReasonConfig(**settings.config(Run("base")).as_dict())
    )
    (out / TUNED).write_text(
        _header(choice, concurrency) + config.to_toml(evidence), encoding="utf-8"
    )
    load = load_section(records, concurrency, probed)
    (out / "tune.json").write_text(
        json.dumps(
            {
                **({} if load is None else {"load": load}),
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
    _plot(base, sd, cands, choice, out / "pareto.png", dropped, concurrency)
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
    concurrency: int = 1,
) -> None:
    """Run every (run, problem) not yet in ``records``.

    One at a time problem-major; with ``concurrency`` N > 1 run-major, each run's problems N
    at a time (:func:`.concurrency.solve_at_once`). ``drop_after``: skip a run's remaining
    problems once it has more wrong answers than this.
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
    # under load a judge's one-token call waits its turn behind the others in flight: it gets
    # every call's timeout, as in `bench load`
    if concurrency == 1:
        draft, base = endpoint_pair(pair.draft_url, pair.base_url, api_key=pair.api_key)
    else:
        draft, base = endpoint_pair(
            pair.draft_url,
            pair.base_url,
            api_key=pair.api_key,
            judge_timeout=JUDGE_TIMEOUT_UNDER_LOAD,
        )
    if replay:
        draft, base = ReplayEndpoint(draft), ReplayEndpoint(base)  # type: ignore[assignment]
    # under load, the bench load's solver: no prefill-floor calls to add to the load
    make = Solver if concurrency == 1 else LoadSolver
    solvers = {run: make(run, draft, base, settings) for run in runs}
    fields = {"split": split, "variant": variant, "replayed": replay}

    def keep(run: Run, record: dict[str, Any]) -> None:
        sink.write(record)
        records.append(record)
        wrong[run] = wrong.get(run, 0) + (not record["correct"])

    with tqdm(
        total=len(todo),
        desc=f"tune {split}{'/' + variant if variant else ''}",
        unit="run",
        disable=not progress,
        dynamic_ncols=True,
    ) as bar:
        if concurrency > 1:
            groups = [(run, [p for r, p in todo if r == run]) for run in runs]
            await solve_at_once(
                [(run, ps) for run, ps in groups if ps],
                solvers,
                concurrency,
                fields=fields,
                dropped=dropped,
                keep=keep,
                bar=bar,
            )
            return
        for run, problem in todo:
            if dropped(run):
                bar.update(1)
                continue
            keep(run, {**await solvers[run].solve(problem), **fields})
            bar.update(1)


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
