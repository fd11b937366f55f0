"""ChatSpecReason behaviour pinned with scripted endpoints (no network)."""

from __future__ import annotations

import pytest
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from pydantic import SecretStr

from langchain_specreason import ChatSpecReason, ConfigError, SpecReasonConfig

from .fakes import ScriptedEndpoint, is_judge, partial_of, score, step


def fake_model(family: str = "instruct", **kwargs) -> ChatSpecReason:
    def draft(req):
        n = partial_of(req).count("\n\n")
        if family == "think":
            return step("Thinking done.", 3, stop="</think>") if n == 2 else step(f"T{n}.", 4)
        return step(f"S{n}.", 4, end=n == 2)

    def base(req):
        if is_judge(req):
            judged = req.messages[-3]["content"]  # the reply with the step under judgement
            return score("2" if judged.endswith("S1.\n\n") else "9")
        if req.stop is None or "\n\n" not in req.stop:
            from langchain_specreason.endpoint import Completion

            return Completion(
                text="The answer is 84.",
                finish_reason="stop",
                completion_tokens=6,
                prompt_tokens=30,
            )
        n = partial_of(req).count("\n\n")
        return step(f"B{n}.", 5)

    kwargs.setdefault("judge", "score")  # scripted 0-9 digits
    return ChatSpecReason(
        draft_endpoint=ScriptedEndpoint("draft", draft),
        base_endpoint=ScriptedEndpoint("base", base),
        family=family,
        api_key=SecretStr("sk-top-secret"),
        **kwargs,
    )


def with_tool_reply(model: ChatSpecReason, arguments: str):
    """The model's base server answers a call with tools by calling ``multiply`` with
    ``arguments`` (as written); returns the tool and the base endpoint."""
    from langchain_core.tools import tool

    from langchain_specreason.endpoint import Completion

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    base = model.base_endpoint
    handler = base.handler

    def tool_reply(req):
        if req.tools:
            return Completion(
                text="",
                finish_reason="tool_calls",
                completion_tokens=9,
                tool_calls=[
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "multiply", "arguments": arguments},
                    }
                ],
            )
        return handler(req)

    base.handler = tool_reply
    return multiply, base


async def test_stream_yields_each_kept_step_once_then_answer_for_think_family():
    model = fake_model("think")
    chunks = [c async for c in model.astream("What is 12*7?")]
    reasoning = [c.additional_kwargs.get("reasoning_content") for c in chunks]
    contents = [c.content for c in chunks]
    steps = [r for r in reasoning if r]
    assert steps == ["T0.\n\n", "T1.\n\n", "Thinking done."]
    first_answer = next(i for i, c in enumerate(contents) if c)
    last_reasoning = max(i for i, r in enumerate(reasoning) if r)
    assert last_reasoning < first_answer  # all reasoning before any answer token
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert full.content == "The answer is 84. "
    assert full.additional_kwargs["reasoning_content"] == "T0.\n\nT1.\n\nThinking done."
    assert full.content_blocks[0]["type"] == "reasoning"
    assert full.usage_metadata["output_token_details"]["reasoning"] == 11
    assert full.response_metadata["finish_reason"] == "stop"


