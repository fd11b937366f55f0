"""Arbitrage (arXiv 2512.05033): escalate a step to the base model only where it pays.

Terms (in addition to those of :mod:`langchain_specreason.state`)
-----------------------------------------------------------------
step scorer
    Rates one step in context, higher is better: the base-model judge's ``average`` score
    (0-9), or a process reward model served by vLLM.
advantage
    ``score(base step) - score(draft step)`` for the two steps both models write from the
    same prefix. Positive: the base model would write a better step.
oracle
    Writes both steps at every position and keeps the base step when the advantage exceeds
    ``tau`` (:class:`~.oracle.OracleJudge`). It never wastes a rewrite, but pays for both
    steps every time: it is the labeller and the upper bound, not a way to go faster.
router
    A small sequence classifier that reads the question, the steps so far (tagged by author)
    and the draft step, never the base step, and outputs ``p = P(base step would be better)``
    (:class:`~.router.RouterJudge`). The draft step is escalated (rewritten by the base
    model) when ``p >= tau``; otherwise it is accepted with no base call at all.
labelled step
    One position of an oracle run: prefix, both steps, both scores, the advantage
    (:class:`~.features.LabelledStep`). ``specreason arbitrage label`` writes them;
    ``specreason arbitrage train`` learns the router from them.
"""

from .features import LabelledStep, router_text

__all__ = ["LabelledStep", "router_text"]
