"""``pldemu demo``: the 4-rank demonstration of the README.

One program, built with the IR builder and printed as ``.pld`` text: inside a ``for`` loop, every
iteration generates fresh inputs in-program (``tile.load`` of a pattern + ``tile.adds`` of a value
made from the rank and the loop index, ``tensor.write`` of the send counts), runs an allreduce and an
all_to_all_v that share ONE mesh signal buffer, and copies each result into a history buffer.  The
program is lowered (a summary of the primitives each collective became is printed), executed once on
every rank, and then every iteration's results are checked against NumPy, and every signal cell on
every rank must be back to 0.  Exit status 0 only if everything held.

The inputs are generated inside the loop because a ``run()`` executes the whole loop: Python cannot
write buffers between iterations.  The history buffers are how Python sees every iteration afterwards.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pldemu.cli import common
from pldemu.harness import injob
from pldemu.ir import (
    Program,
    ProgramBuilder,
    format_program,
)
from pldemu.job import flags
from pldemu.job.argtypes import positive_int
from pldemu.job.exits import EXIT_FAIL, EXIT_OK, UsageError
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from mpi4py import MPI


DEFAULT_RANKS = 4


@dataclass(frozen=True)
class DemoConfig:
    """The demo's geometry: ``loops`` iterations of allreduce([1, size]) + all_to_all_v."""

    nranks: int
    size: int = 1024
    a2a_size: int = 32
    max_recv: int = 2
    loops: int = 6

    @property
    def a2a_rows(self) -> int:
        """Rows of the all_to_all_v input/target: NR * MAX_RECV."""
        return self.nranks * self.max_recv


# Scalars the program adds to its patterns; small integers keep every FP32 value exact.
AR_RANK_STEP = 16
AR_ITER_STEP = 1
A2A_RANK_STEP = 1000
A2A_ITER_STEP = 100


def build_program(cfg: DemoConfig) -> Program:
    """The demo program (pinned to ``cfg.nranks`` ranks so its tile shapes are static)."""
    nr, size, rows, m = cfg.nranks, cfg.size, cfg.a2a_rows, cfg.max_recv
    pb = ProgramBuilder("demo", nranks=nr)
    ar_pattern = pb.local("ar_pattern", "fp32", [1, size])
    data = pb.window("data", "fp32", [1, size])
    sig = pb.signal("sig", [nr, 1])  # ONE mesh signal: allreduce and all_to_all_v take turns on it
    a2a_pattern = pb.local("a2a_pattern", "fp32", [rows, cfg.a2a_size])
    a2a_in = pb.local("a2a_in", "fp32", [rows, cfg.a2a_size])
    a2a_out = pb.window("a2a_out", "fp32", [rows, cfg.a2a_size])
    send_counts = pb.local("send_counts", "int32", [nr])
    # recv_counts is only ever changed atomically (reset, publish) and must start at zero: a signal.
    recv_counts = pb.signal("recv_counts", [nr, 1])
    ar_hist = pb.local("ar_hist", "fp32", [cfg.loops, size])
    a2a_hist = pb.local("a2a_hist", "fp32", [cfg.loops * rows, cfg.a2a_size])
    rc_hist = pb.local("rc_hist", "int32", [cfg.loops * nr, 1])

    fb = pb.function("main")
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(data)
    me = pld.system.rank(ctx)
    with fb.for_range(0, cfg.loops, hint="it") as it:
        # allreduce input: pattern + 16*rank + it, written into the data window.
        t = pld.tile.load(ar_pattern, [0, 0], [1, size], hint="ar_in")
        t = pld.tile.adds(t, me * AR_RANK_STEP + it * AR_ITER_STEP, hint="ar_in")
        pld.tile.store(t, [0, 0], data)
        pld.tensor.allreduce(data, sig, op="Sum", mode="mesh")
        r = pld.tile.load(data, [0, 0], [1, size], hint="ar_res")
        pld.tile.store(r, [it, 0], ar_hist)

        # all_to_all_v inputs: counts (me + dest + it) % (MAX_RECV + 2) cover 0 and > MAX_RECV.
        with fb.for_range(0, nr, hint="dest") as dest:
            pld.tensor.write(send_counts, [dest], (me + dest + it) % (m + 2))
        u = pld.tile.load(a2a_pattern, [0, 0], [rows, cfg.a2a_size], hint="a2a_tile")
        u = pld.tile.adds(u, me * A2A_RANK_STEP + it * A2A_ITER_STEP, hint="a2a_tile")
        pld.tile.store(u, [0, 0], a2a_in)
        pld.tensor.all_to_all_v(a2a_in, a2a_out, sig, send_counts, recv_counts)
        v = pld.tile.load(a2a_out, [0, 0], [rows, cfg.a2a_size], hint="a2a_res")
        pld.tile.store(v, [it * rows, 0], a2a_hist)
        c = pld.tile.load(recv_counts, [0, 0], [nr, 1], hint="rc")
        pld.tile.store(c, [it * nr, 0], rc_hist)
    return pb.build()


