"""The judge's prefill floor: the fewest prompt tokens a judge call can compute.

A judge call's prompt is the conversation, the steps kept so far, the draft step and the
judge's turn (:func:`~..judges.judge_messages`). A prefix cache can at best hold everything
before the draft step: the previous judge call sent exactly those tokens. The draft step and
the judge's suffix are new on every call. So the **floor** of one call is its prompt tokens
(the server's own count, ``judge_prompt_tokens`` of the step) minus the tokens of the prefix
before the draft step, counted by the same server's ``/tokenize`` (vLLM, at the server root,
with the same chat template). The benchmark reports the prefill each judge call really paid
against this floor; the gap is what the cache's block granularity and a cold start cost.

The counting calls run after a problem's clock has stopped, so they add nothing to latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from ..endpoint import server_root
from ..formats import PromptFormat, continue_messages
from ..state import StepRecord


async def count_prompt_tokens(client: httpx.AsyncClient, base_url: str, model: str,
                              messages: list[dict[str, Any]], *, continue_final: bool) -> int:
    """Tokens of a chat prompt as the server renders it (``/tokenize``)."""
    resp = await client.post(f"{server_root(base_url)}/tokenize", json={
        "model": model, "messages": messages, "continue_final_message": continue_final,
        "add_generation_prompt": not continue_final,
    })
    resp.raise_for_status()
    return int(resp.json()["count"])


async def judge_prefill_floor(
    base_url: str, model: str, conversation: list[dict[str, Any]], fmt: PromptFormat,
    steps: Sequence[StepRecord], *, timeout: float = 60.0,
) -> int | None:
    """The sum of the floors of a run's judge calls (``None``: the server cannot tokenize).

    ``conversation`` is the run's input in OpenAI format (roles merged, as the graph sends
    it); ``steps`` the run's step records, in order. A step without a score was not judged.
    """
    total, kept = 0, list[str]()
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            for step in steps:
                if step["score"] is not None and step["judge_prompt_tokens"]:
                    messages, cont = continue_messages(conversation, fmt, kept)
                    prefix = await count_prompt_tokens(client, base_url, model, messages,
                                                       continue_final=cont)
                    total += step["judge_prompt_tokens"] - prefix
                kept.append(step["text"])
    except (httpx.HTTPError, KeyError, ValueError):
        return None
    return total
