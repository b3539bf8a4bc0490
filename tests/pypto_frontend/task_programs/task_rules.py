"""Each dependency rule of pypto's task graph with a program that needs it (pldemu's own programs in
pypto's class form, written here; not collected by pldemu's own suite).

* a tensor argument's edge: ``consume`` reads what ``produce`` wrote, ordered only by the RAW edge the
  runtime derives from their arguments (``pl.no_dep`` on the read drops it: a race);
* ``deps=`` and ``pl.Scalar[pl.TASK_ID]``: in a manual scope the consumer is ordered only by its
  producer's TaskId (without it: a race);
* ``pl.manual_scope()`` / ``no_dep_args=``: a handshake task (count on the peer, wait for two credits)
  submitted before the task that publishes the peer's second credit on the same signal; with automatic
  edges the publisher waits for the handshake, which waits for the publisher: every rank deadlocks;
* ``allow_early_resolve=True``: a hint, not an edge change; the consumer of the early-resolving grid
  still sees every block's row;
* an Orchestration's ``pl.read`` (``get_tensor_data``) waits only for the tensor's writer: waiting for
  every task would deadlock on a waiter whose notifier is submitted after the read; a ``pl.write`` beside
  a task that still reads the tensor is a race (the runtime records no readers);
* ``defer_wait``: more waiters than the simulator has AIV cores, then the publisher: deferred waiters
  free their cores (the blocking version is in task_bug_cores.py).
"""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

W = 8
ROWS = 4
NR = pl.dynamic("NR")


def _compile(program, device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    return ir.compile(program, distributed_config=DistributedConfig(device_ids=device_ids[:devices]))


def _rows(devices, rows=1, dtype=torch.float32):
    return torch.arange(devices * rows * W, dtype=dtype).reshape(devices, rows, W).share_memory_()


def tensor_edge(drop_it: bool):
    """produce -> consume through ``mid``; ``drop_it`` passes ``pl.no_dep(mid)`` to the reader."""

    @pl.program
    class TensorEdge:
        @pl.function(type=pl.FunctionType.InCore)
        def produce(self, x: pl.Tensor[[1, W], pl.FP32],
                    mid: pl.Out[pl.Tensor[[1, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
            return pl.store(pl.add(pl.load(x, [0, 0], [1, W]), 1.0), [0, 0], mid)

        @pl.function(type=pl.FunctionType.InCore)
        def consume(self, mid: pl.Tensor[[1, W], pl.FP32],
                    y: pl.Out[pl.Tensor[[1, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
            return pl.store(pl.load(mid, [0, 0], [1, W]), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                 mid: pl.Out[pl.Tensor[[1, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
            mid = self.produce(x, mid)
            if drop_it:  # noqa: SIM108 - a DSL branch on a Python constant
                y = self.consume(pl.no_dep(mid), y)  # BUG: the read opts out of its RAW edge
            else:
                y = self.consume(mid, y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
                 mid: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]) -> pl.Tensor[[NR, 1, W], pl.FP32]:
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], mid[r], device=r)
            return y

    return TensorEdge


def explicit_deps(with_deps: bool):
    """In a manual scope only the producer's TaskId orders the consumer."""

    @pl.program
    class ExplicitDeps:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                 mid: pl.InOut[pl.Tensor[[1, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
            made_tid: pl.Scalar[pl.TASK_ID] = None
            with pl.manual_scope():
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="produce") as made:
                    mid = pl.store(pl.add(pl.load(x, [0, 0], [1, W]), 1.0), [0, 0], mid)
                if with_deps:
                    made_tid = made
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume", deps=[made_tid]):
                    y = pl.store(pl.load(mid, [0, 0], [1, W]), [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
                 mid: pl.InOut[pl.Tensor[[NR, 1, W], pl.FP32]]) -> pl.Tensor[[NR, 1, W], pl.FP32]:
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], mid[r], device=r)
            return y

    return ExplicitDeps


def handshake(mode: str):
    """mode: "auto" (the deadlock), "manual" (pl.manual_scope) or "no_dep" (no_dep_args=[sig])."""
    opted = mode == "no_dep"

    @pl.program
    class Handshake:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.INT32], y: pl.Out[pl.Tensor[[1, W], pl.INT32]],
                 payload: pl.InOut[pld.DistributedTensor[[1, W], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[1, W], pl.INT32]:
            if mode == "manual":
                with pl.manual_scope():
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="handshake") as shook:
                        ctx = pld.get_comm_ctx(sig)
                        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                        pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                        pld.system.wait(signal=sig, offsets=[0, 0], expected=2, cmp=pld.WaitCmp.Ge)
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish"):
                        ctx = pld.get_comm_ctx(sig)
                        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                        pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), target=payload, peer=nxt, offsets=[0, 0])
                        pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="receive", deps=[shook]):
                        y = pl.store(pl.load(payload, [0, 0], [1, W]), [0, 0], y)
            else:
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="handshake") as shook:
                    ctx = pld.get_comm_ctx(sig)
                    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                    pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                    pld.system.wait(signal=sig, offsets=[0, 0], expected=2, cmp=pld.WaitCmp.Ge)
                if opted:
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish", no_dep_args=[sig]):
                        ctx = pld.get_comm_ctx(sig)
                        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                        pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), target=payload, peer=nxt, offsets=[0, 0])
                        pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                else:
                    # BUG: the AtomicAdd reads and writes sig, so this task looks up the handshake (a writer
                    # of sig) and waits for it, while the handshake waits for the peer's publisher
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish"):
                        ctx = pld.get_comm_ctx(sig)
                        nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                        pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), target=payload, peer=nxt, offsets=[0, 0])
                        pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="receive", deps=[shook]):
                    y = pl.store(pl.load(payload, [0, 0], [1, W]), [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.INT32],
                 y: pl.Out[pl.Tensor[[NR, 1, W], pl.INT32]]) -> pl.Tensor[[NR, 1, W], pl.INT32]:
            rows = pld.alloc_window_buffer(W * 4)
            cells = pld.alloc_window_buffer(4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], pld.window(rows, [1, W], dtype=pl.INT32),
                          pld.window(cells, [1, 1], dtype=pl.INT32), device=r)
            return y

    return Handshake


