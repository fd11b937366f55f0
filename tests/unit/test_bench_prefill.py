"""The judge's prefill floor: each judge call's prompt tokens minus its prefix's tokens."""

from __future__ import annotations

from langchain_specreason.endpoint import OpenAIEndpoint
from langchain_specreason.formats import get_format
from langchain_specreason.lab.bench.prefill import judge_prefill_floor

from .fakes import loopback_server

CONVERSATION = [{"role": "user", "content": "What is 2+3?"}]


def record(text: str, *, score: float | None, prompt_tokens: int, draft: str | None = None):
    return {
        "index": 0,
        "text": text,
        "author": "draft" if draft is None else "base",
        "decision": "accepted" if draft is None else "rewritten",
        "score": score,
        "draft_text": draft,
        "tokens": 4,
        "draft_tokens": 4,
        "base_tokens": 0,
        "draft_s": 0.1,
        "judge_s": 0.1,
        "rewrite_s": 0.0,
        "judge_prompt_tokens": prompt_tokens,
        "judge_cached_tokens": 0,
        "finish": "delimiter",
    }


def words(messages) -> int:
    """The stand-in's tokenizer: one token per word, two per message (its template)."""
    return sum(len(m["content"].split()) + 2 for m in messages)


async def test_floor_subtracts_each_judged_steps_prefix_counted_by_the_server():
    bodies: list[dict] = []

    def respond(path, body):
        if path != "/tokenize":
            return 404, None
        bodies.append(body)
        count = words(body["messages"]) + body["add_generation_prompt"]
        return 200, {"count": count, "tokens": list(range(count))}

    steps = [
        record("Two plus three.\n\n", score=9.0, prompt_tokens=30),
        record("It is five.\n\n", score=3.0, prompt_tokens=40, draft="It is six."),
        record("So 5.", score=None, prompt_tokens=0),  # not judged (a base step): no call
    ]
    with loopback_server(respond) as url:
        base = OpenAIEndpoint(f"{url}/v1", model="m", name="base")
        floor = await judge_prefill_floor(base, CONVERSATION, get_format("instruct"), steps)
    # step 0: prefix = the question and the generation prompt (3 words + 2, + 1)
    # step 1: prefix = the question and the kept step 0, continued (3 + 2, + 3 + 2)
    assert floor == (30 - 6) + (40 - 10)
    assert [b["add_generation_prompt"] for b in bodies] == [True, False]
    assert [b["continue_final_message"] for b in bodies] == [False, True]
    assert bodies[1]["messages"][-1] == {"role": "assistant", "content": "Two plus three.\n\n"}
    assert all(b["model"] == "m" for b in bodies)


async def test_floor_is_unknown_when_the_server_cannot_tokenize():
    steps = [record("A step.\n\n", score=9.0, prompt_tokens=30)]
    with loopback_server(lambda path, body: (404, None)) as url:
        base = OpenAIEndpoint(f"{url}/v1", model="m", name="base")
        assert await judge_prefill_floor(base, CONVERSATION, get_format("instruct"), steps) is None
    nobody = OpenAIEndpoint(
        "http://127.0.0.1:9/v1", model="m", name="base", timeout=2, max_retries=0
    )
    assert await judge_prefill_floor(nobody, CONVERSATION, get_format("instruct"), steps) is None
