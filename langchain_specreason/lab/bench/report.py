"""``summary.md``, ``summary.json`` and the plots, regenerated from ``results.jsonl``.

One row per run (mode at a threshold and score method), the shape of the paper's tables:
accuracy; mean, p50 and p90 latency; speed-up against ``base`` (ratio of mean latencies over
the problems both solved); the share of the trace written by the draft; the mean share of
time spent outside server calls; the base server's prefix-cache hit rate (its own counters);
judge prefill tokens per judge call, against its floor (:mod:`.prefill`). Plots: accuracy
against mean latency, and where the time goes per run.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InputError
from ..shared.modes import DEFAULT_SD_VARIANT, Run
from ..shared.results import META, RESULTS, read_records
from ..shared.stats import mcnemar, paired_ratio, wilson
from .rounds import rounds_markdown

SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"
ACCURACY_PLOT = "accuracy_latency.png"
TIME_PLOT = "time_split.png"
TIME_PARTS = ("draft_s", "judge_s", "rewrite_s", "answer_s", "overhead_s")
"""Where a problem's wall time went. Baselines: the whole reply is ``draft`` or ``answer``."""


@dataclass(frozen=True)
class Row:
    """The summary of one run over its problems."""

    run: Run
    problems: int
    correct: int
    mean_s: float
    p50_s: float
    p90_s: float
    speedup: float | None
    draft_share: float | None
    overhead_share: float | None
    cache_hit_rate: float | None
    judge_prefill_per_call: float | None
    errors: int
    judge_floor_per_call: float | None = None
    """The fewest prompt tokens a judge call could compute (new step + judge suffix, see
    :mod:`.prefill`), over the problems that recorded it."""
    base_generated: float | None = None
    """Mean tokens the base server generated per problem (its own counters)."""
    base_prefilled: float | None = None
    """Mean prompt tokens the base server computed per problem (prompt minus cache hits)."""
    time_split: dict[str, float] = field(default_factory=dict)
    draft_hidden_s: float | None = None
    """Mean draft seconds per problem that ran behind the judge (lookahead; not on the clock)."""

    @property
    def accuracy(self) -> float:
        """Share of problems answered correctly."""
        return self.correct / self.problems if self.problems else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (for ``summary.json``)."""
        out = asdict(self)
        out.update(run=asdict(self.run), label=self.run.label, accuracy=self.accuracy)
        return out


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation, as numpy's default."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else math.nan


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _cache_hit_rate(records: Sequence[dict[str, Any]]) -> float | None:
    deltas = [(r.get("server") or {}).get("base") for r in records]
    known = [d for d in deltas if d]
    return _ratio(
        sum(d["prefix_cache_hits"] for d in known), sum(d["prefix_cache_queries"] for d in known)
    )


def _base_compute(records: Sequence[dict[str, Any]]) -> tuple[float | None, float | None]:
    known = [
        d
        for d in ((r.get("server") or {}).get("base") for r in records)
        if d and "generation_tokens" in d
    ]
    if not known:
        return None, None
    return (
        _mean(d["generation_tokens"] for d in known),
        _mean(d["prompt_tokens"] - d["prefix_cache_hits"] for d in known),
    )


def _judge_floor(records: Sequence[dict[str, Any]]) -> float | None:
    known = [r for r in records if r.get("judge_floor_tokens") is not None and r["judge_calls"]]
    return _ratio(sum(r["judge_floor_tokens"] for r in known), sum(r["judge_calls"] for r in known))


def summarize_run(
    run: Run, records: Sequence[dict[str, Any]], base_latency: dict[str, float]
) -> Row:
    """The row of one run; ``base_latency`` maps problem id to the ``base`` run's latency."""
    latencies = [float(r["latency_s"]) for r in records]
    common = [r for r in records if str(r["problem_id"]) in base_latency]
    speedup = None
    if common:
        speedup = _ratio(
            _mean(base_latency[str(r["problem_id"])] for r in common),
            _mean(float(r["latency_s"]) for r in common),
        )
    steps = sum(r["steps_accepted"] + r["steps_rewritten"] + r["steps_base"] for r in records)
    generated, prefilled = _base_compute(records)
    return Row(
        run=run,
        problems=len(records),
        correct=sum(bool(r["correct"]) for r in records),
        mean_s=_mean(latencies),
        p50_s=percentile(latencies, 50),
        p90_s=percentile(latencies, 90),
        speedup=speedup,
        draft_share=_ratio(sum(r["steps_accepted"] for r in records), steps),
        overhead_share=_mean(
            float(r["overhead_s"] or 0.0) / float(r["latency_s"]) for r in records if r["latency_s"]
        )
        if records
        else None,
        cache_hit_rate=_cache_hit_rate(records),
        judge_prefill_per_call=_ratio(
            sum(r["judge_prefill_tokens"] for r in records), sum(r["judge_calls"] for r in records)
        ),
        errors=sum(r.get("error") is not None for r in records),
        judge_floor_per_call=_judge_floor(records),
        base_generated=generated,
        base_prefilled=prefilled,
        time_split={part: _mean(float(r.get(part) or 0.0) for r in records) for part in TIME_PARTS},
        draft_hidden_s=_mean(float(r.get("draft_hidden_s") or 0.0) for r in records),
    )


