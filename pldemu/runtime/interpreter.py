"""Run a LOWERED program on every rank of a communicator: ``ProgramInstance`` and ``execute``.

Each rank builds a ``ProgramInstance`` from the same program: it validates and prepares the program
(no MPI traffic, so a bad program fails identically everywhere), allocates every buffer collectively
(signals zero, data windows and local tensors poison), then ``run()`` executes the entry function as
often as asked. Ops dispatch through ``pldemu.runtime.ops.HANDLERS``; listeners see every op.
"""

from __future__ import annotations

import math
import operator
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from mpi4py import MPI

from pldemu.ir import (
    NR,
    BufferKind,
    Expr,
    ListExpr,
    Op,
    Program,
    TensorType,
    VerifyError,
    format_expr,
    format_program,
    verify,
)
from pldemu.ir.nodes import FoldError, NotStatic, evaluate
from pldemu.runtime.compiler import CompiledFunction, FunctionCompiler, Listener, function_lines
from pldemu.runtime.errors import AllocationError, DeadlockError, ProgramError
from pldemu.runtime.instrument import Instruments, build
from pldemu.runtime.machine import Machine
from pldemu.runtime.monitor import Monitor
from pldemu.runtime.options import DEFAULT_OPTIONS, RuntimeOptions
from pldemu.runtime.shm import unlink_named_segments
from pldemu.runtime.sites import CallSite, OpEvent
from pldemu.runtime.status import NFIELDS, RankState, StatusBoard
from pldemu.runtime.truncation import Truncation
from pldemu.runtime.values import Buffer, buffer_tensor
from pldemu.windows import (
    FreedOnExit,
    Window,
    WindowSet,
    WindowSpec,
    WindowStats,
    allocate_window,
    host_layout,
)

if TYPE_CHECKING:  # imported at run time only when instrumentation is asked for
    from pldemu.runtime.instrument.invariants import InvariantChecker
    from pldemu.runtime.instrument.races import RaceDetector
    from pldemu.runtime.instrument.schedule import Schedule
    from pldemu.runtime.instrument.trace import Tracer

_STAT_FIELDS = tuple(f.name for f in dataclass_fields(WindowStats))
_STATS_OF = operator.attrgetter(*_STAT_FIELDS)
"""A window's counters as a tuple, in ``_STAT_FIELDS`` order."""

STATUS_WINDOW = "pldemu.status"
"""Name of the status board window (a dot: no program buffer can be called that)."""


@dataclass(slots=True)
class RunStats:
    """What one ``run()`` did on this rank (a plain record, like ``WindowStats``: building a frozen
    dataclass cost a fifth of a barrier's ``run()``).

    ``window_ops`` sums the windows layer's counters over this run (puts, atomic_puts, gets,
    notifies, waits, polls, bytes_put, bytes_got); ``returned`` holds the entry function's return values.
    """

    rank: int
    nranks: int
    entry: str
    run: int
    seconds: float
    window_ops: Mapping[str, int]
    returned: tuple[Any, ...] = ()


class _WindowOps(Mapping[str, int]):
    """``RunStats.window_ops``: the counters' difference over one run, summed over windows when first
    read (most callers never read it, and building it cost more than a short run itself)."""

    __slots__ = ("_after", "_before", "_sums")

    def __init__(self, before: list[tuple[int, ...]], after: list[tuple[int, ...]]) -> None:
        self._before = before
        self._after = after
        self._sums: dict[str, int] | None = None

    def _get(self) -> dict[str, int]:
        if self._sums is None:
            totals = [0] * len(_STAT_FIELDS)
            for b, a in zip(self._before, self._after, strict=True):
                for i, (x, y) in enumerate(zip(b, a, strict=True)):
                    totals[i] += y - x
            self._sums = dict(zip(_STAT_FIELDS, totals, strict=True))
        return self._sums

    def __getitem__(self, key: str) -> int:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(_STAT_FIELDS)

    def __repr__(self) -> str:
        return repr(self._get())


