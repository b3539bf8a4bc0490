"""pldemu as a library: buffer files, ``run --inputs/--expect``, :func:`pldemu.launch`, the pytest plugin.

``project/`` is a downstream project with its own pytest configuration (its files are ``check_*.py``,
which this suite does not collect); ``test_downstream.py`` runs it in a separate pytest process.
"""

collect_ignore = ["project"]
