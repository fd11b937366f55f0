"""LangChain's standard integration suite for ChatSpecReason on the real cpu-test servers."""

from __future__ import annotations

import pytest
from langchain_tests.integration_tests import ChatModelIntegrationTests

from langchain_specreason import ChatSpecReason

pytestmark = pytest.mark.integration

_URLS: dict[str, str] = {}


class TestChatSpecReasonIntegration(ChatModelIntegrationTests):
    @pytest.fixture(autouse=True)
    def _servers(self, servers):
        _URLS.update(draft_url=servers.draft_url, base_url=servers.base_url)

    @property
    def chat_model_class(self) -> type[ChatSpecReason]:
        return ChatSpecReason

    @property
    def chat_model_params(self) -> dict:
        # short traces keep the suite within CI's time on two CPU cores; vLLM's
        # repetition_penalty (sent through extra_body) keeps the 0.5B base from repeating one
        # sentence inside free JSON (json_mode) until max_tokens
        return {**_URLS, "temperature": 0, "budget": 48, "step_max_tokens": 32, "seed": 0,
                "extra_body": {"repetition_penalty": 1.1}}

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return False  # two servers, one model each: the models are chosen at construction

    @property
    def supports_json_mode(self) -> bool:
        return True  # response_format={"type": "json_object"} on the base server
