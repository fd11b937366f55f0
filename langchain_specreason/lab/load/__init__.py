"""``specreason bench load``: ChatSpecReason under concurrent load, through 1 vs N replicas.

* :mod:`.flags` parses and checks the flags into a ``LoadPlan`` before any server starts;
* :mod:`.command` runs the plan: the requests, per replica count, one result line each;
* :mod:`.report` writes the report: requests/min, latencies, speed-up over 1 replica.
"""
