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
        # short traces keep the suite within CI's time on two CPU cores
        return {**_URLS, "temperature": 0, "budget": 48, "step_max_tokens": 32, "seed": 0}

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return False  # two servers, one model each: the models are chosen at construction

    @property
    def supports_json_mode(self) -> bool:
        return True  # response_format={"type": "json_object"} on the base server

    @pytest.mark.xfail(reason=(
        "in free JSON (json_object) the 0.5B base repeats one sentence inside the object "
        "until max_tokens, so the JSON never closes; with vLLM's repetition_penalty sent "
        "through extra_body it completes (test_json_mode_with_a_repetition_penalty in "
        "tests/integration/test_chat_model.py; json_mode itself: "
        "tests/unit/test_structured_output.py)"))
    def test_json_mode(self, model):
        super().test_json_mode(model)

    @pytest.mark.xfail(reason=(
        "Qwen2.5-Coder-0.5B fills a no-argument call with its JSON schema "
        "({'properties': {}, 'type': 'object'}); guided decoding allows the extra keys"))
    def test_tool_calling_with_no_arguments(self, model):
        super().test_tool_calling_with_no_arguments(model)