def summarize(results: Sequence[dict[str, Any]]) -> list[Row]:
    """One row per run, in table order (modes in :data:`..shared.modes.MODES`, then threshold)."""
    by_run: dict[Run, list[dict[str, Any]]] = {}
    for record in results:
        by_run.setdefault(Run.of(record), []).append(record)
    base_latency = {
        str(r["problem_id"]): float(r["latency_s"]) for r in by_run.get(Run("base"), [])
    }
    return [
        summarize_run(run, by_run[run], base_latency) for run in sorted(by_run, key=Run.sort_key)
    ]


def fmt(value: float | None, spec: str, suffix: str = "") -> str:
    """``value`` formatted with ``spec`` (and ``suffix``); ``–`` for none or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:{spec}}{suffix}"


def settings_lines(meta: dict[str, Any]) -> list[str]:
    """``meta.json``'s settings, the served models, the machine and the sessions, as list items."""
    settings = meta.get("settings") or {}
    lines = [f"- {k}: `{v}`" for k, v in settings.items()]
    sessions = meta.get("sessions") or []
    models: dict[str, set[str]] = {}
    for session in sessions:
        for group in session.get("servers") or []:
            for role in ("draft", "base"):
                for m in (group.get(role) or {}).get("models") or []:
                    if m.get("id"):
                        name = m["id"] + (
                            f" ({group['variant']})"
                            if group.get("variant") and role == "base"
                            else ""
                        )
                        models.setdefault(role, set()).add(name)
    for role, names in models.items():
        lines.append(f"- {role} model: {', '.join(sorted(names))}")
    if sessions:
        info = sessions[-1].get("machine") or {}
        lines.append(
            f"- machine: {info.get('cpu_count')} CPUs ({info.get('usable_cpus')} "
            f"usable), {info.get('platform')}"
        )
        lines.append(f"- sessions: {len(sessions)}")
    return lines