class OpCounter:
    """A listener counting executed ops by kind: ``inst.add_listener(counter)``; ``counter.counts``."""

    def __init__(self) -> None:
        self.counts: Counter[Op] = Counter()

    def __call__(self, event: OpEvent) -> None:
        self.counts[event.op] += 1


@dataclass
class _Prepared:
    functions: dict[tuple[str, bool], CompiledFunction] = field(default_factory=dict)
    sites_by_function: dict[str, list[CallSite]] = field(default_factory=dict)


class ProgramInstance(FreedOnExit):
    """One rank's instantiation of a LOWERED program on a communicator.

    Construction is collective (every rank of ``comm`` must construct it with the same program and
    options). It first validates the program without any MPI traffic (verifier, no composite
    collective left, ``nranks`` pin equal to the communicator size, buffer shapes non-negative after
    binding ``NR``, the entry function) and raises ``ProgramError`` identically on every rank; then it
    allocates every buffer collectively.

    ``run()`` executes the entry function once and may be called any number of times (collectively).
    ``close()`` frees the windows (collective, idempotent). Leaving a ``with`` block closes the instance
    when the block ended normally; after an exception the windows are left to the MPI job's teardown,
    because a collective free would hang if only this rank failed. Call ``close()`` yourself when
    every rank knows the failure happened everywhere.
    """

    def __init__(self, program: Program, comm: MPI.Comm, options: RuntimeOptions = DEFAULT_OPTIONS) -> None:
        if not isinstance(options, RuntimeOptions):
            raise TypeError(f"options must be a RuntimeOptions, got {type(options).__name__}")
        program = _as_run(program, options)
        self.program = program
        self.comm = comm
        # Windows need an intracommunicator; any intercommunicator fails in the windows layer.
        intra = cast(MPI.Intracomm, comm)
        self.options = options
        self.rank: int = comm.Get_rank()
        self.nranks: int = comm.Get_size()
        self._listeners: list[Listener] = []
        self._monitors: list[Monitor] = []
        self._instruments: Instruments | None = None
        self._closed = False
        self._runs = 0
        # -- validate and prepare: deterministic, no MPI traffic ------------------------------------
        buffers = _plan_buffers(program, self.nranks)
        self._buffers = {b.name: b for b in buffers}
        self._machine = Machine(self.rank, self.nranks, options, buffers)
        # Before compiling: the schedule and the invariant checker fill machine.overrides, which the compiler reads.
        self._instruments = build(self._machine, options)
        self._schedule: Schedule | None = None
        self._invariants: InvariantChecker | None = None
        if self._instruments is not None:
            self._schedule, self._invariants = self._instruments.schedule, self._instruments.invariants
            self._monitors.extend(self._instruments.call_monitors)
        self._global_slots = {NR.name: 0, **{b.name: 1 + b.index for b in buffers}}
        self._lines = function_lines(program)
        self._prepared = _Prepared()
        for f in program.functions:  # the verifier made sure the entry function is among them
            self._function(f.name, traced=False)
        # -- allocate: collective ---------------------------------------------------------------
        self._window_set: WindowSet | None = None
        self._status_window: Window | None = None
        self.hosts = host_layout(intra)  # first: it also decides every window's back end, with no MPI call
        self._status_window = self._allocate_windows(intra, buffers)
        self._machine.status = StatusBoard(self._status_window)
        if self._invariants is not None:
            self._invariants.board = self._machine.status  # a deadlock report reads violations from it
        if self.hosts.spans_hosts:
            self._machine.hosts = self.hosts.names
        self._globals: list[Any] = [self.nranks, *(buffer_tensor(b) for b in buffers)]
        self._window_stats = [b.window.stats for b in buffers if b.window is not None]
        if self._instruments is not None:
            for mon in self._instruments.start(intra, program.name):  # collective: tracer, race detector
                self.add_monitor(mon)
        # Every rank has mapped MPICH's named shared-memory segments by now (each allocation ends in a
        # barrier): unlink their names so that even an aborted or killed job leaves nothing in /dev/shm.
        unlink_named_segments()

    def _allocate_windows(self, intra: MPI.Intracomm, buffers: list[Buffer]) -> Window:
        """Allocate every buffer, the invariant checker's windows and the status window (collective);
        return the status window."""
        try:
            self._window_set = WindowSet(intra, backend=self.options.windows, layout=self.hosts)
            # Every rank has mapped MPICH's per-node segment of MPI_Init once the window set exists
            # (a collective): drop its name now, so a failure below cannot leave it in /dev/shm.
            unlink_named_segments()
            self._allocate(buffers)
            if self._invariants is not None:
                self._invariants.attach(self._window_set)  # collective: its writer-kind windows
            return allocate_window(intra, STATUS_WINDOW, NFIELDS, np.int64, backend="auto", fill=0, layout=self.hosts)
        except ValueError as err:
            # The windows layer raises ValueError on every rank alike (checked arguments, back end
            # not available), so freeing what exists is a collective every rank reaches.
            self._free()
            raise ProgramError(f"cannot allocate the buffers of program {self.program.name}: {err}") from err
        except (MemoryError, MPI.Exception) as err:
            unlink_named_segments()  # the windows allocated so far; their memory goes with the process
            raise AllocationError(_allocation_failure(self.program.name, buffers, err)) from err

    # -- public API ------------------------------------------------------------------------------------

    @property
    def backend(self) -> str:
        """The window back end in use (``shared`` or ``rma``)."""
        return self._window_set.backend if self._window_set is not None else self.options.windows

    @property
    def program_text(self) -> str:
        """The printed program: the LINE of every reported location refers to this text."""
        return format_program(self.program)

    @property
    def sites(self) -> tuple[CallSite, ...]:
        """Every call site of the program (ids as published on the status board)."""
        return tuple(self._machine.sites)

    def python_source(self, entry: str | None = None) -> str:
        """The Python source generated for function ``entry`` (default: the entry function), as run
        without listeners or monitors (``pldemu.runtime.compiler``); for inspection only."""
        name = entry or self.program.entry
        if name not in self._lines:
            raise ProgramError(f"program {self.program.name} has no function {name!r}")
        return self._function(name, traced=False).source

    @property
    def created_peak(self) -> int:
        """The most bytes of ``tensor.create`` storage alive at once on this rank so far (a created buffer's
        storage is released once no value reaches it: ``values.BufferTable``)."""
        return self._machine.buffers.peak_bytes

    def buffers(self) -> tuple[Buffer, ...]:
        """The program's buffers on this rank, in declaration order."""
        return tuple(self._buffers.values())

    def buffer_names(self) -> tuple[str, ...]:
        """The program's buffers, in declaration order."""
        return tuple(self._buffers)

    def local(self, name: str) -> np.ndarray:
        """This rank's own buffer ``name`` (window segment or local tensor): a writable view with the
        declared shape. Writes to a window segment become visible to peers with the next notify."""
        self._check_open("local")
        return self._buffer(name).array

    def window(self, name: str) -> Window:
        """The window behind buffer ``name`` (a data or signal window, not a local tensor)."""
        self._check_open("window")
        b = self._buffer(name)
        if b.window is None:
            raise ProgramError(f"buffer {name!r} is a rank-local tensor, not a window")
        return b.window

    def on_host_task(self, run: Callable[[int], None] | None) -> None:
        """Who runs ``system.host_task`` N from now on (a resident job's rank: ``run(N)``); None refuses it."""
        self._machine.host_task = run

    def add_listener(self, fn: Callable[[OpEvent], None]) -> None:
        """Call ``fn(event)`` before every executed op from now on (runs switch to the traced variant of
        the prepared program; without listeners nothing per op is spent on them)."""
        self._listeners.append(fn)
        self._drop_traced()

    def add_monitor(self, monitor: Monitor) -> None:
        """Bracket every op ``monitor.wants`` from now on (``pldemu.runtime.monitor``); only the call
        sites of those ops are compiled with it."""
        self._monitors.append(monitor)
        self._drop_traced()

    @property
    def races(self) -> RaceDetector | None:
        """The race detector (``RuntimeOptions.race_detect``), else None."""
        return self._instruments.races if self._instruments is not None else None

    @property
    def truncations(self) -> tuple[Truncation, ...]:
        """This rank's findings so far: each site where ``tdiv`` / ``trem`` (C's truncating division and
        remainder) gave another value than floor semantics, first evaluation only
        (``pldemu.runtime.truncation``)."""
        return self._machine.truncations.found

    @property
    def schedule(self) -> Schedule | None:
        """The adversarial schedule / deferred-visibility state (``pldemu.runtime.instrument.schedule``) when
        any of its knobs or ``invariants`` is set, else None."""
        return self._schedule

    @property
    def invariants(self) -> InvariantChecker | None:
        """The protocol invariant checker (``RuntimeOptions.invariants``), else None."""
        return self._invariants

    @property
    def tracer(self) -> Tracer | None:
        """The trace recorder (``RuntimeOptions.trace``), else None."""
        return self._instruments.tracer if self._instruments is not None else None

    def run(self, entry: str | None = None) -> RunStats:
        """Execute ``entry`` (default: the program's entry function) once on this rank; collective."""
        if self._closed:
            self._check_open("run")  # raises
        name = entry or self.program.entry
        monitors = self._monitors
        traced = bool(self._listeners or monitors)
        # Every attribute load and call counts here: a barrier is a few microseconds of ops, and a
        # benchmark or a stress loop runs it once per run() (docs/benchmarks.md, issue 23).
        fn = self._prepared.functions.get((name, traced))
        if fn is None:
            if name not in self._lines:
                raise ProgramError(f"program {self.program.name} has no function {name!r}")
            fn = self._function(name, traced)
        machine = self._machine
        if len(machine.buffers) > machine.declared:
            machine.drop_created()
        board = machine.status
        assert board is not None
        self._runs = runs = self._runs + 1
        stats = self._window_stats
        before = [_STATS_OF(st) for st in stats]
        frame = self._globals + [None] * (fn.nslots - len(self._globals))
        board.run_started(runs)
        for mon in monitors:
            mon.run_started(runs)
        start = time.perf_counter()
        try:
            try:
                returned = fn.run(frame)
            finally:
                # Peers may sleep on cells the last notifies changed: a run ends the burst.
                if self._window_set is not None:
                    self._window_set.flush_wakes()
        except DeadlockError as err:
            self._run_ended(err)
            raise  # the board already says TIMED_OUT
        except BaseException as err:
            board.set_state(RankState.FAILED)
            self._run_ended(err)
            raise
        seconds = time.perf_counter() - start
        board.run_done()
        if monitors:
            self._run_ended(None)
        return RunStats(self.rank, self.nranks, name, runs, seconds,
                        _WindowOps(before, [_STATS_OF(st) for st in stats]), returned)

    def same_buffers(self, program: Program) -> bool:
        """Whether ``program`` declares exactly this instance's buffers (names, kinds, dtypes, shapes at this
        rank count), so that :meth:`load` can run it on them."""
        try:
            planned = _plan_buffers(program, self.nranks)
        except ProgramError:
            return False
        return [_layout(b) for b in planned] == [_layout(b) for b in self._buffers.values()]

    def load(self, program: Program) -> None:
        """Run ``program`` from now on, on this instance's windows and tensors as they are (no MPI traffic):
        a persistent worker's next dispatch whose host scalars differ. Its buffers must be declared alike
        (:meth:`same_buffers`); the checkers keep what they know, so they see across the two programs."""
        self._check_open("load")
        if not self.same_buffers(program):
            raise ProgramError(f"program {program.name} declares other buffers than {self.program.name}: it cannot "
                               f"run on this instance's windows")
        self.program = program = _as_run(program, self.options)
        self._lines = function_lines(program)
        self._prepared = _Prepared()
        for f in program.functions:
            self._function(f.name, traced=False)

    def close(self) -> None:
        """Free every window (collective); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop_tasks()  # before the windows go: a block a failed call left parked must not wake on them
        if self._machine.status is not None:
            self._machine.status.set_state(RankState.CLOSING)
        if self._instruments is not None:
            self._instruments.close()  # collective: rank 0 writes the trace
        self._free()

    def free(self) -> None:
        """:meth:`close` (what leaving a ``with`` block normally does)."""
        self.close()

    def abandon(self) -> None:
        self._closed = True  # see the class docstring: no collective free on a failure path
        self._stop_tasks()  # local: a failed instance's task threads go with it, not with the process

    # -- internals ---------------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ProgramError(f"{what}: program instance of {self.program.name} is closed")

    def _buffer(self, name: str) -> Buffer:
        try:
            return self._buffers[name]
        except KeyError:
            names = ", ".join(self._buffers) or "none"
            raise KeyError(f"program {self.program.name} has no buffer {name!r} (buffers: {names})") from None

    def _stop_tasks(self) -> None:
        """End the task scheduler's worker threads (no MPI traffic): they would keep this instance's machine
        and its last call's tasks alive for the life of the process."""
        if self._machine.tasks is not None:
            self._machine.tasks.close()

    def _run_ended(self, error: BaseException | None) -> None:
        for mon in self._monitors:
            mon.run_ended(self._runs, error)

    def _drop_traced(self) -> None:
        """Forget the traced compilations: they were built for the previous listeners and monitors."""
        funcs = self._prepared.functions
        for key in [k for k in funcs if k[1]]:
            del funcs[key]

    def _function(self, name: str, traced: bool) -> CompiledFunction:
        key = (name, traced)
        compiled = self._prepared.functions.get(key)
        if compiled is None:
            reuse = self._prepared.sites_by_function.get(name)
            compiler = FunctionCompiler(self._machine, self._global_slots, self._machine.sites, reuse,
                                        self._listeners if traced and self._listeners else None,
                                        self._monitors if traced else ())
            compiled = compiler.compile(self.program.function(name), self._lines[name])
            if reuse is None:
                self._prepared.sites_by_function[name] = compiler.new_sites
            self._prepared.functions[key] = compiled
        return compiled

    def _allocate(self, buffers: list[Buffer]) -> None:
        """Every buffer's memory: a poisoned local array, or a window of the set (all of them with one
        argument check: one allgather per program, not one per window)."""
        assert self._window_set is not None
        windowed = [b for b in buffers if b.kind is not BufferKind.LOCAL]
        for b in buffers:
            if b.kind is BufferKind.LOCAL:
                b.array = self._machine.poison.array(b.shape, b.dtype.np)
        for b, window in zip(windowed, self._window_set.allocate_many([self._spec(b) for b in windowed]), strict=True):
            b.window = window
            b.array = window.local

    def _spec(self, b: Buffer) -> WindowSpec:
        signal = b.kind is BufferKind.SIGNAL
        fill = None if signal or self.options.poison else 0  # None: signals 0, data poisoned (the window's default)
        return WindowSpec(b.name, b.shape, b.dtype.np, fill=fill, signal=signal)

    def _free(self) -> None:
        ws, self._window_set = self._window_set, None
        status, self._status_window = self._status_window, None
        instruments, self._instruments = self._instruments, None
        try:
            if instruments is not None:
                instruments.free()
            if ws is not None:
                ws.free()
        finally:
            if status is not None:
                status.free()

    def _window_counters(self) -> list[tuple[int, ...]]:
        # Called twice per run: one C-level attrgetter per window; the sums and the dict are only
        # built if someone reads RunStats.window_ops (a dataclass walk plus a Counter per window was
        # a third of a barrier's run() overhead).
        return [_STATS_OF(st) for st in self._window_stats]


