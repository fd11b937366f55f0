"""Watch SpecReason reason, live in the terminal, then compare with the base model alone.

A ``rich`` table fills in as the graph's custom stream events arrive: each step as the draft
model writes it, the base model's score, and whether the step was kept or rewritten by the
base model; then the answer streams in. Finally the base model answers the same question
alone (same prompt, sampling and token budget) and the speed-up is printed.

Run::

    pip install -e '.[examples]'     # from the repo root: langchain, rich, the RAG embedder
    export SPECREASON_DRAFT_URL=http://127.0.0.1:8201/v1  # optional: without these two,
    export SPECREASON_BASE_URL=http://127.0.0.1:8202/v1   # the `cpu` pair is started
    python examples/live_steps.py ["your question"]
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from _servers import SHORT, servers
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from langchain_specreason import ChatSpecReason, SpecReasonStats, single_model

QUESTION = "Tom has 12 eggs and uses 5. How many are left?"
BRIEF = "Be brief: two short steps, then the number."
STYLE = {
    "drafted": "yellow",
    "accepted": "green",
    "rewritten": "red",
    "base": "blue",
    "dropped": "dim",
}


class StepView:
    """The steps table and the answer, updated from the graph's custom events."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}
        self.answer = ""
        self.stop = ""

    def update(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "answer_delta":
            self.answer += event["text"]
        elif kind == "done":
            self.stop = event["reason"]
            if self.stop == "repeat":  # the step repeated an earlier one: not kept
                for row in self.rows.values():
                    if row["status"] == "drafted":
                        row["status"] = "dropped"
        elif kind in ("drafted", "scored", "step"):
            row = self.rows.setdefault(event["step"], {"status": "drafted", "score": None})
            if kind == "drafted":
                row.update(text=event["text"], tokens=event["tokens"])
            elif kind == "scored":
                row["score"] = event["score"]
            else:
                row.update(status=event["decision"], text=event["text"], tokens=event["tokens"])

    def __rich__(self) -> Group:
        table = Table(title="SpecReason steps", expand=True)
        table.add_column("step", justify="right", no_wrap=True)
        table.add_column("status", no_wrap=True, min_width=9)
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("tok", justify="right", no_wrap=True)
        table.add_column("text", ratio=1, no_wrap=True, overflow="ellipsis")
        for index, row in sorted(self.rows.items()):
            score = "" if row["score"] is None else f"{row['score']:g}"
            table.add_row(
                str(index),
                Text(row["status"], style=STYLE[row["status"]]),
                score,
                str(row.get("tokens", "")),
                " ".join(row.get("text", "").split()),
            )
        parts: list[Any] = [table]
        if self.stop:
            parts.append(Text(f"reasoning stopped: {self.stop}", style="dim"))
        if self.answer:
            parts.append(Panel(Text(self.answer.strip()), title="answer", title_align="left"))
        return Group(*parts)


async def amain(question: str = QUESTION) -> int:
    console = Console()
    with servers() as srv:
        llm = ChatSpecReason(
            draft_url=srv.draft_url, base_url=srv.base_url, family=srv.family, **SHORT
        )
        messages: list[Any] = [("system", BRIEF), ("user", question)]
        console.print(Text.assemble(("question: ", "bold"), question))

        view = StepView()
        state: dict[str, Any] = {}
        start = time.perf_counter()
        with Live(view, console=console, refresh_per_second=8):
            async for mode, item in llm.graph.astream(
                {"messages": messages}, stream_mode=["custom", "values"]
            ):
                if mode == "custom":
                    view.update(item)
                else:
                    state = item
            view.answer = state.get("answer", "")  # the whole reply, as the caller gets it
        if not console.is_terminal:
            console.line()  # Live's last render ends without a newline when not on a terminal
        wall = time.perf_counter() - start
        stats = SpecReasonStats.from_state(state, wall_s=wall)

        with console.status("base model alone, same question and settings..."):
            alone = await single_model(llm.endpoint("base"), messages, llm.spec_config())
    console.print(Panel(Text(alone.text.strip()), title="base model alone", title_align="left"))

    console.print(
        f"steps: {stats.steps_accepted} kept, {stats.steps_rewritten} rewritten, "
        f"{stats.steps_base} by base; draft tokens {stats.draft_tokens}, "
        f"base tokens {stats.base_tokens}"
    )
    console.print(
        f"speed-up: {alone.seconds / wall:.2f}x (SpecReason {wall:.1f} s, "
        f"base model alone {alone.seconds:.1f} s)",
        highlight=False,
    )
    return 0 if str(state.get("answer", "")).strip() else 1


def main(question: str = QUESTION) -> int:
    return asyncio.run(amain(question))


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
