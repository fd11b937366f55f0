"""Token counts on this machine equal the vLLM server's own, and need no request.

The cpu-test base server reports its model folder (``root`` at ``/v1/models``); that folder is
on this machine, so ``ChatSpecReason`` counts with the model's own tokenizer and chat template.
"""

from __future__ import annotations

import httpx2
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
    trim_messages,
)

from langchain_specreason import ChatSpecReason, OpenAIEndpoint
from langchain_specreason.chat_model.local_tokens import local_counter, served_root

TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
CASES = [
    ([{"role": "user", "content": "Hello there, how are you today?"}], None),
    (
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is 12*7?"},
            {"role": "assistant", "content": "84."},
            {"role": "user", "content": "And 13*7? Explain each step.\n\nThen stop."},
        ],
        None,
    ),
    ([{"role": "user", "content": "Add 2 and 3 with the tool."}], [TOOL]),
    ([{"role": "assistant", "content": "hi"}], None),  # no user message: still counted
]


async def _served_folder(base: OpenAIEndpoint) -> str | None:
    return served_root(await base.models(), await base.model_name())


async def test_the_models_own_tokenizer_counts_what_the_server_counts(servers):
    base = OpenAIEndpoint(servers.base_url, name="base")
    counter = local_counter(await _served_folder(base))
    assert counter is not None  # the cpu-test base's folder is on this machine
    for messages, tools in CASES:
        assert counter.count_messages(messages, tools) == await base.count_tokens(
            messages, tools=tools
        )
    text = "Step 1: 12 * 7 = 84.\n\nSo the answer is 84."
    assert counter.count_text(text) == len(await base.tokenize_text(text))


async def test_the_chat_model_counts_locally_without_a_tokenize_request(servers):
    paths: list[str] = []

    async def record(request: httpx2.Request) -> None:
        paths.append(request.url.path)

    client = httpx2.AsyncClient(event_hooks={"request": [record]})
    model = ChatSpecReason(
        draft_url=servers.draft_url, base_url=servers.base_url, http_async_client=client
    )
    history = [
        SystemMessage("You are terse."),
        HumanMessage("What is 12*7?"),
        AIMessage("84."),
        HumanMessage("And 13*7?"),
    ]
    base = OpenAIEndpoint(servers.base_url, name="base")
    exact = await base.count_tokens(convert_to_openai_messages(history))
    assert model.get_num_tokens_from_messages(history) == exact
    trimmed = trim_messages(history, max_tokens=exact - 5, token_counter=model, strategy="last")
    assert 0 < len(trimmed) < len(history)
    assert model.get_num_tokens_from_messages([ToolMessage("84", tool_call_id="1")]) > 0
    assert not any(path.endswith("/tokenize") for path in paths), paths  # all counted here


async def test_a_tokenizer_folder_counts_with_the_server_down(servers):
    folder = await _served_folder(OpenAIEndpoint(servers.base_url, name="base"))
    model = ChatSpecReason(
        draft_url="http://127.0.0.1:9/v1", base_url="http://127.0.0.1:9/v1", tokenizer=folder
    )
    messages = CASES[1][0][:2]  # a list that opens with a system message counts exactly
    exact = await OpenAIEndpoint(servers.base_url, name="base").count_tokens(messages)
    ours = [SystemMessage(messages[0]["content"]), HumanMessage(messages[1]["content"])]
    assert model.get_num_tokens_from_messages(ours) == exact
