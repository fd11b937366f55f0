"""`langgraph dev` (LangGraph Studio's server) loads langgraph.json and runs a thread.

Started as a user starts it, from the repo root, against the session's real servers.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from langgraph_sdk import get_client

from langchain_specreason.serving.launcher import check_port_free

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PORT = 8131


@pytest.fixture
def langgraph_dev(servers):
    env = {
        **os.environ,
        "SPECREASON_DRAFT_URL": servers.draft_url,
        "SPECREASON_BASE_URL": servers.base_url,
        # the user's knobs, through the environment: short, greedy
        "SPECREASON_BUDGET": "64",
        "SPECREASON_STEP_MAX_TOKENS": "32",
        "SPECREASON_ANSWER_MAX_TOKENS": "32",
        "SPECREASON_TEMPERATURE": "0",
    }
    # langgraph dev prints its "API:" line even when it cannot bind: a stale server on the
    # port would answer this test's requests instead (seen: a vLLM server, 404s)
    check_port_free("127.0.0.1", PORT)
    cli = Path(sys.executable).with_name("langgraph")
    proc = subprocess.Popen(
        [
            str(cli),
            "dev",
            "--no-browser",
            "--no-reload",
            "--host",
            "127.0.0.1",
            "--port",
            str(PORT),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 180
    try:
        while not any("API:" in line for line in seen):
            ready, _, _ = select.select([proc.stdout], [], [], max(0, deadline - time.monotonic()))
            line = proc.stdout.readline() if ready else ""
            if not line:
                raise AssertionError("langgraph dev did not start:\n" + "".join(seen[-40:]))
            seen.append(line)
        yield f"http://127.0.0.1:{PORT}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


async def test_langgraph_dev_serves_the_graph_and_runs_a_thread(langgraph_dev):
    client = get_client(url=langgraph_dev)
    assistants = await client.assistants.search(graph_id="specreason")
    assert len(assistants) == 1
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"],
        assistants[0]["assistant_id"],
        input={"messages": [{"role": "user", "content": "What is 12*7?"}]},
    )
    assert out["answer"].strip()
    assert out["steps"] and out["tokens_used"] <= 64
    assert out["stop"] in ("end", "budget", "repeat")
    assert out["messages"][-1]["content"] == out["answer"]
    # the default judge decided every drafted step (a log-probability, or the check's reject)
    for step in out["steps"]:
        if step["decision"] in ("accepted", "rewritten"):
            assert step["score"] <= 0


async def test_an_assistants_context_sets_the_judge(langgraph_dev):
    client = get_client(url=langgraph_dev)
    # Studio's assistant form writes the context: the score judge with a threshold no step
    # reaches (scores are 0-9), so the base model writes every step the draft proposed
    schema = (
        await client.assistants.get_schemas(
            (await client.assistants.search(graph_id="specreason"))[0]["assistant_id"]
        )
    )["context_schema"]
    assert {"judge", "threshold", "budget"} <= set(schema["properties"])
    strict = await client.assistants.create(
        "specreason", context={"judge": "score", "threshold": 10}, name="strict"
    )
    thread = await client.threads.create()
    out = await client.runs.wait(
        thread["thread_id"],
        strict["assistant_id"],
        input={"messages": [{"role": "user", "content": "What is 12*7?"}]},
    )
    assert out["steps"]
    judged = [s for s in out["steps"] if s["decision"] in ("accepted", "rewritten")]
    assert judged and all(s["decision"] == "rewritten" for s in judged)
    assert all(0 <= s["score"] <= 9 for s in judged)  # the score judge's digits, not logprobs
