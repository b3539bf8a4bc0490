"""Starting MPI jobs: the mpiexec command line, "am I a rank?", and a supervised spawn.

``in_mpi_job`` is the one place in pldemu that reads launcher environment variables. ``spawn`` runs
``mpiexec -n N python -m mpi4py -m pldemu ARGS`` in a new session, streams its output, and kills the
whole process group (process manager and ranks) if it outlives its timeout. Running ranks under
``python -m mpi4py`` matters: an unhandled exception on any rank then calls ``MPI_Abort``, which ends
the whole job instead of leaving the other ranks blocked.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import subprocess

# subprocess, tempfile, shutil, select and json are imported where the launcher uses them: a rank
# imports this module too (its pid, start-up marks, failure notes) and spawns nothing.

LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")
"""Variables a process manager (MPICH hydra, PMIx, Open MPI) sets in every rank it starts."""

_FOREIGN_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPIR_CVAR_PMI")
"""An enclosing job's process-manager variables: a nested mpiexec must not inherit them."""

TIMED_OUT = 124
"""Exit code of ``spawn`` when the job outlived its timeout (as coreutils ``timeout``)."""

JOB_FAILED = 3
"""Exit code of ``spawn`` when mpiexec itself died of a signal (every pldemu command's "the job
failed" code)."""


def in_mpi_job(environ: Mapping[str, str] | None = None) -> bool:
    """True when this process is a rank started by an MPI process manager."""
    env = os.environ if environ is None else environ
    return any(name in env for name in LAUNCHER_VARS)


def _announced(names: Sequence[str], environ: Mapping[str, str] | None) -> int | None:
    env = os.environ if environ is None else environ
    for name in names:
        value = env.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def job_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's rank as its process manager announced it (before MPI is initialised), or None
    outside a job. Lets a command print an input error once instead of once per rank."""
    return _announced(("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"), environ)


def job_size(environ: Mapping[str, str] | None = None) -> int | None:
    """The job's rank count as its process manager announced it (before MPI is initialised), or None."""
    return _announced(("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"), environ)


def abort_job(comm: Any, code: int) -> NoReturn:
    """End the whole MPI job with ``code`` from this rank, now.

    ``MPI_Abort`` kills every rank, but MPICH's may return to the caller before the kill lands; this
    rank must not run on (its peers may already be gone), so it exits right after, its output flushed.
    """
    from pldemu.runtime.shm import unlink_named_segments

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    unlink_named_segments()  # MPI_Abort skips MPI_Finalize, which would have removed them
    try:
        comm.Abort(code)
    finally:
        os._exit(code)


def find_mpiexec() -> str:
    """``mpiexec`` next to the running Python (a venv's MPICH from PyPI) first, then on PATH."""
    local = Path(sys.executable).parent / "mpiexec"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    import shutil

    found = shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError("mpiexec not found next to the Python interpreter nor on PATH "
                                "(pip install mpich, or install an MPI)")
    return found


@functools.lru_cache(maxsize=8)
def _is_open_mpi(mpiexec: str) -> bool:
    """Whether ``mpiexec`` is Open MPI's (asked once per executable: it costs a subprocess)."""
    import subprocess

    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    text = out.stdout + out.stderr
    return any(tag in text for tag in ("Open MPI", "OpenRTE", "PRRTE", "prterun"))


HOSTS_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "hosts.sh"
"""The simulated-hosts launcher of a pldemu checkout (network namespaces on a private bridge)."""


