"""The exit codes of every ``pldemu`` command and of ``pldemu.launch``'s jobs, and the usage error.

One table (README "Exit codes"): a launcher and every rank of its job agree on what a code means, so the
codes live on the launcher side (MPI-free) and the in-job harness imports them from here.
"""

from __future__ import annotations

import sys

from pldemu.job.launch import TIMED_OUT

EXIT_OK = 0
"""Everything ran and every check passed."""
EXIT_FAIL = 1
"""A check failed: wrong results, signal cells not 0 at rest, invariant violations, races in ``check``, a
truncating division or remainder whose value differs from floor semantics (``pldemu.runtime.truncation``);
``stress``: a failure found, or a mutant survived."""
EXIT_USAGE = 2
"""Bad input, refused on every rank before any MPI traffic."""
EXIT_ERROR = 3
"""A failure inside the job: deadlock, crash, a harness synchronisation that timed out."""
EXIT_RACES = 4
"""``pldemu run --races`` found races."""
EXIT_JOB_TIMEOUT = TIMED_OUT
"""The whole mpiexec job outlived its ``--job-timeout`` (124, the launcher's)."""


class UsageError(ValueError):
    """A bad command line or unusable input: one line ``pldemu CMD: error: ...``, exit 2, no traceback."""


def usage_error(command: str, message: str) -> int:
    """Print ``message`` as ``command``'s one-line error on stderr; return :data:`EXIT_USAGE`."""
    sys.stderr.write(f"pldemu {command}: error: {message}\n")
    sys.stderr.flush()
    return EXIT_USAGE


__all__ = ["EXIT_ERROR", "EXIT_FAIL", "EXIT_JOB_TIMEOUT", "EXIT_OK", "EXIT_RACES", "EXIT_USAGE", "UsageError",
           "usage_error"]
