"""Pure helpers: scoring, config validation, message rendering, stats, endpoint errors."""

from __future__ import annotations

import math

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import SecretStr

import langchain_specreason
from langchain_specreason import (
    ChatRequest,
    ConfigError,
    ContextLengthError,
    EndpointError,
    InputError,
    OpenAIEndpoint,
    SpecReasonConfig,
)
from langchain_specreason.formats import (
    PlainFormat,
    TagFormat,
    continue_messages,
    get_format,
    to_openai_messages,
)
from langchain_specreason.judges.score import average_score, digit_of, greedy_score


def test_public_api_is_pinned():
    # what an application imports; errors live in langchain_specreason.errors
    assert langchain_specreason.__all__ == [
        "ChatSpecReason",
        "Judge",
        "OpenAIEndpoint",
        "SpecReasonConfig",
        "__version__",
        "create_specreason_graph",
        "make_judge",
    ]
    for name in langchain_specreason.__all__:
        assert hasattr(langchain_specreason, name)
    assert langchain_specreason.__version__ == "0.1.0"
    from langchain_specreason import errors

    assert {"ConfigError", "EndpointError", "MissingExtraError"} <= set(errors.__all__)


@pytest.mark.parametrize(
    ("token", "digit"),
    [("7", 7), (" 7", 7), ("7\n", 7), ("77", None), ("seven", None), ("", None), ("٣", None)],
)
def test_digit_of(token, digit):
    assert digit_of(token) == digit


def test_greedy_score_non_digit_is_zero():
    assert greedy_score("9") == 9.0
    assert greedy_score("Yes") == 0.0


def test_average_score_renormalises_over_digit_tokens():
    top = [
        ("9", math.log(0.5)),
        (" 9", math.log(0.1)),
        ("3", math.log(0.2)),
        ("The", math.log(0.2)),
    ]
    # digits carry 0.8 of the mass: (0.6*9 + 0.2*3) / 0.8
    assert average_score(top) == pytest.approx((0.6 * 9 + 0.2 * 3) / 0.8)
    assert average_score([("no", -0.1)]) == 0.0
    assert average_score([]) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": -0.5}, "threshold: Input should be (greater|less) than or equal to"),
        ({"threshold": 10.5}, "threshold: Input should be (greater|less) than or equal to"),
        ({"budget": 0}, "budget: Input should be greater than 0"),
        ({"budget": -3}, "budget: Input should be greater than 0"),
        ({"step_max_tokens": 0}, "step_max_tokens: Input should be greater than 0"),
        (
            {"first_n_base_steps": -1},
            "first_n_base_steps: Input should be greater than or equal to 0",
        ),
        ({"score_method": "max"}, "score_method: Input should be 'greedy' or 'average'"),
        ({"delimiter": ""}, "delimiter: String should have at least 1 character"),
        ({"top_p": 0}, "top_p: Input should be"),
        ({"answer_by": "judge"}, "answer_by: Input should be"),
    ],
)
def test_bad_config_is_a_typed_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SpecReasonConfig(**kwargs)


def test_threshold_bounds_are_valid():
    assert SpecReasonConfig(threshold=0).threshold == 0
    assert SpecReasonConfig(threshold=10).threshold == 10


def test_repeated_roles_are_merged_and_system_kept():
    msgs = [
        SystemMessage("a"),
        SystemMessage("b"),
        HumanMessage("q1"),
        HumanMessage("q2"),
        AIMessage("r1"),
        AIMessage("r2"),
        HumanMessage("q3"),
    ]
    out = to_openai_messages(msgs)
    assert [(m["role"], m["content"]) for m in out] == [
        ("system", "a\n\nb"),
        ("user", "q1\n\nq2"),
        ("assistant", "r1\n\nr2"),
        ("user", "q3"),
    ]


def test_tuple_and_dict_messages_are_accepted():
    out = to_openai_messages([("user", "hi"), {"role": "assistant", "content": "yo"}])
    assert [m["role"] for m in out] == ["user", "assistant"]


def test_empty_or_userless_conversation_is_an_input_error():
    with pytest.raises(InputError, match="the conversation is empty"):
        to_openai_messages([])
    with pytest.raises(InputError, match="no user message"):
        to_openai_messages([SystemMessage("only system")])


