"""The judge benchmark's report: AUROC per corruption kind, decisions at a threshold, costs.

A *variant* is one way of reading a judge's results (``likelihood`` read as the ``mean`` or
the ``min`` token log-probability: its ``logprob_aggregate``; ``score`` read ``greedy`` or
``average``: its ``score_method``), or a cascade composed from two judges
(``arithmetic+likelihood``: rejected when ``arithmetic`` finds a wrong result, else the
likelihood score; it calls the base model only on the steps arithmetic lets through).

Costs (seconds, prefilled tokens) are taken from the first call after each problem's warm-up:
the correct example, whose cache state is the one a run sees (its siblings may reuse blocks
of it).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...config import SpecReasonConfig
from ...judges import REJECTED_BY_CHECK
from ..shared.results import META, read_records
from .corruption import KINDS
from .injection import INJECTIONS, SEPARATOR, plain_id

BLOCK = 32
"""The cache block of the CPU profiles (``--block-size 32``): the prefill bound's slack."""

VARIANTS: dict[str, tuple[str, str, str | None]] = {
    "score (greedy)": ("score", "greedy", None),
    "score (average)": ("score", "average", None),
    "score-reference (greedy)": ("score-reference", "greedy", None),
    "score-reference (average)": ("score-reference", "average", None),
    "likelihood (mean)": ("likelihood", "mean", None),
    "likelihood (min)": ("likelihood", "min", None),
    "likelihood (math)": ("likelihood", "math", None),
    "confidence (mean)": ("confidence", "mean", None),
    "confidence (min)": ("confidence", "min", None),
    "confidence (math)": ("confidence", "math", None),
    "arithmetic": ("arithmetic", "verdict", None),
    "arithmetic+likelihood (mean)": ("likelihood", "mean", "arithmetic"),
    "arithmetic+likelihood (min)": ("likelihood", "min", "arithmetic"),
    "arithmetic+likelihood (math)": ("likelihood", "math", "arithmetic"),
    "arithmetic+confidence (mean)": ("confidence", "mean", "arithmetic"),
    "consistency (numbers)": ("consistency", "numbers", None),
    "consistency (words)": ("consistency", "words", None),
}
"""Report rows: (judge, its reading, cheap check in front or None). The reading is the
``score_method`` (score judges), the ``logprob_aggregate`` (likelihood, confidence), or the
one score the judge gives (``verdict``; consistency's ``numbers``/``words``).

Result lines name the judge under ``judge``; folders written before issue 43 say ``measure``,
which :func:`~..shared.results.read_records` reads as ``judge``."""


DEFAULT_VARIANT = f"{SpecReasonConfig().judge} ({SpecReasonConfig().logprob_aggregate})"
"""The row of the library's default judge (drawn bold)."""


def default_reading(judge: str) -> str | None:
    """The reading :class:`~..config.SpecReasonConfig`'s defaults give ``judge``.

    ``score_method`` or ``logprob_aggregate``; ``None``: the judge has one reading.
    """
    cfg = SpecReasonConfig()
    if judge.startswith("score"):
        return cfg.score_method
    if judge in ("likelihood", "confidence"):
        return cfg.logprob_aggregate
    return None


def default_threshold(variant: str) -> float | None:
    """The threshold :class:`~..config.SpecReasonConfig`'s defaults give this variant."""
    cfg = SpecReasonConfig()
    judge, reading, _check = VARIANTS[variant]
    if judge == "arithmetic":
        return 0.5
    if reading != default_reading(judge):
        return None
    thresholds = {
        "score": cfg.threshold,
        "likelihood": cfg.likelihood_threshold,
        "confidence": cfg.confidence_threshold,
    }
    return thresholds.get(judge)  # score-reference: another wording, no default threshold


def auroc(right: Sequence[float], wrong: Sequence[float]) -> float | None:
    """P(a right step scores above a wrong one), ties counted half (Mann-Whitney)."""
    if not right or not wrong:
        return None
    # Mann-Whitney U from mid-ranks: O(n log n), so a bootstrap of it stays cheap
    pooled = sorted([(s, True) for s in right] + [(s, False) for s in wrong])
    rank_sum, i = 0.0, 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j][0] == pooled[i][0]:
            j += 1
        mid = (i + 1 + j) / 2  # ranks i+1 .. j share their mean
        rank_sum += mid * sum(1 for k in range(i, j) if pooled[k][1])
        i = j
    n_right = len(right)
    return (rank_sum - n_right * (n_right + 1) / 2) / (n_right * len(wrong))


def roc_points(right: Sequence[float], wrong: Sequence[float]) -> list[tuple[float, float]]:
    """(false-positive rate, true-positive rate) at every threshold, keeping ``>= t``."""
    points = [(0.0, 0.0)]
    for t in sorted(set(right) | set(wrong), reverse=True):
        points.append(
            (sum(w >= t for w in wrong) / len(wrong), sum(r >= t for r in right) / len(right))
        )
    return points


