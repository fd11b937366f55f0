"""``specreason bench load``: modes across load, or ChatSpecReason through 1 vs N replicas.

* :mod:`.flags` parses and checks the flags into a ``LoadPlan`` before any server starts;
* :mod:`.modes` the modes of ``--modes`` and the plan of (mode, load) cells in server blocks;
* :mod:`.cells` runs those cells (resumable cell by cell), :mod:`.counters` reads the
  servers' ``/metrics`` around and during each; :mod:`.modes_report` writes their report;
* :mod:`.command` runs the replica comparison: the requests, per replica count, one result
  line each; :mod:`.report` writes its report (requests/min, latencies, speed-up over 1).
"""
