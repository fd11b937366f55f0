"""Endpoint failures as langchain-core's model errors and the openai SDK's own (no network).

LangChain's agent middlewares key on ``langchain_core.exceptions`` (``ModelRetryMiddleware``
reads ``is_retryable``, ``SummarizationMiddleware`` catches ``ContextOverflowError``); code
written for ChatOpenAI catches the SDK's types. Both must hold, and the old names too.
"""

from __future__ import annotations

import pickle

import httpx2
import openai
import pytest
from langchain_core import exceptions as core

from langchain_specreason import ChatRequest, ContextLengthError, EndpointError, OpenAIEndpoint
from langchain_specreason.errors import InputError, SpecReasonError

URL = "http://testserver/v1"
REQUEST = ChatRequest([{"role": "user", "content": "hi"}], 4)


def _endpoint(status: int, message: str = "no") -> OpenAIEndpoint:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, json={"message": message})

    return OpenAIEndpoint(
        URL, model="m", name="base", max_retries=0, transport=httpx2.MockTransport(handler)
    )


@pytest.mark.parametrize(
    ("status", "core_type", "sdk_type", "retryable"),
    [
        (400, core.ModelInvalidRequestError, openai.BadRequestError, False),
        (401, core.ModelAuthenticationError, openai.AuthenticationError, False),
        (403, core.ModelPermissionDeniedError, openai.PermissionDeniedError, False),
        (404, core.ModelNotFoundError, openai.NotFoundError, False),
        (422, core.ModelInvalidRequestError, openai.APIStatusError, False),
        (429, core.ModelRateLimitError, openai.RateLimitError, True),
        (500, core.ModelAPIError, openai.InternalServerError, True),
        (503, core.ModelAPIError, openai.InternalServerError, True),
    ],
)
async def test_an_http_error_is_the_matching_core_and_sdk_type(
    status, core_type, sdk_type, retryable
):
    with pytest.raises(EndpointError) as caught:
        await _endpoint(status).complete(REQUEST)
    exc = caught.value
    assert isinstance(exc, core_type) and isinstance(exc, sdk_type)
    assert isinstance(exc, SpecReasonError)
    assert exc.is_retryable is retryable
    assert exc.status_code == status and exc.response.status_code == status
    assert "base endpoint at http://testserver/v1" in str(exc)


async def test_a_prompt_too_long_is_a_context_overflow_and_still_a_context_length_error():
    endpoint = _endpoint(400, "This model's maximum context length is 4096 tokens.")
    with pytest.raises(core.ContextOverflowError) as caught:
        await endpoint.complete(REQUEST)
    exc = caught.value
    assert isinstance(exc, ContextLengthError) and isinstance(exc, InputError)
    assert isinstance(exc, openai.BadRequestError) and exc.status_code == 400
    assert exc.is_retryable is False


@pytest.mark.parametrize(
    ("raised", "core_type", "sdk_type"),
    [
        (httpx2.ConnectError("refused"), core.ModelConnectionError, openai.APIConnectionError),
        (httpx2.ReadTimeout("slow"), core.ModelTimeoutError, openai.APITimeoutError),
    ],
)
async def test_no_answer_is_a_retryable_connection_or_timeout_error(raised, core_type, sdk_type):
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise raised

    endpoint = OpenAIEndpoint(
        URL, model="m", name="base", max_retries=0, transport=httpx2.MockTransport(handler)
    )
    with pytest.raises(EndpointError) as caught:
        await endpoint.complete(REQUEST)
    exc = caught.value
    assert isinstance(exc, core_type) and isinstance(exc, sdk_type)
    assert exc.is_retryable is True


def test_errors_survive_pickling_with_their_type_and_fields():
    from langchain_specreason.errors import EndpointRateLimitError

    exc = EndpointRateLimitError("base", "http://u:p@h/v1", "HTTP 429", 429)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is EndpointRateLimitError
    assert (back.endpoint, back.url, back.status, str(back)) == (
        "base",
        "http://***@h/v1",
        429,
        str(exc),
    )
