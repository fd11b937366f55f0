"""The probe's report: a table on the terminal, ``summary.json`` and ``probe.png``.

``summary.json`` (schema :data:`SCHEMA`, pinned by ``tests/unit/test_probe.py``)::

    schema     1
    probe      how it ran: command settings, servers, start and end, seconds
    decode     {"draft"|"base"|"sd": [Decode.as_dict() for each concurrency]}
    prefill    {"draft"|"base"|"sd": {"cold": Prefill.as_dict(), "cached": ...}}
    judge      {"base"|"sd": JudgeSample.as_dict()}
    ceilings   {"c", "v", "r", "c_sd", "v_sd", "named": {name: speed-up},
                "agree": {"k1": {"n", "speedup"}, ...}, "agree_sd": {...}}
    verdict    {"reference", "reference_speedup", "above_reference", "above_base",
                "tune_worth", "tune_command", "text"}
    tune       what `specreason tune --probe FILE` reads (ceilings.tune_table)

A server that was not measured (``sd`` without an ``sd`` server) is absent from ``decode``,
``prefill`` and ``judge``; a ceiling that was not computed is absent from ``named``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .ceilings import Ceilings, Verdict, tune_table
from .judging import JudgeSample
from .speeds import Decode, Prefill

SCHEMA = 1
SUMMARY = "summary.json"
PLOT = "probe.png"
TOP_KEYS = ("schema", "probe", "decode", "prefill", "judge", "ceilings", "verdict", "tune")
"""The keys of ``summary.json``, in order."""

LABELS: dict[str, str] = {
    "judge_full": "judge, every step accepted",
    "judge_measured": "judge, measured acceptance",
    "agree_k1": "agreement, 1 agreeing step a round",
    "agree_k2": "agreement, 2 agreeing steps a round",
    "sd": "sd (token SD in the base server)",
    "judge_sd_full": "judge on sd base, every step accepted",
    "judge_sd_measured": "judge on sd base, measured acceptance",
    "agree_sd_k1": "agreement on sd base, k=1",
    "agree_sd_k2": "agreement on sd base, k=2",
}
"""How each ceiling is named on the terminal and in the plot."""


def verdict_text(v: Verdict, tune_command: str, sd_measured: bool = True) -> str:
    """The plain verdict: what can beat the reference, and whether to run ``tune``."""
    ref = "the base model" + ("" if sd_measured else " (sd not measured: no sd server given)")
    if v.reference == "sd":
        ref = f"sd ({v.reference_speedup:.2f}x the base)"
    if v.above_reference:
        beats = f"can beat {ref}: " + "; ".join(LABELS[n] for n in v.above_reference)
    else:
        beats = f"no step speculation can beat {ref} on this pair, even at its ceiling"
    if v.tune_worth:
        return f"{beats}.\ntune is worth running:\n  {tune_command}"
    return (
        f"{beats}.\ntune is not worth running here: its settings cannot beat {v.reference}; "
        f"use {v.reference} alone."
    )


def summary(
    probe: Mapping[str, Any],
    decode: Mapping[str, Sequence[Decode]],
    prefill: Mapping[str, tuple[Prefill, Prefill]],
    judge: Mapping[str, JudgeSample],
    c: Ceilings,
    v: Verdict,
    tune_command: str,
) -> dict[str, Any]:
    """The ``summary.json`` document."""
    return {
        "schema": SCHEMA,
        "probe": dict(probe),
        "decode": {role: [d.as_dict() for d in ds] for role, ds in decode.items()},
        "prefill": {
            role: {"cold": cold.as_dict(), "cached": cached.as_dict()}
            for role, (cold, cached) in prefill.items()
        },
        "judge": {role: sample.as_dict() for role, sample in judge.items()},
        "ceilings": {
            "c": c.c,
            "v": c.v,
            "r": c.r,
            "c_sd": c.c_sd,
            "v_sd": c.v_sd,
            "named": c.named(),
            "agree": {f"k{k}": {"n": a.n, "speedup": a.speedup} for k, a in c.agree.items()},
            "agree_sd": {f"k{k}": {"n": a.n, "speedup": a.speedup} for k, a in c.agree_sd.items()},
        },
        "verdict": {
            "reference": v.reference,
            "reference_speedup": v.reference_speedup,
            "above_reference": list(v.above_reference),
            "above_base": list(v.above_base),
            "tune_worth": v.tune_worth,
            "tune_command": tune_command,
            "text": verdict_text(v, tune_command, c.sd is not None),
        },
        "tune": tune_table(c, str(probe.get("judge", ""))),
    }


def table(doc: Mapping[str, Any]) -> str:
    """The terminal report of a ``summary.json`` document."""
    lines = ["decode (greedy, fixed length; one stream's tokens/s, all streams', batch cost)"]
    lines.append(f"  {'server':<6} {'streams':>7} {'tok/s':>8} {'all tok/s':>10} {'batch':>7}")
    for role, rows in doc["decode"].items():
        one = rows[0]["step_s"] if rows and rows[0]["concurrency"] == 1 else None
        for row in rows:
            batch = f"{row['step_s'] / one:.2f}x" if one else "-"
            lines.append(
                f"  {role:<6} {row['concurrency']:>7} {row['tok_s']:>8.2f} "
                f"{row['aggregate_tok_s']:>10.2f} {batch:>7}"
            )
    lines.append("prefill (one request, one token out)")
    for role, pair in doc["prefill"].items():
        for kind in ("cold", "cached"):
            p = pair[kind]
            cached = "?" if p["cached_tokens"] is None else p["cached_tokens"]
            lines.append(
                f"  {role:<6} {kind:<6} {p['prompt_tokens']:>6} tokens ({cached} cached) "
                f"in {p['seconds']:.2f} s = {p['tok_s']:.0f} tok/s"
            )
    for role, j in doc["judge"].items():
        acc = "-" if j["acceptance"] is None else f"{j['acceptance']:.0%}"
        lines.append(
            f"judge {j['judge']} on {role}: {j['steps']} steps of {j['mean_step_tokens']:.0f} "
            f"tokens, {j['mean_s']:.2f} s a call ({j['mean_prompt_tokens']:.0f} prompt "
            f"tokens), {acc} accepted"
        )
    c = doc["ceilings"]
    parts = [f"c = {c['c']:.3f}"]
    parts += [f"{k} = {c[k]:.3f}" for k in ("v", "r", "c_sd", "v_sd") if c[k] is not None]
    lines.append("ceilings (speed-up against the base alone; " + ", ".join(parts) + ")")
    for name, value in c["named"].items():
        n = (c["agree_sd"] if name.startswith("agree_sd") else c["agree"]).get(
            name.rpartition("_")[2]
        )
        where = f" (N = {n['n']} steps in flight)" if name.startswith("agree") and n else ""
        lines.append(f"  {LABELS[name]:<40} {value:>6.2f}x{where}")
    lines.append("verdict: " + doc["verdict"]["text"])
    return "\n".join(lines)


def write(doc: Mapping[str, Any], out: Path) -> Path:
    """Write ``summary.json`` (and the plot when matplotlib is installed) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / SUMMARY
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    plot(doc, out / PLOT)
    return path


