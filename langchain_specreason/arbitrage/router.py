"""The router judge: a small classifier predicts whether the base model would do better.

The router is served by vLLM as a sequence classifier (``--runner pooling``, answering on
``/classify``); class 1 is ``escalate``. The draft step is rewritten by the base model when
``p(escalate) >= tau``, accepted otherwise: an accepted step costs no base-model call at all.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..endpoint import Classifier
from ..errors import ConfigError
from ..judges import StepContext, Verdict
from .features import ROUTER_CONFIG, ROUTER_MAX_TOKENS, PrefixStep, router_text


class RouterJudge:
    """Arbitrage's judge: escalate when the router's ``p(escalate) >= tau``.

    Example::

        router = OpenAIEndpoint("http://127.0.0.1:8203/v1", name="router")
        graph = create_specreason_graph(draft, base, judge=RouterJudge(router, tau=0.5))
    """

    def __init__(
        self,
        router: Classifier,
        *,
        tau: float = 0.5,
        max_tokens: int = ROUTER_MAX_TOKENS,
        tag_authors: bool = True,
        logit_offset: float = 0.0,
    ) -> None:
        if not 0.0 <= tau <= 1.0:
            raise ConfigError(f"router tau must be a probability in [0, 1], got {tau}")
        if not math.isfinite(logit_offset):
            raise ConfigError(f"router logit_offset must be finite, got {logit_offset}")
        self.router = router
        self.tau = tau
        self.max_tokens = max_tokens
        self.tag_authors = tag_authors
        self.logit_offset = logit_offset
        """Added to the served logit of ``escalate``: the constant a frozen-feature router's
        bias-free head cannot hold (``router.json``'s ``logit_offset``; 0 when fine-tuned)."""

    @classmethod
    def from_folder(
        cls, router: Classifier, folder: str | Path, *, tau: float = 0.5
    ) -> RouterJudge:
        """A judge reading the input settings the router was trained with (``router.json``)."""
        path = Path(folder) / ROUTER_CONFIG
        if not path.is_file():
            raise ConfigError(
                f"{path} not found: not a router made by `specreason arbitrage train`"
            )
        meta = json.loads(path.read_text())
        return cls(
            router,
            tau=tau,
            max_tokens=int(meta.get("max_tokens", ROUTER_MAX_TOKENS)),
            tag_authors=bool(meta.get("tag_authors", True)),
            logit_offset=float(meta.get("logit_offset", 0.0)),
        )

    async def judge(self, ctx: StepContext) -> Verdict:
        """Ask the router for ``p(escalate)`` of the draft step."""
        prefix: list[PrefixStep] = [
            {"author": author, "text": text}
            for author, text in zip(ctx.authors, ctx.steps, strict=False)
        ]
        text = router_text(ctx.question, prefix, ctx.step, tag_authors=self.tag_authors)
        out = await self.router.classify([text], truncate=self.max_tokens)
        probs = out.probs[0]
        p = probs[1] if len(probs) > 1 else probs[0]
        if self.logit_offset:
            p = shifted(p, self.logit_offset)
        return Verdict(
            score=1.0 - p,
            accept=p < self.tau,
            seconds=out.seconds,
            prompt_tokens=out.prompt_tokens,
            detail={"p_escalate": round(p, 5), "tau": self.tau},
        )


def shifted(p: float, offset: float) -> float:
    """``sigmoid(logit(p) + offset)``: a probability with ``offset`` added to its logit."""
    p = min(max(p, 1e-12), 1.0 - 1e-12)
    z = math.log(p) - math.log1p(-p) + offset
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))