async def test_invoke_metadata_and_usage_for_instruct_family():
    model = fake_model()
    msg = await model.ainvoke("What is 12*7?")
    assert msg.content == "S0.\n\nB1.\n\nS2."  # step 1 scored 2 -> rewritten by base
    meta = msg.response_metadata
    assert meta["model_name"] is not None and meta["finish_reason"] == "stop"
    assert meta["specreason"]["steps_accepted"] == 2 and meta["specreason"]["steps_rewritten"] == 1
    # every call's output tokens by model (as usage_by_model); the kept trace's in "specreason"
    assert meta["tokens_by_model"] == {"draft": 16, "base": 8}
    # usage counts every server call: 4 drafted steps of 4 tokens (steps 0 and 2, and steps
    # 1 and 2 drafted ahead during the judge), 3 judge readings of one token, 1 rewrite of 5
    by_model = meta["usage_by_model"]
    assert {m: u["output_tokens"] for m, u in by_model.items()} == {"draft": 16, "base": 3 + 5}
    usage = msg.usage_metadata
    assert usage["output_tokens"] == 24
    assert usage["input_tokens"] == sum(u["input_tokens"] for u in by_model.values()) > 0
    assert usage["total_tokens"] == usage["input_tokens"] + 24
    # each judge reading read 100 prompt tokens, 64 of them from the prefix cache
    assert by_model["base"]["input_token_details"] == {"cache_read": 3 * 64}
    assert usage["input_token_details"]["cache_read"] == 3 * 64
    # the judges' readings are reported apart, not as the user's input tokens
    judged = model.base_endpoint.judge_calls()
    assert len(judged) == 3 and meta["specreason"]["judge_calls"] == 3
    assert "judge_prompt_tokens" in meta["specreason"]


def test_sync_invoke_and_stream_share_the_async_path():
    model = fake_model()
    assert model.invoke("q").content == "S0.\n\nB1.\n\nS2."
    assert "".join(c.content for c in model.stream("q")) == "S0.\n\nB1.\n\nS2."


SERVER_CALLS = ("draft_step", "judge_step", "rewrite_step", "write_answer")


async def test_the_callers_tags_and_metadata_reach_every_child_run():
    collector = RunCollectorCallbackHandler()
    config = {"callbacks": [collector], "tags": ["mine"], "metadata": {"who": "me"}}
    await fake_model().ainvoke("What is 12*7?", config)
    root = collector.traced_runs[0]
    children: list = []

    def walk(run):
        for child in run.child_runs:
            children.append(child)
            walk(child)

    walk(root)
    assert {"specreason", "judge_step", "draft_step"} <= {r.name for r in children}
    for run in children:
        assert "mine" in run.tags, run.name
        assert run.extra["metadata"]["who"] == "me", run.name


async def test_tracing_has_a_child_run_per_server_call_with_step_metadata():
    # An inheritable handler, as LangSmith's tracer is (collect_runs() alone is not inherited
    # into LangGraph's node runs).
    collector = RunCollectorCallbackHandler()
    model = fake_model()
    await model.ainvoke("What is 12*7?", {"callbacks": [collector]})
    assert [r.name for r in collector.traced_runs] == ["ChatSpecReason"]
    root = collector.traced_runs[0]
    parents: dict[str, str] = {}
    runs: dict[str, list] = {}

    def walk(run, parent=None):
        runs.setdefault(run.name, []).append(run)
        if parent is not None:
            parents[str(run.id)] = parent.name
        for child in run.child_runs:
            walk(child, run)

    def parent(run) -> str:
        return parents[str(run.id)]

    walk(root)
    assert parent(runs["specreason"][0]) == "ChatSpecReason"
    for call, node in [
        ("draft_step", "verify"),
        ("judge_step", "verify"),
        ("rewrite_step", "rewrite"),
    ]:
        assert {parent(r) for r in runs[call]} == {node}
    assert {parent(r) for r in runs["verify"] + runs["rewrite"]} == {"specreason"}
    judges = runs["judge_step"]
    assert [r.extra["metadata"]["specreason_step"] for r in judges] == [0, 1, 2]
    decided = [r.outputs["llm_output"] for r in judges]
    assert [o["decision"] for o in decided] == ["accepted", "rewritten", "accepted"]
    assert [o["score"] for o in decided] == [9.0, 2.0, 9.0]
    # every server call is an LLM run of its served model, with its tokens (LangSmith's token
    # and cost columns read ls_provider, ls_model_name and the message's usage_metadata)
    calls = [r for name in SERVER_CALLS for r in runs.get(name, [])]
    assert {r.name for r in calls} >= {"draft_step", "judge_step", "rewrite_step"}
    for run in calls:
        assert run.run_type == "llm", run.name
        meta = run.extra["metadata"]
        role = "draft" if run.name == "draft_step" else "base"
        assert (meta["ls_provider"], meta["ls_model_name"]) == ("vllm", role), run.name
        [[generation]] = run.outputs["generations"]
        usage = generation["message"]["kwargs"]["usage_metadata"]
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert usage["output_tokens"] > 0, run.name
    rewrite = runs["rewrite_step"][0]
    assert rewrite.extra["metadata"]["specreason_decision"] == "rewritten"
    assert rewrite.extra["metadata"]["specreason_score"] == 2.0
    # Step 0 and step 2 (after the rewrite) are drafted by the verify node; steps 1 and 2 are
    # also drafted ahead while the judge reads the step before (step 2's is discarded: step 1
    # was rewritten, so it continued a prefix that was not kept).
    drafts = runs["draft_step"]
    on_path = [r for r in drafts if not r.extra["metadata"].get("specreason_lookahead")]
    ahead = [r for r in drafts if r.extra["metadata"].get("specreason_lookahead")]
    assert [(r.extra["metadata"]["specreason_step"], parent(r)) for r in on_path] == [
        (0, "verify"),
        (2, "verify"),
    ]
    assert [(r.extra["metadata"]["specreason_step"], parent(r)) for r in ahead] == [
        (1, "verify"),
        (2, "verify"),
    ]
    everything = str(
        [(r.serialized, r.extra, r.inputs, r.outputs) for group in runs.values() for r in group]
    )
    assert "sk-top-secret" not in everything