def plot(doc: Mapping[str, Any], path: Path) -> None:
    """Ceilings beside the base and ``sd``; each server's batch cost by concurrency."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
    named = doc["ceilings"]["named"]
    names = [n for n in named if n != "sd"]
    left.barh([LABELS[n] for n in names], [named[n] for n in names], color="tab:blue")
    left.axvline(1.0, color="tab:gray", linestyle="--", label="base")
    if "sd" in named:
        left.axvline(named["sd"], color="tab:green", linestyle="--", label="sd (measured)")
    left.set_xlabel("speed-up ceiling against the base alone")
    left.invert_yaxis()
    left.legend(fontsize=7)
    left.tick_params(axis="y", labelsize=7)
    for role, rows in doc["decode"].items():
        one = rows[0]["step_s"]
        right.plot(
            [r["concurrency"] for r in rows],
            [r["step_s"] / one for r in rows],
            marker="o",
            label=role,
        )
    right.set_xlabel("concurrent requests")
    right.set_ylabel("decode step / one stream's")
    right.set_xscale("log", base=2)
    right.legend(fontsize=7)
    v = doc["verdict"]
    fig.suptitle(
        f"specreason probe: ceilings beside the reference ({v['reference']}, "
        f"{v['reference_speedup']:.2f}x); tune worth running: {'yes' if v['tune_worth'] else 'no'}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
