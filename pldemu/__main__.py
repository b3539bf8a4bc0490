"""``python -m pldemu`` is the ``pldemu`` command."""

import sys

from pldemu.runtime.launch import prepare_rank

# First thing in a rank: its pid for the launcher, and a SIGTERM that leaves nothing in /dev/shm.
prepare_rank()

from pldemu.cli import main  # noqa: E402  (after prepare_rank: the import is the slow part)

sys.exit(main())