def test_missing_urls_and_bad_knobs_are_typed_errors(monkeypatch):
    monkeypatch.delenv("SPECREASON_DRAFT_URL", raising=False)
    monkeypatch.delenv("SPECREASON_BASE_URL", raising=False)
    with pytest.raises(
        ConfigError,
        match=r"no draft server: pass draft_url= \(or set "
        r"SPECREASON_DRAFT_URL\) or draft_endpoint=",
    ):
        ChatSpecReason().invoke("hi")
    with pytest.raises(ConfigError, match=r"threshold: Input should be less than or equal to 10"):
        ChatSpecReason(threshold=11)


def test_secret_is_not_in_repr():
    model = ChatSpecReason(draft_url="http://d/v1", base_url="http://b/v1", api_key="sk-xyz")
    assert "sk-xyz" not in repr(model) and "sk-xyz" not in str(model.model_dump())


async def test_bound_tools_reach_the_answer_call_and_come_back_as_tool_calls():
    model = fake_model()
    multiply, base = with_tool_reply(model, '{"a": 123, "b": 456}')
    msg = await model.bind_tools([multiply], tool_choice="any").ainvoke("123*456?")
    answer_call = next(r for r in base.requests if r.tools)
    assert answer_call.tools[0]["function"]["name"] == "multiply"
    assert answer_call.tool_choice == "required"
    assert msg.tool_calls == [
        {"name": "multiply", "args": {"a": 123, "b": 456}, "id": "call-1", "type": "tool_call"}
    ]
    assert msg.response_metadata["finish_reason"] == "tool_calls"


def test_every_specreason_knob_is_a_field_with_the_configs_default(monkeypatch):
    monkeypatch.delenv("SPECREASON_JUDGE", raising=False)
    model = ChatSpecReason(draft_url="http://127.0.0.1:1/v1", base_url="http://127.0.0.1:2/v1")
    assert model.spec_config() == SpecReasonConfig()
    for name, field in SpecReasonConfig.model_fields.items():
        assert name in ChatSpecReason.model_fields
        assert ChatSpecReason.model_fields[name].description == field.description or name == "judge"
    changed = ChatSpecReason(
        draft_url="http://127.0.0.1:1/v1",
        base_url="http://127.0.0.1:2/v1",
        threshold=5,
        likelihood_threshold=-2.0,
        max_tokens=64,
    )
    # max_tokens bounds reasoning + answer: half each here (the answer's share is at most
    # answer_max_tokens)
    assert changed.spec_config() == SpecReasonConfig(
        threshold=5, likelihood_threshold=-2.0, budget=32, answer_max_tokens=32
    )


