"""What a ChatSpecReason builds from its fields, and keeps: endpoints, graphs, the breaker, counts.

Copies (``replace``, ``model_copy(update=...)``) build what their own fields say and share no
cache with the original; the graph cache is bounded; one draft circuit breaker serves every
per-call setting of a model.
"""

from __future__ import annotations

import warnings

import httpx2
import pytest
from langchain_core.messages import HumanMessage

from langchain_specreason import ChatSpecReason
from langchain_specreason.chat_model.wiring import GRAPHS_KEPT
from langchain_specreason.endpoint import OpenAIEndpoint
from langchain_specreason.errors import EndpointError
from langchain_specreason.graph import breaker

from .fakes import ScriptedEndpoint, is_judge, score, step
from .test_chat_model import fake_model
from .test_local_tokens import folder

URLS = {"draft_url": "http://d:1/v1", "base_url": "http://b:1/v1"}


@pytest.mark.parametrize(
    ("change", "read"),
    [
        ({"timeout": 5.0}, lambda e: e.timeout == 5.0),
        ({"request_timeout": 5.0}, lambda e: e.timeout == 5.0),
        ({"judge_timeout": 5.0}, lambda e: e.judge_timeout == 5.0),
        ({"connect_timeout": 5.0}, lambda e: e.connect_timeout == 5.0),
        ({"max_retries": 0}, lambda e: e.max_retries == 0),
        ({"max_concurrency": 2}, lambda e: e.max_concurrency == 2),
        ({"model_kwargs": {"min_p": 0.1}}, lambda e: e.extra_body == {"min_p": 0.1}),
        ({"extra_body": {"min_p": 0.2}}, lambda e: e.extra_body == {"min_p": 0.2}),
        ({"default_headers": {"X-A": "1"}}, lambda e: e.default_headers == {"X-A": "1"}),
        ({"model": "other"}, lambda e: e.model == "other"),
        ({"model_name": "other"}, lambda e: e.model == "other"),
        ({"base_url": "http://c:1/v1"}, lambda e: e.base_url.startswith("http://c:1")),
        ({"http_async_client": httpx2.AsyncClient()}, lambda e: e.http_async_client is not None),
    ],
)
def test_replace_builds_the_endpoints_its_fields_say(change, read):
    llm = ChatSpecReason(**URLS)
    used = llm.endpoint("base")  # built: the model has been used
    copy = llm.replace(**change)
    assert isinstance(copy.endpoint("base"), OpenAIEndpoint)
    assert copy.endpoint("base") is not used
    assert read(copy.endpoint("base"))
    assert llm.endpoint("base") is used  # the original is untouched


def test_replace_of_a_knob_keeps_the_same_servers_and_clients():
    llm = ChatSpecReason(**URLS)
    used = llm.endpoint("base")
    assert llm.replace(temperature=0.5, judge="score").endpoint("base") is used


def test_copies_share_no_token_count_cache_with_the_original(tmp_path):
    (tmp_path / "one").mkdir()
    one = folder(tmp_path / "one")
    llm = ChatSpecReason(**URLS, tokenizer=str(one))
    question = [HumanMessage("what is 2")]
    assert llm.get_num_tokens_from_messages(question) == 6  # <s> <user> what is 2 <assistant>
    other = tmp_path / "other"
    other.mkdir()
    folder(other, template="{% for m in messages %}{{ m.content }} {% endfor %}")
    for copy in (
        llm.model_copy(update={"tokenizer": str(other)}),
        llm.replace(tokenizer=str(other)),
    ):
        assert copy.get_num_tokens_from_messages(question) == 3  # the other template's count
    assert llm.get_num_tokens_from_messages(question) == 6
    assert llm._counts and llm._local  # the original's caches: its own, kept


def test_model_copy_with_an_update_forgets_every_private_state():
    llm = fake_model()
    llm.invoke("12*7?")
    copy = llm.model_copy(update={"temperature": 0.3})
    for name, private in type(llm).__private_attributes__.items():
        if name == "_own_profile":
            continue
        value = getattr(copy, name)
        assert value == private.get_default(call_default_factory=True), name
        assert value is not getattr(llm, name) or value is None or isinstance(value, bool), name


