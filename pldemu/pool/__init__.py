"""Warm jobs: one ``mpiexec`` per rank count serves many ``pldemu`` runs in turn.

Starting a job costs far more than a small run (``pldemu bench startup``): a pytest session of
pypto programs makes one job per compiled call. A :class:`~pldemu.pool.client.JobPool` keeps one job
of N ranks alive per N and hands it each run; every rank executes the run's ``pldemu`` command in the
same process, its output in files of the run's own. A run that does not end cleanly on every rank
(anything but exit 0, 1 or 4, a rank that died, an abort) retires the job and is run again in a job
of its own, so what the caller sees of a failure is exactly what a fresh job shows.

* :mod:`pldemu.pool.client`: the launcher side (never imports MPI).
* :mod:`pldemu.pool.server`: the loop every rank of a pool job runs.
"""

from pldemu.pool.client import JobPool, current_pool, use_pool

__all__ = ["JobPool", "current_pool", "use_pool"]