async def test_with_a_checkpointer_a_crashed_call_resumes_on_its_thread():
    from langgraph.checkpoint.memory import InMemorySaver

    crash = {"left": 1}

    def draft(req):
        n = partial_of(req).count("\n\n")
        if n == 2 and crash["left"]:  # the call dies while step 2 is drafted
            crash["left"] -= 1
            raise RuntimeError("client died")
        return step(f"S{n}.", 4, end=n == 3)

    def base(req):
        return score("9") if is_judge(req) else step("The answer.", 3, end=True)

    model = ChatSpecReason(
        draft_endpoint=ScriptedEndpoint("draft", draft),
        base_endpoint=ScriptedEndpoint("base", base),
        judge="score",
        lookahead=False,
        checkpointer=InMemorySaver(),
    )
    thread = {"metadata": {"thread_id": "t1"}}
    with pytest.raises(RuntimeError, match="client died"):
        await model.ainvoke("What is 12*7?", config=thread)
    drafted = len(model.draft_endpoint.requests)
    msg = await model.ainvoke("What is 12*7?", config=thread)
    assert msg.content == "S0.\n\nS1.\n\nS2.\n\nS3."
    again = [partial_of(r).count("\n\n") for r in model.draft_endpoint.requests[drafted:]]
    assert again == [2, 3]  # steps 0 and 1 came from the checkpoint, not from the servers
    # another conversation on the same thread starts fresh, with exactly its own messages
    other = await model.ainvoke([("user", "And 13*7?")], thread_id="t1")
    assert other.content.startswith("S0.")
    saved = await model.graph.aget_state({"configurable": {"thread_id": "t1"}})
    assert [m.type for m in saved.values["messages"]] == ["human", "ai"]


async def test_unparsable_tool_arguments_are_an_invalid_tool_call_as_with_chatopenai():
    model = fake_model()
    multiply, _ = with_tool_reply(model, '{"a": 123, "b": ')
    msg = await model.bind_tools([multiply]).ainvoke("123*456?")
    assert msg.tool_calls == []
    [invalid] = msg.invalid_tool_calls
    assert (invalid["name"], invalid["args"], invalid["id"]) == (
        "multiply",
        '{"a": 123, "b": ',
        "call-1",
    )
    assert "unparsable arguments" in invalid["error"]
    assert msg.response_metadata["finish_reason"] == "tool_calls"
    # streamed, the argument text arrives as tool_call_chunks, which LangChain merges (and
    # parses leniently) exactly as it does for ChatOpenAI's streams


async def test_knobs_bound_or_passed_per_call_apply_to_that_call():
    model = fake_model()  # temperature 0.6 by default
    draft = model.draft_endpoint
    await model.ainvoke("12*7?")
    assert {r.temperature for r in draft.requests} == {0.6}
    draft.requests.clear()
    await model.bind(temperature=0.0, seed=7).ainvoke("12*7?")
    assert {(r.temperature, r.seed) for r in draft.requests} == {(0.0, 7)}
    draft.requests.clear()
    await model.ainvoke("12*7?", budget=4)  # one 4-token step, then the answer
    assert len(draft.requests) == 1
    with pytest.raises(ConfigError, match="temperature: Input should be less than or equal to 2"):
        await model.ainvoke("12*7?", temperature=5)


class _Stalling(ScriptedEndpoint):
    """Answers like its handler, except that the call after ``calls`` never returns."""

    def __init__(self, endpoint: ScriptedEndpoint, calls: int) -> None:
        super().__init__(endpoint.name, endpoint.handler)
        self.calls = calls
        self.cancelled = 0

    async def complete(self, request):
        import asyncio

        if len(self.requests) >= self.calls:
            self.requests.append(request)
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return await super().complete(request)


