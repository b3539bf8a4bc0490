"""pypto's prepared workers on pldemu: ``compiled.prepare(...)`` is a resident job that dispatches many times.

A :class:`DistributedWorker` owns one :class:`~pldemu.pool.resident.ResidentJob` with a rank per device. Its
ranks keep, between dispatches, each prepared program's windows and signals (with its checkers' state) and
the worker-resident tensors (:class:`~pldemu.pypto.surface.runtime.device_tensor.DeviceTensor`), in the job's
memory. Each dispatch translates the program for its arguments (so host scalars may differ), sends the host
tensors' slices, and writes the results back in place. What pypto defines, as pypto defines it:

* **Windows between dispatches.** Not ``persistent``: fresh windows every dispatch (zero, every rank done
  with the previous one first). ``persistent=True``: the same windows, zeroed by each rank before reuse
  (``reset_persistent_windows``, the default), or left as the previous dispatch left them.
* **Order.** ``rt(...)`` and ``rt.run(...)`` return when every chip is done: the next dispatch starts after
  a fence of every rank, and the race detector and invariant checker judge everything up to it. ``submit``
  returns at once; the next dispatch may start on a rank while the previous one still runs on another
  (two in flight at most: a third waits for the oldest), so the race detector sees the races between them.
  Their verdict comes with the ``result()`` of the newest dispatch, or at ``close()``.
* **Resident tensors.** ``alloc_tensor`` / ``alloc_stacked_tensor`` upload once; a dispatch's
  ``DeviceTensor`` is copied in and out of its buffer on its own rank, and must be dispatched to the
  device that holds it.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import inspect
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pldemu.job.resources import ResourceError, check_bytes, size_text
from pldemu.pool.resident import Dispatch, ResidentJob, verdict_code
from pldemu.pypto.device_tensors import DeviceTensor, StackedDeviceTensor
from pldemu.pypto.dfx import call_options, check_config
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import (
    ProgramRunError,
    TranslationCache,
    as_array,
    finish,
    lowered,
    memory_estimate,
    np_dtype,
)
from pldemu.pypto.translate.values import HostTensor
from pldemu.pypto.types import Direction, ScalarAnn, TensorAnn

PAGE = 4096
"""Resident tensors' handles are page-aligned addresses of a made-up space, a page apart at least."""

IN_FLIGHT = 2
"""Dispatches a worker keeps in flight (pypto's two metadata frames): a third submit waits for the oldest."""


def reset_policy(persistent: bool, reset: bool | None) -> bool:
    """pypto's rule for ``reset_persistent_windows``: None means "reset when persistent"."""
    if reset is None:
        return persistent
    if reset and not persistent:
        raise ValueError("DistributedWorker reset_persistent_windows=True requires persistent=True")
    return bool(reset)


class Allocations:
    """pldemu's stand-in for simpler's ``Worker`` internals that tests read (``worker._w``):
    ``_next_alloc_id`` counts the window sets the worker allocated (one per program on first use when
    persistent, one per dispatch otherwise), as simpler counts its CommDomain allocations."""

    def __init__(self) -> None:
        self._next_alloc_id = 0


class DistributedRunHandle:
    """One submitted dispatch: ``result()`` waits for it (and raises its failure), ``done()``, ``wait()``."""

    def __init__(self, worker: DistributedWorker, compiled: Any, index: int, blocking: bool,
                 finishing: Callable[[Any], Any]) -> None:
        self._worker, self._compiled, self._index, self._blocking = worker, compiled, index, blocking
        self._finishing = finishing
        self._settled = False
        self._error: BaseException | None = None

    def done(self) -> bool:
        """Whether the dispatch has completed (its failure, if any, is raised by :meth:`result`)."""
        return self._settled or self._worker._job.done(self._index)

    def result(self, timeout: float | None = None) -> None:
        """Wait for the dispatch; raise its failure (``ProgramRunError``: races, a deadlock, wrong values)."""
        __tracebackhide__ = True
        if timeout is not None and (timeout < 0 or timeout != timeout or timeout == float("inf")):
            raise ValueError("DistributedRunHandle timeout must be a non-negative finite number of seconds")
        self._settle()
        if self._error is not None:
            raise self._error.with_traceback(None)

    def wait(self, timeout: float | None = None) -> None:
        """:meth:`result`."""
        __tracebackhide__ = True
        self.result(timeout)

    def _settle(self) -> None:
        if self._settled:
            return
        self._settled = True
        try:
            self._worker._settle(self)
        except (ProgramRunError, FrontendError) as err:
            self._error = err


