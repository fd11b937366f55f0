"""The judge benchmark on labelled draft steps: AUROC against ``harmful``, decisions, costs.

Reads the results of ``specreason bench judges --labels FILE`` (every example is a real draft
step, ``harmless`` or ``harmful`` by base-model rollouts; see :mod:`..labels`). Besides the
readings of :data:`.report.VARIANTS` it composes:

* ``disagreement``: the base model's mean token log-probability of the step minus the draft
  model's own (the two ``mean`` readings of ``likelihood`` and ``confidence``): a step the
  base model finds much less likely than the draft did;
* ``learned``: a logistic regression over all readings (:mod:`.learned`), fitted on the
  ``--fit-on`` folder's results (dev labels), never on the labels it is reported on. On the
  dev labels themselves it is read *cross-validated* (:func:`cross_validated`: each problem's
  steps scored by a model fitted without that problem), so its dev AUROC compares fairly with
  the readings that fit nothing, and its threshold is chosen on those out-of-fold scores. Its
  L2 strength is chosen by an inner cross-validation on the steps it is fitted on
  (:func:`choose_l2`), never on the steps it scores.

Every AUROC comes with a 95% interval from a bootstrap over *problems* (:func:`auroc_interval`):
the steps of one problem share a trace and are not independent.

Odd input does not stop the report: infinite readings are read at the fit's clip, constant
ones get weight 0, NaN readings are left out, a fit without both labels is skipped, and the
report's notes say which happened (:func:`learned_notes`).

Thresholds: with ``--fit-on DEV``, each reading's threshold is chosen on the dev results (the
one rejecting the most harmful steps while keeping at least :data:`KEEP_HARMLESS` of the
harmless ones) and only then applied here; without it, the library's default threshold.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...config import SpecReasonConfig
from ..shared.results import read_records
from ..shared.stats import percentile_95
from .learned import (
    CLIP,
    LogisticModel,
    constant_features,
    example_features,
    fit_logistic,
    nonfinite_counts,
)
from .report import (
    DEFAULT_VARIANT,
    VARIANTS,
    _mean,
    auroc,
    default_reading,
    default_threshold,
    roc_points,
    variant_scores,
)

KEEP_HARMLESS = 0.9
"""The share of harmless steps a chosen threshold must keep on the dev labels."""

CV_FOLDS = 5
"""Folds of whole problems for the cross-validated ``learned`` reading on dev labels."""

L2_GRID = (1.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
"""L2 strengths the ``learned`` fit chooses from, by cross-validation on its training steps
(eight features on 47 harmful dev steps overfit at the least: session 19)."""

RESAMPLES = 1000
"""Bootstrap resamples of problems for an AUROC interval."""

DISAGREEMENT = "disagreement (base mean - draft mean)"
LEARNED = "learned (logistic, all readings)"

EXTRA_NAMES: dict[str, str] = {DISAGREEMENT: "disagreement", LEARNED: "learned"}


def judge_name(variant: str) -> str:
    """A reading as ``--judge`` spells it, e.g. ``arithmetic+likelihood[min]``.

    ``[...]`` names what differs from the library's defaults (``logprob_aggregate``,
    ``score_method``).
    """
    if variant not in VARIANTS:
        return EXTRA_NAMES.get(variant, variant)
    judge, reading, check = VARIANTS[variant]
    tags = ["reference"] if judge == "score-reference" else []
    readings = {r for m, r, _c in VARIANTS.values() if m == judge}
    if reading != default_reading(judge) and len(readings) > 1:
        tags.append(reading)  # the reading, unless it is the judge's default or its only one
    name = (f"{check}+" if check else "") + judge.removesuffix("-reference")
    return name + (f"[{','.join(tags)}]" if tags else "")


def all_scores(
    records: Sequence[dict[str, Any]], model: LogisticModel | None = None
) -> dict[str, dict[str, float]]:
    """Reading -> example -> score (higher keeps the step), composed readings included."""
    out = {variant: variant_scores(records, variant) for variant in VARIANTS}
    lik, conf = out["likelihood (mean)"], out["confidence (mean)"]
    out[DISAGREEMENT] = {e: lik[e] - conf[e] for e in lik if e in conf}
    if model is not None:
        _names, features = example_features(out, model.names)
        out[LEARNED] = {e: model.predict(x) for e, x in features.items()}
    # a NaN reading (inf - inf in `disagreement`, a NaN in a results file) is no reading
    out = {k: {e: x for e, x in v.items() if not math.isnan(x)} for k, v in out.items()}
    return {k: v for k, v in out.items() if v}


def nan_readings(records: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Reading -> how many of its steps read NaN (left out of it by :func:`all_scores`)."""
    out = {variant: variant_scores(records, variant) for variant in VARIANTS}
    lik, conf = out["likelihood (mean)"], out["confidence (mean)"]
    out[DISAGREEMENT] = {e: lik[e] - conf[e] for e in lik if e in conf}
    counts = {k: sum(math.isnan(x) for x in v.values()) for k, v in out.items()}
    return {judge_name(k): c for k, c in counts.items() if c}