@dataclass(frozen=True)
class Placement:
    """Where a job's ranks run: this machine (the default), ``sim_hosts`` = (H, R), H simulated hosts
    of R ranks each (:data:`HOSTS_SCRIPT`, root only), or real hosts for mpiexec: ``hosts`` as
    ``(name, ranks)`` pairs (``-hosts a:2,b:2``) or a ``hostfile`` (``-f FILE``)."""

    sim_hosts: tuple[int, int] | None = None
    hosts: tuple[tuple[str, int], ...] = ()
    hostfile: str | None = None

    def __post_init__(self) -> None:
        given = [name for name, on in (("sim_hosts", self.sim_hosts), ("hosts", self.hosts),
                                       ("hostfile", self.hostfile)) if on]
        if len(given) > 1:
            raise ValueError(f"give one of sim_hosts, hosts, hostfile, not {' and '.join(given)}")
        if self.sim_hosts is not None and min(self.sim_hosts) < 1:
            raise ValueError(f"sim_hosts needs at least one host of one rank, got {self.sim_hosts}")
        if any(count < 1 for _, count in self.hosts):
            raise ValueError("every host of hosts needs at least one rank")

    @property
    def ranks(self) -> int | None:
        """The rank count the placement implies (None: the hostfile or this machine leaves it open)."""
        if self.sim_hosts is not None:
            return self.sim_hosts[0] * self.sim_hosts[1]
        return sum(count for _, count in self.hosts) or None

    def local_ranks(self, n: int) -> int | None:
        """How many of a job's ``n`` ranks run on this machine: all of them, simulated hosts included
        (their namespaces share this machine's cores); None when real hosts take them."""
        return None if self.hosts or self.hostfile else n

    @property
    def teardown_grace(self) -> float:
        """Seconds the job's leader gets between SIGTERM and SIGKILL. Simulated hosts need more than
        a local mpiexec: :data:`HOSTS_SCRIPT` ends its job, then deletes the hosts' namespaces and
        bridge, and a SIGKILL in the middle (under load it takes seconds) would leave them behind."""
        return SIM_HOSTS_TEARDOWN_GRACE if self.sim_hosts is not None else 1.0

    def describe(self) -> str:
        """``2x2 simulated hosts``, ``hosts a:2,b:2``, ``hostfile F`` or ``this machine``."""
        if self.sim_hosts is not None:
            return f"{self.sim_hosts[0]}x{self.sim_hosts[1]} simulated hosts"
        if self.hosts:
            return "hosts " + ",".join(f"{h}:{c}" for h, c in self.hosts)
        return f"hostfile {self.hostfile}" if self.hostfile else "this machine"


LOCAL = Placement()
"""Every rank on this machine."""

SIM_HOSTS_TEARDOWN_GRACE = 20.0
"""How long a simulated-hosts job may take to tear its hosts down once told to stop (see
:attr:`Placement.teardown_grace`); the SIGKILL after it is for a teardown that hangs."""


def mpiexec_command(n: int, argv: Sequence[str], placement: Placement = LOCAL) -> list[str]:
    """``mpiexec -n N argv...`` with what the MPI needs to run N ranks on this machine: MPICH
    oversubscribes silently; Open MPI needs ``--oversubscribe`` (and ``--allow-run-as-root`` as root).
    ``placement`` puts the ranks on other hosts (simulated ones through :data:`HOSTS_SCRIPT`, which
    runs mpiexec itself)."""
    if n < 1:
        raise ValueError(f"need at least one rank, got {n}")
    mpiexec = find_mpiexec()
    if placement.sim_hosts is not None:
        hosts, per_host = placement.sim_hosts
        if hosts * per_host != n:
            raise ValueError(f"{hosts}x{per_host} simulated hosts run {hosts * per_host} ranks, not {n}")
        return [str(HOSTS_SCRIPT), "--mpiexec", mpiexec, f"{hosts}x{per_host}", "--", *argv]
    cmd = [mpiexec]
    if _is_open_mpi(mpiexec):
        cmd.append("--oversubscribe")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    if placement.hosts:
        cmd += ["-hosts", ",".join(f"{h}:{c}" for h, c in placement.hosts)]
    elif placement.hostfile:
        cmd += ["-f", placement.hostfile]
    return [*cmd, "-n", str(n), *argv]


def pldemu_argv(args: Sequence[str]) -> list[str]:
    """The per-rank command line running ``pldemu ARGS`` under mpi4py's abort-on-exception runner."""
    return [sys.executable, "-m", "mpi4py", "-m", "pldemu", *args]


MPICH_OVERSUBSCRIBED: Mapping[str, str] = MappingProxyType({
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "1024",
    "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1",
})
"""MPICH settings for a job with more ranks on this machine than it has cores. MPICH's own blocking
calls (barriers, allgathers, window allocation and free) poll without end; with ranks waiting for a
peer that has no core, every poll steals the core from it. With these, a call that has polled 1,024
times without progress sleeps briefly (``nanosleep``) before it polls again: the same "spin briefly,
then back off" that pldemu's own waits follow. Measured on 2 cores (docs/benchmarks.md, "MPICH's
waits in oversubscribed jobs"): the 4- and 8-rank check matrix used 15-30 % less CPU, at the same wall
time or less. A variable already in the environment wins; Open MPI ignores them."""