class RegistrationHandle:
    """``rt.register(compiled)``: a callable that dispatches ``compiled`` (``cid`` 0, as pypto's L3 gives)."""

    def __init__(self, worker: DistributedWorker, compiled: Any) -> None:
        self.worker, self.compiled, self.cid = worker, compiled, 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether the worker this handle dispatches on is closed."""
        return self._closed

    def __call__(self, *args: Any, config: Any = None) -> None:
        __tracebackhide__ = True
        if self._closed:
            raise RuntimeError("RegistrationHandle called after its worker was closed")
        self.worker.run(self.compiled, *args, config=config)


class DistributedWorker:
    """A prepared distributed program (pypto's ``DistributedWorker``): prepare once, dispatch many.

    Construct it with ``compiled.prepare(...)`` or ``DistributedWorker(compiled_or_list, ...)``; use it as a
    context manager or call :meth:`close`."""

    __test__ = False

    def __init__(self, compiled: Any, config: Any = None, *, persistent: bool = False,
                 reset_persistent_windows: bool | None = None, callbacks: dict[str, Any] | None = None,
                 sub_worker_overrides: dict[str, Any] | None = None, inherited_host_tensors: Any = None,
                 startup_timeout_s: float | None = None) -> None:
        programs = list(compiled) if isinstance(compiled, Sequence) else [compiled]
        if not programs:
            raise ValueError("DistributedWorker requires at least one compiled program")
        _check_compatible(programs)
        if sub_worker_overrides is not None:
            warnings.warn("sub_worker_overrides is deprecated; use callbacks= instead.", DeprecationWarning,
                          stacklevel=3)
        self._callbacks = _bind_callbacks(programs, {**(sub_worker_overrides or {}), **(callbacks or {})})
        if startup_timeout_s is not None and not (0 < startup_timeout_s < float("inf")):
            raise ValueError("startup_timeout_s must be a positive finite number of seconds")
        reset = reset_policy(persistent, reset_persistent_windows)
        self._windows = "fresh" if not persistent else "reset" if reset else "keep"
        self._primary = programs[0]
        self._keys = {prog: f"p{i}" for i, prog in enumerate(programs)}
        self._used: set[str] = set()
        opts = call_options(config, self._primary.output_dir)  # a swimlane: one trace of every dispatch, at close
        runtime = dataclasses.replace(opts.runtime, cell_check=False)  # a pypto program may leave its tags
        self._job = ResidentJob(self._primary.nranks, runtime, timeout=opts.timeout)
        self._opts = opts
        self._sent: list[tuple[int, int]] = []
        """(request, bytes) of the uploads the ranks may not hold yet: what the memory now available does not
        show (:meth:`_fits`)."""
        self._w = Allocations()
        self._translations: dict[str, TranslationCache] = {}
        self._lowered: dict[int, tuple[Any, Any]] = {}  # id(translated program) -> (it, lowered): kept alive
        self._in_flight: collections.deque[DistributedRunHandle] = collections.deque()
        self._owned_tensors: dict[tuple[int, int], DeviceTensor] = {}
        self._top = PAGE
        self._registrations: weakref.WeakSet[RegistrationHandle] = weakref.WeakSet()
        self._inherited = tuple(inherited_host_tensors or ())
        self._closed = False

    # -- dispatch ---------------------------------------------------------------------------------------

    def __call__(self, *args: Any, config: Any = None) -> None:
        """Dispatch the primary program and wait for it (``TypeError`` when several were prepared)."""
        __tracebackhide__ = True
        if len(self._keys) > 1:
            raise TypeError("rt(*args) is ambiguous on a multi-program DistributedWorker; dispatch explicitly "
                            "with rt.run(compiled, *args).")
        self._start(self._primary, args, config, wait=True).result()

    def run(self, compiled: Any, *args: Any, config: Any = None) -> None:
        """Dispatch ``compiled`` (one of the prepared programs) and wait for it."""
        __tracebackhide__ = True
        self._start(compiled, args, config, wait=True).result()

    def submit(self, compiled: Any, *args: Any, config: Any = None) -> DistributedRunHandle:
        """Dispatch ``compiled`` and return at once; the handle's ``result()`` waits for it."""
        __tracebackhide__ = True
        return self._start(compiled, args, config, wait=False)

    def register(self, compiled: Any) -> RegistrationHandle:
        """A :class:`RegistrationHandle` that dispatches ``compiled``, one of the prepared programs."""
        self._require_open("register")
        if compiled not in self._keys:
            raise ValueError("DistributedWorker.register(compiled) requires a DistributedCompiledProgram "
                             "registered when this worker was constructed.")
        handle = RegistrationHandle(self, compiled)
        self._registrations.add(handle)
        return handle

    # -- resident tensors -------------------------------------------------------------------------------

    def alloc_tensor(self, shape: Sequence[int], dtype: Any, *, init: Any = None, worker_id: int = 0) -> DeviceTensor:
        """A tensor resident on worker ``worker_id``: zeros, or ``init`` (same dtype and shape) uploaded once."""
        self._require_open("alloc_tensor")
        self._check_worker(worker_id)
        npd = np_dtype(dtype)
        values = None
        if init is not None:
            values = as_array(init)
            if values.dtype != npd or tuple(values.shape) != tuple(shape):
                raise ValueError(f"alloc_tensor init must match shape {tuple(shape)} and dtype {dtype}, got "
                                 f"shape {tuple(values.shape)} and dtype {values.dtype}")
        nbytes = int(np.prod(tuple(shape))) * npd.itemsize
        self._fits(nbytes, f"alloc_tensor({list(shape)}, {dtype}) on worker {worker_id} needs {size_text(nbytes)}")
        t = DeviceTensor(self._address(nbytes), shape, dtype)
        self._sent.append((self._job.alloc(_tid(t), worker_id, t.shape, npd, values), nbytes))
        self._owned_tensors[(worker_id, t.data_ptr)] = t
        return t

    def free_tensor(self, t: DeviceTensor, *, worker_id: int = 0) -> None:
        """Free ``t`` (idempotent; ``worker_id`` must be the one it was allocated on)."""
        key = (worker_id, t.data_ptr)
        if key not in self._owned_tensors:
            owners = sorted(w for w, ptr in self._owned_tensors if ptr == t.data_ptr)
            if owners:
                raise ValueError(f"free_tensor(..., worker_id={worker_id}) does not match the owning worker for "
                                 f"ptr=0x{t.data_ptr:x} (allocated on worker(s) {owners}); pass the same worker_id.")
            return
        del self._owned_tensors[key]
        if self._job.alive:
            self._job.free(_tid(t))

    def alloc_stacked_tensor(self, host: Any, *, worker_ids: Sequence[int] | None = None) -> StackedDeviceTensor:
        """``host`` ``[B, *tail]`` uploaded once, shard ``i`` to worker ``worker_ids[i]`` (default ``range(B)``)."""
        self._require_open("alloc_stacked_tensor")
        values = as_array(host)
        if values.ndim < 2:
            raise ValueError(f"alloc_stacked_tensor needs a [B, *tail] tensor, got shape {tuple(values.shape)}")
        ids = tuple(range(values.shape[0]) if worker_ids is None else worker_ids)
        if len(ids) != values.shape[0] or len(set(ids)) != len(ids):
            raise ValueError(f"alloc_stacked_tensor worker_ids must be {values.shape[0]} distinct workers, got "
                             f"{list(ids)}")
        for w in ids:
            self._check_worker(w)
        dtype = getattr(host, "dtype", values.dtype)
        shards = [self.alloc_tensor(values.shape[1:], dtype, init=values[i], worker_id=w) for i, w in enumerate(ids)]
        return StackedDeviceTensor(shards, values.shape, ids)

    def copy_stacked_from(self, stacked: StackedDeviceTensor, host: Any) -> None:
        """Every shard's current contents into ``host`` (``[B, *tail]``), in place."""
        self._require_open("copy_stacked_from")
        target = as_array(host)
        if tuple(target.shape) != stacked.full_shape:
            raise ValueError(f"copy_stacked_from host shape {tuple(target.shape)} != {stacked.full_shape}")
        for i, (shard, w) in enumerate(zip(stacked.shards, stacked.worker_ids, strict=True)):
            self._require_owned(shard, w, f"shard {i}")
            target[i] = self._job.read(_tid(shard), w, target.dtype)

    def free_stacked_tensor(self, stacked: StackedDeviceTensor) -> None:
        """Free every shard (idempotent)."""
        for shard, w in zip(stacked.shards, stacked.worker_ids, strict=True):
            self.free_tensor(shard, worker_id=w)

    def copy_from_tensor(self, t: DeviceTensor, *, worker_id: int = 0) -> np.ndarray:
        """A copy of ``t``'s current contents (pldemu's reading of a resident tensor)."""
        self._require_owned(t, worker_id, "copy_from_tensor")
        return self._job.read(_tid(t), worker_id, np_dtype(t.dtype))

    def malloc(self, nbytes: int, *, worker_id: int = 0) -> int:
        """``nbytes`` of raw memory resident on worker ``worker_id``; its handle (``data_ptr``)."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"malloc nbytes must be a positive int, got {nbytes!r}")
        import torch  # type: ignore[import-not-found]  # real torch, or pldemu's stand-in while active

        return self.alloc_tensor((nbytes,), torch.uint8, worker_id=worker_id).data_ptr

    def free(self, ptr: int, *, worker_id: int = 0) -> None:
        """Free the memory ``ptr`` (from :meth:`malloc` or :meth:`alloc_tensor`)."""
        t = self._owned_tensors.get((worker_id, ptr))
        if t is not None:
            self.free_tensor(t, worker_id=worker_id)

    def copy_to(self, dst_dev_ptr: int, src_host_ptr: int, nbytes: int, *, worker_id: int = 0) -> None:
        """``nbytes`` from host address ``src_host_ptr`` into resident memory at ``dst_dev_ptr``."""
        self._require_open("copy_to")
        t, offset = self._span(dst_dev_ptr, nbytes, worker_id, "copy_to")
        data = np.frombuffer(ctypes.string_at(src_host_ptr, nbytes), np.uint8)
        self._job.write(_tid(t), worker_id, data, offset)

    def copy_from(self, dst_host_ptr: int, src_dev_ptr: int, nbytes: int, *, worker_id: int = 0) -> None:
        """``nbytes`` of resident memory at ``src_dev_ptr`` to host address ``dst_host_ptr``."""
        self._require_open("copy_from")
        t, offset = self._span(src_dev_ptr, nbytes, worker_id, "copy_from")
        raw = np.ascontiguousarray(self._job.read(_tid(t), worker_id, np_dtype(t.dtype))).reshape(-1).view(np.uint8)
        ctypes.memmove(dst_host_ptr, raw.ctypes.data + offset, nbytes)

    def release_inherited_host_tensor_refs(self) -> None:
        """Drop the references to ``inherited_host_tensors`` (pldemu never maps them: nothing else to do)."""
        self._inherited = ()

    # -- life -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for every dispatch, judge what is left, free everything and end the job; the first failure
        found is raised after. Idempotent."""
        __tracebackhide__ = True
        if self._closed:
            return
        self._closed = True
        first: BaseException | None = None
        while self._in_flight:
            handle = self._in_flight[0]
            handle._settle()
            first = first or handle._error
        self._owned_tensors.clear()
        for reg in list(self._registrations):
            reg._closed = True
        verdict = self._job.close()
        if first is None and verdict is not None and not verdict.ok:
            first = ProgramRunError(f"{self._primary.program.name}: at close(): {verdict.describe_failure()}", verdict)
        if first is not None:
            raise first.with_traceback(None)

    def __enter__(self) -> DistributedWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        __tracebackhide__ = True
        self.close()

    # -- internals --------------------------------------------------------------------------------------

    def _start(self, compiled: Any, args: Sequence[Any], config: Any, wait: bool) -> DistributedRunHandle:
        self._require_open("submit")
        check_config(config, "DistributedWorker")
        key = self._keys.get(compiled)
        if key is None:
            raise ValueError("DistributedWorker.run(compiled) requires a DistributedCompiledProgram registered "
                             "when this worker was constructed.")
        while len(self._in_flight) >= IN_FLIGHT:  # pypto's two frames: wait for the oldest
            self._in_flight[0]._settle()
        prog = compiled.program
        host_args, resident = self._bind(prog, args)
        try:
            built, arrays = self._translations.setdefault(key, TranslationCache()).translate(
                prog, compiled.nranks, host_args, frozenset(resident))
        except FrontendError as err:
            raise err.with_traceback(None) from None
        est = memory_estimate(built, compiled.nranks, self._opts)
        self._fits(est.beyond_processes, f"{prog.name} on {compiled.nranks} devices: its dispatch needs "
                   f"{size_text(est.beyond_processes)} beyond the worker's processes: {est.describe()}")
        d = self._dispatch(key, prog, built, resident, blocking=wait and not self._in_flight)
        if built.host_tasks:
            d = dataclasses.replace(d, host_tasks={t.task.index: t.buffers for t in built.host_tasks},
                                    on_host_task=_TaskRunner(prog, built, arrays, host_args, self._callbacks))
        index = self._job.dispatch(d)
        if self._windows == "fresh" or key not in self._used:
            self._w._next_alloc_id += 1
        self._used.add(key)
        what = f" (dispatch {index + 1} of its prepared worker)"
        handle = DistributedRunHandle(self, compiled, index, d.blocking,
                                      lambda result: finish(prog, built, arrays, result, what))
        self._in_flight.append(handle)
        return handle

    def _fits(self, needed: int, what: str) -> None:
        """Refuse, before anything is sent, what the ranks could not hold beside the uploads they may still be
        receiving (the kernel's out-of-memory killer would pick a rank or the caller instead)."""
        self._sent = [(i, n) for i, n in self._sent if not self._job.done(i)]
        try:
            check_bytes(needed + sum(n for _, n in self._sent), what, self._opts.force)
        except ResourceError as err:
            prog = self._primary.program
            raise prog.error(f"{err} (pldemu python --force, pldemu pytest --pldemu-force)",
                             prog.host().node) from None

    def _dispatch(self, key: str, prog: Any, built: Any, resident: dict[str, Any], blocking: bool) -> Dispatch:
        windows = {d.var.name for d in built.program.buffers if d.kind.value != "local"}
        outputs: list[list[str]] = [[] for _ in built.inputs]
        for wb in built.writebacks:
            if wb.param not in resident:
                outputs[wb.rank].append(wb.buffer)
        res_in: dict[int, dict[str, str]] = {}
        res_out: dict[int, dict[str, str]] = {}
        for rank, sources in enumerate(built.sources):
            for name, (param, index) in sources.items():
                if param not in resident:
                    continue
                tid = self._resident_id(prog, resident[param], param, index, rank)
                res_in.setdefault(rank, {})[name] = tid
                ann = prog.host().annotations.get(param)
                if isinstance(ann, TensorAnn) and ann.direction is not Direction.IN:
                    res_out.setdefault(rank, {})[name] = tid
        inputs = [{n: a for n, a in per_rank.items() if n not in windows} for per_rank in built.inputs]
        if id(built.program) not in self._lowered:  # the ranks run what a one-shot call's job runs: lowered
            self._lowered[id(built.program)] = (built.program, lowered(prog, built))
        program = self._lowered[id(built.program)][1]
        return Dispatch(key, program, inputs, outputs, res_in, res_out, self._windows, blocking)

    def _resident_id(self, prog: Any, value: Any, param: str, index: tuple[int, ...], rank: int) -> str:
        """The resident tensor behind ``param[index]`` on device ``rank``: it must live there."""
        if isinstance(value, StackedDeviceTensor):
            if len(index) != 1:
                raise prog.error(f"{param}{list(index)}: a StackedDeviceTensor is passed to a device one whole "
                                 f"shard at a time ({param}[i])", prog.host().node)
            shard, owner = value.shards[index[0]], value.worker_ids[index[0]]
        else:
            if index:
                raise prog.error(f"{param}{list(index)}: a DeviceTensor is passed to a device whole, not sliced",
                                 prog.host().node)
            shard, owner = value, self._owner(value)
        if owner != rank:
            raise prog.error(f"{param}{list(index) if index else ''} is resident on worker {owner}, but the program "
                             f"dispatches it to device {rank}: pypto requires the device that holds it "
                             f"(StackedDeviceTensor worker_ids[i] == the device= of x[i])", prog.host().node)
        return _tid(shard)

    def _bind(self, prog: Any, args: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
        """The arguments as translation takes them (a resident tensor as a shape-only placeholder), and the
        parameters that hold resident tensors."""
        params = prog.host().params
        out: list[Any] = []
        resident: dict[str, Any] = {}
        for i, a in enumerate(args):
            name = params[i] if i < len(params) else f"#{i}"
            if isinstance(a, (DeviceTensor, StackedDeviceTensor)):
                shards = a.shards if isinstance(a, StackedDeviceTensor) else (a,)
                workers = a.worker_ids if isinstance(a, StackedDeviceTensor) else (self._owner(a),)
                for k, (shard, w) in enumerate(zip(shards, workers, strict=True)):
                    self._require_owned(shard, w, f"Parameter {name!r}" + (f" shard {k}" if len(shards) > 1 else ""))
                resident[name] = a
                out.append(np.broadcast_to(np.zeros((), np_dtype(a.dtype)), a.shape))
                continue
            check_shared(name, prog.host().annotations.get(name), a)
            out.append(a)
        return out, resident

    def _settle(self, handle: DistributedRunHandle) -> None:
        """Wait for ``handle``'s dispatch, add the verdict on everything up to it when it is the newest, and
        finish it (write-back, failure; what a SubWorker raised is raised as it is)."""
        result = self._job.result(handle._index)
        raised = self._job.host_task_error(handle._index)
        if raised is not None:
            self._in_flight.remove(handle)
            handle._error = raised
            return
        if self._in_flight and self._in_flight[-1] is handle and not handle._blocking and result.exit_code in (0, 1, 4):
            result = _with_verdict(result, self._job.check())
        with _removed(self._in_flight, handle):
            handle._finishing(result)

    def _address(self, nbytes: int) -> int:
        """A fresh handle with room for ``nbytes`` before the next one (so a raw copy finds its tensor)."""
        ptr = self._top
        self._top += (nbytes + 2 * PAGE - 1) // PAGE * PAGE
        return ptr

    def _span(self, ptr: int, nbytes: int, worker_id: int, op: str) -> tuple[DeviceTensor, int]:
        """The live tensor of ``worker_id`` holding ``[ptr, ptr + nbytes)``, and ``ptr``'s byte offset in it."""
        for (w, base), t in self._owned_tensors.items():
            if w == worker_id and base <= ptr and ptr + nbytes <= base + t.nbytes:
                return t, ptr - base
        raise ValueError(f"{op}: 0x{ptr:x} + {nbytes} bytes is not inside live memory of this DistributedWorker on "
                         f"worker {worker_id}")

    def _owner(self, t: DeviceTensor) -> int:
        owners = [w for w, ptr in self._owned_tensors if ptr == t.data_ptr]
        if not owners:
            raise ValueError(f"{t!r} is not owned by this DistributedWorker (freed, or from another worker)")
        return owners[0]

    def _require_owned(self, t: DeviceTensor, worker_id: int, what: str) -> None:
        if self._owned_tensors.get((worker_id, t.data_ptr)) is not t:
            raise ValueError(f"{what}: {t!r} is not a live tensor of this DistributedWorker on worker {worker_id}")

    def _check_worker(self, worker_id: int) -> None:
        n = self._primary.nranks
        if isinstance(worker_id, bool) or not isinstance(worker_id, int) or not 0 <= worker_id < n:
            raise ValueError(f"worker_id must be in [0, {n}), got {worker_id!r}")

    def _require_open(self, op: str) -> None:
        if self._closed:
            raise RuntimeError(f"DistributedWorker.{op}() called after close()")


class _removed:
    """Take ``item`` out of ``queue`` on the way out, whatever happens inside."""

    def __init__(self, queue: collections.deque[Any], item: Any) -> None:
        self.queue, self.item = queue, item

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        if self.item in self.queue:
            self.queue.remove(self.item)


def _with_verdict(result: Any, verdict: Any) -> Any:
    """``result`` with the checkers' ``verdict`` on it (the job's check after a non-blocking dispatch)."""
    if not verdict.ok and verdict.exit_code not in (1, 4):  # the job ended: its failure is the result
        return dataclasses.replace(verdict, buffers=result.buffers)
    races = result.races + verdict.races
    invariants = result.invariants + verdict.invariants
    code = verdict_code(races, invariants, result.exit_code == 1 and not result.invariants)
    return dataclasses.replace(result, races=races, invariants=invariants, exit_code=code,
                               output=result.output + verdict.output[len(result.output):])


def _check_compatible(programs: list[Any]) -> None:
    primary = programs[0]
    for prog in programs[1:]:
        if prog.platform != primary.platform:
            raise ValueError("DistributedWorker multi-program mode requires the same platform: "
                             f"{primary.platform!r} != {prog.platform!r}")
        if list(prog.config.device_ids) != list(primary.config.device_ids):
            raise ValueError("DistributedWorker multi-program mode requires the same device_ids: "
                             f"{list(primary.config.device_ids)} != {list(prog.config.device_ids)}")


def _bind_callbacks(programs: list[Any], callbacks: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    """pypto's binding of SubWorkers: a callback (called ``fn(args)``, one list of the task's arguments)
    replaces the SubWorker of its name, which must be one; an abstract SubWorker (a body of ``...``) must
    have one. The result: name -> what runs the task, called with the argument list."""
    declared = {name: f for prog in programs for name, f in prog.program.sub_workers.items()}
    unknown = sorted(set(callbacks) - set(declared))
    if unknown:
        raise ValueError(f"callbacks names {unknown} are not sub-workers of any prepared program.")
    for name, fn in callbacks.items():
        _check_callback_arity(name, fn)
    missing = sorted(name for name, f in declared.items() if f.abstract and name not in callbacks)
    if missing:
        raise ValueError(f"SubWorkers {missing} are runtime-bound callbacks (declared with a `...` body) and must "
                         "be supplied via callbacks={...}.")
    bodies: dict[str, Callable[..., Any]] = {name: _unpacked(f.python) for name, f in declared.items()
                                             if f.python is not None}
    return {**bodies, **callbacks}


def _unpacked(body: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    """A SubWorker's own body as pypto's generated module calls it: ``body(*args)``."""
    return lambda args: body(*args)


def _check_callback_arity(name: str, fn: Any) -> None:
    """A callback is called ``fn(args)``: it must take one positional argument (pypto's check)."""
    if not callable(fn):
        raise TypeError(f"callback for SubWorker '{name}' is not callable: {fn!r}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins expose no signature: taken as they are
    try:
        sig.bind(object())
    except TypeError:
        raise TypeError(f"callback for SubWorker '{name}' must accept a single positional argument "
                        f"fn(args: MappedArgs); got signature {sig}.") from None


class _TaskRunner:
    """Runs a dispatch's host tasks (SubWorkers) here, in the process that called the program: the ranks'
    buffers that hold the task's host tensors are written into the host arrays, the SubWorker runs on the
    caller's own tensors (views of them; a HOST ``pl.create_tensor`` as a torch tensor over its array), and
    what it left goes back to every rank that holds a slice."""

    def __init__(self, prog: Any, built: Any, arrays: dict[str, np.ndarray], args: Sequence[Any],
                 callbacks: dict[str, Callable[..., Any]]) -> None:
        self.prog, self.built, self.arrays, self.callbacks = prog, built, arrays, callbacks
        self.user = dict(zip(prog.host().params, args, strict=False))

    def __call__(self, task: int, per_rank: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
        plan = self.built.host_tasks[task]
        for rank, got in enumerate(per_rank):
            for name, value in got.items():
                param, key = self.built.sources[rank][name]
                self.arrays[param][key] = value
        fn = self.callbacks[plan.task.func]
        params = self.prog.functions[plan.task.func].params
        given = dict(zip(params, plan.task.args, strict=False)) | dict(plan.task.kwargs)
        fn([self._value(given[p]) for p in params if p in given])
        return [{name: np.ascontiguousarray(self.arrays[p][k]) for name in names
                 for p, k in [self.built.sources[rank][name]]} for rank, names in enumerate(plan.buffers)]

    def _value(self, v: Any) -> Any:
        """What the SubWorker gets for a host value: the caller's tensor (or its slice), a tensor over an
        intermediate's array, a scalar as it is."""
        if isinstance(v, (list, tuple)):
            return type(v)(self._value(x) for x in v)
        if not isinstance(v, HostTensor):
            return v
        base = self.user.get(v.param)
        if base is None:  # a HOST pl.create_tensor
            import torch  # real torch, or pldemu's stand-in while active

            base = torch.from_numpy(self.arrays[v.param])
        return base[v.key] if v.key else base


def _tid(t: DeviceTensor) -> str:
    return f"t{t.data_ptr:x}"


def check_shared(name: str, ann: Any, arg: Any) -> None:
    """pypto's rule for a prepared worker's host tensor: shared memory allocated before ``prepare()``
    (the forked chip worker reads it there). A scalar parameter is forwarded as a value, so a 0-d
    tensor given for one (pypto-lib's ``ScalarSpec``) is not checked, as pypto does not."""
    if isinstance(ann, ScalarAnn) or not callable(getattr(arg, "is_shared", None)) or arg.is_shared():
        return
    raise TypeError(f"Parameter {name!r}: a host torch.Tensor passed to a DistributedWorker must be shared memory "
                    "allocated BEFORE prepare() (call .share_memory_() and reuse the same buffer across "
                    "dispatches), so the forked chip worker can see it.")


__all__ = ["IN_FLIGHT", "Allocations", "DistributedRunHandle", "DistributedWorker", "RegistrationHandle",
           "check_shared", "reset_policy"]

