"""Each agreement rule on labelled draft steps: steps kept, harmful among kept, harmful caught.

A labels file of ``specreason label`` holds, at every drafted position, the draft's step, the
base model's own step there (``base_step``, one greedy rollout's first step) and whether the
draft step was harmful (the base model's rollouts did worse from it). A rule run on the pair
``(step, base_step)`` is what the ``agree`` mode decides at that position, so the rule's
precision can be read offline, in seconds, before any server runs.

``specreason bench agreement --labels FILE --out DIR`` writes ``summary.json`` and
``summary.md``: per rule, the share of steps kept (Wilson 95% interval), the harmful share among
the kept ones, and how many harmful steps it catches.

Beside the rules, on the same steps (:func:`decision_readings`, the summary's ``decisions``):

* **Arbitrage's oracle** (``--margins``): it escalates exactly the steps whose rollout
  ``advantage`` exceeds the margin (0: the paper's oracle), read from the labels with no
  server: the steps it keeps, the harmful steps among them, and the base work it costs;
* **judges** (``--judges DIR``, a ``bench judges --labels`` folder on these labels) and the
  **router** (``--router-scores FILE``, out-of-fold or held-out predictions of ``arbitrage cv``
  / ``arbitrage read``): each at the thresholds that catch ``--catch`` (90%, 95%) of the
  harmful steps, chosen on ``--judges-fit-on`` / ``--router-fit-on`` (the dev folder / file)
  when given, else on these labels.

With ``--probe SUMMARY`` (a ``specreason probe`` summary of the pair) each decision but the
rules also gets its speed ceiling on that pair (:mod:`.ceiling`).

Base work: the share of positions at which the base model writes a step, and the same in the
characters of its steps (the labels' ``base_step``). A rule needs the base's step at every
position; a judge or the router only where it rejects (the judges' own prefill calls come on
top); the oracle, as a decision, only where it escalates (as a labeller it writes both steps
and their rollouts everywhere). Shares of kept steps and of harmful among kept carry 95%
intervals from a bootstrap over whole problems.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...agreement import make_rule, rule_specs
from ...config import SpecReasonConfig, add_config_flags
from ...errors import ConfigError, InputError
from ..shared.datasets import read_jsonl
from ..shared.stats import percentile_95, wilson

REQUIRED = ("step", "base_step", "harmful")


class _KeptShares:
    """The two shares read off ``steps``, ``kept`` and ``harmful_kept`` (no dataclass fields)."""

    steps: int
    kept: int
    harmful_kept: int

    @property
    def kept_share(self) -> float:
        """Share of the draft steps kept."""
        return self.kept / self.steps if self.steps else 0.0

    @property
    def harmful_kept_share(self) -> float:
        """Share of the kept steps that are harmful."""
        return self.harmful_kept / self.kept if self.kept else 0.0


@dataclass(frozen=True)
class RuleReading(_KeptShares):
    """One rule on one labels file."""

    rule: str
    steps: int
    kept: int
    kept_low: float
    kept_high: float
    harmful: int
    harmful_kept: int
    harmful_kept_low: float
    harmful_kept_high: float


def read_pairs(path: Path) -> list[tuple[str, str, bool]]:
    """``(draft step, base step, harmful)`` of each line; InputError naming a bad line."""
    pairs = []
    for number, row in read_jsonl(path, REQUIRED):
        step, base, harmful = row["step"], row["base_step"], row["harmful"]
        if not isinstance(step, str) or not isinstance(base, str) or not isinstance(harmful, bool):
            raise InputError(
                f"{path}, line {number}: step and base_step must be strings, harmful true/false"
            )
        pairs.append((step, base, harmful))
    if not pairs:
        raise InputError(f"{path} holds no labelled step")
    return pairs


def read_rule(
    name: str, pairs: Sequence[tuple[str, str, bool]], settings: Mapping[str, Any]
) -> RuleReading:
    """Rule ``name`` (with ``settings``, a config's fields) on the labelled pairs."""
    rule = make_rule(name, settings)
    kept = [harmful for step, base, harmful in pairs if rule.agree(step, base).agree]
    harmful_kept = sum(kept)
    return RuleReading(
        rule=name,
        steps=len(pairs),
        kept=len(kept),
        kept_low=wilson(len(kept), len(pairs))[0],
        kept_high=wilson(len(kept), len(pairs))[1],
        harmful=sum(h for _, _, h in pairs),
        harmful_kept=harmful_kept,
        harmful_kept_low=wilson(harmful_kept, len(kept))[0],
        harmful_kept_high=wilson(harmful_kept, len(kept))[1],
    )


def summary_md(readings: Sequence[RuleReading], labels: Path, settings: Mapping[str, Any]) -> str:
    """The readings as a Markdown table."""
    lines = [
        f"# Agreement rules on {labels}",
        "",
        f"agree_overlap = {settings['agree_overlap']}",
        "",
        "| rule | kept | kept share [95%] | harmful among kept [95%] | harmful caught |",
        "|---|---|---|---|---|",
    ]
    for r in readings:
        lines.append(
            f"| `{r.rule}` | {r.kept}/{r.steps} | {r.kept_share:.1%} "
            f"[{r.kept_low:.1%}, {r.kept_high:.1%}] | {r.harmful_kept}/{r.kept} = "
            f"{r.harmful_kept_share:.1%} [{r.harmful_kept_low:.1%}, {r.harmful_kept_high:.1%}] "
            f"| {r.harmful - r.harmful_kept}/{r.harmful} |"
        )
    return "\n".join(lines) + "\n"


def write_report(
    labels: Path,
    out: Path,
    rules: Sequence[str],
    config: SpecReasonConfig,
    **decisions: Any,
) -> str:
    """Read every rule on ``labels``; write summary.json and summary.md to ``out``.

    ``decisions``: keywords of :func:`decision_readings` (margins, judges, router, ...); with
    none the table of decisions holds the oracle at margin 0 and the rules, when the labels
    carry ``advantage`` and ``problem_id``.
    """
    probe = decisions.pop("probe", None)
    pairs = read_pairs(labels)
    settings = config.as_dict()
    readings = [read_rule(name, pairs, settings) for name in rules]
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "labels": str(labels),
        "agree_overlap": settings["agree_overlap"],
        "rules": [
            {**asdict(r), "kept_share": r.kept_share, "harmful_kept_share": r.harmful_kept_share}
            for r in readings
        ],
    }
    text = summary_md(readings, labels, settings)
    if decisions or _has_rollouts(labels):
        chosen = decision_readings(labels, rules, settings, **decisions)
        summary["decisions"] = [
            {**asdict(r), "kept_share": r.kept_share, "harmful_kept_share": r.harmful_kept_share}
            for r in chosen
        ]
        summary["decision_inputs"] = {k: _plain(v) for k, v in decisions.items()}
        text += "\n" + decisions_md(chosen, labels)
        if probe is not None:
            from .ceiling import ceiling_md, ceiling_rows, read_speeds

            speeds = read_speeds(Path(probe))
            rows = ceiling_rows(chosen, speeds)
            summary["ceilings"] = {"speeds": asdict(speeds), "decisions": rows}
            text += "\n" + ceiling_md(rows, speeds)
    elif probe is not None:
        raise InputError(f"--probe: {labels} carries no rollout advantage to decide on")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(text)
    return text


