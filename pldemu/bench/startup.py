"""``pldemu bench startup``: what one job costs from the user's shell, against bare MPI + Python.

Runs in the launching process (no MPI here: every contender is a job or a process of its own) and
alternates, in every iteration (A B ..., then ... B A), after warm-up:

* ``pldemu run TRIVIAL -n N`` (one ``tile.full`` + ``tile.store``) against
  ``mpiexec -n N python -c "import numpy; from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"``;
* ``pldemu --help`` against ``python -c "import numpy"``;
* one call of ``pldemu.launch(TRIVIAL, N)`` from this process (the library's per-call cost), with a
  job of its own and in a warm job (:mod:`pldemu.pool`, what ``pldemu pytest`` and the pytest
  plugin's ``pldemu_run`` use; its CPU includes the warm job's processes).

Each figure is the median over iterations of the wall time (spawn to exit) and of the CPU time
(user + system) of every process the contender ran (``getrusage`` of this process and its waited-for
children: mpiexec, its proxy and the ranks), which another agent's load on the cores does not
inflate the way it does the wall time. The ``pldemu run`` jobs
also write their phase marks (:func:`pldemu.job.launch.startup_mark`) to a log, from which each
phase gets a number: the phase ends when the last process reaches its mark, so the phases add up to
the job's wall time. Other jobs share the cores: read the ratios, not the absolute times.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pldemu.job.launch import STARTUP_LOG_VAR, job_env, mpiexec_command
from pldemu.pool.client import JobPool, use_pool

TRIVIAL_PROGRAM = """\
program trivial {
  window x: fp32[1, 16]

  func main() {
    t = tile.full([1, 16], 1.0, dtype=fp32)
    tile.store(t, [0, 0], x)
  }
}
"""
"""The job whose cost is start-up alone: one tile op and one store per rank, no MPI traffic."""

BARE_RANK = "import numpy; from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"
"""What every rank of the reference job does: the imports any pldemu rank needs, and one barrier."""

PHASES: tuple[tuple[str, str, str], ...] = (
    ("launcher imports", "", "parsed@launcher"),
    ("launcher prechecks", "parsed@launcher", "checked@launcher"),
    ("spawn (mpiexec, python start)", "checked@launcher", "start"),
    ("rank imports", "start", "parsed"),
    ("parse / lower / verify", "parsed", "checked"),
    ("MPI_Init + window allocation", "checked", "windows"),
    ("run", "windows", "ran"),
    ("report", "ran", "reported"),
    ("teardown (close, finalize, exit)", "reported", ""),
)
"""(phase, mark it starts at, mark it ends at): ``@launcher`` marks are the launching process's, the
others the last rank's; "" is the spawn of the command (start) or its exit (end)."""


@dataclass(frozen=True)
class StartupConfig:
    """How many ranks and iterations."""

    ranks: int = 2
    warmup: int = 1
    iters: int = 10


@dataclass
class StartupReport:
    """Per contender, its wall times (seconds); per phase, its times over the ``pldemu run`` jobs."""

    config: StartupConfig
    times: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    """Per contender, CPU seconds (user + system) of every process it ran, per iteration."""
    phases: dict[str, list[float]] = field(default_factory=dict)

    def median(self, name: str) -> float:
        """Median wall time of a contender (seconds)."""
        return statistics.median(self.times[name])

    def median_cpu(self, name: str) -> float:
        """Median CPU time of a contender (seconds)."""
        return statistics.median(self.cpu[name])

    def lines(self) -> list[str]:
        """The tables, as printed."""
        n = self.config.ranks
        out = [f"# pldemu bench startup: {n} ranks, {self.config.warmup} warm-up + {self.config.iters} timed "
               "iterations, alternating; wall time spawn to exit, median over iterations",
               f"# {'what':<44} {'time(ms)':>9} {'ratio':>7} {'cpu(ms)':>8} {'ratio':>7}  reference"]
        for name, ref in PAIRS:
            mine, cpu = self.median(name), self.median_cpu(name)
            ratio = f"{mine / self.median(ref):7.2f}" if ref else f"{'-':>7}"
            cpu_ratio = f"{cpu / self.median_cpu(ref):7.2f}" if ref else f"{'-':>7}"
            out.append(f"  {name.format(n=n):<44} {mine * 1e3:9.1f} {ratio} {cpu * 1e3:8.1f} {cpu_ratio}  "
                       f"{ref.format(n=n) or '-'}")
        out += ["", f"# where a `pldemu run -n {n}` job's time goes (median over iterations)",
                f"# {'phase':<44} {'time(ms)':>9} {'share':>7}"]
        total = sum(statistics.median(v) for v in self.phases.values()) or float("nan")
        for phase, values in self.phases.items():
            ms = statistics.median(values)
            out.append(f"  {phase:<44} {ms * 1e3:9.1f} {ms / total:7.1%}")
        return out