def early_grid():
    """An SPMD grid flagged allow_early_resolve fills one row per block; its consumer keeps its edge."""

    @pl.program
    class EarlyGrid:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[ROWS, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                 mid: pl.InOut[pl.Tensor[[ROWS, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
            with pl.manual_scope():
                with pl.spmd(ROWS, allow_early_resolve=True) as grid:
                    b = pl.tile.get_block_idx()
                    mid = pl.store(pl.mul(pl.load(x, [b, 0], [1, W]), 2.0), [b, 0], mid)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="fold", deps=[grid]):
                    acc = pl.load(mid, [0, 0], [1, W])
                    for i in pl.range(1, ROWS):
                        acc = pl.add(acc, pl.load(mid, [i, 0], [1, W]))
                    y = pl.store(acc, [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, ROWS, W], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
                 mid: pl.InOut[pl.Tensor[[NR, ROWS, W], pl.FP32]]) -> pl.Tensor[[NR, 1, W], pl.FP32]:
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], mid[r], device=r)
            return y

    return EarlyGrid


def orchestration_access(write_back: bool):
    """An Orchestration's ``pl.read`` waits only for the tensor's writer ("count"), not for the waiter
    submitted before it, whose notifier (the publisher) comes after the read: waiting for every task would
    deadlock every rank. ``write_back`` adds a ``pl.write`` to the tensor a task still reads: the runtime
    does not see readers, so the write is concurrent with it (a race)."""

    @pl.program
    class OrchestrationAccess:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.INT32], y: pl.Out[pl.Tensor[[1, W], pl.INT32]],
                 cnt: pl.InOut[pl.Tensor[[1, W], pl.INT32]], echo: pl.Out[pl.Tensor[[1, W], pl.INT32]],
                 payload: pl.InOut[pld.DistributedTensor[[1, W], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[1, W], pl.INT32]:
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="waiter") as waited:
                pld.system.wait(signal=sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="count"):
                cnt = pl.store(pl.load(x, [0, 0], [1, W]), [0, 0], cnt)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="echo"):
                echo = pl.store(pl.load(cnt, [0, 0], [1, W]), [0, 0], echo)
            n: pl.Scalar[pl.INT32] = pl.read(cnt, [0, 0])  # get_tensor_data: waits for "count" only
            if write_back:
                pl.write(cnt, [0, 0], n + 1)  # BUG: "echo" reads cnt and nothing orders it before this write
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="publisher"):
                ctx = pld.get_comm_ctx(sig)
                nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), target=payload, peer=nxt, offsets=[0, 0])
                pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=n, op=pld.NotifyOp.Set)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="receive", deps=[waited]):
                y = pl.store(pl.load(payload, [0, 0], [1, W]), [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.INT32], y: pl.Out[pl.Tensor[[NR, 1, W], pl.INT32]],
                 cnt: pl.InOut[pl.Tensor[[NR, 1, W], pl.INT32]],
                 echo: pl.Out[pl.Tensor[[NR, 1, W], pl.INT32]]) -> pl.Tensor[[NR, 1, W], pl.INT32]:
            rows = pld.alloc_window_buffer(W * 4)
            cells = pld.alloc_window_buffer(4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], cnt[r], echo[r], pld.window(rows, [1, W], dtype=pl.INT32),
                          pld.window(cells, [1, 1], dtype=pl.INT32), device=r)
            return y

    return OrchestrationAccess


WAITERS = 20
"""More waiters than the simulator's 16 AIV cores (8 clusters)."""


