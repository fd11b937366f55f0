"""Plain-text rendering of the graph's custom stream events (demo, examples, CLI)."""

from __future__ import annotations

import sys
from typing import Any, TextIO


def _one_line(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def format_event(event: dict[str, Any]) -> str | None:
    """One line for a step event; ``None`` for events shown elsewhere (answer deltas)."""
    kind = event.get("type")
    if kind == "drafted":
        return (f"  step {event['step']:>2} drafted  ({event['tokens']} tok, "
                f"{event['seconds']:.1f} s)")
    if kind == "scored":
        verdict = "accept" if event["accepted"] else "reject"
        return f"  step {event['step']:>2} scored   {event['score']:.1f} -> {verdict} " \
               f"({event['seconds']:.1f} s)"
    if kind == "step":
        label = {"kept": "KEPT     ", "rewritten": "REWRITTEN", "base": "BASE     "}
        return f"  step {event['step']:>2} {label[event['decision']]} {_one_line(event['text'])}"
    if kind == "done":
        return f"  reasoning stopped: {event['reason']}"
    if kind == "fallback":
        return (f"  step {event['step']:>2} {event['endpoint']} server failed; the base model "
                f"writes the rest ({_one_line(event['reason'], 80)})")
    return None


def print_event(event: dict[str, Any], out: TextIO = sys.stdout) -> None:
    """Print a step event (answer deltas are printed as they come, without a newline)."""
    if event.get("type") == "answer_delta":
        out.write(event["text"])
        out.flush()
        return
    line = format_event(event)
    if line is not None:
        print(line, file=out, flush=True)
