"""Translation of a captured pypto program to a pldemu :class:`~pldemu.ir.Program` at call time.

``host``: the HOST orchestrator evaluated per rank into an ordered event list (dispatches whose
``device=`` is that rank, host collectives on every rank); ``plan``: buffers from the events (windows
zero at allocation, host slices as per-rank LOCAL inputs); ``device``: Orchestration and InCore bodies
inlined into builder calls, every statement carrying the pypto file:line as its origin; ``ops``: the
``pl.*`` / ``pld.*`` op table.
"""