CATCH = (0.9, 0.95)
"""Shares of harmful steps a judge's or the router's threshold must catch (on dev)."""

JUDGE_READINGS = ("arithmetic+likelihood", "learned")
"""The judges' readings the decisions table shows by default: the library default, learned."""

RESAMPLES = 1000


@dataclass(frozen=True)
class LabelledPair:
    """A labelled position as the decisions table reads it."""

    example: str
    """``problem:step_index``, as the judges' results name it."""
    problem: str
    advantage: float
    harmful: bool
    step: str
    base_step: str


@dataclass(frozen=True)
class DecisionReading(_KeptShares):
    """One way of deciding which draft steps to keep, read on one labels file."""

    row: str
    kind: str
    """``oracle``, ``rule``, ``judge`` or ``router``."""
    chosen: str
    """How its threshold was set (``-`` for none)."""
    threshold: float | None
    steps: int
    kept: int
    kept_95: tuple[float, float]
    harmful: int
    harmful_kept: int
    harmful_kept_95: tuple[float, float]
    base_steps: float
    """Share of positions at which the base writes a step."""
    base_chars: float
    """Characters of the base's steps written, over those of the base writing every step."""


def read_labelled(path: Path) -> list[LabelledPair]:
    """The positions of a rollout labels file (``specreason label``)."""
    rows = []
    needed = ("problem_id", "step", "base_step", "harmful", "advantage")
    for number, row in read_jsonl(path, needed):
        advantage = row["advantage"]
        if isinstance(advantage, bool) or not isinstance(advantage, int | float):
            raise InputError(f"{path}, line {number}: advantage must be a number")
        index = row.get("step_index", len(row.get("steps") or []))
        rows.append(
            LabelledPair(
                example=f"{row['problem_id']}:{index}",
                problem=str(row["problem_id"]),
                advantage=float(advantage),
                harmful=bool(row["harmful"]),
                step=str(row["step"]),
                base_step=str(row["base_step"]),
            )
        )
    if not rows:
        raise InputError(f"{path} holds no labelled step")
    return rows