BLAS_ONE_THREAD: Mapping[str, str] = MappingProxyType({
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
})
"""Set in every job's environment (where it does not set them already): numpy's BLAS runs in the calling
thread. A rank's tile ops (a matmul is ``np.matmul`` on a tile) run in its task threads, several ranks
share the cores, and a tile is small, so BLAS's own threads only spin waiting for each other: 2,000
float64 matmuls of 64x256 by 256x256 took 18.2 s with OpenBLAS's default threads and 1.9 s with one, on
the loaded 2-core machine (pypto-lib's dspark ``lm_head`` at model scale: its dispatches ran past the
job timeout, 80 % of the rank's samples in ``np.matmul``)."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or ``taskset`` narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


PIN_VAR = "PLDEMU_PIN_CORES"
"""The cores (comma-separated) among which a job's ranks bind themselves, rank ``i`` to the
``i % len``-th (:func:`pin_to_core`, called by :func:`prepare_rank`); unset or empty: the ranks run
where the scheduler puts them. ``pldemu bench`` sets it (:func:`pin_env`) when its ranks outnumber
this machine's cores: with 4 ranks on 2 cores Linux leaves 3 ranks on one core and 1 on the other in
about one job of three, and a barrier then takes twice as long for the whole job (90-100 us against
45-55 us a round), so two runs of one benchmark disagree by 2x (docs/benchmarks.md, issue 23, "Item
4, sixth pass"). Other commands leave placement to the scheduler: its variety is part of the
interleavings a stress or check run explores (a 3-rank ``--sim-hosts 3x1`` stress run of the
``wait-eq`` mutant, pinned 2 + 1, found nothing in 40 iterations where unpinned runs deadlock at once).
Set it yourself to pin any job."""


def job_env(extra: Mapping[str, str] | None = None, *, local_ranks: int | None = None) -> dict[str, str]:
    """Our environment minus an enclosing job's process-manager variables, unbuffered Python output,
    single-threaded BLAS (:data:`BLAS_ONE_THREAD`); with ``local_ranks`` (the job's ranks on this machine) above :func:`usable_cores`, also
    :data:`MPICH_OVERSUBSCRIBED` (where the environment does not set them already)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in BLAS_ONE_THREAD.items():
        env.setdefault(name, value)
    if local_ranks is not None and local_ranks > usable_cores():
        for name, value in MPICH_OVERSUBSCRIBED.items():
            env.setdefault(name, value)
    if extra:
        env.update(extra)
    return env


def wait_exit(proc: subprocess.Popen[Any], timeout: float | None) -> int:
    """``proc.wait(timeout)``, woken by the exit itself: ``Popen.wait`` with a timeout polls (sleeps of
    up to 50 ms, so it sees a job's end up to 50 ms late); a pidfd (Linux) blocks until the exit or
    the timeout. Signal handlers run as usual (``select`` is restarted after them)."""
    import select
    import subprocess

    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3, or the process is already reaped
        return proc.wait(timeout=timeout)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout if timeout is not None else 0.0)
    return proc.wait()


def kill_group(proc: subprocess.Popen[Any], grace: float = 5.0, marker: str | None = None) -> None:
    """End the job: its ranks and local proxies SIGKILLed where they stand (:func:`_freeze`),
    mpiexec's process group SIGTERMed once, then SIGKILLed after ``grace``; then unlink MPI's named
    /dev/shm segments the ranks held (:func:`_held_segments`).

    ``marker`` is the job's :data:`PID_DIR_VAR` value: every process of the job carries it, which
    finds what outlived mpiexec. Hydra's proxies are not in its group, and a job that ends with
    ``MPI_Abort`` ends mpiexec before its proxies have killed the other ranks: those are SIGKILLed
    too, and waited for (up to ``grace``), so that nothing of the job writes after this returns."""
    group = _group_alive(proc.pid)
    if not group and marker is None:
        return  # the job ended by itself: its ranks dropped their segments' names
    depth: dict[int, int] = {}
    segments: list[str] = []
    try:
        _freeze(lambda: _marked(marker) | (_descendants(proc.pid) if group else {}), depth)
        segments = _held_segments(depth)
        for pid in (pid for pid, level in depth.items() if level >= 2 or _is_proxy(pid) or _outside(pid, proc.pid)):
            # A rank resumed with a SIGTERM pending may first finish MPI_Init (the signal waits for
            # Python code) and create a segment nobody has seen, and a resumed proxy may start one
            # more rank; a killed one does neither. What left mpiexec's group gets no signal of it.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if group:
            with contextlib.suppress(ProcessLookupError):
                # Pending until each resumes: mpiexec (or the hosts script, whose trap must not be hit
                # twice) forwards it to the ranks on other hosts.
                os.killpg(proc.pid, signal.SIGTERM)
    finally:
        for pid in depth:  # even when interrupted halfway: nothing of the job stays stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    try:
        if group:
            _reap(proc, grace)
        _await_exits([pid for pid in depth if pid != proc.pid], grace)
    finally:
        from pldemu.runtime.shm import unlink_segment

        for path in segments:
            unlink_segment(path)


def _outside(pid: int, pgid: int) -> bool:
    """Whether ``pid`` (still there) is outside process group ``pgid``."""
    try:
        return os.getpgid(pid) != pgid
    except ProcessLookupError:
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


STRAY = 2
"""The depth :func:`_marked` gives a process of the job that is no longer below mpiexec: killed as a
rank is."""


def _marked(marker: str | None) -> dict[int, int]:
    """The processes in this mount namespace whose environment holds ``PID_DIR_VAR=marker`` (a job's
    own folder, so no other process has it), each at depth :data:`STRAY`; empty for None."""
    if marker is None:
        return {}
    entry, found = f"{PID_DIR_VAR}={marker}".encode(), {}
    with contextlib.suppress(OSError):
        mine = os.readlink("/proc/self/ns/mnt")
        for proc_dir in os.scandir("/proc"):
            with contextlib.suppress(OSError):
                if proc_dir.name.isdigit() and os.readlink(f"{proc_dir.path}/ns/mnt") == mine:
                    with open(f"{proc_dir.path}/environ", "rb") as f:
                        if entry in f.read().split(b"\0"):
                            found[int(proc_dir.name)] = STRAY
    return found


def _await_exits(pids: Iterable[int], timeout: float) -> None:
    """Wait until each of ``pids`` (not our children: killed processes of a job) has exited, up to
    ``timeout`` in all; a pidfd (Linux) is readable once its process has ended."""
    import select

    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # gone already, or no pidfds here
            continue
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)


