"""A vLLM general plugin: let a prompt-logprobs request read the prefix cache when it asks.

vLLM (0.32) prefills every request that asks for ``prompt_logprobs`` whole:
``SamplingParams.__post_init__`` sets ``skip_reading_prefix_cache=True`` for it, so that every
prompt position gets a logprob. The ``likelihood`` judge only needs the logprobs of the draft
step at the end of the prompt; the rest (conversation and kept steps) is in the cache from the
previous call. A request carrying ``vllm_xargs={"specreason_read_prefix_cache": 1}`` gets
``skip_reading_prefix_cache=False``: its cached blocks are read, only the rest is prefilled,
and the positions read from the cache carry no logprob (the client ignores them, knowing how
many tokens were cached from the response's ``usage``). Requests without that key are left
exactly as vLLM made them.

vLLM loads the plugin in every process through the ``vllm.general_plugins`` entry point, as
soon as this package is installed in the server's environment (``specreason serve`` is).
Loading it twice is harmless.
"""

from __future__ import annotations

from typing import Any

READ_PREFIX_CACHE_XARG = "specreason_read_prefix_cache"
_PATCHED = "_specreason_read_prefix_cache"


def register() -> None:
    """Wrap ``CompletionRequest.to_sampling_params`` (the ``/v1/completions`` request)."""
    try:
        from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    except ImportError:  # another vLLM layout: leave it alone
        return
    original = CompletionRequest.to_sampling_params
    if getattr(original, _PATCHED, False):
        return

    def to_sampling_params(self: Any, *args: Any, **kwargs: Any) -> Any:
        params = original(self, *args, **kwargs)
        if (self.vllm_xargs or {}).get(READ_PREFIX_CACHE_XARG):
            params.skip_reading_prefix_cache = False
            if params.extra_args:
                params.extra_args.pop(READ_PREFIX_CACHE_XARG, None)
        return params

    setattr(to_sampling_params, _PATCHED, True)
    CompletionRequest.to_sampling_params = to_sampling_params  # type: ignore[method-assign]
