"""pypto-style programs (written here) run end to end: one mpiexec job per compiled call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pldemu.pypto.execute import ProgramRunError
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

pytestmark = pytest.mark.launcher

COLS = 16
NR = pl.dynamic("NR")


def _config(n: int) -> DistributedConfig:
    return DistributedConfig(device_ids=list(range(n)))


def _make_ring_shift(step: int):  # type: ignore[no-untyped-def]
    """Each device puts its row into the window of device (me + step) % NR: a positional region put,
    a scalar argument computed on the host, and a barrier built from notify / wait."""

    @pl.program
    class RingShift:
        @pl.function(type=pl.FunctionType.InCore)
        def shift(self, inp: pl.Tensor[[1, COLS], pl.FP32], out: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                  win: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                  dst: pl.Scalar[pl.INDEX]) -> pl.Tensor[[1, COLS], pl.FP32]:
            ctx = pld.get_comm_ctx(win)
            me = pld.rank(ctx)
            pld.tensor.put(win, dst, inp, [0, 0], [0, 0], [1, COLS], chunk_cols=COLS // 2)
            pld.system.notify(sig, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            src = (me + pld.nranks(ctx) - step) % pld.nranks(ctx)
            pld.system.wait(signal=sig, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            return pl.store(pl.load(win, [0, 0], [1, COLS]), [0, 0], out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32],
                      ys: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
            win_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            sig_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                self.shift(xs[r], ys[r], pld.window(win_buf, [1, COLS], dtype=pl.FP32),
                           pld.window(sig_buf, [pld.world_size(), 1], dtype=pl.INT32),
                           (r + step) % pld.world_size(), device=r)
            return ys

    return RingShift


@pytest.mark.parametrize("n", [2, 3])
def test_ring_shift_put_notify_wait(n: int) -> None:
    xs = np.arange(n * COLS, dtype=np.float32).reshape(n, 1, COLS)
    ys = np.zeros_like(xs)
    ir.compile(_make_ring_shift(1), distributed_config=_config(n))(xs, ys)
    np.testing.assert_array_equal(ys, np.roll(xs, 1, axis=0))


@pl.program
class CarriedSum:
    """A scalar carried through pl.range(init_values=) / pl.yield_, an early return, pl.read/pl.write."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, counts: pl.InOut[pl.Tensor[[1, 4], pl.INT32]], win: pld.DistributedTensor[[1, 1], pl.INT32]
          ) -> pl.Tensor[[1, 4], pl.INT32]:
        me = pld.rank(pld.get_comm_ctx(win))
        for i, (acc,) in pl.range(0, 4, 1, init_values=(pl.const(0, pl.INT32),)):
            acc_next = acc + pl.read(counts, [0, i])
            total = pl.yield_(acc_next)
        if me == 0:
            pl.write(counts, [0, 0], total)
            return counts
        pl.write(counts, [0, 3], total * 2)
        return counts

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, counts: pl.InOut[pl.Tensor[[NR, 1, 4], pl.INT32]]) -> pl.Tensor[[NR, 1, 4], pl.INT32]:
        buf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            self.k(counts[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)
        return counts


def test_carried_scalar_early_return_read_write() -> None:
    counts = np.array([[[1, 2, 3, 4]], [[5, 6, 7, 8]]], np.int32)
    ir.compile(CarriedSum, distributed_config=_config(2))(counts)
    np.testing.assert_array_equal(counts, [[[10, 2, 3, 4]], [[5, 6, 7, 52]]])


ROWS = 4


@pl.program
class CarriedTiles:
    """Running row sums: a tile and a tensor carried together through ``pl.range(init_values=)``."""

    @pl.function(type=pl.FunctionType.InCore)
    def prefix(self, x: pl.Tensor[[ROWS, COLS], pl.FP32], out: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]
               ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        first = pl.load(x, [0, 0], [1, COLS])
        out = pl.store(first, [0, 0], out)
        for i, (acc, total) in pl.range(1, ROWS, init_values=(first, out)):
            acc2 = pl.add(acc, pl.load(x, [i, 0], [1, COLS]))
            total2 = pl.store(acc2, [i, 0], total)
            acc_out, total_out = pl.yield_(acc2, total2)
        return pl.store(pl.add(acc_out, acc_out), [0, 0], total_out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[ROWS, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]]
                  ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        self.prefix(xs, ys)
        return ys


def test_a_carried_tile_is_one_variable_the_loop_reassigns() -> None:
    """Each iteration adds to the previous iteration's tile (not to the initial one), and the tile
    yielded out of the loop is defined after it."""
    xs = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    ys = np.zeros_like(xs)
    ir.compile(CarriedTiles, distributed_config=_config(1))(xs, ys)
    want = np.cumsum(xs, axis=0)
    want[0] = 2 * want[-1]
    np.testing.assert_array_equal(ys, want)


def _make_host_allreduce(explicit_signal: bool):  # type: ignore[no-untyped-def]
    """Two dispatch loops around a HOST-level allreduce (pypto's B' shape): on a [world_size] signal, or
    on none (then two call sites, each with the private [world_size, 1] window pypto synthesises)."""

    @pl.program
    class HostAllreduce:
        @pl.function(type=pl.FunctionType.InCore)
        def stage(self, x: pl.Tensor[[1, COLS], pl.FP32], d: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]
                  ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], d)

        @pl.function(type=pl.FunctionType.InCore)
        def drain(self, d: pld.DistributedTensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]
                  ) -> pl.Tensor[[1, COLS], pl.FP32]:
            return pl.store(pl.load(d, [0, 0], [1, COLS]), [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32],
                      ys: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
            data_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            sig_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                self.stage(xs[r], pld.window(data_buf, [1, COLS], dtype=pl.FP32), device=r)
            data = pld.window(data_buf, [1, COLS], dtype=pl.FP32)
            if explicit_signal:
                data = pld.tensor.allreduce(data, pld.window(sig_buf, [pld.world_size()], dtype=pl.INT32),
                                            op=pld.ReduceOp.Max)
            else:
                data = pld.tensor.allreduce(data, op=pld.ReduceOp.Sum)
                data = pld.tensor.allreduce(data, op=pld.ReduceOp.Max)
            for r in pl.range(pld.world_size()):
                self.drain(data, ys[r], device=r)
            return ys

    return HostAllreduce


def test_host_level_allreduce_and_its_builtin_artifact() -> None:
    compiled = ir.compile(_make_host_allreduce(True), distributed_config=_config(3))
    variant = compiled.output_dir / "next_levels" / "builtin.tensor.allreduce__max__fp32"
    assert (variant / "kernel_config.py").is_file()
    xs = np.random.default_rng(0).standard_normal((3, 1, COLS)).astype(np.float32)
    ys = np.zeros_like(xs)
    compiled(xs, ys)
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.max(axis=0), xs.shape))
    assert (variant / "kernel.pld").is_file()