def ar_pattern(cfg: DemoConfig) -> np.ndarray:
    """The allreduce pattern the program adds rank/iteration offsets to: small integers."""
    return ((np.arange(cfg.size) * 7) % 23 - 11).astype(np.float32).reshape(1, cfg.size)


def a2a_pattern(cfg: DemoConfig) -> np.ndarray:
    """The all_to_all_v pattern: every (row, column) distinct."""
    idx = np.arange(cfg.a2a_rows * cfg.a2a_size, dtype=np.float32)
    return idx.reshape(cfg.a2a_rows, cfg.a2a_size)


def expected_allreduce(cfg: DemoConfig, it: int) -> np.ndarray:
    """Sum over ranks of pattern + 16*rank + it."""
    return sum(
        (ar_pattern(cfg)[0] + np.float32(r * AR_RANK_STEP + it * AR_ITER_STEP) for r in range(cfg.nranks)),
        start=np.zeros(cfg.size, np.float32),
    )


def sent_rows(cfg: DemoConfig, sender: int, dest: int, it: int) -> int:
    """Rows ``sender`` sends ``dest`` at iteration ``it``: clamp((s + d + it) % (M+2), 0, M)."""
    return min((sender + dest + it) % (cfg.max_recv + 2), cfg.max_recv)


# ----------------------------------------------------------------------------------------------
# Lowering summary
# ----------------------------------------------------------------------------------------------

_PRIMITIVES = ("pld.system.notify", "pld.system.wait", "pld.tile.put", "pld.tile.get", "pld.tile.remote_load")


def lowering_summary(report: Any, nranks: int) -> list[str]:
    """Readable lines from ``lower_composite_ops_with_report``: per collective call, the one-sided
    primitives its recipe emitted (static call sites; loops count once), then the lowering's own line."""
    lines = []
    for call in report.calls:
        emitted = dict(call.emitted)
        prims = ", ".join(f"{emitted[p]} {p.rsplit('.', 1)[-1]}" for p in _PRIMITIVES if emitted.get(p))
        rest = sum(n for name, n in emitted.items() if name not in _PRIMITIVES)
        attrs = ", ".join(f"{k}={getattr(v, 'name', v)}" for k, v in call.call.attrs)
        args = ", ".join(getattr(a, "name", "?") for a in call.call.args)
        lines.append(f"  {call.call.op.text}({args}{', ' + attrs if attrs else ''})")
        lines.append(f"      primitives: {prims}  (+{rest} local ops: tile math, views, rank queries)")
        lines.append(f"      {call.summary(nranks).split(': ', 1)[-1].split('; ', 1)[-1]}")
    return lines


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu demo`` options."""
    common.add_ranks_argument(parser, DEFAULT_RANKS)
    parser.add_argument(
        "--loops", type=positive_int, default=DemoConfig.loops, help="loop iterations (default %(default)s)"
    )
    parser.add_argument(
        "--size", type=positive_int, default=DemoConfig.size, help="allreduce elements (default %(default)s)"
    )
    flags.add_runtime_arguments(parser, "demo")


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu demo``."""
    from pldemu.job.launch import in_mpi_job, spawn

    if in_mpi_job():
        return _run_in_job(args)
    n = args.ranks or DEFAULT_RANKS
    argv = ["demo", "-n", str(n), "--loops", str(args.loops), "--size", str(args.size), *flags.runtime_argv(args)]
    return spawn(n, argv, max(120.0, 10 * args.timeout), placement=common.placement(args))


