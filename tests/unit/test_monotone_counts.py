"""Token counts that LangChain's trimmers can add up: a message added never lowers the count.

A chat template that injects a default system prompt into a list without a system message
(Qwen's) made ``[system, user]`` count fewer tokens than ``[user]``; ``trim_messages`` then kept
the system message alone.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

from langchain_specreason import ChatSpecReason
from langchain_specreason.chat_model.tokens import implicit_system, monotone_count

from .test_local_tokens import folder

DEFAULT = "you are qwen created by alibaba"


def render(messages: list[dict]) -> int:
    """Words of a Qwen-like prompt: its default system prompt when the list brings none."""
    words = [] if messages[0]["role"] == "system" else ["<system>", *DEFAULT.split()]
    for m in messages:
        words += [f"<{m['role']}>", *m["content"].split()]
    return len(words) + 1  # the generation prompt


def test_the_default_system_prompt_is_measured_and_left_out_of_lists_without_one():
    assert implicit_system(render) == 6  # the default's six words
    assert implicit_system(lambda m: None) == 0  # cannot be measured: nothing left out
    user = [{"role": "user", "content": "what is 2"}]
    system = [{"role": "system", "content": "be terse"}]
    assert monotone_count(user, render) == 6  # <system> <user> what is 2, the generation prompt
    assert monotone_count(system + user, render) == 8 == render(system + user)  # exact
    assert monotone_count(system + user, render) >= monotone_count(user, render)
    # the parts add up to at least the whole, as trim_messages assumes
    assert monotone_count(system, render) + monotone_count(user, render) >= render(system + user)
    assert monotone_count(user, lambda m: None) is None


TEMPLATE = (
    "{% if messages[0].role != 'system' %}<system> you are qwen {% endif %}"
    "{% for m in messages %}<{{ m.role }}> {{ m.content }} {% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_adding_a_message_never_lowers_the_count_and_trimming_keeps_the_question(tmp_path):
    llm = ChatSpecReason(
        draft_url="http://d:1/v1",
        base_url="http://b:1/v1",
        tokenizer=str(folder(tmp_path, template=TEMPLATE)),
    )
    question = HumanMessage("what is 2")
    system = SystemMessage("be terse")
    lists = [[question], [system, question], [system, question, AIMessage("2"), question]]
    counts = [llm.get_num_tokens_from_messages(m) for m in lists]
    assert counts == sorted(counts) and counts[0] < counts[1], counts
    assert counts[1] == 8  # <system> be terse <user> what is 2 <assistant>: exact
    kept = trim_messages(
        [system, question],
        max_tokens=10,
        token_counter=llm,
        include_system=True,
        strategy="last",
    )
    assert kept == [system, question]