def execute(program: Program, comm: MPI.Comm, options: RuntimeOptions = DEFAULT_OPTIONS,
            entry: str | None = None) -> RunStats:
    """Instantiate ``program`` on ``comm``, run it once, free everything; collective."""
    with ProgramInstance(program, comm, options) as inst:
        return inst.run(entry)


# -- validation and buffer planning (no MPI) ----------------------------------------------------------


def _plan_buffers(program: Program, nranks: int) -> list[Buffer]:
    try:
        verify(program)
    except VerifyError as err:
        raise ProgramError(str(err)) from None
    if program.nranks is not None and program.nranks != nranks:
        raise ProgramError(f"program {program.name} is pinned to nranks={program.nranks} but the "
                           f"communicator has {nranks} ranks")
    for f in program.functions:
        if f.name == program.entry and f.params:
            names = ", ".join(p.name for p in f.params)
            raise ProgramError(f"entry function {f.name} takes parameters ({names}); the runtime passes none")
    out = []
    for i, decl in enumerate(program.buffers):
        t = decl.var.type
        assert isinstance(t, TensorType)  # the verifier checked
        name = decl.var.name
        shape = _static_dims(name, "shape", t.shape, nranks)
        valid = None if t.valid_shape is None else _static_dims(name, "valid shape", t.valid_shape, nranks)
        if valid is not None and (len(valid) != len(shape) or any(v > s for v, s in zip(valid, shape, strict=True))):
            raise ProgramError(f"buffer {name}: valid shape {list(valid)} exceeds its shape {list(shape)}")
        if t.strides is not None and t.strides != _packed_strides(shape):
            raise ProgramError(f"buffer {name}: strided buffers (strides {list(t.strides)}) cannot be "
                               f"executed; the runtime holds every buffer packed row-major")
        out.append(Buffer(i, name, decl.kind, t.dtype, shape, valid, np.empty(0, t.dtype.np),
                          group=_check_group(name, decl.group, nranks)))
    return out