def test_continue_messages_opens_with_generation_prompt_then_continues():
    conv = [{"role": "user", "content": "q"}]
    plain = PlainFormat()
    assert continue_messages(conv, plain, []) == (conv, False)
    msgs, cont = continue_messages(conv, plain, ["a\n\n", "b\n\n"])
    assert cont and msgs[-1] == {"role": "assistant", "content": "a\n\nb\n\n"}
    msgs, cont = continue_messages(conv, TagFormat(), [])
    assert cont and msgs[-1]["content"] == "<think>\n"


def test_unknown_family_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown prompt family 'llama'"):
        get_format("llama")


def test_endpoint_repr_and_errors_never_show_the_key():
    endpoint = OpenAIEndpoint(
        "http://127.0.0.1:1/v1", api_key=SecretStr("sk-secret"), name="base", max_retries=0
    )
    assert "sk-secret" not in repr(endpoint)


@pytest.mark.parametrize("retries, said", [(2, "3 attempts"), (0, "1 attempt ")])
async def test_endpoint_retries_transient_errors_then_names_itself(monkeypatch, retries, said):
    endpoint = OpenAIEndpoint("http://127.0.0.1:1/v1", model="m", name="base", max_retries=retries)
    calls = []
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")

    async def boom(**kwargs):
        calls.append(kwargs)
        raise openai.APIConnectionError(request=request)

    monkeypatch.setattr(endpoint.client.chat.completions, "create", boom)
    monkeypatch.setattr(
        "langchain_specreason.endpoint.server.wait_exponential_jitter", lambda **kw: lambda state: 0
    )
    with pytest.raises(
        EndpointError,
        match=r"base endpoint at http://127.0.0.1:1/v1: "
        r"unreachable after " + said,
    ):
        await endpoint.complete(ChatRequest([{"role": "user", "content": "x"}], 1))
    assert len(calls) == retries + 1


async def test_endpoint_does_not_retry_client_errors(monkeypatch):
    endpoint = OpenAIEndpoint("http://127.0.0.1:1/v1", model="m", name="draft", max_retries=3)
    calls = []
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")

    async def too_long(**kwargs):
        calls.append(kwargs)
        response = httpx.Response(
            400,
            request=request,
            json={"error": {"message": "This model's maximum context length is 4096 tokens."}},
        )
        raise openai.BadRequestError("bad", response=response, body=response.json()["error"])

    monkeypatch.setattr(endpoint.client.chat.completions, "create", too_long)
    with pytest.raises(ContextLengthError, match="maximum context length is 4096"):
        await endpoint.complete(ChatRequest([{"role": "user", "content": "x"}], 1))
    assert len(calls) == 1


def test_config_flags_come_from_the_config_fields():
    import argparse

    from langchain_specreason.config import add_config_flags

    parser = argparse.ArgumentParser()
    add_config_flags(parser, ["budget", "score_method", "lookahead", "seed"], budget=64)
    args = parser.parse_args([])
    assert (args.budget, args.score_method, args.lookahead, args.seed) == (64, "greedy", True, None)
    args = parser.parse_args(
        ["--budget", "32", "--score-method", "average", "--no-lookahead", "--seed", "3"]
    )
    assert (args.budget, args.score_method, args.lookahead, args.seed) == (32, "average", False, 3)
    assert "Token budget" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args(["--score-method", "median"])


def test_settings_read_back_only_their_own_flags_and_errors_name_the_flag():
    import argparse

    from langchain_specreason.config import (
        SpecReasonConfig,
        add_config_flags,
        add_settings_flags,
    )

    parser = argparse.ArgumentParser()
    add_config_flags(parser, ["budget", "lookahead"], budget=64)
    parser.add_argument("--threshold", type=float, nargs="+")  # the command's own, a list
    args = parser.parse_args(["--threshold", "5", "7", "--no-lookahead"])
    config = SpecReasonConfig.from_args(args)
    assert (config.budget, config.lookahead) == (64, False)
    assert config.threshold == SpecReasonConfig().threshold  # not the command's list
    renamed = argparse.ArgumentParser()
    add_settings_flags(renamed, SpecReasonConfig, ["budget"], flags={"budget": "--trace-budget"})
    bad = renamed.parse_args(["--trace-budget", "0"])
    with pytest.raises(ConfigError, match=r"^--trace-budget: Input should be greater than 0"):
        SpecReasonConfig.from_args(bad)
    with pytest.raises(ConfigError, match=r"^budget: Input should be greater than 0"):
        SpecReasonConfig(budget=0)  # in Python, the field's name