def decision(
    row: str,
    kind: str,
    pairs: Sequence[LabelledPair],
    kept: Sequence[bool],
    *,
    base_writes: Sequence[bool] | None = None,
    chosen: str = "-",
    threshold: float | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> DecisionReading:
    """The reading of a decision keeping ``kept[i]`` of ``pairs[i]``.

    ``base_writes``: where the base model writes a step (default: where a step is not kept).
    """
    writes = [not k for k in kept] if base_writes is None else list(base_writes)
    chars = sum(len(p.base_step) for p in pairs)
    by_problem: dict[str, list[tuple[bool, bool]]] = {}
    for pair, keep in zip(pairs, kept, strict=True):
        by_problem.setdefault(pair.problem, []).append((keep, pair.harmful))
    keys = sorted(by_problem)
    rng = random.Random(seed)
    kept_draws, harmful_draws = [], []
    for _ in range(resamples):
        sample = [x for _k in keys for x in by_problem[keys[rng.randrange(len(keys))]]]
        n_kept = sum(k for k, _h in sample)
        kept_draws.append(n_kept / len(sample))
        if n_kept:
            harmful_draws.append(sum(k and h for k, h in sample) / n_kept)
    return DecisionReading(
        row=row,
        kind=kind,
        chosen=chosen,
        threshold=threshold,
        steps=len(pairs),
        kept=sum(kept),
        kept_95=percentile_95(kept_draws),
        harmful=sum(p.harmful for p in pairs),
        harmful_kept=sum(k and p.harmful for p, k in zip(pairs, kept, strict=True)),
        harmful_kept_95=percentile_95(harmful_draws) if harmful_draws else (0.0, 1.0),
        base_steps=sum(writes) / len(pairs),
        base_chars=(
            sum(len(p.base_step) for p, w in zip(pairs, writes, strict=True) if w) / chars
            if chars
            else 0.0
        ),
    )


def oracle_reading(pairs: Sequence[LabelledPair], margin: float = 0.0) -> DecisionReading:
    """Arbitrage's oracle: escalate exactly the steps whose advantage exceeds ``margin``."""
    kept = [p.advantage <= margin for p in pairs]
    return decision(f"oracle: escalate when advantage > {margin:g}", "oracle", pairs, kept)


def rule_decision(
    name: str, pairs: Sequence[LabelledPair], settings: Mapping[str, Any]
) -> DecisionReading:
    """Agreement rule ``name``: keep where the draft's step agrees with the base's own."""
    rule = make_rule(name, settings)
    kept = [rule.agree(p.step, p.base_step).agree for p in pairs]
    return decision(f"agree: rule `{name}`", "rule", pairs, kept, base_writes=[True] * len(pairs))


def catch_threshold(
    keep_scores: Mapping[str, float], harmful: Mapping[str, bool], catch: float
) -> float:
    """The lowest threshold (keep when ``score >= t``) rejecting ``catch`` of the harmful steps."""
    bad = [s for e, s in keep_scores.items() if harmful.get(e)]
    if not bad:
        raise InputError("no harmful step to choose a threshold on")
    for t in [*sorted(set(keep_scores.values())), math.inf]:
        if sum(s < t for s in bad) / len(bad) >= catch:
            return t
    return math.inf


def scored_decisions(
    name: str,
    kind: str,
    pairs: Sequence[LabelledPair],
    scores: Mapping[str, float],
    dev_scores: Mapping[str, float] | None,
    dev_harmful: Mapping[str, bool] | None,
    catch: Sequence[float] = CATCH,
) -> list[DecisionReading]:
    """A reading (higher keeps) at the thresholds catching ``catch`` of the harmful steps.

    Thresholds are chosen on ``dev_scores`` when given, else on these labels' own scores.
    Every labelled step must have a score.
    """
    missing = [p.example for p in pairs if p.example not in scores]
    if missing:
        raise InputError(f"{name}: no reading of {len(missing)} labelled steps ({missing[0]}, ...)")
    here = {p.example: p.harmful for p in pairs}
    fit_scores = dev_scores if dev_scores is not None else scores
    fit_harmful = dev_harmful if dev_harmful is not None else here
    out = []
    for share in catch:
        t = catch_threshold(fit_scores, fit_harmful, share)
        kept = [scores[p.example] >= t for p in pairs]
        chosen = f"catches {share:.0%} on " + ("dev" if dev_scores is not None else "these")
        out.append(decision(name, kind, pairs, kept, chosen=chosen, threshold=t))
    return out


def judge_scores(
    results: Path, fit_on: Path | None, readings: Sequence[str]
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]] | None, dict[str, bool] | None]:
    """(reading -> example -> score here, the same on dev or None, dev's harmful or None).

    ``results``: a ``bench judges --labels`` folder; ``learned`` as its report reads it (out of
    fold on dev; fitted on ``fit_on``'s dev results otherwise).
    """
    from ..judges.labelreport import fit_tuned, harmful_of, judge_name, report_scores
    from ..shared.results import read_records

    records = read_records(results / "results.jsonl")
    dev = read_records(fit_on / "results.jsonl") if fit_on else None
    fitted = fit_tuned(dev) if dev else None
    scores, dev_scores = report_scores(records, dev, fitted[0] if fitted else None)
    named = {judge_name(v): by for v, by in scores.items()}
    dev_named = {judge_name(v): by for v, by in dev_scores.items()}
    unknown = [r for r in readings if r not in named]
    if unknown:
        raise ConfigError(
            f"--judge-readings: {', '.join(unknown)} not in {results} "
            f"(there: {', '.join(sorted(named))})"
        )
    here = {r: named[r] for r in readings}
    there = {r: dev_named[r] for r in readings} if dev else None
    return here, there, harmful_of(dev) if dev else None


