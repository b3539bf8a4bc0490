"""pldemu: run pld.tensor.* distributed collectives for real across MPI ranks.

The Python API (:mod:`pldemu.api`): ``pldemu.launch(program, ranks, inputs=..., options=...)`` runs a
program on N ranks in an isolated ``mpiexec`` job and returns a :class:`RunResult`; importing pldemu
never initialises MPI.
"""

from pldemu.api import JobError, RunResult, launch
from pldemu.runtime.options import RuntimeOptions

__version__ = "0.1.0"

__all__ = ["JobError", "RunResult", "RuntimeOptions", "__version__", "launch"]
