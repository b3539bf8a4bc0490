"""The launcher side of a resident job (never imports MPI): ranks that keep their state between requests.

A :class:`ResidentJob` is one ``mpiexec`` job whose ranks keep their windows, signals, checkers and
resident tensors from one request to the next (:mod:`pldemu.pool.resident_server` is their loop):
pypto's prepared workers run on it, and so does any caller that dispatches programs many times on the
same windows. Requests are files in the job's folder, one per request, read by every rank itself; a
rank answers each with a file of its own. :meth:`ResidentJob.dispatch` returns at once with the
request's number; :meth:`ResidentJob.result` waits for every rank's answer and gives a
:class:`~pldemu.api.RunResult` (the outputs, the verdicts, the exit code as ``pldemu run`` gives it).
A job that ends while a request is open (a deadlock, a refused access: the ranks abort) gives that
request's result with every rank's failure and the job's output; the job is then over, and every later
request raises :class:`ResidentJobEnded`.

Ranks must see the folder, so a resident job runs on this machine (or where the folder is shared).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pldemu.job.buffer_io import as_declared
from pldemu.job.launch import (
    LOCAL,
    MPI_ABORT_CHATTER,
    PID_DIR_VAR,
    TIMED_OUT,
    Placement,
    failure_report,
    job_env,
    kill_group,
    mpiexec_command,
    read_failures,
)
from pldemu.runtime.options import RuntimeOptions
from pldemu.runtime.truncation import Truncation, merge

if TYPE_CHECKING:
    from pldemu.api import RunResult
    from pldemu.ir import Program

OPTIONS_FILE = "options.pickle"
"""The job's :class:`~pldemu.runtime.options.RuntimeOptions`, as every rank reads them at its start."""

CLOSE_GRACE = 30.0
"""Seconds a resident job may take to judge what is left, close its windows and end after ``close``."""

ANSWER_POLL = 2e-3
"""The longest sleep between two looks for the ranks' answers (a dispatch's answer is seen within 2 ms)."""

WINDOWS = ("keep", "reset", "fresh")
"""What a dispatch finds in the windows a previous dispatch of its program used (see the server)."""


def request_path(folder: Path, index: int) -> Path:
    """Where request ``index`` of the job in ``folder`` is written."""
    return folder / "req" / f"{index:06d}.json"


def reply_path(folder: Path, index: int, rank: int) -> Path:
    """Where rank ``rank`` answers request ``index``."""
    return folder / "rep" / f"{index:06d}.rank{rank}.json"


@dataclass
class Progress:
    """The deadline of a wait for a request: ``timeout`` seconds for the request the job is serving
    (``head``), restarted when the job finishes one, so requests queued behind others (a prepared worker's
    pipelined dispatches) are each given the whole timeout, not what the ones before them left."""

    timeout: float
    head: int
    deadline: float

    def expired(self, head: int, now: float) -> bool:
        """Whether the request being served at ``now`` (``head``) has outlived its timeout."""
        if head != self.head:
            self.head, self.deadline = head, now + self.timeout
        return now > self.deadline


class ResidentJobEnded(RuntimeError):
    """The resident job is over (closed, or ended by a failure): it takes no more requests."""


@dataclass(frozen=True)
class Dispatch:
    """One call of ``program`` on a resident job.

    ``key`` names the program's instance (a later dispatch of the same key runs on the same windows);
    ``inputs[rank]``: arrays written into that rank's buffers before the call; ``outputs[rank]``: the
    buffers read back after it; ``resident_in`` / ``resident_out``: ``{rank: {buffer: tensor id}}``, a
    resident tensor copied into a buffer before the call / the buffer copied into it after, in the job's
    memory. ``windows``: one of :data:`WINDOWS`. ``blocking``: every rank meets at a fence at its end and
    the checkers give their verdict (else they judge it at the next blocking dispatch or ``check``)."""

    key: str
    program: Program
    inputs: Sequence[Mapping[str, np.ndarray]] = ()
    outputs: Sequence[Sequence[str]] = ()
    resident_in: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    resident_out: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    windows: str = "keep"
    blocking: bool = True
    host_tasks: Mapping[int, Sequence[Sequence[str]]] = field(default_factory=dict)
    """Host task N (``system.host_task``) -> per rank the buffers it exchanges with the calling process."""
    on_host_task: HostTaskRunner | None = None
    """Runs a host task here: ``(task, per rank {buffer: array})`` -> per rank ``{buffer: array}`` to load
    back. Called from :meth:`ResidentJob.result` (and every wait) once every rank has met the task."""


HostTaskRunner = Callable[[int, list[dict[str, np.ndarray]]], Sequence[Mapping[str, np.ndarray]]]
"""What runs a host task in the calling process (see :attr:`Dispatch.on_host_task`)."""

