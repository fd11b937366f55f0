"""What a ChatOpenAI user meets first, with scripted endpoints (no network).

Usage counted once, ``max_tokens`` bounding reasoning plus answer, token counting on any
message list, URLs checked at construction, the model's identity, and every knob from its
``SPECREASON_<FIELD>`` variable.
"""

from __future__ import annotations

import time

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler

from langchain_specreason import ChatSpecReason, ConfigError
from langchain_specreason.endpoint import Completion

from .fakes import ScriptedEndpoint, is_judge, partial_of, score
from .test_chat_model import fake_model


@pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "astream"])
async def test_the_usage_callback_counts_the_reply_once(how):
    model = fake_model()
    with get_usage_metadata_callback() as counted:
        if how == "invoke":
            msg = model.invoke("12*7?")
        elif how == "ainvoke":
            msg = await model.ainvoke("12*7?")
        elif how == "stream":
            msg = None
            for chunk in model.stream("12*7?"):
                msg = chunk if msg is None else msg + chunk
        else:
            msg = None
            async for chunk in model.astream("12*7?"):
                msg = chunk if msg is None else msg + chunk
    assert msg.usage_metadata["output_tokens"] == 24  # every server call, once
    assert counted.usage_metadata == {msg.response_metadata["model_name"]: msg.usage_metadata}


async def test_child_runs_still_show_each_calls_tokens_for_langsmith():
    model = fake_model()
    runs = RunCollectorCallbackHandler()
    msg = await model.ainvoke("12*7?", config={"callbacks": [runs]})

    def walk(run):
        for child in run.child_runs:
            yield child
            yield from walk(child)

    children = [r for r in walk(runs.traced_runs[0]) if r.run_type == "llm"]
    assert len(children) >= 4
    from langchain_core.tracers.langchain import _get_usage_metadata_from_generations

    total = 0
    for run in children:  # what LangChainTracer stores as extra.metadata.usage_metadata
        usage = _get_usage_metadata_from_generations(run.outputs["generations"])
        assert usage is not None and usage["total_tokens"] >= 1
        assert run.extra["metadata"]["ls_model_name"]
        total += usage["output_tokens"]
    assert total == msg.usage_metadata["output_tokens"]


def _bounded_model(answer_tokens: int = 6, **kwargs) -> ChatSpecReason:
    """Steps of up to 4 tokens that never end on their own; an answer of ``answer_tokens``."""

    def draft(req):
        tokens = min(4, req.max_tokens)
        return Completion(
            text=f"S{partial_of(req).count(chr(10))}.",
            finish_reason="stop" if tokens == 4 else "length",
            stop_reason="\n\n" if tokens == 4 else None,
            completion_tokens=tokens,
        )

    def base(req):
        if is_judge(req):
            return score("9")
        tokens = min(answer_tokens, req.max_tokens)
        return Completion(
            text="84",
            finish_reason="stop" if tokens == answer_tokens else "length",
            completion_tokens=tokens,
        )

    return ChatSpecReason(
        draft_endpoint=ScriptedEndpoint("draft", draft),
        base_endpoint=ScriptedEndpoint("base", base),
        judge="score",
        lookahead=False,
        **kwargs,
    )


@pytest.mark.parametrize("where", ["field", "call"])
async def test_max_tokens_bounds_reasoning_plus_answer(where):
    model = _bounded_model(max_tokens=20) if where == "field" else _bounded_model()
    msg = await (model.ainvoke("q") if where == "field" else model.ainvoke("q", max_tokens=20))
    asked = [r.max_tokens for r in model.draft_endpoint.requests]
    answer = [r.max_tokens for r in model.base_endpoint.generation_calls()]
    # each step asks for no more than what is left of the reasoning's share (10 of 20; each
    # scripted step writes 4 tokens)
    assert asked == [10, 6, 2]
    reasoning = msg.usage_metadata.get("output_token_details", {}).get("reasoning")
    kept = msg.response_metadata["specreason"]
    assert answer == [10]  # the rest of max_tokens
    assert msg.content.rstrip().endswith("84")  # the answer still came
    assert msg.response_metadata["finish_reason"] == "length"  # the bound cut the reasoning
    assert reasoning is None or reasoning <= 10
    assert kept["steps_accepted"] >= 1


@pytest.mark.parametrize("max_tokens", [16000, 32768])
async def test_a_reasoning_models_max_tokens_keeps_the_budget_and_says_stop(max_tokens):
    """16k-32k, usual for reasoning models, is above budget + answer: the reasoning keeps its
    budget, the answer its cap, and a trace that spends its own budget was not cut (F1)."""
    model = _bounded_model(max_tokens=max_tokens, budget=12)
    msg = await model.ainvoke("q")
    answer = [r.max_tokens for r in model.base_endpoint.generation_calls()]
    assert msg.response_metadata["specreason"]["budget"] == 12
    assert msg.response_metadata["specreason"]["steps_accepted"] == 3  # the whole budget
    assert answer == [model.answer_max_tokens]
    assert msg.response_metadata["finish_reason"] == "stop"


