"""A prepared worker's memory (docs/prepared-workers.md#memory): the resident ranks' RSS over many
dispatches, or their peak over one dispatch of many tasks (the race detector's verdict). Run it with
pldemu's pypto layer, at 2 devices:

    pldemu python scripts/worker_memory.py dispatches 200     # RSS every 25 dispatches (host scalar varies)
    pldemu python scripts/worker_memory.py chain 500          # one dispatch of 500 chained pl.at tasks
    pldemu python scripts/worker_memory.py fan 512 128        # an spmd(512) producer, an spmd(128) consumer
    pldemu python scripts/worker_memory.py drain 500 64       # a TaskId kept across a drain, then 500 tasks
    pldemu python scripts/worker_memory.py create 10000 256   # 10000 iterations, each a [256, 16] pl.create_tensor (1 device)
    pldemu python scripts/worker_memory.py create 10000 256 2 # the same on each of 2 devices

Each line gives every resident rank's ``VmRSS`` (and ``VmHWM``, its peak so far) read from ``/proc``.
"""

from __future__ import annotations

import os
import sys
import time

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
ROWS, COLS, W = 1024, 16, 16
STEP = 25


@pl.program
class Exchange:
    """Per dispatch: a run-time-sized scratch seeded by a task, filled by spmd blocks, copied out; then a
    row to the next device through a window and a signal (``n``, the rows, varies between dispatches)."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
             z: pl.Out[pl.Tensor[[1, W], pl.FP32]], recv: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
             arrived: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]], n: pl.Scalar[pl.INDEX]) -> None:
        acc = pl.create_tensor([n, COLS], dtype=pl.FP32)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="seed"):
            for r0 in pl.range(0, n, 16):
                acc[r0:r0 + 16, 0:COLS] = pl.full([16, COLS], dtype=pl.FP32, value=1.0)
        for blk in pl.spmd(4, name_hint="fill"):
            for r0 in pl.range(0, n, 16):
                acc = pl.assemble(acc, pl.add(x[r0:r0 + 16, blk * 4:blk * 4 + 4], 1.0), [r0, blk * 4])
        for blk in pl.spmd(4, name_hint="out"):
            for r0 in pl.range(0, n, 16):
                y = pl.assemble(y, acc[r0:r0 + 16, blk * 4:blk * 4 + 4], [r0, blk * 4])
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish"):
            ctx = pld.get_comm_ctx(arrived)
            nxt = (pld.rank(ctx) + 1) % pld.nranks(ctx)
            pld.tile.remote_store(pl.load(y, [0, 0], [1, W]), target=recv, peer=nxt, offsets=[0, 0])
            pld.system.notify(target=arrived, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume"):
            pld.system.wait(signal=arrived, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            z = pl.store(pl.load(recv, [0, 0], [1, W]), [0, 0], z)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
             z: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]], n: pl.Scalar[pl.INDEX]) -> None:
        rows = pld.alloc_window_buffer(W * 4)
        cells = pld.alloc_window_buffer(4)
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], z[r], pld.window(rows, [1, W], dtype=pl.FP32),
                      pld.window(cells, [1, 1], dtype=pl.INT32), n, device=r)


def chain(tasks: int):
    @pl.program
    class Chain:
        """``tasks`` pl.at tasks writing one tensor: simpler's TensorMap gives each an edge to every earlier one."""

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            for _ in pl.range(tasks):
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="step"):
                    y = pl.assemble(y, pl.add(x[0:16, 0:COLS], 1.0), [0, 0])

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]) -> None:
            for r in pl.range(pld.world_size()):
                self.orch(x[r], y[r], device=r)

    return Chain


def fan(producers: int, consumers: int):
    @pl.program
    class Fan:
        """An spmd(producers) task writes y band by band; every block of an spmd(consumers) task reads a band."""

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            z = pl.create_tensor([ROWS, COLS], dtype=pl.FP32)
            for blk in pl.spmd(producers, name_hint="produce"):
                r0 = blk * (ROWS // producers)
                z = pl.assemble(z, pl.add(x[r0:r0 + ROWS // producers, 0:COLS], 1.0), [r0, 0])
            for blk in pl.spmd(consumers, name_hint="consume"):
                r1 = blk * (ROWS // consumers)
                y = pl.assemble(y, z[r1:r1 + ROWS // consumers, 0:COLS], [r1, 0])

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]) -> None:
            for r in pl.range(pld.world_size()):
                self.orch(x[r], y[r], device=r)

    return Fan


def drain(tasks: int, blocks: int):
    @pl.program
    class Drain:
        """pypto-lib dspark moe's shape around a drain: an spmd(blocks) producer whose TaskId the Orchestration
        keeps across a statement that drains (a scalar computed from a read), then ``tasks`` chained pl.at
        tasks, the first with ``deps=`` on that TaskId (moe's combine_wait: ``deps=[..., dispatch_push_tid]``)."""

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]) -> None:
            z = pl.create_tensor([ROWS, COLS], dtype=pl.FP32)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="seed"):
                z = pl.assemble(z, pl.full([16, COLS], dtype=pl.FP32, value=0.0), [0, 0])
            with pl.spmd(blocks, name_hint="produce") as pushed:
                blk = pl.tile.get_block_idx()
                r0 = blk * (ROWS // blocks)
                z = pl.assemble(z, pl.add(x[r0:r0 + ROWS // blocks, 0:COLS], 1.0), [r0, 0])
            rows = pl.cast(pl.read(x, [0, 0]), pl.INDEX)  # an Orchestration op on tensor data: a drain
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="first", deps=[pushed]):
                y = pl.assemble(y, pl.add(z[0:16, 0:COLS], 1.0), [0, 0])
            for _ in pl.range(rows * tasks):
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="step"):
                    y = pl.assemble(y, pl.add(x[0:16, 0:COLS], 1.0), [0, 0])

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32], y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]]) -> None:
            for r in pl.range(pld.world_size()):
                self.orch(x[r], y[r], device=r)

    return Drain


