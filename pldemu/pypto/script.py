"""A user's Python script run as ``python SCRIPT ARGS`` runs it, with the pypto layer active.

``pldemu python [FLAGS] SCRIPT [ARGS]`` and ``python -m pldemu.pypto [FLAGS] SCRIPT [ARGS]`` both come
here (:func:`run_script`). The script runs as ``__main__`` (:func:`runpy.run_path`) with ``sys.argv`` its
own, its folder first on ``sys.path`` and the working directory unchanged; ``import pypto`` (and
``torch`` without a real one) resolve to pldemu (:mod:`pldemu.pypto.finder`), and every compiled call
runs with the given :class:`~pldemu.pypto.session.FrontendOptions` in this run's warm jobs (one warm
``mpiexec`` job per rank count, :mod:`pldemu.pool`, ended with the script).

What the script's end becomes (:func:`run_script`'s exit code): its own ``SystemExit`` code (0 when it
returns); a failed compiled call that escapes it (:data:`CLEAN_FAILURES`) is pldemu's report, once,
on stderr (the script's line that made the call, then pldemu's message, none of pldemu's frames) and
the job's exit code (README's table: 1 a check, 3 the job failed, 4 races, 124 the job timed out), or 2
for unsupported or bad input (a :class:`~pldemu.pypto.errors.FrontendError`, a pypto name the layer
lacks); any other exception is Python's traceback (from the script's frame on) and 1, as ``python``
gives.
"""

from __future__ import annotations

import dataclasses
import runpy
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from pldemu.api import JobError
from pldemu.job.exits import (
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_JOB_TIMEOUT,
    EXIT_OK,
    EXIT_RACES,
    EXIT_USAGE,
    UsageError,
)
from pldemu.pool.client import JobPool, use_pool
from pldemu.pypto.errors import FrontendError, call_site, missing_pypto_name, not_provided
from pldemu.pypto.execute import ProgramRunError
from pldemu.pypto.finder import active
from pldemu.pypto.session import FrontendOptions, use_options

CLEAN_FAILURES = (FrontendError, ProgramRunError, JobError)
"""A failed compiled call: reported as its message alone at the user's line (a script's, a test's: the
pytest plugin's too), with pldemu's exit code: the program's own file:line is in the message, and
pldemu's frames would only hide it."""

JOB_EXITS = frozenset({EXIT_FAIL, EXIT_USAGE, EXIT_ERROR, EXIT_RACES, EXIT_JOB_TIMEOUT})
"""A failed job's exit codes that the script's run passes on as they are; any other is :data:`EXIT_ERROR`."""

_LIBRARIES = ("stdlib", "platstdlib", "purelib", "platlib")
_NOT_THE_USERS = tuple(dict.fromkeys(Path(folder).resolve() for folder in (
    str(Path(__file__).parents[1]), *(sysconfig.get_path(kind) for kind in _LIBRARIES))))
"""Folders whose frames are never the user's line: pldemu itself, the standard library, installed packages."""


@dataclasses.dataclass(frozen=True)
class Script:
    """The script to run (``path``: absolute, as Python names the ``__main__`` file) and its arguments."""

    path: Path
    args: tuple[str, ...] = ()

    @classmethod
    def at(cls, given: str, args: Sequence[str] = ()) -> Script:
        """The script named on the command line; a missing file is a :class:`UsageError`."""
        path = Path(given)
        if not path.is_file():
            raise UsageError(f"{given}: no such script" if not path.exists() else f"{given}: not a file")
        return cls(path.absolute(), tuple(args))


def run_script(script: Script, options: FrontendOptions) -> int:
    """Run ``script`` as ``__main__`` with the pypto layer active and ``options`` in effect for every
    compiled call, in warm jobs ended when it ends; return the exit code (see the module's doc)."""
    with _as_main(script), active(), use_options(options), JobPool() as pool, use_pool(pool):
        try:
            runpy.run_path(str(script.path), run_name="__main__")
        except SystemExit as stop:
            return _exit_status(stop.code)
        except CLEAN_FAILURES as err:
            return _report(_call_line(err) + str(err), failure_exit(err))
        except Exception as err:  # the script's own error, reported as python reports it
            return _uncaught(err, script)
    return EXIT_OK


