"""``specreason bench``: accuracy and latency of SpecReason against its baselines.

The problems, prompts, modes, servers and result files it shares with the other lab commands
are in :mod:`..shared`. Modules, in the order a run uses them:

* :mod:`.runner` solves each problem in each mode and appends one JSON line per result;
* :mod:`.prefill` counts each judge call's prefill floor (new step + judge suffix);
* :mod:`.metrics` reads a vLLM server's own Prometheus counters;
* :mod:`.rounds` says where an ``agree`` run's rounds spend their time;
* :mod:`.report` turns ``results.jsonl`` into ``summary.md`` and the plots;
* :mod:`.command` is the ``specreason bench`` command line (and its ``judges``, ``load``,
  ``agreement`` and ``report`` subcommands).
"""
