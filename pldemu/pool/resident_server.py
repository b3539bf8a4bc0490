"""The loop of every rank of a resident job: ``python -m mpi4py -m pldemu.pool.resident_server FOLDER``.

A resident job (:class:`pldemu.pool.resident.ResidentJob`) keeps its ranks, their windows, signals and
resident tensors between requests, in the job's memory. Requests are files the launcher writes,
``FOLDER/req/K.json`` numbered from 0; **every rank** reads each one itself, in order, so a rank that
finished request K starts K + 1 as soon as it exists, whatever its peers are doing: two dispatches
submitted back to back overlap across ranks exactly as far as the program lets them. Each rank answers
with ``FOLDER/rep/K.rankR.json``. Between requests a rank sleeps in the idle back-off.

Requests (``op``):

* ``dispatch``: run a program's entry function once on its instance (made on first use, collective; a
  program of the same ``key`` whose buffers are declared alike runs on the same windows); ``windows``
  says what the previous dispatch left there: ``keep`` it, ``reset`` it (each rank zeroes its own
  windows before the call, as pypto's host does), or ``fresh`` (as
  newly allocated windows: a fence, zeroes, a fence); a reset ends in a fence too, since the host zeroes
  every window before it starts the call on any chip. Inputs come from ``.npy`` files and from this
  rank's resident tensors; outputs go to ``.npy`` files and to resident tensors. A ``blocking``
  dispatch ends with every rank at a fence (the host waits for every chip) and a checkpoint of the
  race detector and the invariant checker, whose verdict is in the answer.
* ``alloc`` / ``read`` / ``free``: a resident tensor on the rank that owns it (the others only answer).
* ``check``: a fence and a checkpoint of every instance (what a non-blocking dispatch left unjudged).
* ``close``: the same, then every instance is closed (collective) and the job ends.

A rank whose call fails (a deadlock, a refused access) aborts the job as ``pldemu run`` does; the
launcher reads the failures the ranks left.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pldemu.job.buffer_io import as_declared
from pldemu.job.launch import prepare_rank
from pldemu.npdtypes import dtype_named
from pldemu.pool.resident import (
    OPTIONS_FILE,
    TASK_DONE,
    TASK_FAILED,
    TASK_READY,
    reply_path,
    request_path,
    task_folder,
)

if TYPE_CHECKING:
    from mpi4py import MPI

    from pldemu.harness.blocks import RunContext
    from pldemu.ir import Program
    from pldemu.runtime.instrument.stale import StaleCredits
    from pldemu.runtime.interpreter import ProgramInstance
    from pldemu.runtime.options import RuntimeOptions

HEAD = "pldemu worker: "
"""How every message of a rank of a resident job starts."""


@dataclass
class _Program:
    """One program's instance on this rank and the run context the checkers' hooks go through."""

    source: Program
    """The program as dispatched (the instance may run it with the fences the pass inserted)."""
    inst: ProgramInstance
    ctx: RunContext
    stale: StaleCredits
    calls: int = 0
    truncations: int = 0
    """Findings already answered (``inst.truncations`` grows over the calls)."""


@dataclass
class Resident:
    """What this rank keeps between requests: the programs' instances and the resident tensors."""

    comm: MPI.Intracomm
    options: RuntimeOptions
    programs: dict[str, _Program] = field(default_factory=dict)
    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def me(self) -> int:
        return self.comm.Get_rank()

    # -- requests -------------------------------------------------------------------------------------

    def handle(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one request (collective for ``dispatch``, ``check`` and ``close``)."""
        return HANDLERS[req["op"]](self, req)

    def dispatch(self, req: Mapping[str, Any]) -> dict[str, Any]:
        prog = self._program(req["key"], _load_program(Path(req["program"])))
        ctx, inst = prog.ctx, prog.inst
        inst.on_host_task(lambda task: self._host_task(prog, req, task))
        before: dict[str, list[str]] = {}
        if prog.calls and req["windows"] != "keep":
            before = self._clear_windows(prog, req["index"], fresh=req["windows"] == "fresh")
        arrays = _load_arrays(Path(req["inputs"]), self.me, inst)
        arrays.update({name: self.tensors[tid] for name, tid in req["resident_in"].get(str(self.me), {}).items()})
        if arrays:
            ctx.write_own(arrays, f"the inputs of dispatch {req['index']}")
        seconds = self._call(prog, req["index"])
        verdict = self._judge(prog, req["index"]) if req["blocking"] else {}
        self._outputs(prog, req)
        found = {key: before.get(key, []) + verdict.get(key, []) for key in ("races", "invariants")}
        return {"seconds": seconds, "call": prog.calls, **found, "truncations": self._new_truncations(prog)}

    def check(self, req: Mapping[str, Any]) -> dict[str, Any]:
        found: dict[str, list[str]] = {"races": [], "invariants": []}
        for prog in self.programs.values():
            for key, lines in self._judge(prog, req["index"]).items():
                found[key] += lines
        return found

    def close(self, req: Mapping[str, Any]) -> dict[str, Any]:
        found = self.check(req)
        for prog in self.programs.values():
            prog.inst.close()  # collective: rank 0 writes the trace
        self.programs.clear()
        return found

    def alloc(self, req: Mapping[str, Any]) -> dict[str, Any]:
        if req["rank"] == self.me:
            dtype = dtype_named(req["dtype"])
            source = req.get("init")
            arr = np.zeros(req["shape"], dtype)
            if source is not None:
                arr[...] = as_declared(np.load(source, allow_pickle=False), dtype).reshape(arr.shape)
            self.tensors[req["tensor"]] = arr
        return {}

    def read(self, req: Mapping[str, Any]) -> dict[str, Any]:
        if req["rank"] == self.me:
            np.save(req["path"], self.tensors[req["tensor"]])
        return {}

    def write(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """Bytes from a file into the resident tensor, from byte ``offset`` (a host's raw copy)."""
        if req["rank"] == self.me:
            raw = self.tensors[req["tensor"]].reshape(-1).view(np.uint8)
            data = np.load(req["path"], allow_pickle=False)
            raw[req["offset"]:req["offset"] + data.size] = data
        return {}

    def free(self, req: Mapping[str, Any]) -> dict[str, Any]:
        self.tensors.pop(req["tensor"], None)
        return {}

    # -- internals ------------------------------------------------------------------------------------

    def _program(self, key: str, program: Program) -> _Program:
        """The instance of ``key``: made on first use (collective); a later program of the same key runs
        on the same windows when its buffers are declared alike, else on new ones."""
        from pldemu.harness.blocks import QUIET, RunContext
        from pldemu.harness.repeat import RepeatLog
        from pldemu.runtime.interpreter import ProgramInstance

        prog = self.programs.get(key)
        if prog is not None and prog.source != program:
            if prog.inst.same_buffers(program):
                prog.inst.load(program)
                prog.source = program
            else:
                prog.ctx.fence("the barrier before a program of other buffers replaces this one")
                prog.inst.close()
                prog = None
        if prog is None:
            from pldemu.runtime.instrument.stale import StaleCredits

            inst = ProgramInstance(program, self.comm, self.options)
            stale = StaleCredits(self.me)
            inst.add_monitor(stale)
            ctx = RunContext(self.comm, inst, self.options, RepeatLog(), QUIET)
            prog = self.programs[key] = _Program(program, inst, ctx, stale)
        return prog

    def _clear_windows(self, prog: _Program, index: int, fresh: bool) -> dict[str, list[str]]:
        """Zero the windows and signals before the next call, as the host does before it starts the call on
        any chip: every rank zeroes its own, and none starts the call before all have (the barrier of a
        checkpoint, whose verdict on what came before is returned: the checkers' epoch then starts from the
        zeroed cells). ``fresh``: new windows, which no rank can still be using from the previous call (a
        fence first); else a peer still in the previous call races with the zeroing, and the race detector
        says so."""
        from pldemu.ir import BufferKind

        names = [d.var.name for d in prog.inst.program.buffers if d.kind is not BufferKind.LOCAL]
        if fresh:
            prog.ctx.fence("the barrier before fresh windows")
        prog.ctx.write_own({n: np.zeros_like(prog.inst.local(n)) for n in names}, "the windows' reset")
        return self._judge(prog, index, "the barrier after the windows' reset")

    def _host_task(self, prog: _Program, req: Mapping[str, Any], task: int) -> None:
        """Host task ``task`` of dispatch ``req``, met by every rank: after a fence, this rank's buffers that
        hold its host tensors go to the calling process, which runs it once every rank is there; what it
        left comes back into them, and a fence ends it."""
        from pldemu.mpi import IDLE_POLICY, Backoff
        from pldemu.runtime.errors import ProgramError

        names = req["host_tasks"].get(str(task), {}).get(str(self.me), [])
        folder = task_folder(Path(req["data"]), task)
        prog.ctx.fence(f"the barrier before host task {task}")
        mine = folder / f"rank{self.me}"
        mine.mkdir(parents=True, exist_ok=True)
        for name, value in zip(names, prog.ctx.read_own(names, f"host task {task}"), strict=True):
            np.save(mine / f"{name}.npy", value)
        (folder / f"rank{self.me}{TASK_READY}").touch()
        backoff = Backoff(IDLE_POLICY)
        while not (folder / TASK_DONE).exists():
            if (folder / TASK_FAILED).exists():
                raise ProgramError(f"host task {task} raised in the calling process: "
                                   f"{(folder / TASK_FAILED).read_text()}")
            backoff.pause()
        back = folder / "back" / f"rank{self.me}"
        arrays = {p.stem: as_declared(np.load(p, allow_pickle=False), prog.inst.local(p.stem).dtype)
                  for p in sorted(back.glob("*.npy"))} if back.is_dir() else {}
        if arrays:
            prog.ctx.write_own(arrays, f"host task {task}")
        prog.ctx.fence(f"the barrier after host task {task}")

    def _call(self, prog: _Program, index: int) -> float:
        """One call of the entry function; a failure ends the job as ``pldemu run`` ends it."""
        from pldemu.harness import injob
        from pldemu.harness.run import LOCATION_HINT
        from pldemu.runtime.errors import DeadlockError, ProgramError
        from pldemu.windows import WindowError

        prog.calls += 1
        try:
            return prog.ctx.run_call(index)
        except DeadlockError as err:
            injob.abort_on_deadlock(self.comm, HEAD, err, LOCATION_HINT)
        except (ProgramError, WindowError) as err:
            injob.abort_on_error(self.comm, HEAD, err, LOCATION_HINT)
        except Exception as err:  # not the program's fault: say so, with the traceback, and end the job
            trace = "".join(traceback.format_exception(err)).rstrip()
            injob.abort_with(self.comm, f"internal error: {type(err).__name__}: {err}\n{trace}", head=HEAD,
                             key=f"internal error: {type(err).__name__}: {err}")

    def _judge(self, prog: _Program, index: int, what: str = "") -> dict[str, list[str]]:
        """A barrier (by default the one that ends a blocking dispatch), then the checkers' checkpoint
        (collective): races, invariant violations and waits that what an earlier call left satisfied (every
        rank's)."""
        prog.ctx.block_barrier(what or f"the barrier that ends dispatch {index}")
        violations, races = prog.ctx.checkpoint()
        prog.stale.at_rest(prog.inst.buffers())
        stale = [line for part in self.comm.allgather(prog.stale.take()) for line in part]
        return {"races": [r.describe() for r in races], "invariants": [v.describe() for v in violations] + stale}

    def _outputs(self, prog: _Program, req: Mapping[str, Any]) -> None:
        mine = req["outputs"].get(str(self.me), [])
        resident = req["resident_out"].get(str(self.me), {})
        names = sorted(set(mine) | set(resident))
        if not names:
            return
        values = dict(zip(names, prog.ctx.read_own(names, f"the outputs of dispatch {req['index']}"), strict=True))
        folder = Path(req["out"]) / f"rank{self.me}"
        folder.mkdir(parents=True, exist_ok=True)
        for name in mine:
            np.save(folder / f"{name}.npy", values[name])
        for name, tid in resident.items():
            self.tensors[tid][...] = values[name].reshape(self.tensors[tid].shape)

    def _new_truncations(self, prog: _Program) -> list[dict[str, Any]]:
        found = prog.inst.truncations
        new, prog.truncations = found[prog.truncations:], len(found)
        return [t.to_json() for t in new]


HANDLERS = {
    "dispatch": Resident.dispatch,
    "check": Resident.check,
    "close": Resident.close,
    "alloc": Resident.alloc,
    "read": Resident.read,
    "write": Resident.write,
    "free": Resident.free,
}
"""Request op -> what every rank does with it."""


def _load_program(path: Path) -> Program:
    with path.open("rb") as f:
        program: Program = pickle.load(f)
    return program


def _load_arrays(folder: Path, me: int, inst: ProgramInstance) -> dict[str, np.ndarray]:
    """This rank's input files (``FOLDER/rankR/NAME.npy``), each in its buffer's declared dtype."""
    mine = folder / f"rank{me}"
    if not mine.is_dir():
        return {}
    return {p.stem: as_declared(np.load(p, allow_pickle=False), inst.local(p.stem).dtype)
            for p in sorted(mine.glob("*.npy"))}


def _next_request(folder: Path, index: int, watch: bool) -> dict[str, Any]:
    """Request ``index``, waiting for it in the warm back-off, then the idle one (the launcher writes it
    atomically); ``watch`` (rank 0): while idle, end the job if the launcher is gone (:func:`launcher_gone`)."""
    from pldemu.mpi import IDLE_POLICY, WARM_POLICY, WARM_SECONDS, Backoff

    path = request_path(folder, index)
    warm = Backoff(WARM_POLICY, time.monotonic() + WARM_SECONDS)
    while not path.exists() and warm.pause():
        pass
    idle = Backoff(IDLE_POLICY)
    while not path.exists():
        if watch and launcher_gone():
            raise LauncherGone(f"the launcher of {folder} is gone (its end of rank 0's stdin closed) before request "
                               f"{index}: the job ends")
        idle.pause()
    request: dict[str, Any] = json.loads(path.read_text())
    return request


class LauncherGone(RuntimeError):
    """Rank 0's stdin ended while the job waited for a request: whoever would send it is dead. Raised, not a
    clean exit, so that ``python -m mpi4py`` aborts every rank of the job, wherever it waits."""


def launcher_gone() -> bool:
    """Whether rank 0's stdin (mpiexec forwards the launcher's, a pipe it never writes) has reached its end;
    False where stdin cannot be polled. Only rank 0 asks: the others' stdin is empty from the start."""
    try:
        ready, _, _ = select.select([sys.stdin], [], [], 0)
        return bool(ready) and os.read(sys.stdin.fileno(), 1) == b""
    except (OSError, ValueError):
        return False


def _answer(folder: Path, index: int, me: int, answer: Mapping[str, Any]) -> None:
    path = reply_path(folder, index, me)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(answer))
    os.replace(tmp, path)


def serve(folder: Path) -> int:
    """Serve the requests of ``folder`` until ``close``; collective."""
    from mpi4py import MPI

    from pldemu.runtime.shm import unlink_named_segments

    comm = MPI.COMM_WORLD
    with (folder / OPTIONS_FILE).open("rb") as f:
        options: RuntimeOptions = pickle.load(f)
    state = Resident(comm, options)
    comm.Barrier()
    unlink_named_segments()
    index = 0
    while True:
        request = _next_request(folder, index, state.me == 0)
        start = time.monotonic()
        answer = state.handle({**request, "index": index})
        _answer(folder, index, state.me, {**answer, "wall": time.monotonic() - start})
        if request["op"] == "close":
            return 0
        index += 1


if __name__ == "__main__":
    prepare_rank()
    sys.exit(serve(Path(sys.argv[1])))
