"""context-parallel attention merge at 2, 3 and 4 ranks (the same pl.jit source, NR dynamic): each rank holds
a ragged KV shard (its key count read from a tensor at run time; rank 0's shard is empty), computes its local
(m, l, o) under a run-time `if` (ragged keys: a valid_shape pl.slice taken by matmul b_trans, a valid_shape load, fillpad min of the scores; the empty shard
yields m = -1e30, l = 0, o = 0 from the other branch), then three kernel collectives merge the shards: a mesh
allreduce Max of the row maxima ([S, 1] reshaped to a [1, S] window row), a mesh allreduce Sum of the rescaled
sums (the same [NR, 1] signal as the Max), and a ring allreduce Sum of the rescaled [S, HD] outputs (its own
[2 * (NR - 1), NR] signal; 128 elements over 3 ranks make uneven segments); out = O / L."""
import math

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

S = 8
HD = 16
KM = 16
SCALE = 1.0 / math.sqrt(HD)
NR = pl.dynamic("NR")


@pl.jit.incore
def merge(q: pl.Tensor[[S, HD], pl.FP32], k: pl.Tensor[[KM, HD], pl.FP32], v: pl.Tensor[[KM, HD], pl.FP32],
          nk: pl.Tensor[[1, 8], pl.INT32], out: pl.Out[pl.Tensor[[S, HD], pl.FP32]],
          mw: pld.DistributedTensor[[1, S], pl.FP32], lw: pld.DistributedTensor[[1, S], pl.FP32],
          ow: pld.DistributedTensor[[S, HD], pl.FP32], sig: pld.DistributedTensor[[NR, 1], pl.INT32],
          rsig: pld.DistributedTensor[[2 * (NR - 1), NR], pl.INT32]):
    n = pl.cast(pl.read(nk, [0, 0]), pl.INDEX)
    tmp = pl.create_tile([S, KM], dtype=pl.FP32)
    if n > 0:
        kt = pl.slice(k, [KM, HD], [0, 0], valid_shape=[n, HD])
        vt = pl.fillpad(pl.load(v, [0, 0], [KM, HD], valid_shape=[n, HD]), pad_value=pl.PadValue.zero)
        s = pl.mul(pl.matmul(q[:, :], kt, b_trans=True), SCALE)
        s = pl.fillpad(s, pad_value=pl.PadValue.min)
        m = pl.row_max(s, tmp)
        p = pl.exp(pl.row_expand_sub(s, m))
        lsum = pl.row_sum(p, tmp)
        o = pl.matmul(p, vt)
        m1, l1, o1 = pl.yield_(m, lsum, o)
    else:
        m0 = pl.full([S, 1], pl.FP32, -1.0e30)
        l0 = pl.full([S, 1], pl.FP32, 0.0)
        o0 = pl.full([S, HD], pl.FP32, 0.0)
        m1, l1, o1 = pl.yield_(m0, l0, o0)
    mw = pl.store(pl.reshape(m1, [1, S]), [0, 0], mw)
    mw = pld.tensor.allreduce(mw, sig, op=pld.ReduceOp.Max)
    big = pl.reshape(pl.load(mw, [0, 0], [1, S]), [S, 1])
    alpha = pl.exp(pl.sub(m1, big))
    lw = pl.store(pl.reshape(pl.mul(l1, alpha), [1, S]), [0, 0], lw)
    lw = pld.tensor.allreduce(lw, sig, op=pld.ReduceOp.Sum)
    ow = pl.store(pl.row_expand_mul(o1, alpha), [0, 0], ow)
    ow = pld.tensor.allreduce(ow, rsig, op=pld.ReduceOp.Sum, mode="ring")
    total = pl.reshape(pl.load(lw, [0, 0], [1, S]), [S, 1])
    out = pl.store(pl.row_expand_div(pl.load(ow, [0, 0], [S, HD]), total), [0, 0], out)
    return out


@pl.jit
def orch(q: pl.Tensor[[S, HD], pl.FP32], k: pl.Tensor[[KM, HD], pl.FP32], v: pl.Tensor[[KM, HD], pl.FP32],
         nk: pl.Tensor[[1, 8], pl.INT32], out: pl.Out[pl.Tensor[[S, HD], pl.FP32]],
         mw: pld.DistributedTensor[[1, S], pl.FP32], lw: pld.DistributedTensor[[1, S], pl.FP32],
         ow: pld.DistributedTensor[[S, HD], pl.FP32], sig: pld.DistributedTensor[[NR, 1], pl.INT32],
         rsig: pld.DistributedTensor[[2 * (NR - 1), NR], pl.INT32]):
    return merge(q, k, v, nk, out, mw, lw, ow, sig, rsig)


@pl.jit.host
def host(q: pl.Tensor[[S, HD], pl.FP32], k: pl.Tensor[[NR, KM, HD], pl.FP32], v: pl.Tensor[[NR, KM, HD], pl.FP32],
         nk: pl.Tensor[[NR, 1, 8], pl.INT32], out: pl.Out[pl.Tensor[[NR, S, HD], pl.FP32]]):
    mb = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    lb = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    ob = pld.alloc_window_buffer([S, HD], dtype=pl.FP32)
    sb = pld.alloc_window_buffer(pld.world_size() * 4)
    rb = pld.alloc_window_buffer(2 * (pld.world_size() - 1) * pld.world_size() * 4)
    for r in pl.range(pld.world_size()):
        orch(q, k[r], v[r], nk[r], out[r], pld.window(mb, [1, S], dtype=pl.FP32),
             pld.window(lb, [1, S], dtype=pl.FP32), pld.window(ob, [S, HD], dtype=pl.FP32),
             pld.window(sb, [pld.world_size(), 1], dtype=pl.INT32),
             pld.window(rb, [2 * (pld.world_size() - 1), pld.world_size()], dtype=pl.INT32), device=r)


def test_context_parallel_merge(device_ids):
    for p in (2, 3, 4)[:max(1, len(device_ids) - 1)]:
        rng = np.random.default_rng(500 + p)
        q = rng.standard_normal((S, HD)).astype(np.float32)
        k = rng.standard_normal((p, KM, HD)).astype(np.float32)
        v = rng.standard_normal((p, KM, HD)).astype(np.float32)
        lens = [0] + [KM - 3 * (r % 3) for r in range(1, p)]
        nk = np.zeros((p, 1, 8), np.int32)
        nk[:, 0, 0] = lens
        out = np.zeros((p, S, HD), np.float32)
        host(q, k, v, nk, out, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
        keys = np.concatenate([k[r, :lens[r]] for r in range(p)]).astype(np.float64)
        vals = np.concatenate([v[r, :lens[r]] for r in range(p)]).astype(np.float64)
        s = q.astype(np.float64) @ keys.T * SCALE
        e = np.exp(s - s.max(-1, keepdims=True))
        want = (e @ vals) / e.sum(-1, keepdims=True)
        for r in range(p):
            np.testing.assert_allclose(out[r], want, rtol=1e-4, atol=1e-5, err_msg=f"P={p} rank {r}")
