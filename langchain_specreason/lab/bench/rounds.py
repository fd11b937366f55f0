"""Where an ``agree`` run's rounds spend their time, from its step records (pure).

Each round's first step record carries the round's timing in its ``verdict`` (see
:mod:`langchain_specreason.graph.verify`): ``draft_s``, the time until the draft step the round
waited for last was written, and ``judge_s``, the wait on the base model after it. A round whose
time is mostly ``draft_s`` is bound by the draft server (the base's parallel positions were done
before the draft); one with a large ``judge_s`` share is bound by the base server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def round_records(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One line per round of a run (empty for a run without rounds)."""
    rounds = []
    for step in steps:
        verdict = step.get("verdict") or {}
        if verdict.get("position") != 0 or "round_s" not in verdict:
            continue
        rounds.append(
            {
                "round_s": verdict["round_s"],
                "steps": verdict["round_steps"],
                "agreed": verdict["round_steps"] - (0 if verdict.get("all_agree") else 1),
                "base_requests": verdict["round_base_requests"],
                "base_busy_s": verdict["round_base_busy_s"],
                "draft_wait_s": step["draft_s"],
                "base_wait_s": step["judge_s"],
            }
        )
    return rounds


def rounds_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """A run's rounds over its problems: steps a round, seconds, and each server's share."""
    rounds = [r for record in records for r in record.get("rounds") or []]
    if not rounds:
        return None
    total = sum(r["round_s"] for r in rounds) or 1e-9
    return {
        "rounds": len(rounds),
        "steps_per_round": sum(r["steps"] for r in rounds) / len(rounds),
        "round_s": total / len(rounds),
        "base_requests_per_round": sum(r["base_requests"] for r in rounds) / len(rounds),
        "draft_share": sum(r["draft_wait_s"] for r in rounds) / total,
        "base_wait_share": sum(r["base_wait_s"] for r in rounds) / total,
    }


def rounds_markdown(by_run: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """The rounds table of the runs that have rounds ('' when none has)."""
    rows = [
        (run, summary)
        for run, records in by_run.items()
        if (summary := rounds_summary(records)) is not None
    ]
    if not rows:
        return ""
    lines = [
        "",
        "## Rounds of the agree runs",
        "",
        "| run | rounds | steps a round | mean round s | base requests a round "
        "| waiting on the draft | waiting on the base | bound by |",
        "|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for run, s in rows:
        bound = "draft" if s["draft_share"] >= s["base_wait_share"] else "base"
        lines.append(
            f"| {run} | {s['rounds']:.0f} | {s['steps_per_round']:.2f} | {s['round_s']:.1f} | "
            f"{s['base_requests_per_round']:.2f} | {s['draft_share']:.0%} | "
            f"{s['base_wait_share']:.0%} | {bound} |"
        )
    lines += [
        "",
        "Waiting on the draft: the share of the rounds' time until the last draft step a round "
        "used was written (the base's positions ran beside it); waiting on the base: the rest, "
        "spent after the draft was done, waiting for the base's positions.",
    ]
    return "\n".join(lines) + "\n"
