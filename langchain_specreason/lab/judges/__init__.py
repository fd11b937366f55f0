"""``specreason bench judges``: how well each judge tells right steps from wrong ones.

* :mod:`.command` is the ``bench judges`` command: each judge's readings on the steps;
* :mod:`.data` makes right and corrupted steps from GSM8K train solutions;
* :mod:`.corruption` makes one computed line wrong: arithmetic, operand, operation;
* :mod:`.spelling` writes a step's numbers and operators in words (``--numbers words``);
* :mod:`.injection` makes a wrong step that claims its own verdict (``--inject``);
* :mod:`.consistency` compares the draft's samples of a step with it (``--judge consistency``);
* :mod:`.report` is the report on corrupted steps: AUROC per kind, decisions, costs;
* :mod:`.labelreport` is the report on labelled real draft steps (``--labels``, ``--fit-on``);
* :mod:`.learned` fits the ``learned`` judge's logistic regression on labelled steps.
"""
