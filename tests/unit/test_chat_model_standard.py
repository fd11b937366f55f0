"""LangChain's standard unit suite for ChatSpecReason (no network)."""

from __future__ import annotations

import pytest
from langchain_tests.unit_tests import ChatModelUnitTests

from tests.helpers import ChatSpecReasonSuite


class TestChatSpecReasonUnit(ChatSpecReasonSuite, ChatModelUnitTests):
    @property
    def chat_model_params(self) -> dict:
        return {
            "draft_url": "http://127.0.0.1:8101/v1",
            "base_url": "http://127.0.0.1:8102/v1",
            "model": "qwen2.5-coder-0.5b",
            "temperature": 0,
        }

    @property
    def init_from_env_params(self) -> tuple[dict, dict, dict]:
        return (
            {
                "SPECREASON_DRAFT_URL": "http://draft:1/v1",
                "SPECREASON_BASE_URL": "http://base:2/v1",
                "SPECREASON_BASE_API_KEY": "sk-base",
                "SPECREASON_DRAFT_API_KEY": "sk-draft",
            },
            {},
            {
                "draft_url": "http://draft:1/v1",
                "base_url": "http://base:2/v1",
                "api_key": "sk-base",
                "draft_api_key": "sk-draft",
            },
        )

    @pytest.mark.xfail(
        strict=True,
        reason="langchain-core's load(allowed_objects='all'), which this standard test uses, "
        "admits only the classes of langchain-core's own mapping; a package outside it loads "
        "with allowed_objects=[ChatSpecReason] (test_chat_model.py: the round trip)",
    )
    def test_serdes(self, model, snapshot) -> None:  # type: ignore[override]
        super().test_serdes(model, snapshot)