def _freeze(discover: Callable[[], dict[int, int]], stopped: dict[int, int]) -> None:
    """SIGSTOP the job's processes (``discover``: mpiexec, or the hosts script above it, and its
    descendants in this mount namespace, with the job's strays) until no new one appears (hydra
    starts each rank in a session of its own, so the job is a process tree, not a group), recording
    in ``stopped`` each one's depth below mpiexec (for a local mpiexec, 1: its proxy, 2 and more:
    ranks)."""
    while True:
        fresh = {pid: level for pid, level in discover().items() if pid not in stopped}
        if not fresh:
            return
        for pid, level in fresh.items():
            stopped[pid] = level  # before the signal: an interruption still resumes it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)


def _is_proxy(pid: int) -> bool:
    """Whether ``pid`` is a hydra proxy (MPICH's per-host process that starts the ranks)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "hydra_pmi_proxy"
    except OSError:
        return False


def _descendants(root: int) -> dict[int, int]:
    """``root`` and every process below it in this mount namespace, with its depth below ``root``."""
    parent: dict[int, int] = {}
    with contextlib.suppress(OSError):
        mine = os.readlink("/proc/self/ns/mnt")
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if entry.name.isdigit() and os.readlink(entry / "ns" / "mnt") == mine:
                    parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    tree, level = {root: 0}, [root]
    while level:
        level = [pid for pid, ppid in parent.items() if ppid in level and pid not in tree]
        tree |= {pid: tree[parent[pid]] + 1 for pid in level}
    return tree


def _held_segments(pids: Iterable[int]) -> list[str]:
    """MPI's named /dev/shm segments the (stopped) processes ``pids`` map or hold open. A rank killed
    inside ``MPI_Init``, before :func:`prepare_rank` gave it a SIGTERM that drops them, would leave
    them behind; only the launcher can remove them then."""
    from pldemu.runtime.shm import held_segments

    return sorted({path for pid in pids for path in held_segments(pid)})


def _reap(proc: subprocess.Popen[Any], grace: float) -> None:
    """Wait up to ``grace`` for the SIGTERMed process manager, then SIGKILL its group: whatever of it
    outlived the manager, or the manager too if it is still there (then wait for it once more)."""
    import subprocess

    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:  # it outlived the grace: now it has been SIGKILLed too
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)


class Interrupted(BaseException):
    """This launcher got SIGTERM, SIGHUP or SIGINT while a job ran: the job's process group has been
    killed on the way out. A ``BaseException``, so that no ``except Exception`` swallows it; commands
    end with :attr:`exit_code` (128 + the signal number, as a shell reports a signal death)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
