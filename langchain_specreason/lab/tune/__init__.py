"""``specreason tune``: the fastest setting for a pair that answers like the base model.

* :mod:`.command` is the command: settings searched on dev, chosen, checked on held-out;
* :mod:`.grid` is the search: the settings grid, their measured results, the choice rule;
* :mod:`.report` writes ``tuned.toml``'s header and evidence, ``tune.json``'s parts, the plot;
* :mod:`.replay` is an endpoint that replays calls it made before (the settings' shared work);
* :mod:`.concurrency` is ``--concurrency N``: the problems N at a time, the load named.
"""
