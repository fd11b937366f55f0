"""The LangChain chat model: :class:`ChatSpecReason` (``model.py``) and the helpers only it uses.

* ``model.py``: ChatSpecReason: its guide (the class docstring), thin methods over the rest;
* ``fields.py``: its fields with their docs and env variables; validation, serialization,
  redaction; copies (``replace``, ``model_copy``) and the one reset of what it built;
* ``tokens.py``: token counts (the local tokenizer, ``/tokenize``, or an estimate), monotone;
* ``local_tokens.py``: the served model's own tokenizer and chat template, read on this machine;
* ``batch.py``: batches whose runs are cancelled when one fails or the caller stops early;
* ``run.py``: one call's run (the graph's stream as chunks, usage, metadata, the deadline);
* ``wiring.py``: the endpoints and graphs built from the fields (the graph cache, bounded);
* ``discovery.py``: the servers' served models and windows, asked once; the profile;
* ``arguments.py``: ChatOpenAI's argument names accepted or refused; a call's settings;
* ``messages.py``: earlier replies as the servers read them, trace steps as stream chunks;
* ``resume.py``: a call's thread, and whether a checkpointed run is this call's;
* ``structured.py``: tools and structured output (schemas, ``tool_choice``, parsers).
"""

from .model import ChatSpecReason

__all__ = ["ChatSpecReason"]