def estimate_memory(script: Script, function: str) -> int:
    """``pldemu python --estimate FUNCTION SCRIPT``: import the script with the pypto layer active (its
    ``__main__`` block does not run), print what a call of ``function`` needs at least
    (:mod:`pldemu.pypto.estimate`), and return 0 when it fits this machine, else 2 with the refusal."""
    from pldemu.pypto.estimate import estimate_script

    with _as_main(script), active():
        try:
            est, refusal = estimate_script(str(script.path), function)
        except FrontendError as err:
            return _report(str(err), EXIT_USAGE)
        except Exception as err:  # the script's own error at import
            return _uncaught(err, script)
    if refusal is not None:
        return _report(f"{script.path}: {refusal}", EXIT_USAGE)
    print(f"{function} needs {est.describe()}: it fits this machine's memory now")
    return EXIT_OK


def failure_exit(err: BaseException) -> int:
    """pldemu's exit code for a failed compiled call: 2 for unsupported or bad input, else the job's
    own code (:data:`JOB_EXITS`; 3 when the job left none of them)."""
    if isinstance(err, FrontendError):
        return EXIT_USAGE
    result = getattr(err, "result", None)
    code = EXIT_ERROR if result is None else result.exit_code
    return code if code in JOB_EXITS else EXIT_ERROR


def is_users(path: Path) -> bool:
    """A frame of this file is the user's: not pldemu's, the standard library's or an installed package's."""
    if path.name.startswith("<"):  # <frozen ...>, <string>: no file of the user's
        return False
    where = path.resolve()
    return not any(where.is_relative_to(folder) for folder in _NOT_THE_USERS)


def _call_line(err: BaseException) -> str:
    """The script's line that made the failed call (``file:line: code`` and a newline), or ``""`` when
    the error's own message starts at that very line (a bad program at its class statement)."""
    line = call_site(err, is_users, innermost=True)
    same = isinstance(err, FrontendError) and line.startswith(f"{err.file}:{err.line}: ")
    return "" if same else line


@contextmanager
def _as_main(script: Script) -> Iterator[None]:
    """``sys.argv`` the script's own and its folder first on ``sys.path`` (as ``python SCRIPT`` has them;
    ``sys.path[0]`` resolved as Python resolves it), restored after."""
    argv, path = sys.argv, sys.path[:]
    sys.argv = [str(script.path), *script.args]
    # Inserted, not replacing sys.path[0]: pldemu's own lazily imported modules must stay importable.
    sys.path.insert(0, str(script.path.resolve().parent))
    try:
        yield
    finally:
        sys.argv = argv
        sys.path[:] = path


def _exit_status(code: object) -> int:
    """The process exit status ``SystemExit(code)`` gives in Python: None is 0, an int itself, anything
    else printed on stderr and 1."""
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    return _report(str(code), EXIT_FAIL)


def _report(text: str, code: int) -> int:
    sys.stdout.flush()  # the script's own output first
    sys.stderr.write(text.rstrip("\n") + "\n")
    sys.stderr.flush()
    return code


def _uncaught(err: Exception, script: Script) -> int:
    """A pypto name the layer lacks: one line at the script's line, 2. Anything else: Python's traceback
    from the script's first frame (runpy's and pldemu's left out), through ``sys.excepthook``, 1."""
    name = missing_pypto_name(err)
    if name is not None:
        where = call_site(err, is_users, innermost=True).split(": ", 1)[0]
        return _report(f"{where + ': ' if where else ''}{not_provided(name)}", EXIT_USAGE)
    sys.stdout.flush()
    tb = _from_script(err.__traceback__, str(script.path))
    sys.excepthook(type(err), err.with_traceback(tb), tb)  # the default hook prints err.__traceback__
    return EXIT_FAIL


def _from_script(tb: TracebackType | None, filename: str) -> TracebackType | None:
    """``tb`` from the first frame of ``filename`` on (None when none is: a SyntaxError names its line)."""
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return tb


__all__ = ["CLEAN_FAILURES", "JOB_EXITS", "Script", "estimate_memory", "failure_exit", "is_users", "run_script"]
