"""Plain-text rendering of the graph's custom stream events (demo, examples, CLI)."""

from __future__ import annotations

import sys
from typing import TextIO

from ..events import Event


def _one_line(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def format_event(event: Event) -> str | None:
    """One line for a step event; ``None`` for events shown elsewhere (answer deltas)."""
    if event["type"] == "drafted":
        return (
            f"  step {event['step']:>2} drafted  ({event['tokens']} tok, {event['seconds']:.1f} s)"
        )
    if event["type"] == "scored":
        verdict = "accept" if event["accepted"] else "reject"
        return (
            f"  step {event['step']:>2} scored   {event['score']:.1f} -> {verdict} "
            f"({event['seconds']:.1f} s)"
        )
    if event["type"] == "step":
        label = {"accepted": "ACCEPTED ", "rewritten": "REWRITTEN", "base": "BASE     "}
        return f"  step {event['step']:>2} {label[event['decision']]} {_one_line(event['text'])}"
    if event["type"] == "done":
        return f"  reasoning stopped: {event['reason']}"
    if event["type"] == "fallback":
        return (
            f"  step {event['step']:>2} {event['endpoint']} server failed; the base model "
            f"writes the rest ({_one_line(event['reason'], 80)})"
        )
    return None


def print_event(event: Event, out: TextIO = sys.stdout) -> None:
    """Print a step event (answer deltas are printed as they come, without a newline)."""
    if event["type"] == "answer_delta":
        out.write(event["text"])
        out.flush()
        return
    line = format_event(event)
    if line is not None:
        print(line, file=out, flush=True)
