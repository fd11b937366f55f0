"""Which optional extra each tool needs, and the typed error when it is missing.

``pip install langchain-specreason`` installs the library only; the ``specreason`` tools need
extras (``[serve]``, ``[bench]``, ``[cpu]``, ...). A tool whose imports fail for a module an
extra provides raises :class:`~..errors.MissingExtraError` naming that extra.
"""

from __future__ import annotations

from ..errors import MissingExtraError

EXTRA_OF_MODULE: dict[str, str] = {
    "tqdm": "serve",
    "platformdirs": "serve",
    "httpx": "serve",
    "matplotlib": "bench",
    "math_verify": "bench",
    "prometheus_client": "bench",
    "scipy": "arbitrage",
    "transformers": "arbitrage",
    "vllm_router": "scale",
    "vllm": "cpu",
    "torch": "cpu",
    "gguf": "cpu",
    "accelerate": "cpu",
    "langgraph.checkpoint.sqlite": "sqlite",
}
"""Top-level module -> the extra that installs it."""


COMMAND_EXTRA: dict[str, str] = {
    "models": "cpu",
    "serve": "serve",
    "demo": "cpu",
    "bench": "bench",
    "label": "bench",
    "arbitrage": "arbitrage",
    "tune": "bench",
    "probe": "bench",
}
"""The extra that installs everything a subcommand needs (it includes smaller ones)."""


def missing_extra(
    what: str, exc: ModuleNotFoundError, command: str | None = None
) -> MissingExtraError | None:
    """The typed error for ``exc`` when an extra provides its module (else ``None``).

    With ``command``, the extra named is the command's own (``bench`` for ``specreason
    bench``, even when the first module missing is one of ``serve``'s).
    """
    name = exc.name or ""
    for module, extra in EXTRA_OF_MODULE.items():
        if name == module or name.startswith(module + "."):
            return MissingExtraError(what, COMMAND_EXTRA.get(command or "", extra), name)
    return None
