"""The LangChain chat model: :class:`ChatSpecReason` (``model.py``) and the helpers only it uses.

* ``model.py``: ChatSpecReason, a thin adapter that runs the graph;
* ``messages.py``: earlier replies as the servers read them, trace steps as stream chunks;
* ``resume.py``: a call's thread, and whether a checkpointed run is this call's;
* ``structured.py``: the schemas a request carries (no-argument tools, ``response_format``);
* ``tokens.py``: token counts (the base server's ``/tokenize``, or an offline estimate).
"""

from .model import ChatSpecReason

__all__ = ["ChatSpecReason"]
