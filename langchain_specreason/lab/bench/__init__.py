"""``specreason bench``: accuracy and latency of SpecReason against its baselines.

Modules, in the order a run uses them:

* :mod:`.datasets` loads the problems (GSM8K, MATH-500, a local JSONL, AIME 2024, GPQA-Diamond);
* :mod:`.prompts` holds the fixed prompt of each answer kind;
* :mod:`.modes` names what is compared (``base``, ``draft``, ``specreason``, ``sd``,
  ``specreason+sd``) and which base-server variant each needs;
* :mod:`.servers` starts a profile's servers per variant, or uses given URLs;
* :mod:`.runner` solves each problem in each mode and appends one JSON line per result;
* :mod:`.prefill` counts each judge call's prefill floor (new step + judge suffix);
* :mod:`.grading` marks a reply right or wrong (pure functions);
* :mod:`.results` reads and appends the JSONL files (resume skips finished problems);
* :mod:`.meta` writes ``meta.json`` (settings, versions, servers, machine);
* :mod:`.report` turns ``results.jsonl`` into ``summary.md`` and the plots;
* :mod:`.command` is the ``specreason bench`` command line.
"""