def created(iterations: int, rows: int):
    @pl.program
    class Created:
        """pypto-lib's per-iteration scratch (routed expert's ``h_tile_fp32``): each of ``iterations`` parallel
        steps creates a [rows, COLS] tensor, one pl.at task stages a row of x + 1 into it, the next copies it
        to the step's row of y."""

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: pl.Tensor[[ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[iterations, COLS], pl.FP32]]) -> None:
            for i in pl.parallel(iterations):
                r = i % ROWS
                scratch = pl.create_tensor([rows, COLS], dtype=pl.FP32)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="stage"):
                    scratch[0:1, 0:COLS] = pl.add(x[r:r + 1, 0:COLS], 1.0)
                with pl.at(level=pl.Level.CORE_GROUP, name_hint="use"):
                    y[i:i + 1, 0:COLS] = scratch[0:1, 0:COLS]

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host(self, x: pl.Tensor[[NR, ROWS, COLS], pl.FP32],
                 y: pl.Out[pl.Tensor[[NR, iterations, COLS], pl.FP32]]) -> None:
            for r in pl.range(pld.world_size()):
                self.orch(x[r], y[r], device=r)

    return Created


def _ancestor(pid: int, of: int) -> bool:
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
        if pid == of:
            return True
    return False


def ranks() -> list[int]:
    """This process's resident ranks (not their mpiexec)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"pldemu.pool.resident_server" in argv and b"mpiexec" not in argv[0] and _ancestor(int(entry), os.getpid()):
            found.append(int(entry))
    return sorted(found)


def memory() -> str:
    """Every resident rank's RSS and peak, in MB."""
    out = []
    for pid in ranks():
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if line.startswith(("VmRSS", "VmHWM")))
        out.append(f"{int(fields['VmRSS'].split()[0]) >> 10}/{int(fields['VmHWM'].split()[0]) >> 10}")
    return "rss/peak MB per rank: " + " ".join(out)


def _dispatches(count: int) -> None:
    compiled = ir.compile(Exchange, distributed_config=DistributedConfig(device_ids=[0, 1]))
    x = torch.randn((2, ROWS, COLS), generator=torch.Generator().manual_seed(1)).share_memory_()
    y = torch.zeros((2, ROWS, COLS)).share_memory_()
    z = torch.zeros((2, 1, W)).share_memory_()
    with compiled.prepare() as rt:
        start = time.monotonic()
        for d in range(1, count + 1):
            n = ROWS - 16 * (d % 3)
            rt(x, y, z, n)
            assert torch.equal(y[:, :n], x[:, :n] + 1.0) and torch.equal(z[1], y[0, :1]), d
            if d == 1 or d % STEP == 0:
                print(f"dispatch {d}: {memory()}, {time.monotonic() - start:.1f} s", flush=True)


def _one(program) -> None:
    compiled = ir.compile(program, distributed_config=DistributedConfig(device_ids=[0, 1]))
    x = torch.ones((2, ROWS, COLS)).share_memory_()
    y = torch.zeros((2, ROWS, COLS)).share_memory_()
    with compiled.prepare() as rt:
        print(f"before: {memory()}", flush=True)
        start = time.monotonic()
        rt(x, y)
        print(f"after one dispatch ({time.monotonic() - start:.1f} s): {memory()}", flush=True)
        assert torch.equal(y[:, :16], x[:, :16] + 1.0)


def _created(iterations: int, rows: int, devices: int) -> None:
    # at 2 devices the second one's copy of the loop is the else branch of pldemu's per-device if: its steps are
    # as independent as the first's (the Out promotion behind a prior writer no longer counts the other branch's
    # writes of y, which gave every step there an edge to every earlier one: quadratic)
    compiled = ir.compile(created(iterations, rows), distributed_config=DistributedConfig(device_ids=list(range(devices))))
    x = torch.ones((devices, ROWS, COLS)).share_memory_()
    y = torch.zeros((devices, iterations, COLS)).share_memory_()
    with compiled.prepare() as rt:
        start = time.monotonic()
        rt(x, y)
        print(f"after one dispatch ({time.monotonic() - start:.1f} s): {memory()}", flush=True)
        assert torch.equal(y, torch.full((devices, iterations, COLS), 2.0))


def main(argv: list[str]) -> None:
    kind, *sizes = argv
    if kind == "dispatches":
        _dispatches(int(sizes[0]))
    elif kind == "chain":
        _one(chain(int(sizes[0])))
    elif kind == "create":
        _created(int(sizes[0]), int(sizes[1]), int(sizes[2]) if len(sizes) > 2 else 1)
    elif kind == "drain":
        _one(drain(int(sizes[0]), int(sizes[1])))
    else:
        _one(fan(int(sizes[0]), int(sizes[1])))


main(sys.argv[1:])