def learned_notes(
    fitted_on: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]]
) -> list[str]:
    """What the report did with odd input, in words, for its notes.

    On the ``learned`` fit's steps (``fitted_on``: the dev results, or these) and the NaN
    readings of ``records``: a fit skipped (no step with every reading; one label only),
    infinite readings (read at the clip), constant readings (weight 0), NaN readings (left
    out)
    """
    notes = []
    names, features = example_features(all_scores(fitted_on))
    harmful = harmful_of(fitted_on)
    xs = list(features.values())
    ys = [not harmful[e] for e in features]
    if not features:
        notes.append(
            "`learned` not fitted: no step has the readings it reads "
            "(the likelihood, confidence and arithmetic measures)"
        )
    elif all(ys) or not any(ys):
        notes.append("`learned` not fitted: the steps it would be fitted on hold one label only")
    else:
        infinite = nonfinite_counts(xs, names)
        if infinite:
            notes.append(
                "`learned`: infinite readings on the steps it is fitted on ("
                + ", ".join(f"{n}: {c}" for n, c in infinite.items())
                + f") are read at the fit's clip, {CLIP:g} standard deviations of the finite "
                "values"
            )
        constant = constant_features(xs, names)
        if constant:
            notes.append(
                "`learned`: constant on the steps it is fitted on, so weight 0: "
                + ", ".join(constant)
            )
    nans = nan_readings(records)
    if nans:
        notes.append(
            "NaN readings left out (the n column counts the rest): "
            + ", ".join(f"{n}: {c}" for n, c in nans.items())
        )
    return notes


def fit_tuned(dev: Sequence[dict[str, Any]]) -> tuple[LogisticModel, float] | None:
    """(the learned reading fitted on all of ``dev``, the L2 strength :func:`choose_l2` chose)."""
    harmful = harmful_of(dev)
    names, features = example_features(all_scores(dev))
    ys = [not harmful[e] for e in features]
    if not features or all(ys) or not any(ys):
        return None
    l2 = choose_l2(list(features), features, harmful, names)
    return fit_logistic([features[e] for e in features], ys, names=names, l2=l2), l2


def choose_l2(
    examples: Sequence[str],
    features: Mapping[str, Sequence[float]],
    harmful: Mapping[str, bool],
    names: Sequence[str],
) -> float:
    """The L2 strength of :data:`L2_GRID` with the best out-of-fold AUROC on ``examples``.

    Folds of whole problems (seed 1, unlike the outer folds' 0); a smaller strength wins a tie;
    the grid's least when no strength can be read (a fold lacks either label).
    """
    best, best_auroc = L2_GRID[0], -1.0
    for l2 in L2_GRID:
        scores = _out_of_fold(examples, features, harmful, names, CV_FOLDS, 1, l2)
        ok, bad = split(scores, harmful)
        value = auroc(ok, bad) if ok and bad else None
        if value is not None and value > best_auroc + 1e-9:
            best, best_auroc = l2, value
    return best


