"""The report of ``bench load --modes``: one row per (mode, load) cell, against base at that load.

Made from ``results.jsonl`` and ``cells.jsonl`` (and ``meta.json``'s settings) alone, so it can
be rebuilt from a folder. Per cell: answers right, McNemar against ``base`` at the same load,
latency p50/p90, aggregate completion tokens/s, goodput (right answers per minute), the paired
bootstrap speed-up over ``base`` on the same problems, and the servers' own counters and
gauges, and the cores each server ran on (``bench load --cores``: a column of the table when
they differ between cells, one line under it when not). ``latency_goodput.png``: p50 latency
and goodput against load, one line per mode.

With a probe's ``summary.json`` (``bench load --probe``), the ``sd`` rows carry the probe's
predicted speed-up over ``base`` at their load (``t_b(N) / t_s(N)``, its decode steps:
:func:`..probe.report.load_sd_prediction`), shown beside the measured one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..bench.report import fmt, settings_lines
from ..probe.report import load_sd_prediction
from ..shared.results import read_records
from ..shared.stats import mcnemar, paired_ratio, wilson
from .modes import LOAD_MODES, REFERENCE, Cell
from .report import RESULTS, SUMMARY_JSON, SUMMARY_MD, pyplot, read_meta, summarise_replicas

SD = "sd"
"""The mode a probe predicts (token speculative decoding in the base server)."""
CELLS = "cells.jsonl"
LOAD_PLOT = "latency_goodput.png"


def _order(cell: Cell) -> tuple[int, int, str]:
    modes = list(LOAD_MODES)
    return (
        cell.concurrency,
        modes.index(cell.mode) if cell.mode in modes else len(modes),
        cell.mode,
    )


def versus(
    mine: Sequence[Mapping[str, Any]], ref: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """A cell against the reference cell at the same load, problem by problem.

    McNemar over the problems both sent (a failure counts as wrong); the speed-up (the
    reference's latency over this cell's, summed) with its paired bootstrap 95% interval over
    the problems both answered; ``None`` when they share no problem.
    """
    a = {str(r["problem_id"]): r for r in mine}
    b = {str(r["problem_id"]): r for r in ref}
    common = sorted(set(a) & set(b))
    if not common:
        return None
    only_me, only_ref, p = mcnemar(
        [bool(a[q].get("correct")) for q in common], [bool(b[q].get("correct")) for q in common]
    )
    out: dict[str, Any] = {
        "problems": len(common),
        "right_only_here": only_me,
        f"right_only_{REFERENCE}": only_ref,
        "mcnemar_p": p,
        "speedup": None,
        "speedup_95": None,
    }
    answered = [q for q in common if a[q].get("ok") and b[q].get("ok")]
    if answered:
        ratio = paired_ratio(
            [float(a[q]["latency_s"]) for q in answered],
            [float(b[q]["latency_s"]) for q in answered],
        )
        out.update(speedup=ratio.ratio, speedup_95=[ratio.low, ratio.high], answered=len(answered))
    return out


def summarise_cells(
    records: Sequence[Mapping[str, Any]],
    cell_lines: Sequence[Mapping[str, Any]] = (),
    probe: Mapping[int, float] | None = None,
) -> dict[str, Any]:
    """Each cell's numbers (rows by load, then mode), from its request lines and its cell line.

    ``cell_lines``: the last line of each cell gives its servers' counters and gauges;
    ``probe``: load -> a probe's predicted ``sd`` speed-up over ``base``, put on each ``sd``
    row as ``probe_sd_speedup`` (``None`` at a load the probe did not measure).
    """
    by_cell: dict[Cell, list[Mapping[str, Any]]] = {}
    for r in records:
        by_cell.setdefault(Cell.of(r), []).append(r)
    servers = {Cell.of(line): line for line in cell_lines}
    rows = []
    for cell in sorted(by_cell, key=_order):
        mine = by_cell[cell]
        row = summarise_replicas(0, [dict(r) for r in mine])
        del row["replicas"], row["requests_per_min"]
        low, high = wilson(row["correct"], row["requests"])
        wall = row["wall_s"]
        row = {
            "mode": cell.mode,
            "concurrency": cell.concurrency,
            "run": next((r.get("run") for r in mine if r.get("run")), cell.mode),
            **row,
            "accuracy_95": [low, high],
            "goodput_per_min": 60.0 * row["correct"] / wall if wall else None,
        }
        ref = by_cell.get(Cell(REFERENCE, cell.concurrency))
        if ref is not None and cell.mode != REFERENCE:
            row[f"vs_{REFERENCE}"] = versus(mine, ref)
            ref_wall = summarise_replicas(0, [dict(r) for r in ref])["wall_s"]
            if row[f"vs_{REFERENCE}"] is not None and wall and ref_wall:
                row[f"vs_{REFERENCE}"]["wall_ratio"] = ref_wall / wall
        line = servers.get(cell)
        row["server"] = (line or {}).get("server")
        row["gauges"] = (line or {}).get("gauges")
        row["prefix_cache_reset"] = (line or {}).get("prefix_cache_reset")
        row["cores"] = (line or {}).get("cores") or next(
            (r["cores"] for r in mine if r.get("cores")), None
        )
        if probe is not None and cell.mode == SD:
            row["probe_sd_speedup"] = probe.get(cell.concurrency)
        rows.append(row)
    return {
        "reference": REFERENCE,
        "modes": list(
            dict.fromkeys(r["mode"] for r in sorted(rows, key=lambda r: _order(Cell(r["mode"], 0))))
        ),
        "loads": sorted({r["concurrency"] for r in rows}),
        "rows": rows,
        **({"probe_sd": {str(n): x for n, x in sorted(probe.items())}} if probe else {}),
    }


def _delta(row: Mapping[str, Any], role: str, key: str) -> float | None:
    change = (row.get("server") or {}).get(role)
    return None if not change else change["delta"].get(key)


def _gauge(row: Mapping[str, Any], role: str, key: str) -> str:
    got = (row.get("gauges") or {}).get(role)
    if not got:
        return "–"
    return f"{got[key + '_mean']:.1f} / {got[key + '_max']:.0f}"


def cores_text(cores: Mapping[str, str | None] | None) -> str:
    """``draft 0, base 1`` or ``base 0-1`` (``?``: a server's cores not known; ``–``: none)."""
    if not cores:
        return "–"
    return ", ".join(f"{role} {got or '?'}" for role, got in cores.items())


def render_modes_markdown(summary: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> str:
    """``summary.md`` of :func:`summarise_cells`'s numbers."""
    out = ["# Load benchmark: modes across load", ""]
    lines = settings_lines(dict(meta or {}))
    out += [*lines, ""] if lines else []
    ref = summary.get("reference", REFERENCE)
    kinds = list(dict.fromkeys(cores_text(r.get("cores")) for r in summary["rows"]))
    by_cell = len(kinds) > 1  # the cores differ between cells: a column says which
    out += [
        f"| load | mode | {'cores | ' if by_cell else ''}right [95%] | McNemar p vs {ref} | "
        "p50 s | p90 s | wall s | "
        f"completion tok/s | goodput right/min | speed-up vs {ref} [95%] | wall vs {ref} | "
        "failures |",
        f"|--:|---|{'---|' if by_cell else ''}--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in summary["rows"]:
        low, high = r["accuracy_95"]
        vs = r.get(f"vs_{ref}") or {}
        speed = "–"
        if vs.get("speedup") is not None:
            a, b = vs["speedup_95"]
            speed = f"{vs['speedup']:.2f}× [{a:.2f}, {b:.2f}]"
        out.append(
            f"| {r['concurrency']} | {r['mode']} | "
            f"{cores_text(r.get('cores')) + ' | ' if by_cell else ''}"
            f"{r['correct']}/{r['requests']} "
            f"[{low:.0%}, {high:.0%}] | {fmt(vs.get('mcnemar_p'), '.3g')} | "
            f"{fmt(r['latency_p50_s'], '.1f')} | {fmt(r['latency_p90_s'], '.1f')} | "
            f"{fmt(r['wall_s'], '.1f')} | {fmt(r['tokens_per_s'], '.1f')} | "
            f"{fmt(r['goodput_per_min'], '.2f')} | {speed} | "
            f"{fmt(vs.get('wall_ratio'), '.2f', '×')} | {r['failures']} |"
        )
    unknown = " (`?`: not known)" if any("?" in k for k in kinds) else ""
    if by_cell:
        out += ["", f"Cores: the CPU cores each server of the cell's block ran on{unknown}."]
    elif kinds and kinds[0] != "–":
        out += ["", f"Every cell's servers ran on the same cores: {kinds[0]}{unknown}."]
    out += [
        "",
        "The servers' own counters over each cell (`/metrics` before and after; their "
        "difference) and their requests running / waiting (mean / most of the samples):",
        "",
        "| load | mode | base prompt tok | base generated tok | spec accepted / drafted tok | "
        "acceptance | draft generated tok | base running | base waiting | draft running |",
        "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in summary["rows"]:
        accepted, drafted = (
            _delta(r, "base", "spec_accepted_tokens"),
            _delta(r, "base", "spec_draft_tokens"),
        )
        spec = "–" if drafted is None else f"{fmt(accepted, '.0f')} / {drafted:.0f}"
        acceptance = ((r.get("server") or {}).get("base") or {}).get("acceptance")
        out.append(
            f"| {r['concurrency']} | {r['mode']} | "
            f"{fmt(_delta(r, 'base', 'prompt_tokens'), '.0f')} | "
            f"{fmt(_delta(r, 'base', 'generation_tokens'), '.0f')} | {spec} | "
            f"{fmt(acceptance, '.0%')} | {fmt(_delta(r, 'draft', 'generation_tokens'), '.0f')} | "
            f"{_gauge(r, 'base', 'running')} | {_gauge(r, 'base', 'waiting')} | "
            f"{_gauge(r, 'draft', 'running')} |"
        )
    out += [
        "",
        "A cell: one mode at one load (requests in flight at most), one request per problem, "
        "the same problems in every cell, the prefix caches emptied before it. Wall: first "
        "send to last answer. Completion tok/s: the answered requests' completion tokens "
        "(trace and answer) over the wall; goodput: right answers per minute of wall. "
        f"Latency: send to answer, answered requests. Speed-up vs {ref}: {ref}'s summed "
        "latency over the cell's on the problems both answered, paired bootstrap over "
        f"problems (2,000 resamples); wall vs {ref}: {ref}'s wall over the cell's. McNemar: "
        "exact two-sided p over the problems both sent (a failure counts as wrong). The "
        "counters and gauges are the servers' own, so another client of the same servers "
        "would show in them.",
    ]
    out += probe_lines(summary)
    errors = [(r, e) for r in summary["rows"] for e in r["errors"]]
    if errors:
        out += ["", "Errors:", ""] + [f"- {r['mode']} @ {r['concurrency']}: {e}" for r, e in errors]
    return "\n".join(out) + "\n"


def probe_lines(summary: Mapping[str, Any]) -> list[str]:
    """The probe's predicted ``sd`` speed-up beside each measured ``sd`` cell (none: ``[]``)."""
    rows = [r for r in summary["rows"] if "probe_sd_speedup" in r]
    if not rows:
        return []
    ref = summary.get("reference", REFERENCE)
    out = [
        "",
        f"`sd` against {ref} at each load, measured and as the probe predicts it (`specreason "
        "probe`'s decode steps, t_b(N) / t_s(N); it leaves out prefill and overhead):",
        "",
        f"| load | measured speed-up vs {ref} [95%] | wall vs {ref} | probe predicts | "
        "measured / predicted |",
        "|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        vs = r.get(f"vs_{ref}") or {}
        measured, predicted = vs.get("speedup"), r["probe_sd_speedup"]
        cell = "–"
        if measured is not None:
            low, high = vs["speedup_95"]
            cell = f"{measured:.2f}× [{low:.2f}, {high:.2f}]"
        ratio = measured / predicted if measured is not None and predicted else None
        out.append(
            f"| {r['concurrency']} | {cell} | {fmt(vs.get('wall_ratio'), '.2f', '×')} | "
            f"{fmt(predicted, '.2f', '×')} | {fmt(ratio, '.2f')} |"
        )
    return out


def plot_modes(summary: Mapping[str, Any], path: Path) -> Path | None:
    """p50 latency and goodput against load, one line per mode (``None`` without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return None
    fig, (lat, good) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=120)
    for mode in summary["modes"]:
        rows = sorted(
            (r for r in summary["rows"] if r["mode"] == mode), key=lambda r: r["concurrency"]
        )
        loads = [r["concurrency"] for r in rows]
        p50 = [r["latency_p50_s"] if r["latency_p50_s"] is not None else float("nan") for r in rows]
        goodput = [r["goodput_per_min"] if r["goodput_per_min"] is not None else 0.0 for r in rows]
        lat.plot(loads, p50, marker="o", label=mode)
        good.plot(loads, goodput, marker="o", label=mode)
    for ax, what in ((lat, "p50 latency per request (s)"), (good, "goodput (right answers/min)")):
        ax.set_xlabel("load (requests in flight)")
        ax.set_ylabel(what)
        ax.set_xscale("log", base=2)
        ax.set_xticks(summary["loads"] or [1])
        ax.set_xticklabels([str(n) for n in summary["loads"] or [1]])
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    if summary["modes"]:
        lat.legend(fontsize=8)
    fig.suptitle("Modes under load: latency and goodput")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_modes_report(out: Path, probe: str | Path | None = None) -> list[Path]:
    """Write ``summary.md``, ``summary.json`` and the plot from the folder's JSONL files.

    ``probe``: a probe's ``summary.json``, whose predicted ``sd`` speed-ups go beside the
    measured ones (ConfigError when it is not a probe summary with an ``sd`` server).
    """
    predicted = load_sd_prediction(probe) if probe is not None else None
    summary = summarise_cells(read_records(out / RESULTS), read_records(out / CELLS), predicted)
    md, js = out / SUMMARY_MD, out / SUMMARY_JSON
    md.write_text(render_modes_markdown(summary, read_meta(out)), encoding="utf-8")
    js.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    plot = plot_modes(summary, out / LOAD_PLOT)
    return [md, js] + ([plot] if plot else [])
