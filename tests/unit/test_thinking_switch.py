"""Qwen3-style thinking switches (``chat_template_kwargs``): passed through, or refused clearly.

The ``think`` family speculates on the text inside ``<think>...</think>``; a switch that turns
thinking off leaves nothing to speculate on, so it is a ConfigError naming the switch, at
construction or per call. Turning thinking on passes through to every request.
"""

from __future__ import annotations

import pytest

from langchain_specreason import ConfigError
from langchain_specreason.formats import check_thinking_switch, get_format

from .test_request_options import FakeVLLM, served_model

OFF = {"chat_template_kwargs": {"enable_thinking": False}}
ON = {"chat_template_kwargs": {"enable_thinking": True}}


@pytest.mark.parametrize("key", ["enable_thinking", "thinking"])
def test_a_switch_turning_thinking_off_is_refused_for_the_think_family_only(key):
    off = {"chat_template_kwargs": {key: False}}
    with pytest.raises(ConfigError, match=rf"'{key}': False.*family='think'.*family='instruct'"):
        check_thinking_switch(get_format("think"), off)
    check_thinking_switch(get_format("instruct"), off)  # Qwen3 without thinking: an instruct model
    check_thinking_switch(get_format("think"), {"chat_template_kwargs": {key: True}})
    check_thinking_switch(get_format("think"), None)
    check_thinking_switch(get_format("think"), {"chat_template_kwargs": None})


def test_the_model_refuses_thinking_off_at_construction_naming_the_switch():
    with pytest.raises(ConfigError, match="enable_thinking"):
        served_model(FakeVLLM(), family="think", extra_body=OFF)


async def test_a_per_call_switch_off_is_refused_before_any_request():
    server = FakeVLLM()
    model = served_model(server, family="think")
    with pytest.raises(ConfigError, match="enable_thinking"):
        await model.ainvoke("hi", extra_body=OFF)
    assert server.chat_bodies() == []


async def test_thinking_on_passes_through_to_every_request():
    server = FakeVLLM()
    model = served_model(server, family="think", extra_body=ON)
    await model.ainvoke("hi")
    bodies = server.chat_bodies()
    assert bodies and all(b["chat_template_kwargs"] == {"enable_thinking": True} for b in bodies)
