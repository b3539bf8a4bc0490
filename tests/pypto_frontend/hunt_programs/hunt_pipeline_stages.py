"""P15: two pipeline stages on two ranks: rank 0 runs layer 1 (matmul + gelu-ish tanh-free SiLU) on 5
microbatches and pushes each activation into rank 1's double-buffered window slot m % 2 (remote_store, then a
counting notify); rank 1 waits for the m+1-th credit, runs layer 2 (matmul + rmsnorm), frees the slot with a
credit back to rank 0, which waits for it before reusing the slot. Run-time `if` on the rank."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

MB = 5
T = 8
D = 32
NR = pl.dynamic("NR")


@pl.jit.incore
def stage(x: pl.Tensor[[MB * T, D], pl.FP32], w1: pl.Tensor[[D, D], pl.FP32], w2: pl.Tensor[[D, D], pl.FP32],
          y: pl.Out[pl.Tensor[[MB * T, D], pl.FP32]], slots: pld.DistributedTensor[[2 * T, D], pl.FP32],
          full: pld.DistributedTensor[[1, 8], pl.INT32], free: pld.DistributedTensor[[1, 8], pl.INT32]):
    ctx = pld.get_comm_ctx(slots)
    me = pld.rank(ctx)
    wa = pl.load(w1, [0, 0], [D, D])
    wb = pl.load(w2, [0, 0], [D, D])
    tmp = pl.create_tile([T, D], pl.FP32)
    for m in pl.range(MB):
        slot = m % 2
        if me == 0:
            if m >= 2:
                pld.system.wait(free, offsets=[0, 0], expected=m - 1, cmp=pld.WaitCmp.Ge)
            h = pl.matmul(pl.load(x, [m * T, 0], [T, D]), wa)
            h = pl.mul(h, pl.recip(pl.add(pl.exp(pl.neg(h)), 1.0)))
            pld.tile.remote_store(h, slots, 1, [slot * T, 0])
            pld.system.notify(full, peer=1, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        else:
            pld.system.wait(full, offsets=[0, 0], expected=m + 1, cmp=pld.WaitCmp.Ge)
            a = pl.load(slots, [slot * T, 0], [T, D])
            o = pl.matmul(a, wb)
            ms = pl.mul(pl.row_sum(pl.mul(o, o), tmp), 1.0 / D)
            pl.store(pl.row_expand_mul(o, pl.rsqrt(pl.add(ms, 1e-6))), [m * T, 0], y)
            pld.system.notify(free, peer=0, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    return y


@pl.jit
def orch(x: pl.Tensor[[MB * T, D], pl.FP32], w1: pl.Tensor[[D, D], pl.FP32], w2: pl.Tensor[[D, D], pl.FP32],
         y: pl.Out[pl.Tensor[[MB * T, D], pl.FP32]], slots: pld.DistributedTensor[[2 * T, D], pl.FP32],
         full: pld.DistributedTensor[[1, 8], pl.INT32], free: pld.DistributedTensor[[1, 8], pl.INT32]):
    return stage(x, w1, w2, y, slots, full, free)


@pl.jit.host
def host(x: pl.Tensor[[MB * T, D], pl.FP32], w1: pl.Tensor[[D, D], pl.FP32], w2: pl.Tensor[[D, D], pl.FP32],
         y: pl.Out[pl.Tensor[[NR, MB * T, D], pl.FP32]]):
    sb = pld.alloc_window_buffer(2 * T * D * 4)
    fb = pld.alloc_window_buffer(32)
    eb = pld.alloc_window_buffer(32)
    for r in pl.range(pld.world_size()):
        orch(x, w1, w2, y[r], pld.window(sb, [2 * T, D], dtype=pl.FP32), pld.window(fb, [1, 8], dtype=pl.INT32),
             pld.window(eb, [1, 8], dtype=pl.INT32), device=r)


def test_two_stage_pipeline(device_ids):
    rng = np.random.default_rng(15)
    x = rng.standard_normal((MB * T, D)).astype(np.float32)
    w1 = (rng.standard_normal((D, D)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((D, D)) * 0.2).astype(np.float32)
    y = np.zeros((2, MB * T, D), np.float32)
    host(x, w1, w2, y, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:2])))
    h = x.astype(np.float64) @ w1
    h = h / (1.0 + np.exp(-h))
    o = h @ w2
    np.testing.assert_allclose(y[1], o / np.sqrt((o * o).mean(-1, keepdims=True) + 1e-6), atol=1e-4)
    assert not y[0].any()
