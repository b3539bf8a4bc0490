"""``python -m pldemu`` is the ``pldemu`` command."""

import sys

from pldemu.cli import main

sys.exit(main())
