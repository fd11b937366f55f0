"""One rule for what counts as a secret by its name (logs, meta.json, repr, refusals)."""

from __future__ import annotations

import pytest

from langchain_specreason import ChatSpecReason, ConfigError
from langchain_specreason.redaction import looks_secret
from langchain_specreason.serving.secrets import redact_args, redact_env, redact_record


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_API_KEY",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "PGPASSWORD",
        "--api-key",
        "--hf-token",
        "X-Api-Key",
        "Authorization",
        "Cookie",
        "openai_api_key",
        "client_secret",
        "apikey",
        "db_credentials",
    ],
)
def test_secret_names(name):
    assert looks_secret(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_tokens",
        "max_completion_tokens",
        "--tokenizer",
        "--max-num-batched-tokens",
        "SPECREASON_BUDGET",
        "keyboard",
        "monkey_patch",
        "CUDA_VISIBLE_DEVICES",
        "X-Session-Id",
    ],
)
def test_names_that_are_not_secrets(name):
    assert not looks_secret(name)


def test_every_place_applies_the_same_rule():
    assert redact_args(["--hf-token", "hf_x", "--max-num-batched-tokens", "64"]) == [
        "--hf-token",
        "***",
        "--max-num-batched-tokens",
        "64",
    ]
    assert redact_env({"PGPASSWORD": "pw", "VLLM_CPU_KVCACHE_SPACE": "2"}) == {
        "PGPASSWORD": "***",
        "VLLM_CPU_KVCACHE_SPACE": "2",
    }
    assert redact_record({"hf_token": "x", "token": "7"}) == {"hf_token": "***", "token": "7"}
    model = ChatSpecReason(
        draft_url="http://d/v1",
        base_url="http://b/v1",
        default_headers={"X-Api-Key": "k", "X-Session-Id": "s"},
    )
    assert model.model_dump()["default_headers"] == {"X-Api-Key": "**********", "X-Session-Id": "s"}
    with pytest.raises(ConfigError, match="looks like a secret"):
        ChatSpecReason(draft_url="http://d/v1", base_url="http://b/v1", hf_token="x")


def test_chatopenais_max_completion_tokens_is_the_answers_cap_not_a_secret():
    # the old rule refused every unknown name containing "token" as a secret
    model = ChatSpecReason(
        draft_url="http://d/v1", base_url="http://b/v1", max_completion_tokens=64
    )
    assert model.max_tokens == 64 and model.model_kwargs == {}