def test_the_graph_cache_is_bounded_and_keeps_the_recent_ones():
    llm = fake_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for seed in range(GRAPHS_KEPT + 5):
            llm.invoke("12*7?", seed=seed)
            llm.graph  # the model's own settings: used again at every turn  # noqa: B018
    assert len(llm._graphs) == GRAPHS_KEPT
    assert llm._graph_for(llm.spec_config()) in llm._graphs.values()  # recently used: kept
    assert llm._graph_for(llm.spec_config(seed=GRAPHS_KEPT + 4)) is llm._graph_for(
        llm.spec_config(seed=GRAPHS_KEPT + 4)
    )


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_draft_outage_seen_under_one_setting_is_known_to_every_setting(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(breaker, "_monotonic", clock)

    def draft_down(request):
        raise EndpointError("draft", "http://d/v1", "unreachable (connection refused)")

    draft = ScriptedEndpoint("draft", draft_down)
    base = ScriptedEndpoint(
        "base", lambda r: score("9") if is_judge(r) else step("2+2 = 4.", 4, end=True)
    )
    llm = ChatSpecReason(draft_endpoint=draft, base_endpoint=base, judge="score")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        llm.invoke("What is 2+2?", temperature=0.1)
        assert len(draft.requests) == 1  # failed once: the breaker opened
        llm.invoke("What is 2+2?", temperature=0.2)  # another setting, another graph
        llm.invoke("What is 2+2?", seed=7)
        assert len(draft.requests) == 1  # skipped: the same breaker
        clock.now += llm.draft_cooldown + 1
        llm.invoke("What is 2+2?", seed=8)
    assert len(draft.requests) == 2  # past the model's cooldown: asked again


def _server(name: str, window: int | None, asked: list[str]) -> OpenAIEndpoint:
    def handler(request: httpx2.Request) -> httpx2.Response:
        asked.append(f"{name} {request.url.path}")
        if window is None:
            raise httpx2.ConnectError("connection refused")
        listed = {"id": name, "object": "model", "max_model_len": window}
        return httpx2.Response(200, json={"object": "list", "data": [listed]})

    return OpenAIEndpoint(
        "http://t/v1", name=name, transport=httpx2.MockTransport(handler), max_retries=0
    )


def test_a_summarization_middleware_can_be_built_on_a_fresh_model():
    from langchain.agents.middleware import SummarizationMiddleware

    asked: list[str] = []
    llm = ChatSpecReason(
        draft_endpoint=_server("draft", 4096, asked), base_endpoint=_server("base", 2048, asked)
    )
    assert not asked  # building the model asks nothing
    SummarizationMiddleware(llm, trigger=("fraction", 0.8))  # reads llm.profile
    assert llm.profile is not None and llm.profile["max_input_tokens"] == 2048
    assert llm.profile["tool_calling"]
    assert sorted(asked) == ["base /v1/models", "draft /v1/models"]  # once each
    copy = llm.model_copy(update={"base_endpoint": _server("base", 1024, asked)})
    assert copy.profile["max_input_tokens"] == 1024  # its own servers' window, not the learned
    assert llm.replace(temperature=0.5).profile["max_input_tokens"] == 2048


def test_an_unreachable_server_leaves_the_profile_without_a_window_and_is_asked_once():
    asked: list[str] = []
    llm = ChatSpecReason(
        draft_endpoint=_server("draft", None, asked), base_endpoint=_server("base", None, asked)
    )
    assert "max_input_tokens" not in llm.profile
    assert "max_input_tokens" not in llm.profile
    assert len(asked) == 2  # one attempt each, no retry, not asked again on the next read
    given = ChatSpecReason(**URLS, profile={"max_input_tokens": 10})
    assert given.profile == {"max_input_tokens": 10}  # given: kept as given, nothing asked


async def test_the_profile_read_inside_a_running_loop_never_blocks_it():
    asked: list[str] = []
    llm = ChatSpecReason(
        draft_endpoint=_server("draft", 4096, asked), base_endpoint=_server("base", 2048, asked)
    )
    assert "max_input_tokens" not in llm.profile and not asked  # learned by the first call
    await llm._adiscover()
    assert llm.profile["max_input_tokens"] == 2048
