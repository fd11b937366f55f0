"""What several lab commands share: problems, prompts, modes, servers, result files, stats.

* :mod:`.datasets` loads the problems (GSM8K, MATH-500, a local JSONL, AIME 2024, GPQA-Diamond);
* :mod:`.prompts` holds the fixed prompt of each answer kind;
* :mod:`.grading` marks a reply right or wrong (pure functions);
* :mod:`.modes` names what is compared (``base``, ``draft``, ``specreason``, ``sd``,
  ``specreason+sd``) and which base-server variant each needs;
* :mod:`.servers` starts a profile's servers per variant, or uses given URLs;
* :mod:`.results` reads and appends the JSONL files (resume skips finished problems);
* :mod:`.perproblem` is the resumable per-problem loop ``label`` and ``arbitrage label`` share;
* :mod:`.meta` writes ``meta.json`` (settings, versions, servers, machine);
* :mod:`.stats` holds Wilson intervals, paired bootstrap speed-ups and McNemar's exact p.
"""
