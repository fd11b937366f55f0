"""A vLLM reasoning-parser plugin: deepseek_r1's split, on strings instead of token ids.

vLLM's ``deepseek_r1`` and ``qwen3`` parsers need ``<think>`` and ``</think>`` to be single
tokens of the vocabulary, and no model of the catalog has them. This parser answers as they
do on text: what comes before ``</think>`` is ``reasoning``, what follows is ``content``, and a
reply without ``</think>`` is all reasoning (``BaseThinkingReasoningParser.extract_reasoning``).
Served with ``--reasoning-parser-plugin <this file> --reasoning-parser r1-strings``.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.reasoning import ReasoningParser, ReasoningParserManager

START, END = "<think>", "</think>"


@ReasoningParserManager.register_module("r1-strings")
class R1StringsParser(ReasoningParser):
    @property
    def reasoning_start_str(self) -> str:
        return START

    @property
    def reasoning_end_str(self) -> str:
        return END

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        text = self.model_tokenizer.decode(list(input_ids))
        return text.rfind(END) > text.rfind(START)

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        return []  # only structured outputs use it; not served here

    def extract_reasoning(self, model_output, request):
        before, tag, after = model_output.partition(START)
        text = after if tag else before
        if END not in text:
            return text, None
        reasoning, _, content = text.partition(END)
        return reasoning, content or None

    def extract_reasoning_streaming(
        self,
        previous_text,
        current_text,
        delta_text,
        previous_token_ids,
        current_token_ids,
        delta_token_ids,
    ):
        if END in previous_text:
            return DeltaMessage(content=delta_text) if delta_text else None
        if END in current_text:
            reasoning, _, content = current_text.partition(END)
            reasoning = reasoning[len(previous_text) :]
            return DeltaMessage(reasoning=reasoning or None, content=content or None)
        return DeltaMessage(reasoning=delta_text) if delta_text else None