def deferred_waiters():
    """pypto's deferred-completion shape in one dispatch: WAITERS deferred waiters, each with a consumer
    ordered by its TaskId, then the publisher of the peer's payload and signal."""

    @pl.program
    class DeferredWaiters:
        @pl.function(type=pl.FunctionType.Orchestration)
        def chip(self, x: pl.Tensor[[1, W], pl.INT32], y: pl.Out[pl.Tensor[[WAITERS, W], pl.INT32]],
                 payload: pl.InOut[pld.DistributedTensor[[1, W], pl.INT32]],
                 sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]) -> pl.Tensor[[WAITERS, W], pl.INT32]:
            with pl.manual_scope():
                for i in pl.range(WAITERS):
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="deferred_wait") as waited:
                        pld.system.defer_wait(signal=sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
                    with pl.at(level=pl.Level.CORE_GROUP, name_hint="consumer", deps=[waited]):
                        y = pl.store(pl.load(payload, [0, 0], [1, W]), [i, 0], y)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="publisher"):
                    ctx = pld.get_comm_ctx(sig)
                    nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
                    pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), target=payload, peer=nxt, offsets=[0, 0])
                    pld.system.notify(target=sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, 1, W], pl.INT32],
                 y: pl.Out[pl.Tensor[[NR, WAITERS, W], pl.INT32]]) -> pl.Tensor[[NR, WAITERS, W], pl.INT32]:
            rows = pld.alloc_window_buffer(W * 4)
            cells = pld.alloc_window_buffer(4)
            for r in pl.range(pld.world_size()):
                self.chip(x[r], y[r], pld.window(rows, [1, W], dtype=pl.INT32),
                          pld.window(cells, [1, 1], dtype=pl.INT32), device=r)
            return y

    return DeferredWaiters


def _ring_payload(devices, compiled, rows):
    x = _rows(devices, dtype=torch.int32)
    y = torch.full((devices, rows, W), -1, dtype=torch.int32).share_memory_()
    compiled(x, y)
    for r in range(devices):
        assert torch.equal(y[r], x[(r - 1) % devices].expand(rows, W)), (r, y[r])


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_a_tensor_edge_orders_the_consumer(device_ids, devices):
    x = _rows(devices)
    y, mid = torch.zeros_like(x).share_memory_(), torch.zeros_like(x).share_memory_()
    _compile(tensor_edge(False), device_ids, devices)(x, y, mid)
    assert torch.equal(y, x + 1.0)


def test_a_no_dep_read_drops_the_edge(device_ids):
    x = _rows(2)
    y, mid = torch.zeros_like(x).share_memory_(), torch.zeros_like(x).share_memory_()
    _compile(tensor_edge(True), device_ids, 2)(x, y, mid)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_deps_order_a_manual_scope(device_ids, devices):
    x = _rows(devices)
    y, mid = torch.zeros_like(x).share_memory_(), torch.zeros_like(x).share_memory_()
    _compile(explicit_deps(True), device_ids, devices)(x, y, mid)
    assert torch.equal(y, x + 1.0)


def test_a_manual_scope_without_deps(device_ids):
    x = _rows(2)
    y, mid = torch.zeros_like(x).share_memory_(), torch.zeros_like(x).share_memory_()
    _compile(explicit_deps(False), device_ids, 2)(x, y, mid)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("mode", ["manual", "no_dep"])
def test_the_publisher_opts_out_of_the_handshake_edge(device_ids, devices, mode):
    _ring_payload(devices, _compile(handshake(mode), device_ids, devices), 1)


def test_an_automatic_edge_behind_the_handshake(device_ids):
    _ring_payload(2, _compile(handshake("auto"), device_ids, 2), 1)


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_an_early_resolving_grid_keeps_its_edge(device_ids, devices):
    x = _rows(devices, ROWS)
    y = torch.zeros((devices, 1, W)).share_memory_()
    mid = torch.zeros_like(x).share_memory_()
    _compile(early_grid(), device_ids, devices)(x, y, mid)
    assert torch.equal(y, (x * 2.0).sum(dim=1, keepdim=True))


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_deferred_waiters_free_their_cores(device_ids, devices):
    _ring_payload(devices, _compile(deferred_waiters(), device_ids, devices), WAITERS)


def _orchestration_access(device_ids, devices, write_back):
    x = (_rows(devices, dtype=torch.int32) + 1).share_memory_()
    y, cnt, echo = (torch.zeros_like(x).share_memory_() for _ in range(3))
    _compile(orchestration_access(write_back), device_ids, devices)(x, y, cnt, echo)
    for r in range(devices):
        assert torch.equal(y[r], x[(r - 1) % devices]), (r, y[r])


@pytest.mark.parametrize("devices", [1, 2, 3, 4, 5])
def test_an_orchestration_read_waits_for_its_writer_only(device_ids, devices):
    _orchestration_access(device_ids, devices, False)


def test_an_orchestration_write_beside_a_reader(device_ids):
    _orchestration_access(device_ids, 2, True)