def render_markdown(rows: Sequence[Row], meta: dict[str, Any]) -> str:
    """The summary as Markdown: settings, the main table, the time split."""
    dataset = (meta.get("settings") or {}).get("dataset", "?")
    out = [f"# Benchmark: {dataset}", "", *settings_lines(meta), ""]
    out += [
        "| run | problems | accuracy | mean s | p50 s | p90 s | speed-up vs base | "
        "steps by draft | overhead share | base prefix-cache hit | judge prefill tok/call | "
        "judge floor tok/call | base tok generated | base tok prefilled |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        out.append(
            f"| {r.run.label} | {r.problems} | {r.accuracy:.1%} ({r.correct}) | "
            f"{fmt(r.mean_s, '.2f')} | {fmt(r.p50_s, '.2f')} | {fmt(r.p90_s, '.2f')} | "
            f"{fmt(r.speedup, '.2f', '×')} | {fmt(r.draft_share, '.0%')} | "
            f"{fmt(r.overhead_share, '.1%')} | {fmt(r.cache_hit_rate, '.0%')} | "
            f"{fmt(r.judge_prefill_per_call, '.0f')} | {fmt(r.judge_floor_per_call, '.0f')} | "
            f"{fmt(r.base_generated, '.0f')} | "
            f"{fmt(r.base_prefilled, '.0f')} |"
        )
    out += [
        "",
        "Mean seconds per problem by where they went:",
        "",
        "| run | draft | judge | rewrite | answer | overhead | draft behind judge |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        parts = " | ".join(fmt(r.time_split.get(p), ".2f") for p in TIME_PARTS)
        out.append(f"| {r.run.label} | {parts} | {fmt(r.draft_hidden_s, '.2f')} |")
    errors = sum(r.errors for r in rows)
    out += [
        "",
        "Speed-up: mean latency of `base` over the mean latency of the run, on the "
        "problems both answered. Steps by draft: accepted draft steps over all steps. "
        "Overhead: time outside server calls. Draft behind judge: draft seconds that ran "
        "while the base model judged the previous step (lookahead), not counted in the "
        "draft column. Judge floor: the fewest prompt tokens a judge call could compute, its "
        "new step and the judge's suffix (the rest could be cached); measured per call with "
        "the base server's `/tokenize`. Base tokens generated / prefilled: per "
        "problem, from the base server's own counters (its compute). Single-model runs "
        "count their whole reply as draft (`draft`) or answer (`base`, `sd`) time.",
    ]
    if errors:
        out += ["", f"{errors} problem(s) could not run (prompt too long); they count as wrong."]
    return "\n".join(out) + "\n"


def _colors(rows: Sequence[Row]) -> list[str]:
    palette = {
        "base": "tab:gray",
        "draft": "tab:orange",
        "specreason": "tab:blue",
        "sd": "tab:green",
        "specreason+sd": "tab:purple",
        "arbitrage": "tab:red",
        "oracle": "tab:brown",
    }
    return [palette.get(r.run.mode, "tab:red") for r in rows]


LABEL_LINE_PX = 10.0
"""Height of one line of scatter-plot label text, in offset points."""


def label_levels(
    points: Sequence[tuple[float, float, float]], line: float = LABEL_LINE_PX
) -> list[int]:
    """How many lines up each label goes so that no two labels overlap (pure; for the scatter).

    ``points`` are ``(x, y, width)``: a label starts at ``x`` and spans ``width`` (x units);
    its text sits at height ``y + line * level`` (y in the same units as ``line``, e.g. pixels).
    Each label takes the lowest level at which no earlier label is less than a line away
    vertically while overlapping it horizontally.
    """
    placed: list[tuple[float, float, float]] = []  # x, width, text height
    levels = []
    for x, y, width in points:
        level = 0
        while any(
            abs(y + line * level - h) < line and x < px + pw and px < x + width
            for px, pw, h in placed
        ):
            level += 1
        placed.append((x, width, y + line * level))
        levels.append(level)
    return levels


def plot_label(row: Row, most: int) -> str:
    """A run's label on the plots: its problem count too when it ran on fewer than the others."""
    return row.run.label if row.problems == most else f"{row.run.label} (n={row.problems})"


def plot_accuracy_latency(rows: Sequence[Row], path: Path, title: str) -> None:
    """Scatter of accuracy against mean latency, one labelled point per run."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    ax.scatter([r.mean_s for r in rows], [100 * r.accuracy for r in rows], c=_colors(rows))
    finite = [r.mean_s for r in rows if not math.isnan(r.mean_s)]
    xmax = 1.3 * max(finite, default=1.0) or 1.0  # room for the labels
    ax.set_xlim(0, xmax)
    ax.set_ylim(-5, 105)
    most = max((r.problems for r in rows), default=0)
    ordered = sorted(rows, key=lambda r: (r.accuracy, r.mean_s))
    labels = [plot_label(r, most) for r in ordered]
    # in pixels of the ~600 x 370 px axes: a fontsize-8 character is ~5 px wide, a line 10 px
    char = xmax / 600 * 5
    px_per_point = 370 / 110
    levels = label_levels(
        [
            (r.mean_s, px_per_point * 100 * r.accuracy, char * (len(text) + 2))
            for r, text in zip(ordered, labels, strict=True)
        ]
    )
    for r, text, level in zip(ordered, labels, levels, strict=True):
        ax.annotate(
            text,
            (r.mean_s, 100 * r.accuracy),
            textcoords="offset points",
            xytext=(5, 4 + LABEL_LINE_PX * level),
            fontsize=8,
        )
    ax.set_xlabel("mean latency per problem (s)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_time_split(rows: Sequence[Row], path: Path, title: str) -> None:
    """Stacked bars of mean seconds per problem: draft, judge, rewrite, answer, overhead."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(rows) + 2), 4.5), dpi=120)
    most = max((r.problems for r in rows), default=0)
    labels = [plot_label(r, most) for r in rows]
    bottom = [0.0] * len(rows)
    for part in TIME_PARTS:
        heights = [r.time_split.get(part) or 0.0 for r in rows]
        heights = [0.0 if math.isnan(h) else h for h in heights]
        ax.bar(labels, heights, bottom=bottom, label=part.removesuffix("_s"))
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_ylabel("mean seconds per problem")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_plots(rows: Sequence[Row], out: Path, dataset: str) -> list[Path]:
    """Both PNG plots (Agg backend); none, with a warning, when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print(
            "warning: plots need matplotlib: pip install 'langchain-specreason[bench]'",
            file=sys.stderr,
        )
        return []
    matplotlib.use("Agg")
    accuracy, split = out / ACCURACY_PLOT, out / TIME_PLOT
    plot_accuracy_latency(rows, accuracy, f"{dataset}: accuracy vs latency")
    plot_time_split(rows, split, f"{dataset}: where the time goes")
    return [accuracy, split]


def paired(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per run: accuracy with its 95% interval, and paired comparisons with base and sd.

    Against ``base`` and ``sd``, on the problems both answered: the speed-up (their latency
    over this run's) with a paired bootstrap 95% interval, and the accuracy difference with
    McNemar's exact p.
    """
    by_run: dict[Run, dict[str, dict[str, Any]]] = {}
    for record in results:
        by_run.setdefault(Run.of(record), {})[str(record["problem_id"])] = record
    refs = {
        "base": by_run.get(Run("base")),
        "sd": by_run.get(Run("sd", variant=DEFAULT_SD_VARIANT)),
    }
    out = []
    for run in sorted(by_run, key=Run.sort_key):
        mine = by_run[run]
        k = sum(bool(r["correct"]) for r in mine.values())
        low, high = wilson(k, len(mine))
        row: dict[str, Any] = {
            "run": run.label,
            "problems": len(mine),
            "correct": k,
            "accuracy": k / len(mine),
            "accuracy_95": [low, high],
        }
        for name, ref in refs.items():
            if ref is None or ref is mine:
                continue
            common = sorted(set(mine) & set(ref))
            if not common:
                continue
            ratio = paired_ratio(
                [float(mine[p]["latency_s"]) for p in common],
                [float(ref[p]["latency_s"]) for p in common],
            )
            only_me, only_ref, p = mcnemar(
                [bool(mine[q]["correct"]) for q in common],
                [bool(ref[q]["correct"]) for q in common],
            )
            row[f"vs_{name}"] = {
                "problems": len(common),
                "speedup": ratio.ratio,
                "speedup_95": [ratio.low, ratio.high],
                "right_only_here": only_me,
                f"right_only_{name}": only_ref,
                "mcnemar_p": p,
            }
        out.append(row)
    return out


def session_of(record: dict[str, Any], starts: Sequence[str]) -> int | None:
    """Index of the session a result was written in (``starts``: the sessions' ``started_at``).

    By the result's ``finished_at``: the last session that started before it.
    """
    done = record.get("finished_at")
    if not done:
        return None
    # ISO 8601 times in UTC compare as strings
    found = [i for i, start in enumerate(starts) if start and start <= str(done)]
    return found[-1] if found else None


def split_problems(records: Sequence[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """Problems whose results were written in more than one session (their pairs mix drift)."""
    starts = [str(s.get("started_at") or "") for s in meta.get("sessions") or []]
    seen: dict[str, set[int | None]] = {}
    for record in records:
        seen.setdefault(str(record["problem_id"]), set()).add(session_of(record, starts))
    return sorted(pid for pid, found in seen.items() if len(found) > 1)


def paired_markdown(
    rows: Sequence[dict[str, Any]],
    meta: dict[str, Any],
    records: Sequence[dict[str, Any]] = (),
) -> str:
    """The paired table; says so when the results span several sessions.

    With ``records``, it also says how many problems have their modes in different sessions:
    the others' pairs were timed in one session each (problem-major order), so their ratios
    do not carry drift between sessions even when the folder spans several.
    """
    lines = ["", "## Paired comparisons (95% intervals)", ""]
    sessions = len(meta.get("sessions") or [])
    if sessions > 1:
        where = ""
        if records:
            split = split_problems(records, meta)
            named = ", ".join(split[:10]) + (", ..." if len(split) > 10 else "")
            where = f" Problems with modes in different sessions: {len(split)}"
            where += f" ({named})" if split else ""
            where += "; every other problem's modes ran in one session."
        lines += [
            f"**These results come from {sessions} sessions**: a ratio between runs of "
            f"different sessions includes the host's drift between them.{where}",
            "",
        ]
    lines += [
        "| run | accuracy [95%] | speed-up vs base [95%] | McNemar p vs base "
        "| speed-up vs sd [95%] | McNemar p vs sd |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        low, high = row["accuracy_95"]
        cells = [row["run"], f"{row['correct']}/{row['problems']} [{low:.0%}, {high:.0%}]"]
        for name in ("base", "sd"):
            vs = row.get(f"vs_{name}")
            if vs is None:
                cells += ["–", "–"]
                continue
            a, b = vs["speedup_95"]
            cells += [f"{vs['speedup']:.2f}× [{a:.2f}, {b:.2f}]", f"{vs['mcnemar_p']:.3g}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Speed-up: the reference's total latency over this run's on the problems "
        "both answered; interval: paired bootstrap over problems (2,000 resamples). "
        "McNemar: exact two-sided p of the accuracy difference (discordant problems).",
    ]
    return "\n".join(lines) + "\n"


def write_report(out: Path) -> list[Path]:
    """Regenerate the summary and the plots of folder ``out`` from its ``results.jsonl``."""
    results = read_records(out / RESULTS)
    if not results:
        raise InputError(f"no results in {out / RESULTS}; run the benchmark first")
    meta_path = out / META
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    rows = summarize(results)
    md, js = out / SUMMARY_MD, out / SUMMARY_JSON
    pairs = paired(results)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for record in results:
        by_run.setdefault(Run.of(record).label, []).append(record)
    md.write_text(
        render_markdown(rows, meta)
        + paired_markdown(pairs, meta, results)
        + rounds_markdown(by_run),
        encoding="utf-8",
    )
    js.write_text(json.dumps([r.as_dict() for r in rows], indent=2) + "\n", encoding="utf-8")
    (out / "paired.json").write_text(json.dumps(pairs, indent=2) + "\n", encoding="utf-8")
    dataset = str((meta.get("settings") or {}).get("dataset", out.name))
    return [md, js, *write_plots(rows, out, dataset)]