def _out_of_fold(
    examples: Sequence[str],
    features: Mapping[str, Sequence[float]],
    harmful: Mapping[str, bool],
    names: Sequence[str],
    folds: int,
    seed: int,
    l2: float | None,
) -> dict[str, float]:
    """Example -> P(harmless) from a model fitted without the example's problem.

    ``{}`` when a fold's training part lacks either label; ``l2=None``: chosen by
    :func:`choose_l2` on each fold's training part alone (nested).
    """
    problems = sorted({problem_of(e) for e in examples})
    random.Random(seed).shuffle(problems)
    fold_of = {p: i % folds for i, p in enumerate(problems)}
    out: dict[str, float] = {}
    for fold in range(folds):
        train = [e for e in examples if fold_of[problem_of(e)] != fold]
        test = [e for e in examples if fold_of[problem_of(e)] == fold]
        ys = [not harmful[e] for e in train]
        if not test:
            continue
        if all(ys) or not any(ys):
            return {}
        strength = choose_l2(train, features, harmful, names) if l2 is None else l2
        model = fit_logistic([features[e] for e in train], ys, names=names, l2=strength)
        out.update({e: model.predict(features[e]) for e in test})
    return out


def harmful_of(records: Sequence[dict[str, Any]]) -> dict[str, bool]:
    """Example -> harmful."""
    return {r["example"]: r["kind"] == "harmful" for r in records}


def problem_of(example: str) -> str:
    """The problem a labelled step belongs to: ``gsm8k-train-6389:3`` -> ``gsm8k-train-6389``."""
    return example.rsplit(":", 1)[0]


def cross_validated(
    records: Sequence[dict[str, Any]],
    folds: int = CV_FOLDS,
    seed: int = 0,
    l2: float | None = None,
) -> dict[str, float]:
    """Example -> out-of-fold P(harmless) of the ``learned`` reading on these results.

    Problems are dealt into ``folds`` folds (seeded shuffle); each fold's steps are scored by a
    model fitted on the other folds, its L2 strength chosen on those other folds alone
    (:func:`choose_l2`; ``l2`` fixes it instead). Empty when a fold's training part lacks
    either label (too few problems): a reading scored on some steps only would not compare
    with the others.
    """
    harmful = harmful_of(records)
    names, features = example_features(all_scores(records))
    return _out_of_fold(list(features), features, harmful, names, folds, seed, l2)


