"""``specreason tune``'s report: ``tuned.toml``'s header and evidence, tune.json's parts, the plot.

The evidence compares the chosen setting, ``sd`` and the base model on the held-out problems
(paired speed-ups, McNemar's p); ``pareto.png`` shows every dev setting's accuracy and latency.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..shared.datasets import Problem
from ..shared.modes import DEFAULT_SD_VARIANT, Run
from .grid import Choice, Measured, measured


def _header(choice: Choice, concurrency: int = 1) -> str:
    """The comment that opens ``tuned.toml``: what tune recommends, in words.

    At a load above one request at a time the first line names it (the reason names it too).
    """
    if choice.recommend == "specreason":
        at = "" if concurrency == 1 else f" at {concurrency} requests at once"
        return f"# specreason tune: this setting{at} (evidence below)\n"
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
    from ..shared.stats import mcnemar, paired_ratio

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
    concurrency: int = 1,
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
    at = "" if concurrency == 1 else f", {concurrency} requests at once"
    ax.set_xlabel(f"seconds of server calls per problem (dev{at})")
    ax.set_ylabel("accuracy (dev)")
    ax.set_title(
        "tune: settings on the dev problems (blue: plain base, purple: with sd)"
        if concurrency == 1
        else f"tune at {concurrency} requests at once (blue: plain base, purple: with sd)"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