TASK_DONE, TASK_FAILED, TASK_READY = "done", "failed", ".ready"
"""The files of a host task's exchange: the launcher's answer, or its failure; a rank's arrival."""


def task_folder(data: Path, task: int) -> Path:
    """Where a dispatch (its data folder ``data``) exchanges host task ``task``."""
    return data / f"task{task}"


@dataclass
class _Open:
    """A request in flight: what ``result`` needs to make its answer."""

    index: int
    op: str
    folder: Path
    program: Program | None = None
    dtypes: Mapping[str, np.dtype] = field(default_factory=dict)
    tasks: Mapping[int, Sequence[Sequence[str]]] = field(default_factory=dict)
    runner: HostTaskRunner | None = None
    next_task: int = 0
    error: BaseException | None = None
    """What a host task raised (the job then ended): the caller's to re-raise."""


class ResidentJob:
    """A job of ``ranks`` ranks that keeps its state between requests (see the module docstring).

    ``options``: the runtime's knobs for every request; ``timeout``: seconds any one request may take
    before the job is killed (its result then says 124)."""

    def __init__(self, ranks: int, options: RuntimeOptions, *, timeout: float = 600.0,
                 placement: Placement = LOCAL) -> None:
        self.ranks, self.options, self.timeout = ranks, options, timeout
        self.folder = Path(tempfile.mkdtemp(prefix="pldemu-worker-"))
        for sub in ("req", "rep", "pids", "data"):
            (self.folder / sub).mkdir()
        with (self.folder / OPTIONS_FILE).open("wb") as f:
            pickle.dump(options, f)
        argv = [sys.executable, "-m", "mpi4py", "-m", "pldemu.pool.resident_server", str(self.folder)]
        with (self.folder / "output.txt").open("wb") as log:
            # stdin: a pipe this process never writes, so rank 0 sees its end when the launcher dies (even by
            # SIGKILL, the OOM killer's) and ends the job instead of waiting for requests for ever
            self._proc = subprocess.Popen(mpiexec_command(ranks, argv, placement), stdin=subprocess.PIPE,
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                          env=job_env({PID_DIR_VAR: str(self.folder / "pids")},
                                                      local_ranks=placement.local_ranks(ranks)))
        self._next = 0
        self._open: dict[int, _Open] = {}
        self._task_errors: dict[int, BaseException] = {}
        """What a host task of an answered dispatch raised (only those: the rest of a request is dropped)."""
        self._ended: str | None = None
        self.requests = 0
        """Requests sent so far."""
        self._answered_below = 0
        """Requests below this one are answered by every rank."""

    # -- requests ---------------------------------------------------------------------------------------

    def dispatch(self, d: Dispatch) -> int:
        """Send ``d``; its request number (:meth:`result` waits for it)."""
        if d.windows not in WINDOWS:
            raise ValueError(f"windows must be one of {', '.join(WINDOWS)}, got {d.windows!r}")
        index = self._next
        data = self.folder / "data" / str(index)
        (data / "in").mkdir(parents=True)
        program_file = data / "program.pickle"
        with program_file.open("wb") as f:
            pickle.dump(d.program, f)
        for rank, arrays in enumerate(d.inputs):
            folder = data / "in" / f"rank{rank}"
            folder.mkdir()
            for name, arr in arrays.items():
                np.save(folder / f"{name}.npy", arr)
        dtypes = {decl.var.name: decl.var.type.dtype.np for decl in d.program.buffers
                  if hasattr(decl.var.type, "dtype")}
        tasks = {str(t): {str(r): list(names) for r, names in enumerate(per_rank)} for t, per_rank in d.host_tasks.items()}
        self._send({"op": "dispatch", "key": d.key, "program": str(program_file), "inputs": str(data / "in"),
                    "out": str(data / "out"), "data": str(data), "windows": d.windows, "blocking": d.blocking,
                    "outputs": {str(r): list(names) for r, names in enumerate(d.outputs)},
                    "resident_in": _by_rank(d.resident_in), "resident_out": _by_rank(d.resident_out),
                    "host_tasks": tasks},
                   _Open(index, "dispatch", data, d.program, dtypes, d.host_tasks, d.on_host_task))
        return index

    def host_task_error(self, index: int) -> BaseException | None:
        """What a host task of dispatch ``index`` raised, if one did (the job then ended)."""
        req = self._open.get(index)
        return req.error if req is not None else self._task_errors.get(index)

    def alloc(self, tensor: str, rank: int, shape: Sequence[int], dtype: np.dtype[Any],
              init: np.ndarray | None = None) -> int:
        """Allocate the resident tensor ``tensor`` on ``rank``, zeros or ``init``'s values (sent once, through
        a file)."""
        index = self._next
        source = None
        if init is not None:
            source = self.folder / "data" / f"{index}.init.npy"
            np.save(source, init)
        return self._send({"op": "alloc", "tensor": tensor, "rank": rank, "shape": list(shape), "dtype": dtype.name,
                           "init": None if source is None else str(source)})

    def read(self, tensor: str, rank: int, dtype: np.dtype) -> np.ndarray:
        """A copy of the resident tensor ``tensor`` of ``rank`` (waits for it)."""
        path = self.folder / "data" / f"{self._next}.read.npy"
        index = self._send({"op": "read", "tensor": tensor, "rank": rank, "path": str(path)})
        if self._wait(index) is None:
            raise ResidentJobEnded(f"the resident job is over ({self._ended})")
        try:
            return as_declared(np.load(path, allow_pickle=False), dtype)
        finally:
            path.unlink(missing_ok=True)

    def write(self, tensor: str, rank: int, data: np.ndarray, offset: int = 0) -> int:
        """Copy ``data``'s bytes into the resident tensor ``tensor`` of ``rank`` from byte ``offset``."""
        path = self.folder / "data" / f"{self._next}.write.npy"
        np.save(path, np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        return self._send({"op": "write", "tensor": tensor, "rank": rank, "path": str(path), "offset": offset})

    def free(self, tensor: str) -> int:
        """Free the resident tensor ``tensor`` wherever it is."""
        return self._send({"op": "free", "tensor": tensor})

    def check(self) -> RunResult:
        """A fence and the checkers' verdict on everything so far (what non-blocking dispatches left)."""
        return self.result(self._send({"op": "check"}, _Open(self._next, "check", self.folder)))

    def close(self) -> RunResult | None:
        """Judge what is left, free every window and end the job; the verdict (None when the job had
        ended already). Idempotent."""
        if self._ended is not None:
            self._stop()
            shutil.rmtree(self.folder, ignore_errors=True)
            return None
        index = self._send({"op": "close"}, _Open(self._next, "close", self.folder))
        try:
            return self.result(index)
        finally:
            self._ended = self._ended or "closed"
            self._stop(CLOSE_GRACE)
            shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def alive(self) -> bool:
        """Whether the job still takes requests."""
        return self._ended is None

    # -- answers ----------------------------------------------------------------------------------------

    def done(self, index: int) -> bool:
        """Whether every rank has answered request ``index`` (or the job is over)."""
        return self._ended is not None or all(reply_path(self.folder, index, r).exists() for r in range(self.ranks))

    def result(self, index: int) -> RunResult:
        """Wait for request ``index`` and make its result (outputs for a dispatch); a job that ended
        under it gives its failures and exit code; the dispatch's files go with it."""
        req = self._open.get(index)
        if req is None:
            raise KeyError(f"request {index} is not open (each result is taken once)")
        start = time.monotonic()
        answers = self._wait(index)
        answered = self._open.pop(index)
        if answered.error is not None:
            self._task_errors[index] = answered.error
        try:
            return self._answered(req, answers, start)
        finally:
            if req.op == "dispatch":  # every rank is done with its files: a long worker's disk stays bounded
                shutil.rmtree(req.folder, ignore_errors=True)

    def _answered(self, req: _Open, answers: list[dict[str, Any]] | None, start: float) -> RunResult:
        from pldemu.api import RunResult

        if answers is None:
            return self._ended_result(req, time.monotonic() - start)
        races = tuple(answers[0].get("races", ()))
        invariants = tuple(answers[0].get("invariants", ()))
        truncations = merge(Truncation.from_json(t) for a in answers for t in a.get("truncations", ()))
        code = verdict_code(races, invariants, bool(truncations) and not self.options.truncation_warn)
        return RunResult(self.ranks, code, self._output(), time.monotonic() - start, self._buffers(req),
                         {}, tuple(float(a.get("seconds", 0.0)) for a in answers), races, invariants, (), {},
                         _text(req.program), truncations)

    def _wait(self, index: int) -> list[dict[str, Any]] | None:
        """Every rank's answer to ``index``; None when the job ended first (killed after the timeout)."""
        progress = Progress(self.timeout, self._head(index), time.monotonic() + self.timeout)
        pause = 1e-4
        paths = [reply_path(self.folder, index, r) for r in range(self.ranks)]
        while not all(p.exists() for p in paths):
            if self._serve_host_tasks():
                pause = 1e-4
                continue
            if self._ended is not None or self._proc.poll() is not None:
                self._ended = self._ended or "ended"
                return None
            if progress.expired(self._head(index), time.monotonic()):
                self._ended = f"killed after {self.timeout:g} s"
                self._stop()
                return None
            time.sleep(pause)
            pause = min(2 * pause, ANSWER_POLL)
        return [json.loads(p.read_text()) for p in paths]

    def _head(self, index: int) -> int:
        """The first request up to ``index`` that not every rank has answered (the one the job is serving:
        it serves them in order)."""
        while self._answered_below < index and all(
                reply_path(self.folder, self._answered_below, r).exists() for r in range(self.ranks)):
            self._answered_below += 1
        return self._answered_below

    def _serve_host_tasks(self) -> bool:
        """Run every host task that all ranks have met (the oldest dispatch first); whether one ran."""
        for req in self._open.values():
            if req.runner is None or req.next_task not in req.tasks or req.error is not None:
                continue
            folder = task_folder(req.folder, req.next_task)
            if not all((folder / f"rank{r}{TASK_READY}").exists() for r in range(self.ranks)):
                return False  # ranks meet tasks in order: a later request's cannot be ready before this one
            self._run_host_task(req, folder)
            return True
        return False

    def _run_host_task(self, req: _Open, folder: Path) -> None:
        assert req.runner is not None
        arrays = [{p.stem: as_declared(np.load(p, allow_pickle=False), req.dtypes[p.stem])
                   for p in sorted((folder / f"rank{r}").glob("*.npy"))} for r in range(self.ranks)]
        try:
            back = req.runner(req.next_task, arrays)
        except BaseException as err:  # the program's own Python: the job ends, the caller re-raises it
            req.error = err
            (folder / TASK_FAILED).write_text(f"{type(err).__name__}: {err}")
            return
        for r, per_rank in enumerate(back):
            mine = folder / "back" / f"rank{r}"
            mine.mkdir(parents=True, exist_ok=True)
            for name, arr in per_rank.items():
                np.save(mine / f"{name}.npy", arr)
        (folder / TASK_DONE).touch()
        req.next_task += 1

    def _ended_result(self, req: _Open, wall: float) -> RunResult:
        from pldemu.api import RunResult

        timed_out = self._ended is not None and self._ended.startswith("killed")
        self._stop(5.0)
        rc = TIMED_OUT if timed_out else self._proc.returncode
        failures = read_failures(self.folder / "pids")
        text = self._output()
        if failures:
            text += failure_report(failures) + "\n"
        code = rc if rc in (1, 3, 4, TIMED_OUT) else 3
        return RunResult(self.ranks, code, text, wall, (), {}, (), (), (), (), {f.rank: f.text for f in failures},
                         _text(req.program))

    def _buffers(self, req: _Open) -> tuple[dict[str, np.ndarray], ...]:
        if req.op != "dispatch":
            return ()
        out = req.folder / "out"
        return tuple({p.stem: as_declared(np.load(p, allow_pickle=False), req.dtypes[p.stem])
                      for p in sorted((out / f"rank{r}").glob("*.npy"))} for r in range(self.ranks))

    def _output(self) -> str:
        text = (self.folder / "output.txt").read_bytes().decode(errors="replace")
        return "".join(line for line in text.splitlines(keepends=True) if not MPI_ABORT_CHATTER.match(line))

    # -- internals --------------------------------------------------------------------------------------

    def _send(self, request: dict[str, Any], pending: _Open | None = None) -> int:
        if self._ended is not None:
            raise ResidentJobEnded(f"the resident job is over ({self._ended})")
        index = self._next
        path = request_path(self.folder, index)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(request))
        os.replace(tmp, path)  # a rank never reads half a request
        self._next += 1
        self.requests += 1
        if pending is not None:
            self._open[index] = pending
        return index

    def _stop(self, grace: float = 0.0) -> None:
        """End the job's processes (after ``grace`` seconds for them to end by themselves) and its folder."""
        if self._proc.poll() is None and grace > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=grace)
        kill_group(self._proc, grace=5.0, marker=str(self.folder / "pids"))
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()


def verdict_code(races: Sequence[str], invariants: Sequence[str], truncated: bool) -> int:
    """The exit code ``pldemu run`` gives these verdicts: 1 for invariant violations or a truncation finding
    that is not only a warning, else 4 for races, else 0."""
    return 1 if invariants or truncated else 4 if races else 0


def _by_rank(per_rank: Mapping[int, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    return {str(r): dict(names) for r, names in per_rank.items()}


def _text(program: Program | None) -> str:
    if program is None:
        return ""
    from pldemu.ir import format_program

    return format_program(program)


__all__ = [
    "CLOSE_GRACE",
    "OPTIONS_FILE",
    "TASK_DONE",
    "TASK_FAILED",
    "TASK_READY",
    "WINDOWS",
    "Dispatch",
    "HostTaskRunner",
    "Progress",
    "ResidentJob",
    "ResidentJobEnded",
    "reply_path",
    "request_path",
    "task_folder",
    "verdict_code",
]