def auroc_interval(
    scores: Mapping[str, float],
    harmful: Mapping[str, bool],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """95% interval of a reading's AUROC, resampling whole problems (seeded bootstrap).

    ``None`` when no resample holds both a harmless and a harmful step.
    """
    groups: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for example, score in scores.items():
        groups[problem_of(example)].append((score, harmful[example]))
    keys = sorted(groups)
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        ok: list[float] = []
        bad: list[float] = []
        for _k in keys:
            for score, is_harmful in groups[keys[rng.randrange(len(keys))]]:
                (bad if is_harmful else ok).append(score)
        value = auroc(ok, bad)
        if value is not None:
            draws.append(value)
    return percentile_95(draws) if draws else None


def choose_threshold(
    harmless: Sequence[float], harmful: Sequence[float], keep: float = KEEP_HARMLESS
) -> float:
    """The threshold rejecting the most harmful steps while keeping >= ``keep`` harmless.

    Keeping means ``score >= threshold``; the highest such threshold is taken.
    """
    best = min(harmless) if harmless else 0.0
    for t in sorted(set(harmless) | set(harmful)):
        if sum(s >= t for s in harmless) / len(harmless) >= keep:
            best = t
    return best


def split(
    scores: Mapping[str, float], harmful: Mapping[str, bool]
) -> tuple[list[float], list[float]]:
    """(harmless scores, harmful scores)."""
    ok = [s for e, s in scores.items() if not harmful[e]]
    bad = [s for e, s in scores.items() if harmful[e]]
    return ok, bad


def report_scores(
    records: Sequence[dict[str, Any]],
    dev: Sequence[dict[str, Any]] | None,
    model: LogisticModel | None,
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """(scores of ``records``, scores of ``dev``) per reading, as the report reads them.

    With dev results, ``learned`` is ``model`` on ``records`` and out-of-fold on ``dev`` (its
    threshold is chosen on scores like those it will meet); without, it is out-of-fold on
    ``records``.
    """
    scores = all_scores(records, model)
    dev_scores = all_scores(dev, model) if dev else {}
    if dev and LEARNED in dev_scores:
        dev_scores[LEARNED] = cross_validated(dev)
    if not dev:
        out_of_fold = cross_validated(records)
        if out_of_fold:
            scores[LEARNED] = out_of_fold
    return scores, dev_scores


def summarise_labels(
    records: Sequence[dict[str, Any]],
    dev: Sequence[dict[str, Any]] | None = None,
    model: LogisticModel | None = None,
    computed: tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]] | None = None,
    learned_l2: float | None = None,
) -> dict[str, Any]:
    """``{"judges": {NAME: {...}}, "fit_on_dev": bool}`` for the labelled results ``records``.

    ``model``: the learned reading already fitted on ``dev`` (fitted here when not given),
    ``learned_l2`` the L2 strength its fit chose; ``computed``: :func:`report_scores` of the
    same arguments, when already at hand.
    """
    if model is None and dev:
        fitted = fit_tuned(dev)
        model, learned_l2 = fitted if fitted else (None, None)
    scores, dev_scores = computed or report_scores(records, dev, model)
    harm = harmful_of(records)
    judges: dict[str, Any] = {}
    costs = _costs(records)
    for variant, by_example in scores.items():
        ok, bad = split(by_example, harm)
        if not ok or not bad:
            continue
        if dev:
            if variant not in dev_scores:
                continue
            d_ok, d_bad = split(dev_scores[variant], harmful_of(dev))
            threshold: float | None = choose_threshold(d_ok, d_bad) if d_ok else None
        else:
            threshold = _default_threshold(variant)
        row: dict[str, Any] = {
            "variant": variant,
            "n": len(by_example),
            "harmful": len(bad),
            "auroc": auroc(ok, bad),
            "auroc_95": auroc_interval(by_example, harm),
        }
        if variant == LEARNED and not dev:
            row["cross_validated"] = CV_FOLDS
        if threshold is not None:
            row.update(
                threshold=threshold,
                kept_harmless=sum(s >= threshold for s in ok) / len(ok),
                rejected_harmful=sum(s < threshold for s in bad) / len(bad),
            )
        row.update(costs.get(variant, {}))
        judges[judge_name(variant)] = row
    learned_threshold = judges.get("learned", {}).get("threshold")
    if not dev:
        # these labels are the dev labels: the learned judge a user loads is fitted on all of
        # them, its threshold chosen on the out-of-fold scores
        fitted = fit_tuned(records)
        model, learned_l2 = fitted if fitted else (None, None)
        if LEARNED in scores:
            ok, bad = split(scores[LEARNED], harm)
            learned_threshold = choose_threshold(ok, bad) if ok else None
    notes = learned_notes(dev or records, records)
    if not dev and LEARNED not in scores and not any("not fitted" in n for n in notes):
        notes.append(
            "`learned` not read out of fold: a fold's training steps hold one label only "
            "(too few problems)"
        )
    return {
        "fit_on_dev": bool(dev),
        "keep_harmless_target": KEEP_HARMLESS,
        "features": list(model.names) if model else None,
        "learned_weights": model.as_dict() if model else None,
        "learned_threshold": learned_threshold if model else None,
        "learned_l2": learned_l2,
        "judges": judges,
        "notes": notes,
    }


def _default_threshold(variant: str) -> float | None:
    if variant in VARIANTS:
        return default_threshold(variant)
    return None


JUDGE_NAMES = tuple(dict.fromkeys(judge for judge, _reading, _check in VARIANTS.values()))
"""The judges whose costs a report lists: every judge a reading reads."""


