"""``python -m pldemu.pypto [PLDEMU FLAGS] SCRIPT [SCRIPT ARGS...]``: ``pldemu python``, the same command
(:mod:`pldemu.cli.commands.python_run`; the runner is :mod:`pldemu.pypto.script`)."""

from __future__ import annotations

import sys

from pldemu.cli import main

if __name__ == "__main__":
    sys.exit(main(["python", *sys.argv[1:]]))