async def test_a_cut_answer_says_length_and_small_bounds_never_ask_for_more():
    model = _bounded_model(answer_tokens=50, max_tokens=5)
    msg = await model.ainvoke("q")
    asked = [r.max_tokens for r in model.draft_endpoint.requests + model.base_endpoint.requests]
    assert sum(r for r in asked if r > 1) <= 5  # judge readings are one token each
    assert msg.response_metadata["finish_reason"] == "length"
    with pytest.raises(ConfigError, match="max_tokens"):
        await model.ainvoke("q", max_tokens=1)


def test_token_counting_works_on_any_message_list_without_a_server():
    model = fake_model()  # scripted endpoints: the offline estimate
    assert model.get_num_tokens_from_messages([AIMessage("hi")]) > 0
    assert model.get_num_tokens_from_messages([SystemMessage("be brief")]) > 0
    assert model.get_num_tokens_from_messages([]) == 0
    history = [
        SystemMessage("be brief"),
        HumanMessage("one " * 40),
        AIMessage("two " * 40),
        HumanMessage("three"),
    ]
    kept = trim_messages(history, max_tokens=30, token_counter=model, strategy="last")
    assert kept and kept[-1].content == "three"


def test_counting_against_a_dead_port_is_fast_and_a_live_count_is_asked_once():
    from .fakes import loopback_server

    dead = ChatSpecReason(draft_url="http://127.0.0.1:9/v1", base_url="http://127.0.0.1:9/v1")
    import pytest_socket

    pytest_socket.enable_socket()
    pytest_socket.socket_allow_hosts(["127.0.0.1"])
    assert dead.get_num_tokens_from_messages([AIMessage("warm")]) > 0  # loads the estimator
    again = ChatSpecReason(draft_url="http://127.0.0.1:9/v1", base_url="http://127.0.0.1:9/v1")
    start = time.perf_counter()
    assert again.get_num_tokens_from_messages([AIMessage("hi")]) > 0  # the estimate
    assert time.perf_counter() - start < 2.0  # one attempt a route, not 2.7 s of retries

    asked: list[str] = []

    def respond(path, body):
        asked.append(path)
        if path.endswith("/models"):
            return 200, {"object": "list", "data": [{"id": "m", "object": "model"}]}
        return 200, {"tokens": list(range(7)), "count": 7}

    with loopback_server(respond) as root:
        live = ChatSpecReason(draft_url=root + "/v1", base_url=root + "/v1")
        messages = [AIMessage("hi")]
        assert live.get_num_tokens_from_messages(messages) == 7
        assert live.get_num_tokens_from_messages(messages) == 7
    # the list once (the second count is cached), and once per model the two renders that
    # measure the chat template's default system prompt (left out of every count)
    assert asked.count("/tokenize") == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("draft_url", "not a url"),
        ("base_url", "ftp://127.0.0.1/v1"),
        ("draft_url", "http:///v1"),
        ("base_url", "http://127.0.0.1:99999/v1"),
    ],
)
def test_a_malformed_or_unsupported_url_is_a_config_error_naming_the_field(field, value):
    urls = {"draft_url": "http://127.0.0.1:1/v1", "base_url": "http://127.0.0.1:2/v1"}
    with pytest.raises(ConfigError, match=field):
        ChatSpecReason(**{**urls, field: value})


def test_a_malformed_url_from_the_environment_is_refused_too(monkeypatch):
    monkeypatch.setenv("SPECREASON_DRAFT_URL", "localhost:8201")
    with pytest.raises(ConfigError, match="draft_url"):
        ChatSpecReason(base_url="http://127.0.0.1:2/v1")


async def test_model_name_and_provider_read_as_with_chatopenai():
    model = fake_model(model="qwen-base")
    assert model.model_name == "qwen-base" and model.model == "qwen-base"
    msg = await model.ainvoke("12*7?")
    assert msg.response_metadata["model_provider"] == "specreason"
    assert msg.response_metadata["model_name"] == "qwen-base"


async def test_reasoning_stays_a_content_block_with_the_provider_set():
    msg = await fake_model(family="think").ainvoke("12*7?")
    assert msg.response_metadata["model_provider"] == "specreason"
    kinds = [block["type"] for block in msg.content_blocks]
    assert kinds[0] == "reasoning" and "text" in kinds


async def test_a_per_call_model_other_than_the_base_is_refused_not_ignored():
    model = fake_model(model="qwen-base")
    with pytest.raises(ConfigError, match="per call"):
        await model.ainvoke("q", model="gpt-4o")
    assert not model.draft_endpoint.requests  # refused before any server call
    msg = await model.ainvoke("q", model="qwen-base")  # the same model: fine
    assert msg.response_metadata["model_name"] == "qwen-base"


def test_every_knob_comes_from_its_environment_variable(monkeypatch):
    monkeypatch.setenv("SPECREASON_BUDGET", "64")
    monkeypatch.setenv("SPECREASON_THRESHOLD", "5")
    monkeypatch.setenv("SPECREASON_DELIMITER", "\\n")
    urls = {"draft_url": "http://127.0.0.1:1/v1", "base_url": "http://127.0.0.1:2/v1"}
    model = ChatSpecReason(**urls)
    assert (model.budget, model.threshold, model.delimiter) == (64, 5.0, "\n")
    assert ChatSpecReason(**urls, budget=128).budget == 128  # an argument wins
    monkeypatch.setenv("SPECREASON_BUDGET", "lots")
    with pytest.raises(ConfigError, match="budget"):
        ChatSpecReason(**urls)
