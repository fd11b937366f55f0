"""``specreason probe``: in a few minutes, whether step speculation can pay on a served pair.

Modules, in the order a probe uses them:

* :mod:`.prompts` holds the built-in questions and reads ``--prompts FILE``;
* :mod:`.speeds` measures decode speed (1 and N concurrent streams) and prefill speed;
* :mod:`.judging` drafts a few steps and times the judge on them (its cost and acceptance);
* :mod:`.ceilings` turns those speeds into speed-up ceilings and a verdict (pure arithmetic);
* :mod:`.report` prints the table and writes ``summary.json`` and ``probe.png``;
* :mod:`.command` is the ``specreason probe`` command line.
"""