def router_scores(path: Path) -> tuple[dict[str, float], dict[str, bool]]:
    """(example -> 1 - P(escalate), example -> harmful) of ``arbitrage cv``/``read`` lines."""
    keep, harmful = {}, {}
    for _number, row in read_jsonl(path, ("example", "p_escalate", "harmful")):
        keep[str(row["example"])] = 1.0 - float(row["p_escalate"])
        harmful[str(row["example"])] = bool(row["harmful"])
    return keep, harmful


def decisions_md(readings: Sequence[DecisionReading], labels: Path) -> str:
    """The decisions as one Markdown table."""
    lines = [
        f"## Oracle, routers, judges and rules on the same steps ({labels})",
        "",
        "Kept and harmful-among-kept with 95% intervals from a bootstrap over problems. "
        "Base work: where the base model writes a step (share of positions; of the "
        "characters of the base's steps).",
        "",
        "| decision | threshold | kept [95%] | harmful among kept [95%] | harmful caught "
        "| base writes: steps | base writes: chars |",
        "|---|---|---|---|---|--:|--:|",
    ]
    for r in readings:
        t = "-" if r.threshold is None else f"{r.threshold:.4g} ({r.chosen})"
        lines.append(
            f"| {r.row} | {t} | {r.kept}/{r.steps} = {r.kept_share:.1%} "
            f"[{r.kept_95[0]:.1%}, {r.kept_95[1]:.1%}] | {r.harmful_kept}/{r.kept} = "
            f"{r.harmful_kept_share:.1%} [{r.harmful_kept_95[0]:.1%}, "
            f"{r.harmful_kept_95[1]:.1%}] | {r.harmful - r.harmful_kept}/{r.harmful} "
            f"| {r.base_steps:.1%} | {r.base_chars:.1%} |"
        )
    return "\n".join(lines) + "\n"


