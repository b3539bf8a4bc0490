"""a tensor-parallel MLP on 2 ranks: each rank holds a column shard of W1 and a row shard of W2 (BF16, FP32
accumulation, SiLU between, the hidden rounded to BF16 with rint); its [16, 32] partial is stored as [2, 256]
(reshape) into a window and summed by a kernel pld.tensor.reduce_scatter, each rank rmsnorms its 8-row shard
with 1-D BF16 weights (its 1-D slice reshaped to a row), pld.tensor.allgather brings the shards back, and a
ring step reads the neighbour's per-row sums of squares with pld.tile.remote_load after a notify / wait (the
predecessor computed as (me + n - 1) % n, never a negative dividend)."""
import ml_dtypes
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

P = 2
T = 16
TR = T // P
D = 32
F = 64
FP = F // P
EPS = 1e-5
NR = pl.dynamic("NR")


@pl.jit
def mlp(x: pl.Tensor[[T, D], pl.BF16], w1: pl.Tensor[[D, FP], pl.BF16], w2: pl.Tensor[[FP, D], pl.BF16],
        g: pl.Tensor[[2 * D], pl.BF16], out: pl.Out[pl.Tensor[[T, D], pl.FP32]],
        nbr: pl.Out[pl.Tensor[[1, 8], pl.FP32]],
        part: pld.DistributedTensor[[NR, TR * D], pl.FP32], sig1: pld.DistributedTensor[[NR, 1], pl.INT32],
        gath: pld.DistributedTensor[[NR, TR * D], pl.FP32], sig2: pld.DistributedTensor[[NR, 1], pl.INT32],
        stat: pld.DistributedTensor[[1, 8], pl.FP32], ready: pld.DistributedTensor[[1, 1], pl.INT32]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="mlp"):
        h = pl.matmul(x[:, :], w1[:, :], out_dtype=pl.FP32)
        act = pl.mul(h, pl.recip(pl.add(pl.exp(pl.neg(h)), 1.0)))
        hb = pl.cast(act, target_type=pl.BF16, mode="rint")
        y = pl.matmul(hb, w2[:, :], out_dtype=pl.FP32)
        part[:, :] = pl.reshape(y, [P, TR * D])
    part = pld.tensor.reduce_scatter(part, sig1, op=pld.ReduceOp.Sum)
    mine = pl.create_tensor([1, TR * D], dtype=pl.FP32)
    ctx = pld.get_comm_ctx(part)
    me = pld.rank(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="norm"):
        s = pl.reshape(part[me:me + 1, :], [TR, D])
        ss = pl.row_sum(pl.mul(s, s))
        inv = pl.rsqrt(pl.add(pl.mul(ss, 1.0 / D), EPS), high_precision=True)
        gw = pl.cast(pl.reshape(g[D:2 * D], [1, D]), target_type=pl.FP32)
        mine[:, :] = pl.reshape(pl.col_expand_mul(pl.row_expand_mul(s, inv), gw), [1, TR * D])
        stat[:, :] = pl.reshape(ss, [1, TR])
    gath = pld.tensor.allgather(mine, gath, sig2)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="ring"):
        c2 = pld.get_comm_ctx(stat)
        r = pld.rank(c2)
        n = pld.nranks(c2)
        pld.system.notify(ready, peer=(r + n - 1) % n, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(ready, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        nbr[:, :] = pld.tile.remote_load(stat, (r + 1) % n, [0, 0], [1, 8])
        for k in pl.range(n):
            out[k * TR:k * TR + TR, :] = pl.reshape(gath[k:k + 1, :], [TR, D])
    return out


@pl.jit.host
def host(x: pl.Tensor[[NR, T, D], pl.BF16], w1: pl.Tensor[[NR, D, FP], pl.BF16], w2: pl.Tensor[[NR, FP, D], pl.BF16],
         g: pl.Tensor[[2 * D], pl.BF16], out: pl.Out[pl.Tensor[[NR, T, D], pl.FP32]],
         nbr: pl.Out[pl.Tensor[[NR, 1, 8], pl.FP32]]):
    pb = pld.alloc_window_buffer(pld.world_size() * TR * D * 4)
    gb = pld.alloc_window_buffer(pld.world_size() * TR * D * 4)
    s1 = pld.alloc_window_buffer(pld.world_size() * 4)
    s2 = pld.alloc_window_buffer(pld.world_size() * 4)
    sb = pld.alloc_window_buffer(8 * 4)
    rb = pld.alloc_window_buffer(4)
    for r in pl.range(pld.world_size()):
        mlp(x[r], w1[r], w2[r], g, out[r], nbr[r],
            pld.window(pb, [pld.world_size(), TR * D], dtype=pl.FP32),
            pld.window(s1, [pld.world_size(), 1], dtype=pl.INT32),
            pld.window(gb, [pld.world_size(), TR * D], dtype=pl.FP32),
            pld.window(s2, [pld.world_size(), 1], dtype=pl.INT32),
            pld.window(sb, [1, 8], dtype=pl.FP32), pld.window(rb, [1, 1], dtype=pl.INT32), device=r)


def test_tensor_parallel_mlp(device_ids):
    rng = np.random.default_rng(33)
    bf = np.dtype(ml_dtypes.bfloat16)
    x1 = rng.standard_normal((T, D)).astype(bf)
    x = np.stack([x1] * P)
    w1f = (rng.standard_normal((D, F)) * 0.3).astype(bf)
    w2f = (rng.standard_normal((F, D)) * 0.3).astype(bf)
    w1 = np.stack([w1f[:, r * FP:(r + 1) * FP] for r in range(P)])
    w2 = np.stack([w2f[r * FP:(r + 1) * FP] for r in range(P)])
    g = (1.0 + 0.1 * rng.standard_normal(2 * D)).astype(bf)
    out = np.zeros((P, T, D), np.float32)
    nbr = np.zeros((P, 1, 8), np.float32)
    host(x, w1, w2, g, out, nbr, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:P])))
    xf = x1.astype(np.float64)
    y = np.zeros((T, D))
    for r in range(P):
        h = xf @ w1[r].astype(np.float64)
        a = (h / (1 + np.exp(-h))).astype(bf).astype(np.float64)
        y += a @ w2[r].astype(np.float64)
    ss = (y ** 2).sum(-1, keepdims=True)
    want = y / np.sqrt(ss / D + EPS) * g[D:].astype(np.float64)
    for r in range(P):
        np.testing.assert_allclose(out[r], want, rtol=1e-4, atol=1e-4)
        nb = (r + 1) % P
        np.testing.assert_allclose(nbr[r, 0], ss[nb * TR:(nb + 1) * TR, 0], rtol=1e-4)