@pytest.mark.parametrize("where", ["field", "call"])
async def test_past_its_deadline_a_call_is_cancelled_with_a_typed_error(where):
    import time

    from langchain_specreason import DeadlineError

    model = fake_model(**({"deadline": 0.3} if where == "field" else {}))
    stalled = _Stalling(model.draft_endpoint, calls=2)  # the third draft stalls
    model = model.model_copy(update={"draft_endpoint": stalled})
    start = time.perf_counter()
    with pytest.raises(
        DeadlineError,
        match=r"longer than its deadline of 0.3 s and was "
        r"cancelled; with a checkpointer, repeat the call",
    ):
        await model.ainvoke("What is 12*7?", **({"deadline": 0.3} if where == "call" else {}))
    assert time.perf_counter() - start < 5
    stalls = len(stalled.requests) - stalled.calls  # with lookahead, two drafts may be waiting
    assert stalls >= 1
    assert stalled.cancelled == stalls  # every call in flight was cancelled, none left running


def test_the_deadline_holds_on_the_sync_path_too():
    from langchain_specreason import DeadlineError

    model = fake_model(deadline=0.3)
    model = model.model_copy(update={"draft_endpoint": _Stalling(model.draft_endpoint, calls=1)})
    with pytest.raises(DeadlineError):
        model.invoke("What is 12*7?")


def test_bad_deadline_and_timeouts_are_config_errors():
    with pytest.raises(ConfigError, match="deadline"):
        ChatSpecReason(deadline=0)
    with pytest.raises(ConfigError, match="judge_timeout"):
        ChatSpecReason(judge_timeout=-1)


async def test_given_endpoints_and_a_custom_judge_are_what_the_run_uses():
    from langchain_specreason import Verdict

    class RejectSecond:
        def __init__(self) -> None:
            self.seen: list[str] = []

        async def judge(self, ctx):
            self.seen.append(ctx.step)
            return Verdict(accept=len(self.seen) != 2, score=float(len(self.seen) != 2))

    judge = RejectSecond()
    model = fake_model(custom_judge=judge)
    assert model.endpoint("draft") is model.draft_endpoint
    out = await model.ainvoke("What is 12*7?")
    meta = out.response_metadata["specreason"]
    assert judge.seen[:2] == ["S0.\n\n", "S1.\n\n"]
    assert (meta["steps_accepted"], meta["steps_rewritten"]) == (2, 1)
    assert model.base_endpoint.judge_calls() == []  # the named judge was not asked


def test_dumpd_load_round_trip_keeps_the_knobs_and_never_writes_a_key(monkeypatch):
    from langchain_core.load import dumpd, load

    from langchain_specreason import ChatSpecReason

    monkeypatch.setenv("SPECREASON_BASE_API_KEY", "sk-from-env")
    llm = ChatSpecReason(
        draft_url="http://d/v1",
        base_url="http://b/v1",
        api_key="sk-from-env",
        likelihood_threshold=-2.0,
        judge="arithmetic+likelihood",
    )
    data = dumpd(llm)
    assert "sk-from-env" not in str(data)
    assert data["kwargs"]["api_key"] == {
        "lc": 1,
        "type": "secret",
        "id": ["SPECREASON_BASE_API_KEY"],
    }
    back = load(
        data,
        valid_namespaces=["langchain_specreason"],
        allowed_objects=[ChatSpecReason],
        secrets_from_env=True,
    )
    assert isinstance(back, ChatSpecReason)
    assert back.spec_config() == llm.spec_config()
    assert back.api_key.get_secret_value() == "sk-from-env"
    assert back.dict() == llm.dict()


def test_sync_batch_answers_in_order_and_returns_exceptions_when_asked():
    model = fake_model()
    replies = model.batch(["q1", "q2", "q3"], config={"max_concurrency": 2})
    assert [r.content for r in replies] == ["S0.\n\nB1.\n\nS2."] * 3
    bad = model.batch(["q", "q"], return_exceptions=True, temperature=5)
    assert all(isinstance(r, ConfigError) for r in bad)
    assert model.batch([]) == []