def _costs(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Seconds and prefilled tokens per call of each reading, as the library would call it."""
    per_judge: dict[str, dict[str, float]] = {}
    for judge in JUDGE_NAMES:
        calls = [r for r in records if r["judge"] == judge]
        if calls:
            per_judge[judge] = {
                "seconds_per_call": _mean([c["seconds"] for c in calls]),
                "prefilled_per_call": _mean([c.get("prefilled_tokens") or 0 for c in calls]),
            }
    out: dict[str, dict[str, float]] = {}
    for variant, (judge, _reading, _check) in VARIANTS.items():
        if judge in per_judge:
            out[variant] = per_judge[judge]
    # in the library the draft's log-probabilities come with the step (no call): the
    # composed readings cost the likelihood call alone
    if "likelihood" in per_judge:
        out[DISAGREEMENT] = out[LEARNED] = per_judge["likelihood"]
    return out


def markdown(summary: dict[str, Any], title: str) -> str:
    """The summary table of a labelled judge benchmark."""
    how = (
        "thresholds and weights chosen on the dev labels (`--fit-on`), applied here"
        if summary["fit_on_dev"]
        else "thresholds: the library defaults"
    )
    lines = [
        f"# {title}",
        "",
        f"Real draft steps labelled by base-model rollouts; {how}. AUROC with a 95% interval "
        "from a bootstrap over problems (a problem's steps resampled together)"
        + (
            f"; `learned` read out of fold ({CV_FOLDS} folds of whole problems), "
            "never scoring a step its model was fitted on."
            if not summary["fit_on_dev"]
            else "."
        )
        + " `confidence` costs no call in the library (the draft's log-probabilities come with"
        " the step); its s/call here is the benchmark reading them again from the draft server;"
        " `disagreement` and `learned` cost the `likelihood` call.",
        "",
        "| judge | n | harmful | AUROC | AUROC 95% | threshold | harmless kept | harmful rejected "
        "| s/call | prefilled tok/call |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, row in sorted(summary["judges"].items(), key=lambda kv: -(kv[1]["auroc"] or 0)):
        t = row.get("threshold")
        ci = row.get("auroc_95")
        lines.append(
            f"| {name} | {row['n']} | {row['harmful']} | {row['auroc']:.3f} | "
            + (f"{ci[0]:.2f}-{ci[1]:.2f} | " if ci else "– | ")
            + (
                f"{t:.4g} | {row['kept_harmless']:.0%} | {row['rejected_harmful']:.0%} | "
                if t is not None
                else "– | – | – | "
            )
            + (
                f"{row['seconds_per_call']:.2f} | {row['prefilled_per_call']:.0f} |"
                if "seconds_per_call" in row
                else "– | – |"
            )
        )
    notes = summary.get("notes") or []
    if notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def plot_label_roc(
    records: Sequence[dict[str, Any]],
    path: Path,
    model: LogisticModel | None = None,
    scores: Mapping[str, Mapping[str, float]] | None = None,
) -> Path | None:
    """One ROC panel: harmless steps kept against harmful steps kept, per reading.

    ``scores``: the readings as the report reads them (:func:`report_scores`); composed from
    ``records`` and ``model`` when not given.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if scores is None:
        scores = all_scores(records, model)
    harm = harmful_of(records)
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    shown = [v for v in scores if "(min)" not in v and "reference" not in v]
    cmap = plt.get_cmap("tab20")
    for number, variant in enumerate(shown):
        ok, bad = split(scores[variant], harm)
        if not ok or not bad:
            continue
        xs, ys = zip(*roc_points(ok, bad), strict=True)
        bold = variant in (LEARNED, DEFAULT_VARIANT)
        ax.plot(
            xs,
            ys,
            label=f"{judge_name(variant)} ({auroc(ok, bad):.2f})",
            linewidth=2.4 if bold else 1.2,
            color=cmap(number % 20),
        )
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("harmful draft steps kept (FPR)")
    ax.set_ylabel("harmless draft steps kept (TPR)")
    ax.set_title("judges on real draft steps (AUROC in brackets)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_label_report(out: Path, dev: Path | None = None) -> list[Path]:
    """``summary.md``, ``summary.json`` and ``roc.png`` of a labelled judge-benchmark folder."""
    records = read_records(out / "results.jsonl")
    dev_records = read_records(dev / "results.jsonl") if dev else None
    fitted = fit_tuned(dev_records) if dev_records else None  # once, for table and plot
    model, l2 = fitted if fitted else (None, None)
    both = report_scores(records, dev_records, model)
    summary = summarise_labels(records, dev_records, model, both, l2)
    scores = both[0]
    summary["config_defaults"] = {
        k: SpecReasonConfig().as_dict()[k]
        for k in ("judge", "likelihood_threshold", "logprob_aggregate", "threshold", "score_method")
    }
    if dev:
        summary["fit_on"] = str(dev)
    steps = len({r["example"] for r in records})
    paths = [out / "summary.md", out / "summary.json"]
    paths[0].write_text(
        markdown(summary, f"Judges on {steps} labelled draft steps"), encoding="utf-8"
    )
    paths[1].write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    png = plot_label_roc(records, out / "roc.png", model, scores)
    return paths + ([png] if png else [])
