"""Megatron-style sequence parallelism at 2 and 4 ranks (one pl.jit.incore kernel, NR dynamic): each rank holds
SR = 4 rows of the sequence, rmsnorms them, allgathers the normalised rows with a kernel pld.tensor.allgather
(local [1, SR * D] row into a [NR, SR * D] window, reshaped back to rows), multiplies the gathered sequence by its
column shard of W1 (GELU-free ReLU) and its row shard of W2, stores its [NR * SR, D] partial as [NR, SR * D] and
reduce_scatters it (kernel pld.tensor.reduce_scatter, Sum; the same [NR, 1] signal as the allgather), keeping its
own row of the sum plus its residual. The row shards' count is the rank count, so the gathered extent is
NR * SR: a dynamic dim in the annotations."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

SR = 4
D = 16
FS = 16
EPS = 1e-6
NR = pl.dynamic("NR")


@pl.jit.incore
def sp_block(x: pl.Tensor[[SR, D], pl.FP32], w1: pl.Tensor[[D, FS], pl.FP32], w2: pl.Tensor[[FS, D], pl.FP32],
             out: pl.Out[pl.Tensor[[SR, D], pl.FP32]], mine: pld.DistributedTensor[[1, SR * D], pl.FP32],
             rows: pld.DistributedTensor[[NR, SR * D], pl.FP32], part: pld.DistributedTensor[[NR, SR * D], pl.FP32],
             sig: pld.DistributedTensor[[NR, 1], pl.INT32]):
    ctx = pld.get_comm_ctx(rows)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    xt = pl.load(x, [0, 0], [SR, D])
    ss = pl.row_sum(pl.mul(xt, xt), pl.create_tile([SR, D], dtype=pl.FP32))
    xn = pl.row_expand_mul(xt, pl.rsqrt(pl.add(pl.mul(ss, 1.0 / D), EPS)))
    mine = pl.store(pl.reshape(xn, [1, SR * D]), [0, 0], mine)
    rows = pld.tensor.allgather(mine, rows, sig)
    a = pl.load(w1, [0, 0], [D, FS])
    b = pl.load(w2, [0, 0], [FS, D])
    for k in pl.range(n):
        seq = pl.reshape(pl.load(rows, [k, 0], [1, SR * D]), [SR, D])
        y = pl.matmul(pl.relu(pl.matmul(seq, a)), b)
        part = pl.store(pl.reshape(y, [1, SR * D]), [k, 0], part)
    part = pld.tensor.reduce_scatter(part, sig, op=pld.ReduceOp.Sum)
    summed = pl.reshape(pl.load(part, [me, 0], [1, SR * D]), [SR, D])
    out = pl.store(pl.add(summed, xt), [0, 0], out)
    return out


@pl.jit
def orch(x: pl.Tensor[[SR, D], pl.FP32], w1: pl.Tensor[[D, FS], pl.FP32], w2: pl.Tensor[[FS, D], pl.FP32],
         out: pl.Out[pl.Tensor[[SR, D], pl.FP32]], mine: pld.DistributedTensor[[1, SR * D], pl.FP32],
         rows: pld.DistributedTensor[[NR, SR * D], pl.FP32], part: pld.DistributedTensor[[NR, SR * D], pl.FP32],
         sig: pld.DistributedTensor[[NR, 1], pl.INT32]):
    return sp_block(x, w1, w2, out, mine, rows, part, sig)


@pl.jit.host
def host(x: pl.Tensor[[NR, SR, D], pl.FP32], w1: pl.Tensor[[NR, D, FS], pl.FP32], w2: pl.Tensor[[NR, FS, D], pl.FP32],
         out: pl.Out[pl.Tensor[[NR, SR, D], pl.FP32]]):
    mb = pld.alloc_window_buffer([1, SR * D], dtype=pl.FP32)
    rb = pld.alloc_window_buffer(pld.world_size() * SR * D * 4)
    pb = pld.alloc_window_buffer(pld.world_size() * SR * D * 4)
    sb = pld.alloc_window_buffer(pld.world_size() * 4)
    for r in pl.range(pld.world_size()):
        orch(x[r], w1[r], w2[r], out[r], pld.window(mb, [1, SR * D], dtype=pl.FP32),
             pld.window(rb, [pld.world_size(), SR * D], dtype=pl.FP32),
             pld.window(pb, [pld.world_size(), SR * D], dtype=pl.FP32),
             pld.window(sb, [pld.world_size(), 1], dtype=pl.INT32), device=r)


def test_sequence_parallel_block(device_ids):
    for p in (2, 4)[:1 if len(device_ids) < 4 else 2]:
        rng = np.random.default_rng(800 + p)
        x = rng.standard_normal((p, SR, D)).astype(np.float32)
        w1 = (rng.standard_normal((p, D, FS)) * 0.3).astype(np.float32)
        w2 = (rng.standard_normal((p, FS, D)) * 0.3).astype(np.float32)
        out = np.zeros((p, SR, D), np.float32)
        host(x, w1, w2, out, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
        seq = x.reshape(p * SR, D).astype(np.float64)
        xn = seq / np.sqrt((seq * seq).mean(-1, keepdims=True) + EPS)
        y = sum(np.maximum(xn @ w1[r], 0) @ w2[r] for r in range(p)) + seq
        for r in range(p):
            np.testing.assert_allclose(out[r], y[r * SR:(r + 1) * SR], rtol=1e-4, atol=1e-4, err_msg=f"P={p} rank {r}")