def variant_scores(records: Sequence[dict[str, Any]], variant: str) -> dict[str, float]:
    """Example id -> score of ``variant`` (examples every part of it has results for)."""
    judge, reading, check = VARIANTS[variant]
    by_judge: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        by_judge[r["judge"]][r["example"]] = r
    scores: dict[str, float] = {}
    for example, r in by_judge.get(judge, {}).items():
        if reading not in r["scores"]:  # a result line older than this reading
            continue
        value = float(r["scores"][reading])
        if check is not None:
            gate = by_judge.get(check, {}).get(example)
            if gate is None:
                continue
            if gate["scores"]["verdict"] == 0.0:
                value = REJECTED_BY_CHECK
        scores[example] = value
    return scores


def best_threshold(right: Sequence[float], wrong: Sequence[float]) -> float:
    """The threshold with the highest balanced accuracy (right kept, wrong rejected)."""
    best, best_t = -1.0, 0.0
    for t in sorted(set(right) | set(wrong)):
        acc = sum(r >= t for r in right) / len(right) + sum(w < t for w in wrong) / len(wrong)
        if acc > best:
            best, best_t = acc, t
    return best_t


def summarise(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per variant with results: AUROC per kind, decisions, costs."""
    kinds = {r["example"]: r["kind"] for r in records}
    first = [r for r in records if r["kind"] == "correct"]
    rows = []
    for variant, (judge, _reading, check) in VARIANTS.items():
        scores = variant_scores(records, variant)
        right = [s for e, s in scores.items() if kinds[e] == "correct"]
        wrong_by = {k: [s for e, s in scores.items() if kinds[e] == k] for k in KINDS}
        wrong = [s for k in KINDS for s in wrong_by[k]]
        if not right or not wrong:
            continue
        row: dict[str, Any] = {
            "variant": variant,
            "examples": len(scores),
            "auroc": {k: auroc(right, wrong_by[k]) for k in KINDS},
        }
        row["auroc"]["all"] = auroc(right, wrong)
        for name, t in (
            ("default", default_threshold(variant)),
            ("best", best_threshold(right, wrong)),
        ):
            if t is None:
                continue
            row[name] = {
                "threshold": t,
                "kept_right": sum(s >= t for s in right) / len(right),
                "rejected_wrong": {
                    k: sum(s < t for s in v) / len(v) for k, v in wrong_by.items() if v
                },
            }
        costs = [r for r in first if r["judge"] == judge and r["example"] in scores]
        if check is not None:  # the model judge runs only on steps the check let through
            let_through = [e for e in scores if scores[e] != REJECTED_BY_CHECK]
            row["model_calls_share"] = len(let_through) / len(scores)
        if costs and judge not in ("arithmetic",):
            row["seconds_per_call"] = _mean([c["seconds"] for c in costs])
            row["prefilled_per_call"] = _mean([c["prefilled_tokens"] for c in costs])
            row["step_tokens_per_call"] = _mean([c.get("step_tokens") or 0 for c in costs])
            row["within_bound"] = _mean([_within(c, judge) for c in costs])
        elif judge == "arithmetic":
            row["seconds_per_call"] = _mean(
                [r["seconds"] for r in first if r["judge"] == "arithmetic"]
            )
            row["prefilled_per_call"] = 0.0
        rows.append(row)
    return rows


def _within(call: dict[str, Any], judge: str) -> float:
    """1 when the call prefilled at most step + judge suffix + one cache block."""
    step = call.get("step_tokens") or 0
    suffix = 0
    if judge.startswith("score"):  # the judge's own turn after the step
        suffix = max(0, call["prompt_tokens"] - (call.get("cached_tokens") or 0) - step)
        suffix = min(suffix, 60)  # the turn is ~51 tokens; more than that is not suffix
    return float(call["prefilled_tokens"] <= step + suffix + BLOCK)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The summary table."""
    head = (
        "| judge | AUROC arithmetic | AUROC operand | AUROC operation | AUROC all "
        "| threshold | right kept | wrong rejected (a/o/op) | best threshold "
        "| right kept | wrong rejected (a/o/op) | s/call | prefilled tok/call "
        "| step tok/call | calls within the prefill bound |"
    )
    lines = [head, "|---|" + "--:|" * (head.count("|") - 2)]
    for row in rows:
        au = row["auroc"]
        cells = [row["variant"]] + [
            f"{au[k]:.3f}" if au[k] is not None else "–" for k in (*KINDS, "all")
        ]
        for name in ("default", "best"):
            d = row.get(name)
            if d is None:
                cells += ["–", "–", "–"]
                continue
            rej = "/".join(_pct(d["rejected_wrong"].get(k)) for k in KINDS)
            cells += [f"{d['threshold']:g}", _pct(d["kept_right"]), rej]
        cells += [
            f"{row['seconds_per_call']:.2f}" if "seconds_per_call" in row else "–",
            f"{row['prefilled_per_call']:.0f}" if "prefilled_per_call" in row else "–",
            f"{row['step_tokens_per_call']:.0f}" if "step_tokens_per_call" in row else "–",
            _pct(row.get("within_bound")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def injection_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant and injection: the score shift, and the decisions turned to accept.

    Each wrong step with the injection appended is paired with its plain version; the shift is
    their mean difference, the decisions are at the variant's default threshold.
    """
    kinds = {r["example"]: r["kind"] for r in records}
    rows = []
    for variant in VARIANTS:
        scores = variant_scores(records, variant)
        threshold = default_threshold(variant)
        for name in INJECTIONS:
            pairs = [
                (scores[plain_id(e)], s)
                for e, s in scores.items()
                if kinds[e].endswith(SEPARATOR + name) and plain_id(e) in scores
            ]
            if not pairs:
                continue
            flipped = (
                None
                if threshold is None
                else sum(plain < threshold <= forged for plain, forged in pairs)
            )
            rows.append(
                {
                    "variant": variant,
                    "injection": name,
                    "pairs": len(pairs),
                    "mean_shift": _mean([forged - plain for plain, forged in pairs]),
                    "threshold": threshold,
                    "flipped_to_accept": flipped,
                }
            )
    return rows


def injection_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The injection table (empty text when the run judged no injected step)."""
    if not rows:
        return ""
    lines = [
        "",
        "## Injected verdicts appended to wrong steps",
        "",
        "| judge | injection | pairs | mean score shift | threshold | rejected -> accepted |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for row in rows:
        flipped = (
            "–"
            if row["flipped_to_accept"] is None
            else f"{row['flipped_to_accept']}/{row['pairs']}"
        )
        threshold = "–" if row["threshold"] is None else f"{row['threshold']:g}"
        lines.append(
            f"| {row['variant']} | {row['injection']} | {row['pairs']} "
            f"| {row['mean_shift']:+.3f} | {threshold} | {flipped} |"
        )
    return "\n".join(lines) + "\n"


def plot_roc(records: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """ROC curves, one panel per corruption kind (None when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    kinds = {r["example"]: r["kind"] for r in records}
    fig, axes = plt.subplots(1, len(KINDS), figsize=(5 * len(KINDS), 4.6), sharey=True)
    shown = [v for v in VARIANTS if "(min)" not in v and "(average)" not in v]
    colours = [plt.get_cmap("tab10")(i) for i in range(10)]
    for ax, kind in zip(axes, KINDS, strict=True):
        for number, variant in enumerate(shown):
            scores = variant_scores(records, variant)
            right = [s for e, s in scores.items() if kinds[e] == "correct"]
            wrong = [s for e, s in scores.items() if kinds[e] == kind]
            if not right or not wrong:
                continue
            xs, ys = zip(*roc_points(right, wrong), strict=True)
            default = variant == DEFAULT_VARIANT
            ax.plot(
                xs,
                ys,
                label=f"{variant} ({auroc(right, wrong):.2f})" + (" - default" if default else ""),
                linewidth=2.6 if default else 1.3,
                color=colours[number % len(colours)],
                linestyle="-" if number < len(colours) else "--",
                zorder=3 if default else 2,
            )
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"right vs {kind} errors (AUROC in brackets)")
        ax.set_xlabel("wrong steps kept (FPR)")
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("right steps kept (TPR)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_judge_report(out: Path) -> list[Path]:
    """Write ``summary.md``, ``summary.json`` and ``roc.png`` of a judge-benchmark folder.

    With injected examples (``--inject``), also ``injections.json``. A folder made with
    ``--numbers words`` says so in the title.
    """
    records = read_records(out / "results.jsonl")
    rows = summarise(records)
    injections = injection_rows(records)
    problems = len({r["problem_id"] for r in records})
    meta_path = out / META
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    words = (meta.get("settings") or {}).get("numbers") == "words"
    text = (
        f"# Judge benchmark, synthetic{', numbers spelled out in words' if words else ''} "
        f"({problems} GSM8K train problems, {len({r['example'] for r in records})} examples)\n\n"
        "Synthetic: gold steps against copies with one number or operator corrupted, "
        "what the arithmetic check and the `math` reading were built to catch"
        + ("; the judged step states its numbers and operators in words" if words else "")
        + ". For the draft's own mistakes see `bench judges --labels`.\n\n"
        + markdown(rows)
        + injection_markdown(injections)
    )
    paths = [out / "summary.md", out / "summary.json"]
    paths[0].write_text(text, encoding="utf-8")
    paths[1].write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if injections:
        paths.append(out / "injections.json")
        paths[2].write_text(json.dumps(injections, indent=1) + "\n", encoding="utf-8")
    png = plot_roc(records, out / "roc.png")
    return paths + ([png] if png else [])
