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


def missing_extra(what: str, exc: ModuleNotFoundError) -> MissingExtraError | None:
    """The typed error for ``exc`` when an extra provides its module (else ``None``)."""
    name = exc.name or ""
    for module, extra in EXTRA_OF_MODULE.items():
        if name == module or name.startswith(module + "."):
            return MissingExtraError(what, extra, name)
    return None