"""What ends a launcher (``timeout``, a CI cancel, a closed terminal, Ctrl-C): each raises
:class:`Interrupted` in the main thread while a job may run, so the job never outlives us."""


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turn :data:`FORWARDED_SIGNALS` into :class:`Interrupted` for the duration (main thread only;
    a signal this process ignores stays ignored; nothing is installed inside an MPI job, whose
    process manager tears ranks down itself)."""
    if threading.current_thread() is not threading.main_thread() or in_mpi_job():
        yield
        return

    def raise_interrupted(signum: int, _frame: object) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.getsignal(sig) for sig in FORWARDED_SIGNALS}
    for sig, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, raise_interrupted)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


PID_DIR_VAR = "PLDEMU_JOB_PIDS"
"""The spawned job's folder, on the launcher's machine: every rank writes ``rankR.pid`` there (see
:func:`prepare_rank`), so a launcher whose job died of a signal can name the processes mpiexec's
report speaks of, and a failing rank leaves its message there (:func:`note_failure`)."""


def prepare_rank(environ: Mapping[str, str] | None = None) -> None:
    """First thing in a rank of a job this launcher spawned: write this process's pid for the
    launcher, and make SIGTERM (how mpiexec and the launcher end a job) drop MPI's named /dev/shm
    segments before the process dies, since MPI_Finalize will not run then."""
    env = os.environ if environ is None else environ
    folder, rank = env.get(PID_DIR_VAR), job_rank(env)
    if folder and rank is not None:
        with contextlib.suppress(OSError):
            Path(folder, f"rank{rank}.pid").write_text(str(os.getpid()))
    if rank is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    pin_to_core(env)


def pin_env(local_ranks: int | None) -> dict[str, str]:
    """What a job that measures adds to its environment (:data:`PIN_VAR`): this process's cores when
    the job's ranks on this machine (``local_ranks``; None: real hosts take them) outnumber them and
    the environment does not say already, else nothing."""
    if local_ranks is None or local_ranks <= usable_cores() or PIN_VAR in os.environ:
        return {}
    try:
        return {PIN_VAR: ",".join(map(str, sorted(os.sched_getaffinity(0))))}
    except (AttributeError, OSError):
        return {}


def pin_to_core(environ: Mapping[str, str] | None = None) -> int | None:
    """Bind this rank to one core of :data:`PIN_VAR`'s list, the one its rank (as the process manager
    announced it) picks in turn; return that core, or None where nothing asks for it or the list or
    the rank is missing or unusable (the rank then runs where the scheduler puts it). The job's rank,
    not the rank on its host: the launcher asks for this only when every rank runs on this machine,
    simulated hosts included, whose ranks each count from 0 on their host."""
    env = os.environ if environ is None else environ
    rank = job_rank(env)
    try:
        cores = [int(c) for c in env.get(PIN_VAR, "").split(",") if c.strip()]
    except ValueError:
        return None
    if not cores or rank is None:
        return None
    core = cores[rank % len(cores)]
    try:
        os.sched_setaffinity(0, {core})
    except (AttributeError, OSError):
        return None
    return core


POOL_VAR = "PLDEMU_POOL_JOB"
"""Set in a pool job's environment (:mod:`pldemu.pool`): its ranks serve one run after another, so a
run that ends with a check's failure keeps MPI initialised for the next (:func:`serves_pool`)."""


