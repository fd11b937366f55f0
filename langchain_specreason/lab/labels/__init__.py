"""Step labels from the models' own behaviour (base-model rollouts), independent of every judge.

* :mod:`.rollout`: label one problem's draft steps by the base model's success rate after
  each draft step against after its own step (the "advantage");
* :mod:`.run`: label a sample of problems, resumable, into ``labels.jsonl``;
* :mod:`.labelfile`: read a labels file (what ``specreason bench judges --labels`` reads).
"""
