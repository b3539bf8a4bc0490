"""``python -m pldemu`` is the ``pldemu`` command."""

import sys

from pldemu.job.launch import in_mpi_job, prepare_rank, startup_mark
from pldemu.runtime.shm import unlink_named_segments

# First thing in a rank: its pid for the launcher, and a SIGTERM that leaves nothing in /dev/shm.
prepare_rank()
startup_mark("start")

from pldemu.cli import main  # noqa: E402  (after prepare_rank: the import is the slow part)

code = main()
startup_mark("exit")
if in_mpi_job():
    # A non-zero exit under ``python -m mpi4py`` ends in MPI_Abort, which skips MPI_Finalize: drop the
    # names of MPI's /dev/shm segments (every local rank mapped them long ago) before leaving.
    unlink_named_segments()
sys.exit(code)
