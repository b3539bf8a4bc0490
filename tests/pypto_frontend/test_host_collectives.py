"""HOST-level collectives in pypto's shapes (written here), run end to end: one mpiexec job per call.

Each program is the form pypto's host builtins take: an allgather whose result is drained as a rank-2
tile into a rank-3 host tensor, a ring allreduce on pypto's ``[2 * (NR - 1) + 1, NR]`` signal, and an
all_to_all_v whose send counts are a window (an allreduce that omits its signal is in test_run.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

pytestmark = pytest.mark.launcher

COLS = 8
NR = pl.dynamic("NR")


def _config(n: int) -> DistributedConfig:
    return DistributedConfig(device_ids=list(range(n)))


def _make_gather(n: int):  # type: ignore[no-untyped-def]
    @pl.program
    class GatherRows:
        @pl.function(type=pl.FunctionType.InCore)
        def drain(self, g: pld.DistributedTensor[[n, COLS], pl.FP32],
                  out: pl.Out[pl.Tensor[[1, n, COLS], pl.FP32]]) -> pl.Tensor[[1, n, COLS], pl.FP32]:
            for i in pl.range(n):
                row = pl.load(g, [i, 0], [1, COLS])
                out = pl.store(row, [0, i, 0], out)  # a rank-2 tile into the rank-3 tensor
            return out

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[n, 1, COLS], pl.FP32],
                      ys: pl.Out[pl.Tensor[[n, 1, n, COLS], pl.FP32]]) -> pl.Tensor[[n, 1, n, COLS], pl.FP32]:
            gbuf = pld.alloc_window_buffer(n * COLS * pl.FP32.get_byte())
            sbuf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            g = pld.window(gbuf, [n, COLS], dtype=pl.FP32)
            g = pld.tensor.allgather(xs[0], g, pld.window(sbuf, [n], dtype=pl.INT32))
            for r in pl.range(n):
                self.drain(g, ys[r], device=r)
            return ys

    return GatherRows


def test_allgather_drained_into_a_rank3_tensor() -> None:
    n = 3
    xs = np.zeros((n, 1, COLS), np.float32)
    xs[0] = np.arange(COLS)  # every device gathers host slice xs[0]: identical rows
    ys = np.full((n, 1, n, COLS), -1, np.float32)
    ir.compile(_make_gather(n), distributed_config=_config(n))(xs, ys)
    np.testing.assert_array_equal(ys, np.broadcast_to(xs[0], (n, 1, n, COLS)))


def _make_ring(n: int):  # type: ignore[no-untyped-def]
    rounds = 2 * (n - 1) + 1  # pypto's host ring layout: one spare row after the 2 * (NR - 1) rounds

    @pl.program
    class HostRing:
        @pl.function(type=pl.FunctionType.InCore)
        def stage(self, x: pl.Tensor[[1, COLS], pl.FP32], d: pl.InOut[pld.DistributedTensor[[1, COLS], pl.FP32]]
                  ) -> pld.DistributedTensor[[1, COLS], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, COLS]), [0, 0], d)

        @pl.function(type=pl.FunctionType.InCore)
        def drain(self, d: pld.DistributedTensor[[1, COLS], pl.FP32], sig: pld.DistributedTensor[[rounds, n], pl.INT32],
                  y: pl.Out[pl.Tensor[[1, COLS], pl.FP32]], s: pl.Out[pl.Tensor[[rounds, n], pl.INT32]]
                  ) -> pl.Tensor[[1, COLS], pl.FP32]:
            for row in pl.range(rounds):
                for col in pl.range(n):
                    pl.write(s, [row, col], pl.read(sig, [row, col]))
            return pl.store(pl.load(d, [0, 0], [1, COLS]), [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[n, 1, COLS], pl.FP32], ys: pl.Out[pl.Tensor[[n, 1, COLS], pl.FP32]],
                      sigs: pl.Out[pl.Tensor[[n, rounds, n], pl.INT32]]) -> pl.Tensor[[n, 1, COLS], pl.FP32]:
            dbuf = pld.alloc_window_buffer(COLS * pl.FP32.get_byte())
            sbuf = pld.alloc_window_buffer(rounds * n * pl.INT32.get_byte())
            sig = pld.window(sbuf, [rounds, n], dtype=pl.INT32)
            for r in pl.range(n):
                self.stage(xs[r], pld.window(dbuf, [1, COLS], dtype=pl.FP32), device=r)
            d = pld.window(dbuf, [1, COLS], dtype=pl.FP32)
            d = pld.tensor.allreduce(d, sig, op=pld.ReduceOp.Sum, mode="ring")
            d = pld.tensor.allreduce(d, sig, op=pld.ReduceOp.Sum, mode="ring")  # the signal reused
            for r in pl.range(n):
                self.drain(d, sig, ys[r], sigs[r], device=r)
            return ys

    return HostRing


def test_ring_allreduce_on_pyptos_spare_row_signal() -> None:
    n = 4  # pypto's ring builtin wants the element count (COLS) a multiple of the rank count
    xs = np.arange(n * COLS, dtype=np.float32).reshape(n, 1, COLS)
    ys = np.zeros_like(xs)
    sigs = np.full((n, 2 * n - 1, n), -1, np.int32)
    ir.compile(_make_ring(n), distributed_config=_config(n))(xs, ys, sigs)
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.sum(axis=0) * n, xs.shape))
    assert not sigs.any()  # every round's cells retired, the spare row never touched


def _make_a2av(n: int, max_recv: int):  # type: ignore[no-untyped-def]
    total = n * max_recv

    @pl.program
    class HostA2AV:
        @pl.function(type=pl.FunctionType.InCore)
        def fill(self, x: pl.Tensor[[total, COLS], pl.FP32], c: pl.Tensor[[n, 1], pl.INT32],
                 stage: pl.Out[pld.DistributedTensor[[total, COLS], pl.FP32]],
                 counts: pl.Out[pld.DistributedTensor[[n, 1], pl.INT32]]) -> None:
            pl.store(pl.load(x, [0, 0], [total, COLS]), [0, 0], stage)
            for d in pl.range(n):
                pl.write(counts, [d, 0], pl.read(c, [d, 0]))

        @pl.function(type=pl.FunctionType.InCore)
        def drain(self, data: pld.DistributedTensor[[total, COLS], pl.FP32],
                  recv: pld.DistributedTensor[[n, 1], pl.INT32], y: pl.Out[pl.Tensor[[total, COLS], pl.FP32]],
                  got: pl.Out[pl.Tensor[[n, 1], pl.INT32]]) -> None:
            pl.store(pl.load(data, [0, 0], [total, COLS]), [0, 0], y)
            for s in pl.range(n):
                pl.write(got, [s, 0], pl.read(recv, [s, 0]))

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[n, total, COLS], pl.FP32], cs: pl.Tensor[[n, n, 1], pl.INT32],
                      ys: pl.Out[pl.Tensor[[n, total, COLS], pl.FP32]],
                      gots: pl.Out[pl.Tensor[[n, n, 1], pl.INT32]]) -> None:
            in_buf = pld.alloc_window_buffer(total * COLS * pl.FP32.get_byte())
            out_buf = pld.alloc_window_buffer(total * COLS * pl.FP32.get_byte())
            sig_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            cnt_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            recv_buf = pld.alloc_window_buffer(n * pl.INT32.get_byte())
            stage = pld.window(in_buf, [total, COLS], dtype=pl.FP32)
            counts = pld.window(cnt_buf, [n, 1], dtype=pl.INT32)
            for r in pl.range(n):
                self.fill(xs[r], cs[r], stage, counts, device=r)
            data = pld.window(out_buf, [total, COLS], dtype=pl.FP32)
            recv = pld.window(recv_buf, [n, 1], dtype=pl.INT32)
            data = pld.tensor.all_to_all_v(stage, data, pld.window(sig_buf, [n, 1], dtype=pl.INT32), counts, recv)
            for r in pl.range(n):
                self.drain(data, recv, ys[r], gots[r], device=r)

    return HostA2AV


def test_all_to_all_v_with_window_send_counts() -> None:
    n, m = 3, 2
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((n, n * m, COLS)).astype(np.float32)
    cs = rng.integers(0, m + 2, size=(n, n, 1)).astype(np.int32)  # counts above MAX_RECV are clamped
    ys = np.zeros_like(xs)
    gots = np.full((n, n, 1), -1, np.int32)
    ir.compile(_make_a2av(n, m), distributed_config=_config(n))(xs, cs, ys, gots)
    for dst in range(n):
        for src in range(n):
            rows = min(int(cs[src, dst, 0]), m)
            assert gots[dst, src, 0] == rows
            block = ys[dst, src * m:src * m + rows]
            np.testing.assert_array_equal(block, xs[src, dst * m:dst * m + rows])


def _make_lanes(n: int, size: int, lanes: int, stride: int):  # type: ignore[no-untyped-def]
    @pl.program
    class HostLanes:
        @pl.function(type=pl.FunctionType.InCore)
        def stage(self, x: pl.Tensor[[1, size], pl.FP32], d: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]]
                  ) -> pld.DistributedTensor[[1, size], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, size]), [0, 0], d)

        @pl.function(type=pl.FunctionType.InCore)
        def drain(self, d: pld.DistributedTensor[[1, size], pl.FP32], sig: pld.DistributedTensor[[n, stride], pl.INT32],
                  y: pl.Out[pl.Tensor[[1, size], pl.FP32]], s: pl.Out[pl.Tensor[[n, stride], pl.INT32]]
                  ) -> pl.Tensor[[1, size], pl.FP32]:
            for row in pl.range(n):
                for col in pl.range(stride):
                    pl.write(s, [row, col], pl.read(sig, [row, col]))
            return pl.store(pl.load(d, [0, 0], [1, size]), [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, xs: pl.Tensor[[n, 1, size], pl.FP32], ys: pl.Out[pl.Tensor[[n, 1, size], pl.FP32]],
                      sigs: pl.Out[pl.Tensor[[n, n, stride], pl.INT32]]) -> pl.Tensor[[n, 1, size], pl.FP32]:
            dbuf = pld.alloc_window_buffer(size * pl.FP32.get_byte())
            sbuf = pld.alloc_window_buffer(n * stride * pl.INT32.get_byte())
            sig = pld.window(sbuf, [n, stride], dtype=pl.INT32)
            for r in pl.range(n):
                self.stage(xs[r], pld.window(dbuf, [1, size], dtype=pl.FP32), device=r)
            d = pld.window(dbuf, [1, size], dtype=pl.FP32)
            d = pld.tensor.allreduce(d, sig, op=pld.ReduceOp.Max, core_num=lanes)
            d = pld.tensor.allreduce(d, sig, op=pld.ReduceOp.Sum, core_num=lanes)  # the lanes' cells reused
            for r in pl.range(n):
                self.drain(d, sig, ys[r], sigs[r], device=r)
            return ys

    return HostLanes


def test_allreduce_split_into_core_num_lanes() -> None:
    n, size, lanes, stride = 3, 1000, 3, 4  # 4 chunks of 256: lane 0 takes chunks 0 and 3; column 3 is spare
    xs = np.random.default_rng(2).integers(-50, 50, size=(n, 1, size)).astype(np.float32)
    ys = np.zeros_like(xs)
    sigs = np.full((n, n, stride), -1, np.int32)
    compiled = ir.compile(_make_lanes(n, size, lanes, stride), distributed_config=_config(n))
    compiled(xs, ys, sigs)
    np.testing.assert_array_equal(ys, np.broadcast_to(xs.max(axis=0) * n, xs.shape))
    assert not sigs.any()  # every lane retired its credits; the spare column was never touched
    kernel = (compiled.output_dir / "next_levels" / "builtin.tensor.allreduce__max__fp32" / "kernel.pld").read_text()
    assert "for lane in range(0, 3, 1)" in kernel and "[me, lane]" in kernel