def _as_run(program: Program, options: RuntimeOptions) -> Program:
    """``program`` as this instance runs it: in fenced mode, with the pipeline's last passes and the
    toolchain's drains (idempotent)."""
    if options.visibility == "fenced" and options.insert_fences:
        from pldemu.lowering.toolchain_drains import insert_fences

        return insert_fences(program)
    return program


def _layout(b: Buffer) -> tuple[Any, ...]:
    return (b.name, b.kind, b.dtype, b.shape, b.valid, b.group)


def _check_group(name: str, group: tuple[int, ...] | None, nranks: int) -> tuple[int, ...] | None:
    if group is not None and (not group or len(set(group)) != len(group) or not all(0 <= r < nranks for r in group)):
        raise ProgramError(f"buffer {name}: group {list(group)} must be distinct ranks of the {nranks}")
    return group


def _static_dims(name: str, what: str, dims: tuple[Expr, ...], nranks: int) -> tuple[int, ...]:
    out = []
    for d in dims:
        value = _eval_shape_expr(d, nranks)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProgramError(f"buffer {name}: {what} entry {format_expr(d)} is not an integer")
        if value < 0:
            raise ProgramError(f"buffer {name}: {what} entry {format_expr(d)} is {value} with NR={nranks}; "
                               f"extents must not be negative")
        out.append(value)
    return tuple(out)


def _eval_shape_expr(e: Expr | ListExpr, nranks: int) -> Any:
    try:
        return evaluate(e, nranks)
    except FoldError as err:
        raise ProgramError(f"shape expression {format_expr(err.expr)}: {err.cause}") from None
    except NotStatic as err:
        raise ProgramError(f"shape expression {format_expr(err.expr)} may only use literals and NR") from None


def _allocation_failure(program: str, buffers: list[Buffer], err: BaseException) -> str:
    total = sum(b.numel * b.dtype.np.itemsize for b in buffers)
    first = (str(err).splitlines() or [type(err).__name__])[0].removesuffix(", error stack:")
    return (f"cannot allocate the buffers of program {program} ({total / 2**20:.0f} MiB per rank): out of "
            f"memory or address space ({first})")


def _packed_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


__all__ = ["OpCounter", "ProgramInstance", "RunStats", "execute"]
