"""Token counts on this machine from a tokenizer folder: the chat template and the tokenizer.

A tiny word-level tokenizer is built here (no network); the integration suite checks that the
real models' folders count exactly what their vLLM server's ``/tokenize`` counts.
"""

from __future__ import annotations

import json
import sys

import pytest

from langchain_specreason.chat_model.local_tokens import local_counter, served_root

TEMPLATE = (
    "{{ bos_token }} {% for m in messages %}<{{ m.role }}> {{ m.content }} {% endfor %}"
    "{% if tools %}<tools> {{ tools | length }} {% endif %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
WORDS = ["[UNK]", "<s>", "<user>", "<assistant>", "<system>", "<tools>", "1", "what", "is", "2"]


def folder(tmp_path, *, template: str | None = TEMPLATE, as_file: bool = False):
    tokenizers = pytest.importorskip("tokenizers", reason="the [cpu] extra's; tested without below")
    Tokenizer, models, pre_tokenizers = (
        tokenizers.Tokenizer,
        tokenizers.models,
        tokenizers.pre_tokenizers,
    )

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(tmp_path / "tokenizer.json"))
    config: dict = {"bos_token": {"content": "<s>", "special": True}}
    if template and as_file:
        (tmp_path / "chat_template.jinja").write_text(template)
    elif template:
        config["chat_template"] = template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return tmp_path


QUESTION = [{"role": "user", "content": "what is 2"}]


@pytest.mark.parametrize("as_file", [False, True])
def test_messages_are_rendered_by_the_models_template_then_counted(tmp_path, as_file):
    counter = local_counter(folder(tmp_path, as_file=as_file))
    assert counter is not None
    # <s> <user> what is 2 <assistant>: the bos token from the config, the generation prompt
    assert counter.count_messages(QUESTION) == 6
    assert counter.count_messages(QUESTION, tools=[{"type": "function"}]) == 8
    assert counter.count_text("what is 2") == 3


def test_a_folder_without_a_template_counts_text_only(tmp_path):
    counter = local_counter(folder(tmp_path, template=None))
    assert counter is not None
    assert counter.count_text("what is 2") == 3
    assert counter.count_messages(QUESTION) is None  # the caller asks the server


def test_a_template_that_raises_gives_none_not_an_error(tmp_path):
    counter = local_counter(folder(tmp_path, template="{{ raise_exception('no system') }}"))
    assert counter is not None and counter.count_messages(QUESTION) is None


def test_no_folder_no_tokenizer_file_or_no_tokenizers_means_no_local_counter(tmp_path, monkeypatch):
    assert local_counter(None) is None
    assert local_counter(tmp_path) is None  # no tokenizer.json
    assert local_counter("Qwen/Qwen2.5-1.5B-Instruct") is None  # a hub id is not read here
    (tmp_path / "tokenizer.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # the library alone
    from langchain_specreason.chat_model import local_tokens

    local_tokens._load.cache_clear()
    assert local_counter(tmp_path) is None
    local_tokens._load.cache_clear()


def test_the_chat_template_arguments_of_the_requests_shape_the_count(tmp_path):
    template = (
        "{% if enable_thinking %}<s> {% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"
    )
    path = folder(tmp_path, template=template)
    assert local_counter(path).count_messages(QUESTION) == 3
    assert local_counter(path, {"enable_thinking": True}).count_messages(QUESTION) == 4


def test_the_served_root_is_read_from_the_model_listing():
    listed = [{"id": "a", "root": "/models/a"}, {"id": "b", "root": "/models/b"}]
    assert served_root(listed, "b") == "/models/b"
    assert served_root(listed, None) == "/models/a"
    assert served_root([{"id": "a"}], "a") is None
    assert served_root(listed, "c") is None


def test_the_chat_model_counts_with_its_tokenizer_folder_and_no_server(tmp_path, monkeypatch):
    from langchain_core.messages import HumanMessage, trim_messages

    from langchain_specreason import ChatSpecReason

    path = folder(tmp_path)
    model = ChatSpecReason(draft_url="http://d:1/v1", base_url="http://b:1/v1", tokenizer=str(path))
    assert model.get_num_tokens_from_messages([HumanMessage("what is 2")]) == 6
    assert model.get_num_tokens("what is 2") == 3
    history = [HumanMessage("what is 1"), HumanMessage("what is 2")]
    assert trim_messages(history, max_tokens=6, token_counter=model, strategy="last") == history[1:]
    monkeypatch.setenv("SPECREASON_TOKENIZER", str(path))
    assert ChatSpecReason(draft_url="http://d:1/v1", base_url="http://b:1/v1").tokenizer == str(
        path
    )