@pytest.mark.timeout(30)  # a thread pool's batch would wait an hour for its stalled runs
def test_ctrl_c_during_a_sync_batch_cancels_every_run_at_once():
    import os
    import signal
    import threading
    import time

    model = fake_model()
    stalled = _Stalling(model.draft_endpoint, calls=0)  # every draft call stalls
    model = model.model_copy(update={"draft_endpoint": stalled})
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        model.batch(["q1", "q2", "q3"])
    # not the minutes the runs would take: a thread pool's batch waits for its threads
    assert time.perf_counter() - start < 5
    assert len(stalled.requests) >= 3 and stalled.cancelled == len(stalled.requests)


@pytest.mark.timeout(30)
def test_sync_batch_as_completed_yields_every_index_and_ctrl_c_cancels_the_rest():
    import os
    import signal
    import threading

    model = fake_model()
    got = dict(model.batch_as_completed(["q1", "q2"]))
    assert sorted(got) == [0, 1] and {m.content for m in got.values()} == {"S0.\n\nB1.\n\nS2."}
    assert list(model.batch_as_completed([])) == []
    stalled = _Stalling(model.draft_endpoint, calls=0)
    model = model.model_copy(update={"draft_endpoint": stalled})
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        list(model.batch_as_completed(["q1", "q2"]))
    assert len(stalled.requests) >= 2 and stalled.cancelled == len(stalled.requests)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("api", ["abatch", "batch"])
def test_a_failing_run_of_a_batch_cancels_the_others_before_its_error_is_raised(api):
    import asyncio
    import time

    from langchain_core.callbacks import AsyncCallbackHandler

    class FailsLate(AsyncCallbackHandler):
        raise_error = True

        async def on_chat_model_start(self, *args, **kwargs):
            await asyncio.sleep(0.5)  # the other runs are waiting on their drafts by now
            raise RuntimeError("this run failed")

    model = fake_model()
    stalled = _Stalling(model.draft_endpoint, calls=0)  # every draft call stalls
    model = model.model_copy(update={"draft_endpoint": stalled})
    configs = [{}, {}, {"callbacks": [FailsLate()]}]
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="this run failed"):
        if api == "batch":
            model.batch(["q1", "q2", "q3"], configs)
        else:
            asyncio.run(model.abatch(["q1", "q2", "q3"], configs))
    assert time.perf_counter() - start < 5
    # both other runs had a draft call in flight, and neither is left running
    assert len(stalled.requests) == 2 and stalled.cancelled == 2


def test_a_copy_with_new_fields_runs_with_them_after_the_original_was_used():
    model = fake_model()
    model.invoke("q")  # builds and caches the original's endpoints and graph
    first = model.draft_endpoint
    other = ScriptedEndpoint("draft", first.handler)
    copy = model.model_copy(update={"draft_endpoint": other})
    assert copy.invoke("q").content == "S0.\n\nB1.\n\nS2."
    assert other.requests, "the copy called the draft endpoint of the model it was copied from"
    before = len(first.requests)
    model.invoke("q")  # the original keeps its own
    assert len(first.requests) > before and model.endpoint("draft") is first


@pytest.mark.timeout(30)
async def test_stopping_abatch_as_completed_early_cancels_the_runs_still_going():
    import asyncio

    model = fake_model()
    stalled = _Stalling(model.draft_endpoint, calls=0)  # every draft call stalls
    model = model.model_copy(update={"draft_endpoint": stalled})
    runs = model.abatch_as_completed(["q1", "q2", "q3"], config={"max_concurrency": 2})
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(runs), 0.5)  # none ends; the caller gives up
    await runs.aclose()
    assert len(stalled.requests) == 2  # max_concurrency held the third back
    assert stalled.cancelled == 2  # and nothing is left running


def test_the_guide_names_the_default_judges_threshold_and_the_package_map_every_module():
    from pathlib import Path

    import langchain_specreason.chat_model as package

    first = (ChatSpecReason.__doc__ or "").split("\n\n")[1]  # the paragraph after the summary
    assert "`likelihood_threshold`" in first and "below `threshold`" not in first
    here = Path(package.__file__).parent
    modules = {p.name for p in here.glob("*.py") if p.name != "__init__.py"}
    assert {m for m in modules if f"``{m}``" not in (package.__doc__ or "")} == set()
