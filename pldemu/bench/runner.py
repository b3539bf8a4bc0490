"""``run_bench``: every measurement family in one MPI job, tables printed by rank 0 as rows finish.

Order: signals (hop, barrier round), bulk bandwidth per size, then the collectives per size, then
the bounds of every recipe (measured alongside it, from no pldemu figure) and the targets this run covers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from mpi4py import MPI

from pldemu.bench.bulk import bench_bulk
from pldemu.bench.collectives import CollectiveCase, bench_collective
from pldemu.bench.common import bounded, format_size
from pldemu.bench.micro import bench_micro
from pldemu.bench.report import (
    BOUND_HEADER,
    BULK_HEADER,
    COLLECTIVE_HEADER,
    MICRO_HEADER,
    SIGNAL_HEADER,
    BenchReport,
    format_bound,
    format_bulk,
    format_collective,
    format_micro,
    format_signal,
)
from pldemu.bench.signals import bench_signals
from pldemu.collectives import COLLECTIVE_NAMES
from pldemu.harness.common import rank0_printer
from pldemu.ir import DType
from pldemu.job.launch import PIN_VAR
from pldemu.runtime.options import RuntimeOptions

SECTIONS = ("signals", "bulk", "micro")
"""Measurement families besides the collectives (``pldemu bench signals`` ...); ``micro`` (one
process, the interpreter's own costs) runs only when asked for by name."""

WHATS = (*COLLECTIVE_NAMES, *SECTIONS, "all")
"""What ``pldemu bench`` accepts as its first argument."""

MIN_SHORT_ITERS = 20
"""Fewest timed iterations of the signal and bulk sections, whatever ``--iters`` says."""


@dataclass(frozen=True)
class BenchConfig:
    """What to measure and how often."""

    what: str = "all"
    sizes: tuple[int, ...] = (4 << 10, 1 << 20)
    dtype: DType = DType.FP32
    warmup: int = 3
    iters: int = 20
    modes: tuple[str, ...] = ("mesh", "ring")
    """allreduce algorithms to run."""

    def __post_init__(self) -> None:
        if self.what not in WHATS:
            raise ValueError(f"unknown benchmark {self.what!r}; expected one of {', '.join(WHATS)}")
        if self.iters < 1 or self.warmup < 0:
            raise ValueError(f"need iters >= 1 and warmup >= 0, got {self.iters} and {self.warmup}")
        if not self.sizes:
            raise ValueError("need at least one size")
        if self.dtype not in (DType.FP32, DType.FP16):
            raise ValueError(f"bench data is fp32 or fp16, not {self.dtype.value}")

    @property
    def short_iters(self) -> int:
        """Timed iterations of the signal and bulk sections: at least :data:`MIN_SHORT_ITERS` (their
        samples take milliseconds, and they are the noisiest figures on a shared machine)."""
        return max(self.iters, MIN_SHORT_ITERS)

    @property
    def collectives(self) -> tuple[str, ...]:
        """Collectives to run, in protocol order."""
        if self.what == "all":
            return COLLECTIVE_NAMES
        return (self.what,) if self.what in COLLECTIVE_NAMES else ()

    @property
    def run_signals(self) -> bool:
        """True when the signal section runs."""
        return self.what in ("all", "signals")

    @property
    def run_bulk(self) -> bool:
        """True when the bulk section runs."""
        return self.what in ("all", "bulk")

    def cases(self, nranks: int) -> list[CollectiveCase]:
        """Every collective case, size-major within each collective; barrier once (it has no size)."""
        out: list[CollectiveCase] = []
        for name in self.collectives:
            if name == "barrier":
                out.append(CollectiveCase(name, 0, self.dtype, nranks))
                continue
            modes = self.modes if name == "allreduce" else ("mesh",)
            for mode in modes:
                for size in self.sizes:
                    out.append(CollectiveCase(name, size, self.dtype, nranks, mode=mode))
        return out


def run_bench(
    comm: MPI.Intracomm,
    config: BenchConfig,
    options: RuntimeOptions,
    *,
    emit: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> BenchReport:
    """Run the benchmarks ``config`` asks for on every rank of ``comm``; collective.

    ``emit`` prints the tables (default: rank 0, stdout), ``progress`` one line before each
    measurement starts (default: rank 0, stderr).
    """
    from pldemu.windows import choose_backend

    emit = emit or rank0_printer(comm)
    progress = progress or rank0_printer(comm, sys.stderr)
    nranks = comm.Get_size()
    backend = choose_backend(comm, options.windows)
    report = BenchReport(nranks, backend, config.dtype.value, config.warmup, config.iters, config.sizes)
    emit(
        f"# pldemu bench {config.what}: {nranks} ranks, {backend} windows, {config.dtype.value}, "
        f"{config.warmup} warm-up + {config.iters} timed iterations ({config.short_iters} for signals and bulk), sizes "
        f"{','.join(format_size(s) for s in config.sizes)}; times: max over ranks, median over iterations"
    )
    placement = _placement(bounded(comm).gather(_cores(), "the ranks' cores"))
    emit(f"# machine: {os.cpu_count()} cores, load average {_load()} at start (other jobs share the cores); "
         f"{placement}")
    run = _Run(comm, config, options, report, emit, progress)
    if config.run_signals:
        run.signals()
    if config.run_bulk:
        run.bulk()
    if config.what == "micro":
        run.micro()
    run.collectives()
    run.summary()
    bounded(comm).barrier("the end of the bench")
    return report


@dataclass
class _Run:
    """One ``run_bench``: what it measures with, where it reports; one method per section."""

    comm: MPI.Intracomm
    config: BenchConfig
    options: RuntimeOptions
    report: BenchReport
    emit: Callable[[str], None]
    progress: Callable[[str], None]

    def signals(self) -> None:
        self.progress("# bench: signals (hop, barrier round)")
        self.emit("")
        self.emit(SIGNAL_HEADER)
        for s in bench_signals(self.comm, self.options, self.config.warmup, self.config.short_iters):
            self.report.signals.append(s)
            self.emit(format_signal(s))

    def bulk(self) -> None:
        self.emit("")
        self.emit(BULK_HEADER)
        config = self.config
        for size in config.sizes:
            self.progress(f"# bench: bulk {format_size(size)}")
            for b in bench_bulk(self.comm, size, config.dtype, self.options, config.warmup, config.short_iters):
                self.report.bulk.append(b)
                self.emit(format_bulk(b))

    def micro(self) -> None:
        self.progress("# bench: micro (rank 0 alone, MPI.COMM_SELF)")
        self.emit("")
        self.emit(MICRO_HEADER)
        report = self.report
        if self.comm.Get_rank() == 0:
            report.micro.extend(bench_micro(self.options))
        report.micro = self.comm.bcast(report.micro, root=0)
        for m in report.micro:
            self.emit(format_micro(m))

    def collectives(self) -> None:
        nranks = self.comm.Get_size()
        cases = self.config.cases(nranks)
        if cases:
            self.emit("")
            self.emit(COLLECTIVE_HEADER)
        for i, case in enumerate(cases):
            if case.size < 1:
                self.emit(f"  {case.label:<16} {case.nbytes:>10}  (skipped: too small for {nranks} ranks)")
                continue
            self.progress(f"# bench: [{i + 1}/{len(cases)}] {case.label} {format_size(case.nbytes)}")
            row = bench_collective(self.comm, case, self.options, self.config.warmup, self.config.iters)
            self.report.collectives.append(row)
            self.emit(format_collective(row))

    def summary(self) -> None:
        bounds = [r for r in self.report.collectives if r.bound_s is not None]
        if bounds:
            self.emit("")
            self.emit(BOUND_HEADER)
            for r in bounds:
                self.emit(format_bound(r))
        tgts = self.report.targets()
        if tgts:
            self.emit("")
            self.emit("# targets")
            for t in tgts:
                self.emit(t.format())
        self.emit(f"# load average {_load()} at the end")


def _cores() -> list[int] | None:
    """The cores this rank may run on (None where the platform does not say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _placement(every: list[list[int] | None] | None) -> str:
    """Where the ranks run, from every rank's :func:`_cores` (rank 0; elsewhere ``every`` is None):
    ``ranks pinned to cores 0,1,0,1`` when the launcher pinned them (:data:`PIN_VAR`)."""
    if every is None:
        return ""
    if os.environ.get(PIN_VAR) and all(c is not None and len(c) == 1 for c in every):
        return f"ranks pinned to cores {','.join(str(c[0]) for c in every if c is not None)} ({PIN_VAR})"
    return "ranks placed by the scheduler"


def _load() -> str:
    """The 1/5/15-minute load averages, for the record: ranks share the cores with anything else."""
    try:
        return "/".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


__all__ = ["SECTIONS", "WHATS", "BenchConfig", "run_bench"]
