"""The `think` family against a vLLM server with vLLM's own ``deepseek_r1`` reasoning parser.

R1 distills, QwQ and Qwen3 are served with ``--reasoning-parser``, which moves the text it takes
for thinking out of ``content`` into ``reasoning``. The parser needs ``<think>`` and ``</think>``
to be single tokens, and no model of the catalog has them: the server (the 135M, both roles)
runs with a copy of its tokenizer in which two special tokens of code metadata (``<filename>``,
``<issue_closed>``) are renamed ``<think>`` and ``</think>`` (same ids, same weights; not
``<jupyter_start>``/``<jupyter_text>``, which the model writes one after the other, so it would
close every thinking at once). It starts after the session's pair stopped (memory).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from langchain_specreason import ChatSpecReason
from langchain_specreason.serving.fetch import model_dir
from tests.conftest import LOG_DIR, start_serve
from tests.helpers import greedy

pytestmark = pytest.mark.integration

PORT = 8137
KV = f"--draft-arg=--kv-cache-memory-bytes={256 * 2**20}"
QUESTION = "What is 12*7? Think it through."
RENAMED = {"<filename>": "<think>", "<issue_closed>": "</think>"}


def thinking_tokenizer(folder: Path) -> Path:
    """A copy of the 135M's tokenizer with ``<think>`` and ``</think>`` as single tokens."""
    source = model_dir("smollm2-135m")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (source / name).exists():
            shutil.copy(source / name, folder / name)
    spec = json.loads((folder / "tokenizer.json").read_text())
    for token in spec["added_tokens"]:
        if token["content"] in RENAMED:
            token["content"] = RENAMED[token["content"]]
            token["special"] = False  # as in R1's tokenizer: kept in the text, not skipped
    vocab = spec["model"]["vocab"]
    for old, new in RENAMED.items():
        vocab[new] = vocab.pop(old)
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    return folder


@pytest.fixture(scope="module")
def parsing_server(tmp_path_factory):
    tokenizer = thinking_tokenizer(tmp_path_factory.mktemp("think-tokenizer"))
    serve = start_serve(
        *("cpu-test", "--only", "draft", "--draft-port", str(PORT)),
        "--keep-profile-cores",  # beside the suite's pair (other ports): the draft's core only
        *("--draft-env", "VLLM_CPU_KVCACHE_SPACE=", KV),
        f"--draft-arg=--tokenizer={tokenizer}",
        "--draft-arg=--reasoning-parser=deepseek_r1",
        roles=("draft",),
        log_dir=LOG_DIR / "reasoning-parser",
        name="serve-reasoning-parser",
    )
    try:
        yield serve.urls["draft"]
    finally:
        if serve.proc.poll() is None:
            serve.interrupt()


@pytest.mark.after_shutdown  # the models are fetched by then
def test_the_renamed_tokens_are_single_tokens_of_the_copy(tmp_path):
    from tokenizers import Tokenizer

    original = Tokenizer.from_file(str(model_dir("smollm2-135m") / "tokenizer.json"))
    copy = Tokenizer.from_file(str(thinking_tokenizer(tmp_path) / "tokenizer.json"))
    for old, new in RENAMED.items():
        assert copy.encode(new, add_special_tokens=False).ids == [original.token_to_id(old)]
    assert len(original.encode("<think>", add_special_tokens=False).ids) > 1  # why the copy


@pytest.mark.after_shutdown
def test_the_server_splits_thinking_from_content(parsing_server):
    # the parser is on: a continued thinking comes back in `reasoning`, not `content`
    reply = httpx.post(
        parsing_server + "/chat/completions",
        json={
            "model": "smollm2-135m",
            "messages": [
                {"role": "user", "content": "What is 2+2?"},
                {"role": "assistant", "content": "<think>\nTwo plus two"},
            ],
            "continue_final_message": True,
            "add_generation_prompt": False,
            "max_tokens": 8,
            "temperature": 0,
        },
        timeout=120,
    ).json()
    message = reply["choices"][0]["message"]
    assert message["reasoning"] and not message["content"], message


@pytest.mark.after_shutdown
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_think_family_gets_its_steps_and_answer(parsing_server, streamed):
    llm = ChatSpecReason(
        draft_url=parsing_server,
        base_url=parsing_server,
        family="think",
        **greedy(48, 16, 16),
    )
    if streamed:
        chunks = [c async for c in llm.astream(QUESTION)]
        msg = chunks[0]
        for chunk in chunks[1:]:
            msg += chunk
    else:
        msg = await llm.ainvoke(QUESTION)
    stats = msg.response_metadata["specreason"]
    steps = stats["steps_accepted"] + stats["steps_rewritten"] + stats["steps_base"]
    assert steps >= 1 and stats["trace_tokens"] > 0
    # every step's text arrived (before the fix, each was "" and the trace empty)
    assert len(msg.additional_kwargs["reasoning_content"].strip()) > 0
    assert msg.content.strip() and stats["answer_tokens"] > 0
