"""The probe's report: a table on the terminal, ``summary.json`` and ``probe.png``.

``summary.json`` (schema :data:`SCHEMA`, pinned by ``tests/unit/test_probe.py``)::

    schema     1
    probe      how it ran: command settings, servers, start and end, seconds
    decode     {"draft"|"base"|"sd": [Decode.as_dict() for each concurrency]}
    prefill    {"draft"|"base"|"sd": {"cold": Prefill.as_dict(), "cached": ...}}
    judge      {"base"|"sd": JudgeSample.as_dict()}
    ceilings   {"c", "v", "r", "c_sd", "v_sd", "named": {name: speed-up},
                "agree": {"k1": {"n", "speedup"}, ...}, "agree_sd": {...},
                "spread", "noise", "load", "sd_by_load": {"N": t_b(N) / t_s(N)}}
    verdict    {"reference", "reference_speedup", "above_reference", "above_base",
                "tune_worth", "tune_command", "text", "noise", "spread",
                "within_noise_of_reference", "within_noise_of_base", "tune_kinds", "load"}
    tune       what `specreason tune --probe FILE` reads (ceilings.tune_table)

A server that was not measured (``sd`` without an ``sd`` server) is absent from ``decode``,
``prefill`` and ``judge``; a ceiling that was not computed is absent from ``named``.

The noise band (:mod:`.ceilings`) added fields and changed no name: each decode row's
``repeats``, ``step_s_slowest`` and ``spread``; the ceilings' and the verdict's ``spread``
and ``noise`` (the band); the verdict's ``within_noise_of_reference``,
``within_noise_of_base`` and ``tune_kinds``; the tune table's ``noise``. ``above_reference``
and ``above_base`` now hold the ceilings that beat by more than the band. A file written
before the band lacks them; :func:`rebuild` recomputes its ceilings, verdict and tune table
from its measurements (the band is then the floor: no spread was recorded).

The load (issue 54) added fields too: ``probe.load`` (the requests at once the ceilings and
the verdict are read at), ``probe.ignore_eos`` (``false``: natural continuations;
``true``: the old fixed length), ``probe.offset``, each decode row's ``stream_tokens``, the
ceilings' ``load`` and ``sd_by_load``, the verdict's ``load`` and the tune table's ``load``.
A file written before them was read at one stream with fixed-length continuations: it
rebuilds at load 1 to the numbers it holds (:func:`measured_of`), and its decode rows say
"fixed length" (:func:`table`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from .ceilings import (
    NOISE_FLOOR,
    Ceilings,
    Measured,
    Verdict,
    beats,
    ceilings,
    reading_probe,
    sd_by_load,
    tune_table,
    verdict,
)
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


def noise_text(v: Verdict) -> str:
    """The band and where it comes from, e.g. ``±10%, the floor; the repeats spread 4%``."""
    band = f"\u00b1{v.noise:.0%}"
    if v.spread is not None and math.isclose(v.noise, v.spread):
        return f"{band}, the spread over the probe's repeats"
    if not math.isclose(v.noise, NOISE_FLOOR):
        return band
    if v.spread is None:
        return f"{band}, the floor; no spread over repeats was recorded"
    return f"{band}, the floor; the repeats spread {v.spread:.0%}"


def _listed(v: Verdict, names: Sequence[str]) -> str:
    return "; ".join(
        f"{LABELS[n]} ({v.named[n]:.2f}x)" if n in v.named else LABELS[n] for n in names
    )


def load_words(load: int) -> str:
    """The load in words: ``one request at a time``, ``4 requests at once``."""
    return "one request at a time" if load == 1 else f"{load} requests at once"


def verdict_text(v: Verdict, tune_command: str, sd_measured: bool = True) -> str:
    """The plain verdict: what beats the reference, the judge ceiling read, whether to tune.

    It opens with the load every speed was read at (:func:`load_words`). "Beats" means by
    more than the noise band (:func:`.ceilings.beats`).
    """
    ref = "the base model" + ("" if sd_measured else " (sd not measured: no sd server given)")
    its = "the base's 1.00x"
    if v.reference == "sd":
        ref = f"sd ({v.reference_speedup:.2f}x the base)"
        its = f"sd's {v.reference_speedup:.2f}x"
    noise = f"the probe's noise ({noise_text(v)})"
    near = v.within_noise_of_reference
    if v.above_reference:
        lines = [f"can beat {ref} by more than {noise}: {_listed(v, v.above_reference)}."]
        if near:
            lines.append(f"Within the noise of {its}: {_listed(v, near)}.")
    elif near:
        verb = "is" if len(near) == 1 else "are"
        lines = [
            f"no ceiling clearly beats {ref}: {_listed(v, near)} {verb} within {noise} of {its}."
        ]
    else:
        lines = [f"no step speculation can beat {ref} on this pair, even at its ceiling."]
    full, measured = v.named.get("judge_full"), v.named.get("judge_measured")
    if full is not None:
        judge = (
            f"The judge is read at every step accepted ({full:.2f}x on the plain base; the bound "
            "of any threshold tune tries)"
        )
        if measured is not None and v.acceptance is not None:
            won = beats(measured, v.reference_speedup, v.noise)
            clear = "clearly beats" if won else "does not clearly beat"
            judge += (
                f", not at the measured acceptance ({v.acceptance:.0%}: {measured:.2f}x, which "
                f"{clear} {its})"
            )
        lines.append(judge + ".")
    searched = [k for k in v.tune_kinds if k in near]
    if v.tune_worth:
        lines.append(f"tune is worth running:\n  {tune_command}")
    elif searched:
        lines.append(
            f"tune is not worth running: no setting it searches clearly beats {v.reference}; "
            f"use {v.reference} alone, or run tune only to confirm:\n  {tune_command}"
        )
    else:
        lines.append(
            f"tune is not worth running here: its settings cannot beat {v.reference}; "
            f"use {v.reference} alone."
        )
    lead = "One request at a time" if v.load == 1 else f"At {load_words(v.load)}"
    lines[0] = f"{lead}: {lines[0]}"
    return "\n".join(lines)


def ceilings_section(c: Ceilings) -> dict[str, Any]:
    """The ``ceilings`` section of ``summary.json``."""
    return {
        "c": c.c,
        "v": c.v,
        "r": c.r,
        "c_sd": c.c_sd,
        "v_sd": c.v_sd,
        "named": c.named(),
        "agree": {f"k{k}": {"n": a.n, "speedup": a.speedup} for k, a in c.agree.items()},
        "agree_sd": {f"k{k}": {"n": a.n, "speedup": a.speedup} for k, a in c.agree_sd.items()},
        "spread": c.spread,
        "noise": c.noise,
        "load": c.load,
        "sd_by_load": {str(n): speedup for n, speedup in c.sd_by_load.items()},
    }


def verdict_section(v: Verdict, tune_command: str, sd_measured: bool) -> dict[str, Any]:
    """The ``verdict`` section of ``summary.json``."""
    return {
        "reference": v.reference,
        "reference_speedup": v.reference_speedup,
        "above_reference": list(v.above_reference),
        "above_base": list(v.above_base),
        "tune_worth": v.tune_worth,
        "tune_command": tune_command,
        "text": verdict_text(v, tune_command, sd_measured),
        "noise": v.noise,
        "spread": v.spread,
        "within_noise_of_reference": list(v.within_noise_of_reference),
        "within_noise_of_base": list(v.within_noise_of_base),
        "tune_kinds": list(v.tune_kinds),
        "load": v.load,
    }


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
        "ceilings": ceilings_section(c),
        "verdict": verdict_section(v, tune_command, c.sd is not None),
        "tune": tune_table(c, str(probe.get("judge", ""))),
    }


def measured_of(doc: Mapping[str, Any]) -> Measured:
    """The measurements of a ``summary.json`` document, as the ceilings read them.

    At the document's ``probe.load`` (1 when absent: files written before the load). A decode
    row without ``spread`` (written before the noise band) has no known spread.
    """
    decode = doc["decode"]
    load = int(doc.get("probe", {}).get("load", 1))
    steps = {
        role: {row["concurrency"]: row["step_s"] for row in rows} for role, rows in decode.items()
    }
    spread = {
        role: next((row.get("spread") for row in rows if row["concurrency"] == load), None)
        for role, rows in decode.items()
    }
    judges = doc.get("judge", {})
    base, sd = judges.get("base"), judges.get("sd")
    return Measured(
        draft_step_s=steps["draft"],
        base_step_s=steps["base"],
        sd_step_s=steps.get("sd"),
        step_tokens=(base["mean_step_tokens"] or None) if base else None,
        judge_s=base["mean_s"] if base and base["steps"] else None,
        acceptance=base["acceptance"] if base else None,
        sd_judge_s=sd["mean_s"] if sd and sd["steps"] else None,
        spread=spread,
        load=load,
    )


def load_sd_prediction(path: str | Path) -> dict[int, float]:
    """``N -> t_b(N) / t_s(N)`` of a probe's ``summary.json``: ``sd``'s predicted speed-up.

    Read from the decode rows (any probe's file, old ones too); ConfigError naming the file
    when it is not a probe summary or measured no ``sd`` server.
    """
    with reading_probe(path) as where:
        decode = json.loads(where.read_text(encoding="utf-8"))["decode"]
        steps = {
            role: {int(row["concurrency"]): float(row["step_s"]) for row in decode[role]}
            for role in ("base", "sd")
            if role in decode
        }
    predicted = sd_by_load(steps.get("base", {}), steps.get("sd", {}))
    if not predicted:
        raise ConfigError(
            f"--probe {where}: the probe measured no sd server (run it with an sd server: "
            "--profile without --no-sd, or --sd-base-url)"
        )
    return predicted


def rebuild(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` with its ceilings, verdict and tune table computed again from its measurements.

    Reads files written before the noise band as well (their band is the floor); the
    measurements, the run's settings and the key order are kept.
    """
    out = dict(doc)
    c = ceilings(measured_of(doc))
    command = str(doc.get("verdict", {}).get("tune_command", "specreason tune"))
    out["ceilings"] = ceilings_section(c)
    out["verdict"] = verdict_section(verdict(c), command, c.sd is not None)
    out["tune"] = tune_table(c, str(doc.get("probe", {}).get("judge", "")))
    return out


def load(path: str | Path) -> dict[str, Any]:
    """A ``summary.json`` document, rebuilt (:func:`rebuild`)."""
    return rebuild(json.loads(Path(path).read_text(encoding="utf-8")))


def table(doc: Mapping[str, Any]) -> str:
    """The terminal report of a ``summary.json`` document."""
    probe = doc.get("probe", {})
    length = "fixed length" if probe.get("ignore_eos", True) else "natural length"
    load = int(probe.get("load", 1))
    lines = [
        f"decode (greedy, {length}; one stream's tokens/s, all streams', batch cost, "
        "spread: slowest repeat over fastest)"
    ]
    lines.append(
        f"  {'server':<6} {'streams':>7} {'tok/s':>8} {'all tok/s':>10} {'batch':>7} {'spread':>7}"
    )
    for role, rows in doc["decode"].items():
        one = rows[0]["step_s"] if rows and rows[0]["concurrency"] == 1 else None
        for row in rows:
            batch = f"{row['step_s'] / one:.2f}x" if one else "-"
            spread = "-" if row.get("spread") is None else f"{row['spread']:.0%}"
            lines.append(
                f"  {role:<6} {row['concurrency']:>7} {row['tok_s']:>8.2f} "
                f"{row['aggregate_tok_s']:>10.2f} {batch:>7} {spread:>7}"
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
    if c.get("noise") is not None:
        parts.append(f"noise band \u00b1{c['noise']:.0%}")
    lines.append(
        f"ceilings at {load_words(load)} (speed-up against the base at the same load; "
        + ", ".join(parts)
        + ")"
    )
    for name, value in c["named"].items():
        n = (c["agree_sd"] if name.startswith("agree_sd") else c["agree"]).get(
            name.rpartition("_")[2]
        )
        where = f" (N = {n['n']} steps in flight)" if name.startswith("agree") and n else ""
        lines.append(f"  {LABELS[name]:<40} {value:>6.2f}x{where}")
    by_load = c.get("sd_by_load") or {}
    if by_load:
        lines.append(
            "sd over the base by load (t_b(N) / t_s(N)): "
            + ", ".join(f"{n}: {x:.2f}x" for n, x in by_load.items())
        )
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
    v = doc["verdict"]
    if v.get("noise") is not None:  # absent from files written before the band
        ref = float(v["reference_speedup"])
        left.axvspan(
            ref, ref * (1.0 + v["noise"]), color="tab:orange", alpha=0.15,
            label=f"within the noise (\u00b1{v['noise']:.0%}) of {v['reference']}",
        )  # fmt: skip
    load = int(doc.get("probe", {}).get("load", 1))
    left.set_xlabel(f"speed-up ceiling against the base, {load_words(load)}")
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
    fig.suptitle(
        f"specreason probe: ceilings beside the reference ({v['reference']}, "
        f"{v['reference_speedup']:.2f}x); tune worth running: {'yes' if v['tune_worth'] else 'no'}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
