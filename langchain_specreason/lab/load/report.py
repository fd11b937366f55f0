"""``specreason bench load``'s report: per replica count its throughput, latencies, accuracy.

``summary.md``, ``summary.json`` and ``latency.png`` are made from ``results.jsonl`` (and
``meta.json``'s settings) alone, so a report can be rebuilt from a folder.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..bench.report import fmt, percentile, settings_lines
from ..shared.results import read_records

RESULTS = "results.jsonl"
SUMMARY_MD = "summary.md"
SUMMARY_JSON = "summary.json"
LATENCY_PLOT = "latency.png"

CPU_NOTE = (
    "Note: replicas add compute only when each has its own device. On a CPU machine all N "
    "replicas of a role share the same cores; on a 2-core machine they cannot add compute, "
    "so there the numbers show the router's overhead and how the requests are scheduled, "
    "not scale-out."
)

# -- summary ------------------------------------------------------------------------------


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or not den:
        return None
    return num / den


def summarise_replicas(replicas: int, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The numbers of one replica count's batch (pure)."""
    ok = [r for r in records if r.get("ok")]
    latencies = [float(r["latency_s"]) for r in ok]
    starts = [float(r["started_s"]) for r in records if r.get("started_s") is not None]
    ends = [float(r["ended_s"]) for r in records if r.get("ended_s") is not None]
    wall = max(ends) - min(starts) if starts and ends else None
    tokens = [r["completion_tokens"] for r in ok if r.get("completion_tokens") is not None]
    correct = sum(bool(r.get("correct")) for r in records)

    def pct(q: float) -> float | None:
        return percentile(latencies, q) if latencies else None

    rpm = _ratio(60.0 * len(ok), wall)
    return {
        "replicas": replicas,
        "requests": len(records),
        "ok": len(ok),
        "failures": len(records) - len(ok),
        "wall_s": wall,
        "requests_per_min": rpm,
        "completion_tokens": sum(tokens) if tokens else None,
        "tokens_per_s": _ratio(float(sum(tokens)), wall) if tokens else None,
        "latency_p50_s": pct(50),
        "latency_p90_s": pct(90),
        "latency_max_s": max(latencies) if latencies else None,
        "correct": correct,
        "accuracy": correct / len(records) if records else None,
        "steps_accepted": sum(r.get("steps_accepted") or 0 for r in ok),
        "steps_rewritten": sum(r.get("steps_rewritten") or 0 for r in ok),
        "errors": sorted(
            {
                f"{r['error']['type']}: {r['error']['message'][:120]}"
                for r in records
                if not r.get("ok") and r.get("error")
            }
        ),
    }


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per replica count (ascending) its numbers, and each count's speed-up over N=1 (pure).

    Speed-up: completed requests per minute of N over those of N=1 (``None`` without N=1).
    """
    by_n: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by_n.setdefault(int(r["replicas"]), []).append(r)
    rows = [summarise_replicas(n, by_n[n]) for n in sorted(by_n)]
    one = next((row for row in rows if row["replicas"] == 1), None)
    speedup = {
        str(row["replicas"]): _ratio(
            row["requests_per_min"], one["requests_per_min"] if one else None
        )
        for row in rows
        if row["replicas"] != 1
    }
    return {"rows": rows, "speedup_over_1": speedup if one else {}}


def render_markdown(summary: dict[str, Any], meta: dict[str, Any] | None = None) -> str:
    """``summary.md`` of :func:`summarise`'s numbers (and ``meta.json``'s settings, if any)."""
    out = ["# Load benchmark: ChatSpecReason through 1 vs N replicas per role", ""]
    lines = settings_lines(meta or {})
    out += [*lines, ""] if lines else []
    out += [
        "| replicas | requests | failures | wall s | requests/min | completion tok/s | "
        "p50 s | p90 s | max s | accuracy |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in summary["rows"]:
        out.append(
            f"| {r['replicas']} | {r['requests']} | {r['failures']} | "
            f"{fmt(r['wall_s'], '.1f')} | {fmt(r['requests_per_min'], '.2f')} | "
            f"{fmt(r['tokens_per_s'], '.1f')} | {fmt(r['latency_p50_s'], '.1f')} | "
            f"{fmt(r['latency_p90_s'], '.1f')} | {fmt(r['latency_max_s'], '.1f')} | "
            f"{r['correct']}/{r['requests']} |"
        )
    out.append("")
    speedup = summary.get("speedup_over_1") or {}
    if speedup:
        out.append(
            "Speed-up over 1 replica (requests/min of N over 1 replica's): "
            + ", ".join(f"N={n}: {fmt(v, '.2f', '×')}" for n, v in speedup.items())
            + "."
        )
    elif any(r["replicas"] != 1 for r in summary["rows"]):
        out.append("Speed-up over 1 replica: no 1-replica run in this folder to compare with.")
    out += [
        "",
        "Wall: first send to last answer of the batch. Requests/min and completion "
        "tok/s count the answered requests over that wall time; latencies (send to "
        "answer) are of the answered requests; a failed request counts as wrong.",
        "",
        CPU_NOTE,
    ]
    errors = [(r["replicas"], e) for r in summary["rows"] for e in r["errors"]]
    if errors:
        out += ["", "Errors:", ""] + [f"- {n} replica(s): {e}" for n, e in errors]
    return "\n".join(out) + "\n"


def pyplot() -> Any | None:
    """The pyplot of matplotlib on the Agg backend; ``None`` (and a warning) when it is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "warning: plots need matplotlib: pip install 'langchain-specreason[bench]'",
            file=sys.stderr,
        )
        return None
    return plt


def plot_latency(records: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Sorted latencies (empirical CDF over all requests sent), one line per replica count.

    ``None`` (and a warning) when matplotlib is missing.
    """
    plt = pyplot()
    if plt is None:
        return None
    by_n: dict[int, list[float]] = {}
    sent: dict[int, int] = {}
    for r in records:
        n = int(r["replicas"])
        sent[n] = sent.get(n, 0) + 1
        if r.get("ok"):
            by_n.setdefault(n, []).append(float(r["latency_s"]))
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for n in sorted(by_n):
        # share of all the requests sent: with failures the line stops short of 100 %
        values = sorted(by_n[n])
        share = [100 * (i + 1) / sent[n] for i in range(len(values))]
        ax.step(values, share, where="post", marker=".", label=f"{n} replica(s)")
    ax.set_xlabel("latency per request, send to answer (s)")
    ax.set_ylabel("requests answered within (%)")
    ax.set_ylim(0, 105)
    ax.set_xlim(left=0)
    ax.set_title("ChatSpecReason under load: latency by replica count")
    ax.grid(alpha=0.3)
    if by_n:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_load_report(out: Path) -> list[Path]:
    """Write ``summary.md``, ``summary.json`` and ``latency.png`` from ``results.jsonl``."""
    records = read_records(out / RESULTS)
    meta = read_meta(out)
    summary = summarise(records)
    md, js = out / SUMMARY_MD, out / SUMMARY_JSON
    md.write_text(render_markdown(summary, meta), encoding="utf-8")
    js.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    png = plot_latency(records, out / LATENCY_PLOT)
    return [md, js] + ([png] if png else [])


def read_meta(out: Path) -> dict[str, Any]:
    """``meta.json`` of folder ``out`` (``{}`` when there is none)."""
    path = out / "meta.json"
    return json.loads(path.read_text()) if path.is_file() else {}