def serves_pool(environ: Mapping[str, str] | None = None) -> bool:
    """True in a rank of a pool job: it must not finalise MPI after a run (the next run needs it)."""
    env = os.environ if environ is None else environ
    return env.get(POOL_VAR) == "1"


STARTUP_LOG_VAR = "PLDEMU_STARTUP_LOG"
"""File to which the launcher and every rank append one ``PHASE RANK TIME`` line as they pass each
start-up phase (:func:`startup_mark`; ``pldemu bench startup`` sets it to break a job's cost down)."""


def startup_mark(phase: str, environ: Mapping[str, str] | None = None) -> None:
    """Record that this process (rank, or -1 for the launcher) reached ``phase``, with the wall-clock
    time (comparable across the processes of one machine), when :data:`STARTUP_LOG_VAR` names a file;
    nothing otherwise. One short ``O_APPEND`` write: lines of concurrent ranks do not interleave."""
    env = os.environ if environ is None else environ
    path = env.get(STARTUP_LOG_VAR)
    if path:
        rank = job_rank(env)
        with contextlib.suppress(OSError), open(path, "a") as log:
            log.write(f"{phase} {-1 if rank is None else rank} {time.time():.6f}\n")


def _terminated(signum: int, _frame: object) -> None:
    from pldemu.runtime.shm import unlink_named_segments

    unlink_named_segments()
    os._exit(128 + signum)


@dataclass(frozen=True)
class RankFailure:
    """What one failing rank of a spawned job has to say, left for the launcher to print once.

    ``text`` is the message without its head, e.g. ``WindowAccessError: main:7 ...``; ``head`` the
    command's prefix (``pldemu run: ``, ``# ``). Ranks whose failures have the same ``key`` (default:
    the text) hit the same failure and are printed as one. ``full`` is False for a message that
    refers to another rank's (a deadlock seen after a lower rank's report). ``hint`` follows the
    group once."""

    rank: int
    text: str
    head: str = ""
    key: str = ""
    hint: str = ""
    full: bool = True

    @property
    def line(self) -> str:
        """The message as the rank itself would print it."""
        return f"{self.head}rank {self.rank}: {self.text}"


_FAILURE_FILE = "rank{rank}.failure.json"


def note_failure(failure: RankFailure, environ: Mapping[str, str] | None = None) -> bool:
    """Leave ``failure`` in the job's folder for the launcher (:data:`PID_DIR_VAR`); False when this
    rank was not spawned by a pldemu launcher, or runs where the folder is not (another host): the
    caller then prints the message itself."""
    env = os.environ if environ is None else environ
    folder = env.get(PID_DIR_VAR)
    if not folder or not Path(folder).is_dir():
        return False
    path = Path(folder, _FAILURE_FILE.format(rank=failure.rank))
    try:
        partial = path.with_suffix(".tmp")
        import json

        partial.write_text(json.dumps(asdict(failure)))
        partial.replace(path)  # the launcher never reads half a message
    except OSError:
        return False
    return True


