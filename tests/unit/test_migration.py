"""Moving over from ChatOpenAI: its names work here, never as request fields; secrets stay out."""

from __future__ import annotations

import pytest

from langchain_specreason import ChatSpecReason
from langchain_specreason.errors import ConfigError

URLS = {"draft_url": "http://d/v1", "base_url": "http://b/v1"}


def test_chatopenai_names_are_aliases_not_request_fields(recwarn):
    llm = ChatSpecReason(
        **URLS, openai_api_key="sk-secret", model_name="qwen", request_timeout=30, max_retries=1
    )
    assert llm.api_key is not None and llm.api_key.get_secret_value() == "sk-secret"
    assert (llm.base_model, llm.timeout, llm.max_retries) == ("qwen", 30.0, 1)
    assert llm.model_kwargs == {}
    assert "sk-secret" not in repr(llm)
    assert not [w for w in recwarn if "transferred to model_kwargs" in str(w.message)]


def test_vllm_api_key_is_read_after_the_specreason_variable(monkeypatch):
    monkeypatch.delenv("SPECREASON_BASE_API_KEY", raising=False)
    monkeypatch.setenv("VLLM_API_KEY", "from-vllm")
    assert ChatSpecReason(**URLS).api_key.get_secret_value() == "from-vllm"
    monkeypatch.setenv("SPECREASON_BASE_API_KEY", "from-specreason")
    assert ChatSpecReason(**URLS).api_key.get_secret_value() == "from-specreason"


def test_a_single_openai_url_is_refused_with_the_two_urls_explained():
    with pytest.raises(ConfigError, match=r"two servers; pass draft_url=.*and base_url="):
        ChatSpecReason(openai_api_base="http://127.0.0.1:8000/v1")


@pytest.mark.parametrize("name", ["hf_token", "anthropic_api_key", "password", "Secret"])
def test_an_unknown_secret_looking_argument_is_refused(name):
    with pytest.raises(ConfigError, match=f"unknown argument '{name}' looks like a secret"):
        ChatSpecReason(**URLS, **{name: "x"})


def test_other_unknown_arguments_still_go_to_the_request_body():
    with pytest.warns(UserWarning, match="transferred to model_kwargs"):
        llm = ChatSpecReason(**URLS, repetition_penalty=1.1)
    assert llm.model_kwargs == {"repetition_penalty": 1.1}


def test_header_secrets_and_url_passwords_never_show():
    llm = ChatSpecReason(
        draft_url="http://user:pw@d/v1",
        base_url="http://b/v1",
        default_headers={"Authorization": "Bearer sk-xyz", "X-Trace": "1"},
    )
    for shown in (repr(llm), str(llm.model_dump()), llm.model_dump_json()):
        assert "sk-xyz" not in shown and ":pw@" not in shown
    assert llm.model_dump()["default_headers"] == {"Authorization": "**********", "X-Trace": "1"}
    assert llm.draft_url == "http://user:pw@d/v1"  # the endpoint still gets the real URL


def test_an_endpoint_error_never_carries_a_url_password():
    from langchain_specreason.errors import EndpointError

    err = EndpointError("draft", "http://user:pw@h:8101/v1", "unreachable")
    assert str(err) == "draft endpoint at http://***@h:8101/v1: unreachable"
    assert ":pw@" not in err.url


def test_replace_keeps_the_servers_checkpointer_and_keys():
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    llm = ChatSpecReason(**URLS, checkpointer=saver, api_key="k", default_headers={"X": "1"})
    stricter = llm.replace(likelihood_threshold=-2.0)
    assert stricter.spec_config().likelihood_threshold == -2.0
    assert llm.spec_config().likelihood_threshold != -2.0  # the original is unchanged
    assert (stricter.draft_url, stricter.base_url) == (URLS["draft_url"], URLS["base_url"])
    assert stricter.checkpointer is saver and stricter.api_key.get_secret_value() == "k"
    assert stricter.default_headers == {"X": "1"}
    with pytest.raises(ConfigError, match="threshold"):
        llm.replace(threshold=12)


def test_tool_choice_true_means_required_as_with_chatopenai():
    def add(a: int, b: int) -> int:
        """Add a and b."""
        return a + b

    llm = ChatSpecReason(**URLS)
    assert llm.bind_tools([add], tool_choice=True).kwargs["tool_choice"] == "required"
    assert llm.bind_tools([add], tool_choice=False).kwargs["tool_choice"] is None
    assert llm.bind_tools([add], tool_choice="add").kwargs["tool_choice"] == {
        "type": "function",
        "function": {"name": "add"},
    }


def test_the_cache_key_holds_every_option_that_changes_the_answer():
    class Judge:
        async def judge(self, ctx):  # pragma: no cover - never called here
            raise AssertionError

    plain = ChatSpecReason(**URLS)
    keys = {
        "plain": plain._get_llm_string(),
        "extra_body": ChatSpecReason(**URLS, extra_body={"min_p": 0.1})._get_llm_string(),
        "url": ChatSpecReason(**{**URLS, "draft_url": "http://d2/v1"})._get_llm_string(),
        "judge": ChatSpecReason(**URLS, custom_judge=Judge())._get_llm_string(),
        "threshold": ChatSpecReason(**URLS, likelihood_threshold=-1.0)._get_llm_string(),
    }
    assert len(set(keys.values())) == len(keys)
    assert ChatSpecReason(**URLS)._get_llm_string() == keys["plain"]  # same options, same key
