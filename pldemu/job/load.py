"""The one way a program file becomes a program ready for a job: source -> parse -> verify -> lower ->
verify -> prechecks (``pldemu run``, ``pldemu stress PROGRAM``; a job launched by hand runs it again on
every rank), and the hand-over of the loaded program from ``pldemu run``'s launcher to its ranks.

Every problem is a :class:`~pldemu.job.exits.UsageError` naming the file, found before any MPI traffic.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from pldemu.ir import Program
from pldemu.job.exits import UsageError
from pldemu.job.prelaunch import check_before_launch
from pldemu.runtime.options import RuntimeOptions


def load_program(path: str, lower: bool = True, nranks: int | None = None, options: RuntimeOptions | None = None,
                 force: bool = False) -> Program:
    """Read (``.pld`` text or a Python builder file, see ``pldemu.ir.source``), lower unless ``lower`` is
    False, and verify ``path``; with ``nranks``, also check it before a job of that many ranks
    (:func:`pldemu.job.prelaunch.check_before_launch`, the memory estimate unless ``force``). Every
    problem is a UsageError."""
    from pldemu.ir import VerifyError, verify
    from pldemu.ir.source import SourceError, load_source

    try:
        source = program = load_source(path)
        verify(source)  # before lowering: it bounds the nesting every later walk recurses on
    except SourceError as err:
        raise UsageError(str(err)) from None
    except VerifyError as err:
        raise UsageError(f"{path}: {err}") from None
    if lower:
        from pldemu.lowering import lower_composite_ops

        try:
            program = lower_composite_ops(program)
        except ValueError as err:  # LoweringError and the IR's own type errors
            raise UsageError(f"{path}: cannot lower: {err}") from None
    else:
        from pldemu.lowering import composite_calls

        composite = next(iter(composite_calls(program)), None)
        if composite is not None:
            raise UsageError(f"{path}: --no-lower, but the program still calls the composite collective "
                             f"{composite.op.text}: drop --no-lower (or lower it first: pldemu lower --after-only)")
    try:
        verify(program)
    except VerifyError as err:
        raise UsageError(f"{path}: {err}") from None
    if nranks is not None:
        try:
            check_before_launch([(program, source)], nranks, options or RuntimeOptions(), force=force)
        except UsageError as err:
            raise UsageError(f"{path}: {err}") from None
    return program


def hand_over(program: Program, folder: Path) -> Path:
    """Write ``program`` (loaded, lowered, verified and checked by this launcher) for the job's ranks,
    which read it back (``--lowered FILE``, set by the launcher only) instead of parsing, lowering and
    verifying the file again: every check was made here, before the job, at its rank count."""
    path = folder / "program.pickle"
    path.write_bytes(pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def handed_program(path: str) -> Program:
    """The program :func:`hand_over` wrote (a rank of the job); a file that is not one is a UsageError."""
    try:
        program = pickle.loads(Path(path).read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError) as err:
        raise UsageError(f"--lowered {path}: cannot read the program: {err}") from None
    if not isinstance(program, Program):
        raise UsageError(f"--lowered {path}: not a pickled pldemu program")
    return program


__all__ = ["hand_over", "handed_program", "load_program"]