def read_failures(folder: Path) -> list[RankFailure]:
    """The failures the ranks of a job left in ``folder`` (:func:`note_failure`), by rank."""
    import json

    out: list[RankFailure] = []
    for f in folder.glob(_FAILURE_FILE.format(rank="*")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            out.append(RankFailure(**json.loads(f.read_text())))
    return sorted(out, key=lambda x: x.rank)


def rank_set_text(ranks: Sequence[int]) -> str:
    """``rank 2``, ``ranks 0-3``, ``ranks 0, 2, 5-7``."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    spans = [f"{a}" if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}" for a, b in runs]
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(spans)}"


def failure_report(failures: Sequence[RankFailure]) -> str:
    """Every failure once: the ranks that hit it, then its message (the first rank's, the lowest rank
    with a full message, when the ranks' messages differ), its hint once; in order of first rank."""
    groups: dict[tuple[str, str], list[RankFailure]] = {}
    for f in sorted(failures, key=lambda x: x.rank):
        groups.setdefault((f.head, f.key or f.text), []).append(f)
    blocks: list[str] = []
    for (head, key), group in groups.items():
        ranks = rank_set_text([f.rank for f in group])
        first = next((f for f in group if f.full), group[0])
        if len(group) == 1:
            lines = [first.line]
        elif all(f.text == first.text for f in group):
            lines = [f"{head}{ranks}: {first.text}"]
        else:
            lines = [f"{head}{ranks}: {key}; rank {first.rank}'s message:", first.line]
        blocks.append("\n".join(lines + ([first.hint] if first.hint else [])))
    return "\n".join(blocks)


MPI_ABORT_CHATTER = re.compile(r"^Abort\(-?\d+\) on node \d+ \(rank \d+ in comm \d+\): "
                               r"application called MPI_Abort\(.*\) - process \d+\s*$")
"""The line MPICH prints for every MPI_Abort. pldemu has said why the job ends by then (or, for an
unhandled exception, mpi4py printed the traceback): the launcher drops it."""


def _forward(source: IO[bytes], sink: IO[Any]) -> None:
    """Copy a job's stderr to ``sink`` line by line, without the MPI library's abort chatter."""
    for raw in iter(source.readline, b""):
        line = raw.decode(errors="replace")
        if MPI_ABORT_CHATTER.match(line):
            continue
        with contextlib.suppress(ValueError, OSError):  # a sink closed under us: keep draining
            sink.write(line)
            sink.flush()


def report_timeout(n: int, timeout: float | None, elapsed: float, err: IO[Any]) -> None:
    """The one line a launcher prints when it killed an ``n``-rank job that outlived ``timeout``."""
    print(f"pldemu: the {n}-rank job ran longer than {timeout:g}s and was killed ({elapsed:.0f}s)",
          file=err, flush=True)


def run_job(n: int, argv: Sequence[str], timeout: float | None, *, env: Mapping[str, str] | None = None,
            cwd: str | os.PathLike[str] | None = None, stdout: IO[Any] | None = None,
            stderr: IO[Any] | None = None, placement: Placement = LOCAL) -> int:
    """Run ``mpiexec -n N argv...`` (on ``placement``'s hosts) in a new session and return its exit
    code, mapped to the documented codes by :func:`job_exit_code` (with a message when the job died abnormally).

    Output goes to ``stdout``/``stderr`` (default: ours, streamed as it comes), the job's stderr
    without the MPI library's abort chatter (:data:`MPI_ABORT_CHATTER`); the failures its ranks left
    (:func:`note_failure`) are printed once each at the end (:func:`failure_report`). After
    ``timeout`` seconds (``None``: no limit) the job's whole process group is killed (SIGTERM, then
    SIGKILL) and ``TIMED_OUT`` (124) returned; on SIGTERM / SIGHUP / Ctrl-C it is killed and
    :class:`Interrupted` raised. However the job ends, no process of its group survives this call.
    """
    import subprocess
    import tempfile

    cmd = mpiexec_command(n, argv, placement)
    err = sys.stderr if stderr is None else stderr
    with tempfile.TemporaryDirectory(prefix="pldemu-pids-") as pids, interruptible():
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                                env=job_env({**(env or {}), PID_DIR_VAR: pids}, local_ranks=placement.local_ranks(n)),
                                cwd=cwd, start_new_session=True)
        assert proc.stderr is not None
        pump = threading.Thread(target=_forward, args=(proc.stderr, err), daemon=True)
        pump.start()
        start = time.monotonic()
        try:
            rc = wait_exit(proc, timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc, grace=max(5.0, placement.teardown_grace), marker=pids)
            _finish(proc, pump, Path(pids), err)
            report_timeout(n, timeout, time.monotonic() - start, err)
            return TIMED_OUT
        except BaseException as exc:
            kill_group(proc, grace=placement.teardown_grace, marker=pids)  # the job is in another session: it did not get our signal
            _finish(proc, pump, Path(pids), err)
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted(signal.SIGINT) from None
            raise
        finally:
            kill_group(proc, grace=placement.teardown_grace, marker=pids)  # mpiexec is gone: nothing it left may run on
        _finish(proc, pump, Path(pids), err)
        return job_exit_code(rc, _rank_pids(Path(pids)), err)


def _finish(proc: subprocess.Popen[Any], pump: threading.Thread, folder: Path, err: IO[Any]) -> None:
    """The job's stderr drained (its group is gone, so the pipe ends), then every failure its ranks
    left, printed once (idempotent: the files are consumed)."""
    pump.join(timeout=5.0)  # a process that left the group may hold the pipe: do not wait for it
    if not pump.is_alive() and proc.stderr is not None:
        proc.stderr.close()
    report_failures(folder, err)


def report_failures(folder: Path, err: IO[Any]) -> bool:
    """Print every failure the ranks left in ``folder`` once (:func:`failure_report`) and consume
    them; False when there was none."""
    failures = read_failures(folder)
    for f in folder.glob(_FAILURE_FILE.format(rank="*")):
        with contextlib.suppress(OSError):
            f.unlink()
    if failures:
        print(failure_report(failures), file=err, flush=True)
    return bool(failures)


DOCUMENTED_EXITS = (0, 1, 2, 3, 4, TIMED_OUT)
"""The exit codes pldemu's commands return from a job (README's table)."""


def job_exit_code(rc: int, pids: Mapping[int, int], err: IO[Any]) -> int:
    """A job's exit code as one of :data:`DOCUMENTED_EXITS`: a code of ours passes through; mpiexec
    killed by a signal, or reporting a process that died of one (its exit code is then the signal
    number, or 255 when a proxy vanished), becomes ``JOB_FAILED`` with a message saying which."""
    if rc in DOCUMENTED_EXITS:
        return rc
    ranks = ", ".join(f"rank {r} pid {p}" for r, p in sorted(pids.items())) or "no rank had started"
    if rc < 0:
        what = f"mpiexec itself was killed by {_signal_name(-rc)}"
    elif rc == 255:
        what = "mpiexec lost a process of the job (a proxy or rank vanished)"
    elif 0 < rc < 65:
        what = f"a process of the job died of {_signal_name(rc)}; mpiexec's report above gives its PID"
    else:
        what = f"mpiexec exited {rc}"
    print(f"pldemu: the job failed: {what} ({ranks}); the rest of the job was killed", file=err, flush=True)
    return JOB_FAILED


def _signal_name(signum: int) -> str:
    try:
        return f"signal {signum} ({signal.Signals(signum).name})"
    except ValueError:
        return f"signal {signum}"


def _rank_pids(folder: Path) -> dict[int, int]:
    out: dict[int, int] = {}
    for f in folder.glob("rank*.pid"):
        with contextlib.suppress(ValueError, OSError):
            out[int(f.stem[len("rank"):])] = int(f.read_text())
    return out


def spawn(n: int, argv: Sequence[str], timeout: float | None, *, env: Mapping[str, str] | None = None,
          cwd: str | os.PathLike[str] | None = None, placement: Placement = LOCAL) -> int:
    """Run ``pldemu ARGV`` on ``n`` ranks (``mpiexec -n N python -m mpi4py -m pldemu ARGV``), streaming
    its output; return an exit code for the command (see :func:`run_job`)."""
    return run_job(n, pldemu_argv(argv), timeout, env=env, cwd=cwd, placement=placement)


__all__ = [
    "DOCUMENTED_EXITS",
    "FORWARDED_SIGNALS",
    "HOSTS_SCRIPT",
    "JOB_FAILED",
    "LAUNCHER_VARS",
    "LOCAL",
    "MPICH_OVERSUBSCRIBED",
    "MPI_ABORT_CHATTER",
    "PID_DIR_VAR",
    "PIN_VAR",
    "POOL_VAR",
    "STARTUP_LOG_VAR",
    "TIMED_OUT",
    "Interrupted",
    "Placement",
    "RankFailure",
    "abort_job",
    "failure_report",
    "find_mpiexec",
    "in_mpi_job",
    "interruptible",
    "job_env",
    "job_exit_code",
    "job_rank",
    "job_size",
    "kill_group",
    "mpiexec_command",
    "note_failure",
    "pin_env",
    "pin_to_core",
    "pldemu_argv",
    "prepare_rank",
    "rank_set_text",
    "read_failures",
    "report_failures",
    "run_job",
    "serves_pool",
    "spawn",
    "startup_mark",
    "usable_cores",
    "wait_exit",
]
