"""The `think` family against a vLLM server with a reasoning parser on.

R1 distills, QwQ and Qwen3 are served with ``--reasoning-parser``, which moves the text it takes
for thinking out of ``content`` into ``reasoning``. One real vLLM server (the 135M, both roles)
runs ``r1_strings.py``: deepseek_r1's split on strings, since no model of the catalog has
``<think>`` as a token. It starts after the session's pair stopped (memory).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from langchain_specreason import ChatSpecReason
from tests.conftest import LOG_DIR, start_serve

pytestmark = pytest.mark.integration

PLUGIN = Path(__file__).with_name("r1_strings.py")
PORT = 8137
KV = f"--draft-arg=--kv-cache-memory-bytes={256 * 2**20}"
QUESTION = "What is 12*7? Think it through."


@pytest.fixture(scope="module")
def parsing_server():
    serve = start_serve(
        *("cpu-test", "--only", "draft", "--draft-port", str(PORT)),
        *("--draft-env", "VLLM_CPU_KVCACHE_SPACE=", KV),
        f"--draft-arg=--reasoning-parser-plugin={PLUGIN}",
        "--draft-arg=--reasoning-parser=r1-strings",
        roles=("draft",),
        log_dir=LOG_DIR / "reasoning-parser",
        name="serve-reasoning-parser",
    )
    try:
        yield serve.urls["draft"]
    finally:
        if serve.proc.poll() is None:
            serve.interrupt()


@pytest.mark.after_shutdown
def test_the_server_splits_thinking_from_content(parsing_server):
    # the parser is on: a continued thinking comes back in `reasoning`, not `content`
    reply = httpx.post(
        parsing_server + "/chat/completions",
        json={
            "model": "smollm2-135m",
            "messages": [
                {"role": "user", "content": "What is 2+2?"},
                {"role": "assistant", "content": "<think>\nTwo plus two"},
            ],
            "continue_final_message": True,
            "add_generation_prompt": False,
            "max_tokens": 8,
            "temperature": 0,
        },
        timeout=120,
    ).json()
    message = reply["choices"][0]["message"]
    assert message["reasoning"] and not message["content"], message


@pytest.mark.after_shutdown
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_think_family_gets_its_steps_and_answer(parsing_server, streamed):
    llm = ChatSpecReason(
        draft_url=parsing_server,
        base_url=parsing_server,
        family="think",
        temperature=0,
        seed=0,
        budget=48,
        step_max_tokens=16,
        answer_max_tokens=16,
    )
    if streamed:
        chunks = [c async for c in llm.astream(QUESTION)]
        msg = chunks[0]
        for chunk in chunks[1:]:
            msg += chunk
    else:
        msg = await llm.ainvoke(QUESTION)
    stats = msg.response_metadata["specreason"]
    steps = stats["steps_accepted"] + stats["steps_rewritten"] + stats["steps_base"]
    assert steps >= 1 and stats["trace_tokens"] > 0
    # every step's text arrived (before the fix, each was "" and the trace empty)
    assert len(msg.additional_kwargs["reasoning_content"].strip()) > 0
    assert msg.content.strip() and stats["answer_tokens"] > 0