def test_host_allreduce_without_a_signal_gets_one_synthesised() -> None:
    n = 3
    xs = np.arange(n * COLS, dtype=np.float32).reshape(n, 1, COLS)
    ys = np.zeros_like(xs)
    ir.compile(_make_host_allreduce(False), distributed_config=_config(n))(xs, ys)
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0), xs.shape))


@pl.program
class ReuseRace:
    """Publish, host barrier, read the peer's window, publish again: nothing orders the peer's read
    before the second publish (the write-after-read race of pypto's barrier signal-reuse test)."""

    @pl.function(type=pl.FunctionType.InCore)
    def publish(self, x: pl.Tensor[[1, COLS], pl.FP32], d: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]
                ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
        return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], d)  # MARK-write

    @pl.function(type=pl.FunctionType.InCore)
    def consume(self, d: pld.DistributedTensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
                peer: pl.Scalar[pl.INDEX]) -> pl.Tensor[[1, COLS], pl.FP32]:
        got = pld.tile.remote_load(d, peer=peer, offsets=[0, 0], shape=[1, COLS])  # MARK-read
        return pl.store(got, [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[2, NR, 1, COLS], pl.FP32],
                  ys: pl.Out[pl.Tensor[[2, NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[2, NR, 1, COLS], pl.FP32]:
        data_buf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        sig_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        for rd in pl.range(2):
            for r in pl.range(pld.world_size()):
                self.publish(xs[rd, r], pld.window(data_buf, [1, COLS], dtype=pl.FP32), device=r)
            pld.tensor.barrier(pld.window(sig_buf, [pld.world_size()], dtype=pl.INT32))
            for r in pl.range(pld.world_size()):
                self.consume(pld.window(data_buf, [1, COLS], dtype=pl.FP32), ys[rd, r],
                             (r + 1) % pld.world_size(), device=r)
        return ys


def test_signal_reuse_race_is_reported_with_both_pypto_lines() -> None:
    xs = np.ones((2, 2, 1, COLS), np.float32)
    with pytest.raises(ProgramRunError) as err:
        ir.compile(ReuseRace, distributed_config=_config(2))(xs, np.zeros_like(xs))
    text = str(err.value)
    src = Path(__file__).read_text().splitlines()
    write = next(i + 1 for i, line in enumerate(src) if "MARK-write" in line and "next(" not in line)
    read = next(i + 1 for i, line in enumerate(src) if "MARK-read" in line and "next(" not in line)
    assert "race on data_buf" in text
    assert f"test_run.py:{write}" in text and f"test_run.py:{read}" in text


@pl.program
class TensorLevelPush:
    """Tensor-level InCore ops (pl.tensor.*) whose value stays on core, pushed with pld.tensor.remote_store
    to the right neighbour, then a notify / wait handshake."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[1, COLS], pl.FP32], y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
          win: pld.DistributedTensor[[1, COLS], pl.FP32], sig: pld.DistributedTensor[[1, 1], pl.INT32],
          right: pl.Scalar[pl.INDEX]) -> pl.Tensor[[1, COLS], pl.FP32]:
        v = pl.tensor.maximum(pl.tensor.mul(pl.tensor.add(x, x), 3.0), pl.tensor.sub(x, x))
        pld.tensor.remote_store(v, win, right, [0, 0])
        pld.system.notify(target=sig, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        return pl.store(pl.load(win, [0, 0], [1, COLS]), [0, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32],
                  ys: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
        wbuf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
        sbuf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            self.k(xs[r], ys[r], pld.window(wbuf, [1, COLS], dtype=pl.FP32),
                   pld.window(sbuf, [1, 1], dtype=pl.INT32), (r + 1) % pld.world_size(), device=r)
        return ys


def test_tensor_level_ops_pushed_from_core() -> None:
    xs = (np.arange(3 * COLS, dtype=np.float32) - 20).reshape(3, 1, COLS)
    ys = np.zeros_like(xs)
    ir.compile(TensorLevelPush, distributed_config=_config(3))(xs, ys)
    np.testing.assert_array_equal(ys, np.roll(np.maximum(xs * 6, 0), 1, axis=0))


@pl.program
class AliasedRebind:
    """``cur = own`` binds ``cur`` to the value of ``own``; re-binding ``cur`` in a loop changes ``cur`` only
    (pypto's names are SSA values: ``own`` keeps what it was loaded with)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[1, COLS], pl.FP32], owns: pl.Out[pl.Tensor[[1, COLS], pl.FP32]],
          sums: pl.Out[pl.Tensor[[1, COLS], pl.FP32]]) -> pl.Tensor[[1, COLS], pl.FP32]:
        own = pl.load(x, [0, 0], [1, COLS])
        cur = own
        for _ in pl.range(1):
            cur = pl.add(cur, own)
        owns = pl.store(own, [0, 0], owns)
        return pl.store(cur, [0, 0], sums)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, xs: pl.Tensor[[NR, 1, COLS], pl.FP32], owns: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]],
                  sums: pl.Out[pl.Tensor[[NR, 1, COLS], pl.FP32]]) -> pl.Tensor[[NR, 1, COLS], pl.FP32]:
        for r in pl.range(pld.world_size()):
            self.k(xs[r], owns[r], sums[r], device=r)
        return sums


def test_rebinding_an_alias_in_a_loop_leaves_the_original() -> None:
    xs = np.full((2, 1, COLS), 4, np.float32)
    owns, sums = np.zeros_like(xs), np.zeros_like(xs)
    ir.compile(AliasedRebind, distributed_config=_config(2))(xs, owns, sums)
    np.testing.assert_array_equal(owns, xs)  # 4, as in pypto (the aliasing bug gave 8)
    np.testing.assert_array_equal(sums, 2 * xs)
