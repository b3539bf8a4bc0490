"""What every launcher checks before it starts a job (one home for run, check, stress and bench).

A problem found here is one line and exit 2 with nothing started: the programs checked at the job's
rank count (:func:`pldemu.job.precheck.precheck`), the job's estimated memory against the
machine's (:mod:`pldemu.job.resources`; ``--force`` starts it anyway), and every output path
the job will write at its end (:mod:`pldemu.job.outputs`). All of it is MPI-free.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence

from pldemu.ir import Program
from pldemu.job.exits import UsageError
from pldemu.job.outputs import OutputPathError, output_file
from pldemu.runtime.options import RuntimeOptions


def add_force_argument(parser: argparse.ArgumentParser) -> None:
    """``--force``: start a job estimated to need more memory than the machine has."""
    parser.add_argument("--force", action="store_true",
                        help="start the job even when its estimated memory exceeds what the machine has")


def check_before_launch(programs: Iterable[tuple[Program, Program | None]], nranks: int, options: RuntimeOptions,
                        *, force: bool, outputs: Sequence[tuple[str, str | None]] = (), copies: int | None = None) -> None:
    """Raise :class:`UsageError` if the job cannot work: ``programs`` are (lowered, source) pairs
    (source None: only the lowered one is known), ``outputs`` (flag, path) pairs of files to write,
    ``copies`` how many times a rank holds its buffers (default: a ``pldemu run``'s)."""
    from pldemu.job.precheck import PrecheckError, precheck, static_buffers
    from pldemu.job.resources import RUN_COPIES, ResourceError, check_fits, job_memory

    estimates = []
    try:
        for flag, path in [("--trace", options.trace), *outputs]:
            if path is not None:
                output_file(path, flag)
        for lowered, source in programs:
            precheck(lowered, nranks, options, source=source)
            estimates.append(job_memory(static_buffers(lowered, nranks).values(), nranks, options.race_detect,
                                        copies or RUN_COPIES, invariants=options.invariants, program=lowered))
        if estimates:
            check_fits(max(estimates, key=lambda e: e.total), force)
    except PrecheckError as err:
        lines = str(err).splitlines()
        head = f"at {nranks} ranks:"
        raise UsageError(f"{head} {lines[0]}" if len(lines) == 1 else "\n  ".join([head, *lines])) from None
    except (OutputPathError, ResourceError) as err:
        raise UsageError(str(err)) from None


__all__ = ["add_force_argument", "check_before_launch"]