RUN = "pldemu run trivial -n {n}"
BARE = "mpiexec -n {n} python (numpy, mpi4py, barrier)"
HELP = "pldemu --help"
NUMPY = "python -c 'import numpy'"
LAUNCH = "pldemu.launch(trivial, {n}) per call"
WARM = "the same, in a warm job (pldemu.pool)"
PAIRS: tuple[tuple[str, str], ...] = ((BARE, ""), (RUN, BARE), (LAUNCH, BARE), (WARM, BARE), (NUMPY, ""),
                                      (HELP, NUMPY))
"""(contender, its reference) in print order."""


def pldemu_command() -> list[str]:
    """The ``pldemu`` console script next to this Python (what a user runs), else ``python -m pldemu``."""
    script = Path(sys.executable).parent / "pldemu"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pldemu"]


def _process(argv: Sequence[str], env: dict[str, str] | None = None) -> Callable[[], None]:
    def run() -> None:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode(errors='replace')}")

    return run


def _launch(path: Path, ranks: int, pool: JobPool | None = None) -> Callable[[], None]:
    def run() -> None:
        import pldemu

        with use_pool(pool):
            result = pldemu.launch(path, ranks)
        if not result.ok:
            raise RuntimeError(f"pldemu.launch failed: {result.describe_failure()}")

    return run


def _cpu_seconds(pool: JobPool) -> float:
    """User + system seconds of this process, of every child it has waited for and of the warm jobs."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime + pool.cpu_seconds()


def phase_times(log: str, start: float, end: float) -> dict[str, float]:
    """Seconds per phase of one job from its ``startup_mark`` log (see :data:`PHASES`)."""
    marks: dict[str, float] = {"": start}
    for line in log.splitlines():
        phase, rank, stamp = line.split()
        key = f"{phase}@launcher" if rank == "-1" else phase
        marks[key] = max(marks.get(key, 0.0), float(stamp))
    out = {}
    for name, begin, finish in PHASES:
        stop = end if finish == "" else marks[finish]
        out[name] = stop - marks[begin]
    return out


def bench_startup(config: StartupConfig, emit: Callable[[str], None]) -> StartupReport:
    """Run every contender ``warmup + iters`` times, alternating, and return the figures."""
    report = StartupReport(config)
    n = config.ranks
    with tempfile.TemporaryDirectory(prefix="pldemu-bench-startup-") as work, JobPool() as pool:
        program = Path(work, "trivial.pld")
        program.write_text(TRIVIAL_PROGRAM)
        log = Path(work, "marks.log")
        run_env = job_env({STARTUP_LOG_VAR: str(log)})
        contenders: dict[str, Callable[[], None]] = {
            BARE: _process(mpiexec_command(n, [sys.executable, "-c", BARE_RANK])),
            RUN: _process([*pldemu_command(), "run", str(program), "-n", str(n)], run_env),
            LAUNCH: _launch(program, n),
            WARM: _launch(program, n, pool),
            NUMPY: _process([sys.executable, "-c", "import numpy"]),
            HELP: _process([*pldemu_command(), "--help"]),
        }
        names = list(contenders)
        for it in range(config.warmup + config.iters):
            order = names if it % 2 == 0 else names[::-1]
            for name in order:
                log.unlink(missing_ok=True)
                c0, t0 = _cpu_seconds(pool), time.time()
                contenders[name]()
                t1, c1 = time.time(), _cpu_seconds(pool)
                if it < config.warmup:
                    continue
                report.times.setdefault(name, []).append(t1 - t0)
                report.cpu.setdefault(name, []).append(c1 - c0)
                if name == RUN:
                    for phase, seconds in phase_times(log.read_text(), t0, t1).items():
                        report.phases.setdefault(phase, []).append(seconds)
            emit(f"# bench startup: iteration {it + 1}/{config.warmup + config.iters}")
    return report


__all__ = ["PHASES", "TRIVIAL_PROGRAM", "StartupConfig", "StartupReport", "bench_startup", "phase_times",
           "pldemu_command"]
