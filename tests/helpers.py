"""Helpers shared by every test folder (``tests/`` is on sys.path, see ``tests/conftest.py``).

* :func:`agree`: the collective assert of multi-rank tests.
* :func:`instance`: a program instance on a communicator (COMM_SELF by default), closed afterwards.
* :func:`pldemu` / :func:`report`: the ``pldemu`` command as a user runs it (outside any MPI job).
* :data:`BACKENDS`: the window back ends the ``backend`` fixture of ``tests/conftest.py`` runs
  (:data:`MATRIX_BACKENDS`: the two the check matrix alternates).
* :func:`processes_with`: the processes whose command line holds a token (a token of the test's own:
  its tmp_path, a uuid); :func:`own_processes_with` / :func:`marked_processes`: those of the test's own
  runs, by the mark their jobs carry; :data:`SPIN`, a program whose job runs until it is killed;
  :func:`private_shm` / :func:`left_in`: a command's own /dev/shm, and what its jobs left there. A test
  looks only at what it started, never at the machine's processes or segments.
* :func:`slack_while` / :data:`HAS_TIMER_SLACK`: a thread's Linux timer slack before, during and after a call.
* :func:`lowered_then` / :func:`call_of`: a broken recipe for the harness tests (LowerCompositeOps, then
  every statement of main mapped or dropped).

The fixtures themselves (``comm``, ``backend``, and the ``self_and_world`` marker that runs one test
body on COMM_SELF in a plain pytest and on COMM_WORLD under MPI) live in ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mpi_launch import IN_JOB_ENV, OWNER_VAR, REPO_ROOT, job_env

from pldemu.ir import Assign, Call, Eval, For, If, Op, Program, Seq, Stmt, While
from pldemu.lowering import lower_composite_ops

if TYPE_CHECKING:  # both import mpi4py, which initialises MPI: conftest.py imports this module in MPI-free runs
    from mpi4py import MPI

    from pldemu.runtime import ProgramInstance

BACKENDS: tuple[str, ...] = ("shared", "rma", "hybrid")
MATRIX_BACKENDS: tuple[str, ...] = ("shared", "rma")
"""The back ends the check matrix alternates (hybrid on one node is shared data with MPI signals; the
check of every collective on real hybrid windows runs in ``tests/multihost``)."""
"""The window back ends every ``backend``-parametrised test runs on."""

SPIN = """\
program spin {
  signal sig: int32[NR, 1]
  func main() {
    k = 0:int32
    while k >= 0:int32 {
      k = (k + 1:int32) % 1000:int32
    }
  }
}
"""
"""A program whose ranks spin forever once started (no MPI traffic): the job a kill test kills."""

StmtMap = Callable[[Stmt], Stmt | None]
"""A statement rewrite for :func:`lowered_then`: the new statement, or None to drop it."""


def agree(comm: MPI.Intracomm, ok: bool, detail: str = "") -> None:
    """Collective assert: raise on every rank if it failed on any rank, with every failing rank's detail.

    A plain ``assert`` failing on one rank would send that rank into the window free (or the next
    test) while the others wait in some other collective: a hang.
    """
    results = comm.allgather((bool(ok), detail))
    bad = [(r, d) for r, (good, d) in enumerate(results) if not good]
    if bad:
        lines = "\n".join(f"  rank {r}: {d}" for r, d in bad)
        raise AssertionError(f"failed on {len(bad)} of {comm.Get_size()} ranks:\n{lines}")


@contextmanager
def instance(program: Program, comm: MPI.Intracomm | None = None, **options: Any) -> Iterator[ProgramInstance]:
    """``program`` instantiated on ``comm`` (COMM_SELF by default) with ``RuntimeOptions(**options)``.

    On one rank it is closed afterwards even when the test fails (the collective free cannot hang);
    on several it is closed only when the block ends normally, as ``with ProgramInstance(...)`` does,
    so that a rank failing alone never waits in the free for the others.
    """
    from mpi4py import MPI

    from pldemu.runtime import ProgramInstance, RuntimeOptions

    on = comm if comm is not None else MPI.COMM_SELF
    inst = ProgramInstance(program, on, RuntimeOptions(**options))
    if on.Get_size() > 1:
        with inst:
            yield inst
        return
    try:
        yield inst
    finally:
        inst.close()


def pldemu(*argv: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pldemu ARGV`` as a user would: outside any MPI job (it spawns its own)."""
    env = job_env()
    env.pop(IN_JOB_ENV, None)
    return subprocess.run([sys.executable, "-m", "pldemu", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO_ROOT, check=False, stdin=subprocess.DEVNULL)


def report(res: subprocess.CompletedProcess[str]) -> str:
    """Exit code, stdout and stderr of ``res``, for an assertion message."""
    return f"exit {res.returncode}\n--- stdout ---\n{res.stdout}\n--- stderr ---\n{res.stderr}"


def call_of(st: Stmt, op: Op) -> Call | None:
    """The ``op`` call a statement makes (``op(...)`` or ``x = op(...)``), else None."""
    call = st.call if isinstance(st, Eval) else st.value if isinstance(st, Assign) else None
    return call if isinstance(call, Call) and call.op is op else None


def map_statements(seq: Seq, fn: StmtMap) -> Seq:
    """Apply ``fn`` to every statement (depth first; None drops it), rebuilding the structure."""
    out: list[Stmt] = []
    for st in seq.stmts:
        if isinstance(st, For):
            st = For(st.var, st.start, st.stop, st.step, map_statements(st.body, fn))
        elif isinstance(st, While):
            st = While(st.cond, map_statements(st.body, fn))
        elif isinstance(st, If):
            st = If(st.cond, map_statements(st.then, fn), None if st.orelse is None else map_statements(st.orelse, fn))
        elif isinstance(st, Seq):
            st = map_statements(st, fn)
        new = fn(st)
        if new is not None:
            out.append(new)
    return Seq(tuple(out))


def lowered_then(fn: StmtMap) -> Callable[[Program], Program]:
    """A ``lower`` for the harnesses: LowerCompositeOps, then ``fn`` over every statement of main."""

    def lower(program: Program) -> Program:
        lowered = lower_composite_ops(program)
        main = lowered.function()
        return lowered.replace_function(type(main)(main.name, main.params, map_statements(main.body, fn)))

    return lower


HAS_TIMER_SLACK = Path("/proc/self/timerslack_ns").exists()
"""Linux shows a task's timer slack in ``/proc/<tid>/timerslack_ns`` (a thread id names its task there)."""


def _slack_of(tid: int) -> int:
    return int(Path(f"/proc/{tid}/timerslack_ns").read_text())


def slack_while(call: Callable[[], object], settle: float = 0.2) -> dict[str, int]:
    """Run ``call`` (which must sleep well over ``settle`` seconds) in a thread and read that thread's
    timer slack before the call, ``settle`` seconds into it (from outside), and after it."""
    seen: dict[str, int] = {}

    def body() -> None:
        seen["before"] = _slack_of(threading.get_native_id())
        call()
        seen["after"] = _slack_of(threading.get_native_id())

    worker = threading.Thread(target=body)
    worker.start()
    deadline = time.monotonic() + 5.0
    while "before" not in seen and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(settle)
    assert worker.native_id is not None
    seen["during"] = _slack_of(worker.native_id)
    worker.join()
    return seen


CAN_PRIVATE_SHM = sys.platform.startswith("linux") and os.geteuid() == 0 and shutil.which("unshare") is not None
"""Whether :func:`private_shm` works here (root, util-linux's unshare)."""


def private_shm(folder: Path) -> tuple[str, ...]:
    """A command prefix: run the command with ``folder`` (empty) as its /dev/shm, bound in a mount
    namespace of its own (root, :data:`CAN_PRIVATE_SHM`). What MPI's segments of the command's jobs leave
    behind is then in ``folder``, and only theirs, whatever else the machine runs."""
    return ("unshare", "--mount", "sh", "-c", 'mount --bind "$0" /dev/shm && exec "$@"', str(folder))


def left_in(folder: Path) -> list[str]:
    """The entries a command run under :func:`private_shm` left in its /dev/shm."""
    return sorted(p.name for p in folder.iterdir())


def marked_processes(var: str, value: str) -> list[int]:
    """PIDs whose environment sets ``var`` to ``value`` or to a path below it: a run's own processes when
    ``value`` is its mark (the launcher's job folder :data:`pldemu.job.launch.PID_DIR_VAR` under the run's
    own TMPDIR, :data:`mpi_launch.OWNER_VAR`), never another session's. Another user's process, whose
    environment cannot be read, is not ours."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            entries = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for entry in entries:
            name, _, got = entry.decode(errors="replace").partition("=")
            if name == var and (got == value or got.startswith(value.rstrip("/") + "/")):
                found.append(int(proc.name))
                break
    return found


def own_processes_with(token: str) -> list[int]:
    """:func:`processes_with` ``token`` among the processes of the jobs this process started
    (``mpi_launch.job_env`` marks them with :data:`mpi_launch.OWNER_VAR`)."""
    return sorted(set(processes_with(token)) & set(marked_processes(OWNER_VAR, str(os.getpid()))))


def processes_with(token: str) -> list[int]:
    """PIDs whose command line contains ``token``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(proc.name))
    return found