def _run_in_job(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    try:
        injob.check_job_size(args.ranks, comm.Get_size())
        options = flags.runtime_options(args)
    except UsageError as err:
        return injob.refuse(comm, "demo", err)
    try:
        return _demo(comm, args, options)
    except Exception as err:  # any failure inside the job ends the whole job with exit 3
        injob.abort_on_error(comm, "# ", err)


@dataclass(frozen=True)
class _Ran:
    """What one rank's run of the demo program produced: its history buffers and signal cells."""

    backend: str
    seconds: float
    window_ops: dict[str, int]
    ar_hist: np.ndarray
    a2a_hist: np.ndarray
    rc_hist: np.ndarray
    cells: np.ndarray


def _demo(comm: MPI.Intracomm, args: argparse.Namespace, options: RuntimeOptions) -> int:
    from pldemu.harness.common import rank0_printer  # in the job only: it imports MPI
    from pldemu.lowering import lower_composite_ops_with_report

    nr, me = comm.Get_size(), comm.Get_rank()
    cfg = DemoConfig(nranks=nr, size=args.size, loops=args.loops)

    say = rank0_printer(comm)
    program = build_program(cfg)
    say(f"== pldemu demo: {cfg.loops} loop iterations of allreduce + all_to_all_v on {nr} ranks ==")
    say("")
    say("-- the program (.pld), built with pldemu.ir.ProgramBuilder --")
    say(format_program(program).rstrip())
    say("")
    t0 = time.perf_counter()
    report = lower_composite_ops_with_report(program)
    t_lower = time.perf_counter() - t0
    say(f"-- LowerCompositeOps ({t_lower * 1e3:.1f} ms): what each collective became --")
    for line in lowering_summary(report, nr):
        say(line)
    say("")
    ran = _run_program(comm, cfg, report.program, options)
    checks = _checks(cfg, me, ran)
    return _verdict(comm, cfg, ran, checks, say)


def _run_program(comm: MPI.Intracomm, cfg: DemoConfig, lowered: Program, options: RuntimeOptions) -> _Ran:
    """Run the lowered demo program once on this rank; copy out what the checks read."""
    from pldemu.runtime.interpreter import ProgramInstance

    with ProgramInstance(lowered, comm, options) as inst:
        inst.local("ar_pattern")[...] = ar_pattern(cfg)
        inst.local("a2a_pattern")[...] = a2a_pattern(cfg)
        comm.Barrier()
        t0 = time.perf_counter()
        stats = inst.run()
        elapsed = time.perf_counter() - t0
        ar, a2a, rc = (np.array(inst.local(name), copy=True) for name in ("ar_hist", "a2a_hist", "rc_hist"))
        # Everyone has retired every call before anyone reads its cells: they must all be 0.
        comm.Barrier()
        win = inst.window("sig")
        cells = np.array([win.read_cell(i) for i in range(win.numel)])
        return _Ran(str(inst.backend), elapsed, dict(stats.window_ops), ar, a2a, rc, cells)


def _checks(cfg: DemoConfig, me: int, ran: _Ran) -> list[tuple[str, int]]:
    """This rank's checks against NumPy: (what, wrong count)."""
    nr = cfg.nranks
    ar_wrong = sum(
        int(np.count_nonzero(ran.ar_hist[it] != expected_allreduce(cfg, it))) for it in range(cfg.loops)
    )
    a2a_wrong = 0
    rc_wrong = 0
    rows, m, pat = cfg.a2a_rows, cfg.max_recv, a2a_pattern(cfg)
    # Over all (sender, receiver, iteration) edges: how many sent nothing, how many were clamped.
    raw_counts = [(s + d + it) % (m + 2) for s in range(nr) for d in range(nr) for it in range(cfg.loops)]
    zero_edges = sum(c == 0 for c in raw_counts)
    clamped_edges = sum(c > m for c in raw_counts)
    for it in range(cfg.loops):
        for s in range(nr):
            nrows = sent_rows(cfg, s, me, it)
            rc_wrong += int(ran.rc_hist[it * nr + s, 0] != nrows)
            want = pat[me * m : me * m + nrows] + np.float32(s * A2A_RANK_STEP + it * A2A_ITER_STEP)
            got = ran.a2a_hist[it * rows + s * m : it * rows + s * m + nrows]
            a2a_wrong += int(np.count_nonzero(got != want))
    return [
        (f"allreduce(sum) results, {cfg.loops} iterations x {cfg.size} elements", ar_wrong),
        (
            f"all_to_all_v payload rows ({zero_edges} empty edges, {clamped_edges} clamped to MAX_RECV={m})",
            a2a_wrong,
        ),
        ("all_to_all_v recv_counts", rc_wrong),
        (f"signal cells back to 0 ({ran.cells.size} cells per rank)", int(np.count_nonzero(ran.cells))),
    ]


def _verdict(comm: MPI.Intracomm, cfg: DemoConfig, ran: _Ran, checks: list[tuple[str, int]],
             say: Callable[..., None]) -> int:
    """Reduce the checks and figures over ranks; rank 0 prints them. The exit code."""
    from mpi4py import MPI

    totals = np.zeros(len(checks), dtype=np.int64)
    comm.Allreduce(np.array([n for _, n in checks], dtype=np.int64), totals, MPI.SUM)
    slowest = comm.allreduce(ran.seconds, op=MPI.MAX)
    keys = ("puts", "gets", "notifies", "waits", "polls")
    ops = np.zeros(len(keys), dtype=np.int64)
    comm.Allreduce(np.array([ran.window_ops.get(k, 0) for k in keys], dtype=np.int64), ops, MPI.SUM)
    ok = not totals.any()

    say(f"-- ran on {cfg.nranks} ranks, windows={ran.backend} --")
    say(
        f"  {cfg.loops} iterations in {slowest * 1e3:.1f} ms (slowest rank): "
        f"{slowest / cfg.loops * 1e3:.2f} ms per iteration (allreduce + all_to_all_v)"
    )
    say(
        "  one-sided operations, all ranks: "
        + ", ".join(f"{int(n)} {k}" for k, n in zip(keys, ops, strict=True))
    )
    say("")
    say("-- checks (every rank, every iteration, against NumPy) --")
    for (what, _), bad in zip(checks, totals, strict=True):
        say(f"  {'ok  ' if bad == 0 else 'FAIL'}  {what}" + ("" if bad == 0 else f": {int(bad)} wrong"))
    say("")
    say("PASS: every result matched NumPy and the shared signal buffer cleared itself" if ok else "FAIL")
    return EXIT_OK if ok else EXIT_FAIL
