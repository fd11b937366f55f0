"""The judge's prefill floor: the fewest prompt tokens a judge call can compute.

A judge call's prompt is the conversation, the steps kept so far, the draft step and the
judge's turn (:func:`~..judges.judge_messages`). A prefix cache can at best hold everything
before the draft step: the previous judge call sent exactly those tokens. The draft step and
the judge's suffix are new on every call. So the **floor** of one call is its prompt tokens
(the server's own count, ``judge_prompt_tokens`` of the step) minus the tokens of the prefix
before the draft step, counted by the same server's ``/tokenize``
(:meth:`~..endpoint.OpenAIEndpoint.count_tokens`, the same chat template). The benchmark
reports the prefill each judge call really paid against this floor; the gap is what the
cache's block granularity and a cold start cost.

The counting calls run after a problem's clock has stopped, so they add nothing to latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...endpoint import OpenAIEndpoint
from ...errors import EndpointError
from ...formats import PromptFormat, continue_messages
from ...state import StepRecord


async def judge_prefill_floor(
    base: OpenAIEndpoint,
    conversation: list[dict[str, Any]],
    fmt: PromptFormat,
    steps: Sequence[StepRecord],
) -> int | None:
    """The sum of the floors of a run's judge calls (``None``: the server cannot tokenize).

    ``conversation`` is the run's input in OpenAI format (roles merged, as the graph sends
    it); ``steps`` the run's step records, in order. A step without a score was not judged.
    """
    total, kept = 0, list[str]()
    try:
        for step in steps:
            if step["score"] is not None and step["judge_prompt_tokens"]:
                messages, cont = continue_messages(conversation, fmt, kept)
                prefix = await base.count_tokens(messages, continue_final=cont)
                total += step["judge_prompt_tokens"] - prefix
            kept.append(step["text"])
    except EndpointError:
        return None
    return total