def decision_readings(
    labels: Path,
    rules: Sequence[str],
    settings: Mapping[str, Any],
    *,
    margins: Sequence[float] = (0.0,),
    judges: Path | None = None,
    judges_fit_on: Path | None = None,
    judge_readings: Sequence[str] = JUDGE_READINGS,
    router: Path | None = None,
    router_fit_on: Path | None = None,
    catch: Sequence[float] = CATCH,
) -> list[DecisionReading]:
    """The oracle, the router, the judges and the rules on the steps of ``labels``."""
    pairs = read_labelled(labels)
    out = [oracle_reading(pairs, m) for m in margins]
    if router is not None:
        here, _ = router_scores(router)
        dev, dev_harmful = router_scores(router_fit_on) if router_fit_on else (None, None)
        out += scored_decisions(
            f"router `{router.parent.name}/{router.name}`",
            "router",
            pairs,
            here,
            dev,
            dev_harmful,
            catch,
        )
    if judges is not None:
        scores, dev_scores, dev_harmful = judge_scores(judges, judges_fit_on, judge_readings)
        for name in judge_readings:
            out += scored_decisions(
                f"judge `{name}`",
                "judge",
                pairs,
                scores[name],
                dev_scores[name] if dev_scores else None,
                dev_harmful,
                catch,
            )
    out += [rule_decision(name, pairs, settings) for name in rules]
    return out


def add_parser(subparsers: Any) -> None:
    """``specreason bench agreement``."""
    p = subparsers.add_parser(
        "agreement",
        help="the agreement rules read on labelled draft steps (no server, seconds)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--labels", required=True, help="a labels.jsonl of `specreason label`")
    p.add_argument("--out", required=True, help="folder for summary.json and summary.md")
    p.add_argument(
        "--rules",
        default=",".join(rule_specs()),
        help=f"comma-separated rules (default: all): {', '.join(rule_specs())}",
    )
    add_config_flags(p, ["agree_overlap"])
    p.add_argument(
        "--margins",
        default="0",
        help="the oracle escalates where advantage > margin; comma list (default: 0)",
    )
    p.add_argument("--judges", help="a `bench judges --labels` folder on the same labels")
    p.add_argument("--judges-fit-on", help="its dev folder: thresholds chosen there")
    p.add_argument(
        "--judge-readings",
        default=",".join(JUDGE_READINGS),
        help=f"the judges' readings shown (default: {','.join(JUDGE_READINGS)})",
    )
    p.add_argument(
        "--router-scores", help="the router's predictions (`arbitrage cv` oof.jsonl, `read`)"
    )
    p.add_argument("--router-fit-on", help="its dev predictions: thresholds chosen there")
    p.add_argument(
        "--probe",
        help="a `specreason probe` summary.json: each decision's speed ceiling on that pair",
    )
    p.add_argument(
        "--catch",
        default=",".join(f"{c:g}" for c in CATCH),
        help="shares of harmful steps a judge's or router's threshold catches (default: 0.9,0.95)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``specreason bench agreement``."""
    rules = [name.strip() for name in args.rules.split(",") if name.strip()]
    config = SpecReasonConfig(agree_overlap=args.agree_overlap, agree_rule=rules[0])
    for name in rules:
        config.replace(agree_rule=name)  # ConfigError naming an unknown rule
    decisions: dict[str, Any] = {
        "margins": _floats("--margins", args.margins),
        "catch": _floats("--catch", args.catch),
        "judge_readings": [r.strip() for r in args.judge_readings.split(",") if r.strip()],
    }
    for key in ("judges", "judges_fit_on", "router_fit_on", "probe"):
        if getattr(args, key):
            decisions[key] = Path(getattr(args, key))
    if args.router_scores:
        decisions["router"] = Path(args.router_scores)
    print(write_report(Path(args.labels), Path(args.out), rules, config, **decisions), end="")
    return 0


def _floats(flag: str, text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag}: expected comma-separated numbers, got {text!r}") from None


def _has_rollouts(labels: Path) -> bool:
    """Whether the labels carry what the decisions table reads (advantage, problem_id)."""
    for _number, row in read_jsonl(labels, ()):
        return "advantage" in row and "problem_id" in row
    return False


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
