"""data-parallel SGD: three steps in a kernel loop, each a forward matmul, residual, a_trans gradient
matmul, a kernel pld.tensor.allreduce of the [24, 40] gradient window (the signal reused every step), the
weight carried through pl.range(init_values=); then the per-row squared error reduce_scatter'ed (rows
[NR, 32]) and allgather'ed back, and a max-allreduce of a column max."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import pytest
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

B = 16
D = 24
N = 40
S = 32
LR = 0.05
STEPS = 3
NR = pl.dynamic("NR")


@pl.jit.incore
def sgd(x: pl.Tensor[[B, D], pl.FP32], y: pl.Tensor[[B, N], pl.FP32], w0: pl.Tensor[[D, N], pl.FP32],
        wout: pl.Out[pl.Tensor[[D, N], pl.FP32]], gath: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
        cmax: pl.Out[pl.Tensor[[1, N], pl.FP32]],
        g: pld.DistributedTensor[[D, N], pl.FP32], sig: pld.DistributedTensor[[NR, 1], pl.INT32],
        rows: pld.DistributedTensor[[NR, S], pl.FP32], sig2: pld.DistributedTensor[[NR, 1], pl.INT32],
        allrows: pld.DistributedTensor[[NR, S], pl.FP32], sig3: pld.DistributedTensor[[NR, 1], pl.INT32],
        mx: pld.DistributedTensor[[1, N], pl.FP32], sig4: pld.DistributedTensor[[NR, 1], pl.INT32],
        stage: pl.Out[pl.Tensor[[1, S], pl.FP32]]):
    xt = pl.load(x, [0, 0], [B, D])
    yt = pl.load(y, [0, 0], [B, N])
    wt = pl.load(w0, [0, 0], [D, N])
    n = pl.tensor.dim(sig, 0)
    for _it, (w,) in pl.range(STEPS, init_values=(wt,)):
        res = pl.sub(pl.matmul(xt, w), yt)
        grad = pl.matmul(x, res, a_trans=True)
        g = pl.store(grad, [0, 0], g)
        g = pld.tensor.allreduce(g, sig, op=pld.ReduceOp.Sum)
        gsum = pl.load(g, [0, 0], [D, N])
        wn = pl.yield_(pl.sub(w, pl.mul(gsum, LR)))
    pl.store(wn, [0, 0], wout)
    res2 = pl.sub(pl.matmul(xt, wn), yt)
    sq = pl.mul(res2, res2)
    tmp = pl.create_tile([B, N], pl.FP32)
    err = pl.reshape(pl.row_sum(sq, tmp), [1, B])
    for j in pl.range(n):
        scaled = pl.mul(err, pl.cast(pl.cast(j + 1, pl.INT32), pl.FP32))
        rows = pl.store(pl.concat(scaled, scaled), [j, 0], rows)
    rows = pld.tensor.reduce_scatter(rows, sig2, op=pld.ReduceOp.Sum)
    ctx = pld.get_comm_ctx(rows)
    me = pld.rank(ctx)
    stage = pl.store(pl.load(rows, [me, 0], [1, S]), [0, 0], stage)
    allrows = pld.tensor.allgather(stage, allrows, sig3)
    for k in pl.range(n):
        pl.store(pl.load(allrows, [k, 0], [1, S]), [k, 0], gath)
    mx = pl.store(pl.col_max(sq), [0, 0], mx)
    mx = pld.tensor.allreduce(mx, sig4, op=pld.ReduceOp.Max)
    pl.store(pl.load(mx, [0, 0], [1, N]), [0, 0], cmax)
    return wout


@pl.jit
def step(x: pl.Tensor[[B, D], pl.FP32], y: pl.Tensor[[B, N], pl.FP32], w0: pl.Tensor[[D, N], pl.FP32],
         wout: pl.Out[pl.Tensor[[D, N], pl.FP32]], gath: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
         cmax: pl.Out[pl.Tensor[[1, N], pl.FP32]],
         g: pld.DistributedTensor[[D, N], pl.FP32], sig: pld.DistributedTensor[[NR, 1], pl.INT32],
         rows: pld.DistributedTensor[[NR, S], pl.FP32], sig2: pld.DistributedTensor[[NR, 1], pl.INT32],
         allrows: pld.DistributedTensor[[NR, S], pl.FP32], sig3: pld.DistributedTensor[[NR, 1], pl.INT32],
         mx: pld.DistributedTensor[[1, N], pl.FP32], sig4: pld.DistributedTensor[[NR, 1], pl.INT32]):
    stage = pl.create_tensor([1, S], dtype=pl.FP32)
    return sgd(x, y, w0, wout, gath, cmax, g, sig, rows, sig2, allrows, sig3, mx, sig4, stage)


@pl.jit.host
def host(x: pl.Tensor[[NR, B, D], pl.FP32], y: pl.Tensor[[NR, B, N], pl.FP32], w0: pl.Tensor[[D, N], pl.FP32],
         wout: pl.Out[pl.Tensor[[NR, D, N], pl.FP32]], gath: pl.Out[pl.Tensor[[NR, NR, S], pl.FP32]],
         cmax: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]]):
    gb = pld.alloc_window_buffer(D * N * 4)
    rb = pld.alloc_window_buffer(pld.world_size() * S * 4)
    ab = pld.alloc_window_buffer(pld.world_size() * S * 4)
    mb = pld.alloc_window_buffer(N * 4)
    s1 = pld.alloc_window_buffer(pld.world_size() * 4)
    s2 = pld.alloc_window_buffer(pld.world_size() * 4)
    s3 = pld.alloc_window_buffer(pld.world_size() * 4)
    s4 = pld.alloc_window_buffer(pld.world_size() * 4)
    for r in pl.range(pld.world_size()):
        step(x[r], y[r], w0, wout[r], gath[r], cmax[r],
             pld.window(gb, [D, N], dtype=pl.FP32), pld.window(s1, [pld.world_size(), 1], dtype=pl.INT32),
             pld.window(rb, [pld.world_size(), S], dtype=pl.FP32), pld.window(s2, [pld.world_size(), 1], dtype=pl.INT32),
             pld.window(ab, [pld.world_size(), S], dtype=pl.FP32), pld.window(s3, [pld.world_size(), 1], dtype=pl.INT32),
             pld.window(mb, [1, N], dtype=pl.FP32), pld.window(s4, [pld.world_size(), 1], dtype=pl.INT32), device=r)


@pytest.mark.parametrize("devices", [2, 3])
def test_data_parallel_sgd(device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    p = devices
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((p, B, D)) * 0.3).astype(np.float32)
    y = rng.standard_normal((p, B, N)).astype(np.float32)
    w0 = (rng.standard_normal((D, N)) * 0.1).astype(np.float32)
    wout = np.zeros((p, D, N), np.float32)
    gath = np.zeros((p, p, S), np.float32)
    cmax = np.zeros((p, 1, N), np.float32)
    host(x, y, w0, wout, gath, cmax, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    xd, yd = x.astype(np.float64), y.astype(np.float64)
    w = w0.astype(np.float64)
    for _ in range(STEPS):
        w = w - LR * sum(xd[r].T @ (xd[r] @ w - yd[r]) for r in range(p))
    sqs = [(xd[r] @ w - yd[r]) ** 2 for r in range(p)]
    tot = sum(s.sum(-1) for s in sqs)
    wantg = np.stack([np.concatenate([tot * (j + 1)] * 2) for j in range(p)])
    for r in range(p):
        np.testing.assert_allclose(wout[r], w, atol=1e-4)
        np.testing.assert_allclose(gath[r], wantg, rtol=1e-5)
        np.testing.assert_allclose(cmax[r, 0], np.max([s.max(0) for s in sqs], 0), atol=1e-3)
