"""What several test modules share: the CLI run as a child process, the flags and models that
point at the session's server pair, short greedy settings, and the files a bench writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain_specreason import (
    ChatSpecReason,
    OpenAIEndpoint,
    SpecReasonConfig,
    create_specreason_graph,
)

QUESTION = (
    "A box holds 12 eggs. Tom buys 3 boxes and breaks 5 eggs. How many eggs are left? "
    "Think step by step, then give the number."
)

RESULT_KEYS = {
    "mode",
    "threshold",
    "score_method",
    "problem_id",
    "correct",
    "latency_s",
    "steps_drafted",
    "steps_accepted",
    "steps_rewritten",
    "draft_tokens",
    "base_tokens",
    "overhead_s",
    "draft_s",
    "judge_s",
    "rewrite_s",
    "answer_s",
    "judge_prompt_tokens",
    "judge_cached_tokens",
    "prediction",
    "gold",
    "reply",
}
"""Keys every line of a bench's results.jsonl holds (a run on servers adds ``server``)."""

KV_BYTES = 256 * 2**20
TINY_PAIR = (
    "--base-model",
    "smollm2-135m",
    *(
        flag
        for role in ("draft", "base")
        for flag in (
            f"--{role}-env",
            "VLLM_CPU_KVCACHE_SPACE=",  # "" unsets it for vLLM
            f"--{role}-arg=--kv-cache-memory-bytes={KV_BYTES}",
        )
    ),
)
"""`specreason serve` flags for tests of the serving stack, not of answers: the 135M draft model
serves the base too, each server with 256 MiB of KV cache (one 4096-token sequence fits)."""


def greedy(budget: int, step_max_tokens: int, answer_max_tokens: int, **more: Any) -> dict:
    """Settings for short, reproducible traces: a small budget, greedy sampling, seed 0."""
    return {
        "budget": budget,
        "step_max_tokens": step_max_tokens,
        "answer_max_tokens": answer_max_tokens,
        "temperature": 0.0,
        "seed": 0,
        **more,
    }


def budget_flags(budget: int, step_max_tokens: int, answer_max_tokens: int) -> list[str]:
    """The CLI's flags for a run's token budget and its step and answer caps."""
    return [
        *("--budget", str(budget), "--step-max-tokens", str(step_max_tokens)),
        *("--answer-max-tokens", str(answer_max_tokens)),
    ]


ONE_PROBLEM = ["--dataset", "gsm8k", "--limit", "1"]
"""A bench on the first GSM8K test problem."""


OUTAGE = greedy(160, 40, 32, judge="score", threshold=0)
"""For runs through a server outage: the 0-9 judge at threshold 0 keeps every draft step, so
what the base server does is only what the outage makes it do."""


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``specreason <args>`` in a child process, its output captured; exit code unchecked."""
    return subprocess.run(
        [sys.executable, "-m", "langchain_specreason.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def cli_ok(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``specreason <args>`` that must exit 0 (else its stderr's end is the failure)."""
    done = cli(*args, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def pair_flags(servers) -> list[str]:
    """``--draft-url``/``--base-url`` for the session's servers."""
    return ["--draft-url", servers.draft_url, "--base-url", servers.base_url]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def pair_model(servers, **settings: Any) -> ChatSpecReason:
    """ChatSpecReason on the session's servers, with their model family."""
    return ChatSpecReason(
        draft_url=servers.draft_url, base_url=servers.base_url, family=servers.family, **settings
    )


def pair_graph(
    servers, config: SpecReasonConfig, *, max_retries: int = 1, **graph_options: Any
) -> Any:
    """The SpecReason graph on the session's servers, with their model family."""
    return create_specreason_graph(
        OpenAIEndpoint(servers.draft_url, name="draft", max_retries=max_retries),
        OpenAIEndpoint(servers.base_url, name="base", max_retries=max_retries),
        config=config,
        family=servers.family,
        **graph_options,
    )


class ChatSpecReasonSuite:
    """What LangChain's standard suites (unit and integration) ask of ChatSpecReason beside
    its parameters: its class and the capabilities that hold wherever it runs. Put it first
    among the bases, before the suite."""

    @property
    def chat_model_class(self) -> type[ChatSpecReason]:
        return ChatSpecReason

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return False  # two servers, one model each: the models are chosen at construction
