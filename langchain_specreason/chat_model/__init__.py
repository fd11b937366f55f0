"""The LangChain chat model: :class:`ChatSpecReason` (``model.py``) and the helpers only it uses.

* ``model.py``: ChatSpecReason, its fields and thin methods over the modules below;
* ``run.py``: one call's run (the graph's stream as chunks, usage, metadata, the deadline);
* ``batch.py``: batches whose runs are cancelled when one fails or the caller stops early;
* ``wiring.py``: the endpoints and graphs built from the fields;
* ``discovery.py``: the servers' served models and windows, asked once; the profile;
* ``arguments.py``: ChatOpenAI's argument names accepted or refused; a call's settings;
* ``messages.py``: earlier replies as the servers read them, trace steps as stream chunks;
* ``resume.py``: a call's thread, and whether a checkpointed run is this call's;
* ``structured.py``: tools and structured output (schemas, ``tool_choice``, parsers);
* ``tokens.py``: token counts (the base server's ``/tokenize``, or an offline estimate).
"""

from .model import ChatSpecReason

__all__ = ["ChatSpecReason"]
