"""a 2 x 2 data-parallel x tensor-parallel grid at 4 ranks with four comm groups, two of them strided: rank
r = 2 * dp + tp. Tensor-parallel pairs {0, 1} / {2, 3} each get their own window (dispatched by pl.range(0, 2) /
pl.range(2, 4)) and sum their row-parallel partials x_dp[:, tp half] @ W1[tp half] with a HOST
pld.tensor.allreduce; data-parallel pairs {0, 2} / {1, 3} (dispatches at constant devices) take the max over
the microbatches of relu(z) scaled by the group-local rank (pld.rank of the window's comm ctx, which must be the
position in the group, not the global rank) with a HOST allreduce Max, then a kernel-level pld.tensor.allgather
over the same strided group collects every member's row sums times its group rank + 1 into a [2, S] window (the row of group rank k)."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import pytest
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

S = 8
K = 32
KH = K // 2
N = 16


@pl.jit
def tp_part(x: pl.Tensor[[S, KH], pl.FP32], w: pl.Tensor[[KH, N], pl.FP32], z: pld.DistributedTensor[[S, N], pl.FP32]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tp"):
        z[:, :] = pl.matmul(x[:, :], w[:, :])
    return z


@pl.jit
def dp_local(z: pld.DistributedTensor[[S, N], pl.FP32], v: pld.DistributedTensor[[S, N], pl.FP32]):
    ctx = pld.get_comm_ctx(v)
    k = pld.rank(ctx)
    f = pl.cast(k + 1, pl.FP32)  # in the orchestration (C++): an INDEX -> FP32 cast is legal there
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="dp"):
        v[:, :] = pl.mul(pl.relu(z[:, :]), f)
    return v


@pl.jit.incore
def gather_sums(v: pld.DistributedTensor[[S, N], pl.FP32], rows: pld.DistributedTensor[[1, S], pl.FP32],
                allr: pld.DistributedTensor[[2, S], pl.FP32], sig: pld.DistributedTensor[[2, 1], pl.INT32],
                out: pl.Out[pl.Tensor[[2, S], pl.FP32]], vout: pl.Out[pl.Tensor[[S, N], pl.FP32]]):
    vt = pl.load(v, [0, 0], [S, N])
    vout = pl.store(vt, [0, 0], vout)
    k = pld.rank(pld.get_comm_ctx(allr))
    sums = pl.mul(pl.row_sum(vt, pl.create_tile([S, N], dtype=pl.FP32)), pl.cast(pl.cast(k + 1, pl.INT32), pl.FP32))
    rows = pl.store(pl.reshape(sums, [1, S]), [0, 0], rows)
    allr = pld.tensor.allgather(rows, allr, sig)
    out = pl.store(pl.load(allr, [0, 0], [2, S]), [0, 0], out)
    return out, vout


@pl.jit
def gather_orch(v: pld.DistributedTensor[[S, N], pl.FP32], rows: pld.DistributedTensor[[1, S], pl.FP32],
                allr: pld.DistributedTensor[[2, S], pl.FP32], sig: pld.DistributedTensor[[2, 1], pl.INT32],
                out: pl.Out[pl.Tensor[[2, S], pl.FP32]], vout: pl.Out[pl.Tensor[[S, N], pl.FP32]]):
    return gather_sums(v, rows, allr, sig, out, vout)


@pl.jit.host
def host(x: pl.Tensor[[4, S, KH], pl.FP32], w: pl.Tensor[[4, KH, N], pl.FP32], out: pl.Out[pl.Tensor[[4, 2, S], pl.FP32]],
         vout: pl.Out[pl.Tensor[[4, S, N], pl.FP32]]):
    za = pld.alloc_window_buffer([S, N], dtype=pl.FP32)
    zb = pld.alloc_window_buffer([S, N], dtype=pl.FP32)
    sa = pld.alloc_window_buffer(2 * pl.INT32.get_byte())
    sb = pld.alloc_window_buffer(2 * pl.INT32.get_byte())
    va = pld.alloc_window_buffer([S, N], dtype=pl.FP32)
    vb = pld.alloc_window_buffer([S, N], dtype=pl.FP32)
    ta = pld.alloc_window_buffer(2 * pl.INT32.get_byte())
    tb = pld.alloc_window_buffer(2 * pl.INT32.get_byte())
    ra = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    rb = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    ga = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    gb = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
    qa = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    qb = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    z_a = pld.window(za, [S, N], dtype=pl.FP32)
    z_b = pld.window(zb, [S, N], dtype=pl.FP32)
    for r in pl.range(0, 2):
        tp_part(x[r], w[r], z_a, device=r)
    for r2 in pl.range(2, 4):
        tp_part(x[r2], w[r2], z_b, device=r2)
    z_a = pld.tensor.allreduce(z_a, pld.window(sa, [2], dtype=pl.INT32), op=pld.ReduceOp.Sum)
    z_b = pld.tensor.allreduce(z_b, pld.window(sb, [2], dtype=pl.INT32), op=pld.ReduceOp.Sum)
    v_a = pld.window(va, [S, N], dtype=pl.FP32)
    v_b = pld.window(vb, [S, N], dtype=pl.FP32)
    dp_local(z_a, v_a, device=0)
    dp_local(z_b, v_a, device=2)
    dp_local(z_a, v_b, device=1)
    dp_local(z_b, v_b, device=3)
    v_a = pld.tensor.allreduce(v_a, pld.window(ta, [2], dtype=pl.INT32), op=pld.ReduceOp.Max)
    v_b = pld.tensor.allreduce(v_b, pld.window(tb, [2], dtype=pl.INT32), op=pld.ReduceOp.Max)
    gather_orch(v_a, pld.window(ra, [1, S], dtype=pl.FP32), pld.window(ga, [2, S], dtype=pl.FP32),
                pld.window(qa, [2, 1], dtype=pl.INT32), out[0], vout[0], device=0)
    gather_orch(v_a, pld.window(ra, [1, S], dtype=pl.FP32), pld.window(ga, [2, S], dtype=pl.FP32),
                pld.window(qa, [2, 1], dtype=pl.INT32), out[2], vout[2], device=2)
    gather_orch(v_b, pld.window(rb, [1, S], dtype=pl.FP32), pld.window(gb, [2, S], dtype=pl.FP32),
                pld.window(qb, [2, 1], dtype=pl.INT32), out[1], vout[1], device=1)
    gather_orch(v_b, pld.window(rb, [1, S], dtype=pl.FP32), pld.window(gb, [2, S], dtype=pl.FP32),
                pld.window(qb, [2, 1], dtype=pl.INT32), out[3], vout[3], device=3)


def test_grid_groups(device_ids):
    if len(device_ids) < 4:
        pytest.skip("needs 4 devices")
    rng = np.random.default_rng(44)
    xs = rng.standard_normal((2, S, K)).astype(np.float32)  # one microbatch per dp
    wf = (rng.standard_normal((K, N)) * 0.3).astype(np.float32)
    x = np.stack([xs[r // 2][:, (r % 2) * KH:(r % 2 + 1) * KH] for r in range(4)])
    w = np.stack([wf[(r % 2) * KH:(r % 2 + 1) * KH] for r in range(4)])
    out = np.zeros((4, 2, S), np.float32)
    vout = np.zeros((4, S, N), np.float32)
    host(x, w, out, vout, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:4])))
    z = [xs[dp].astype(np.float64) @ wf for dp in range(2)]
    for r in range(4):
        # dp group {tp, tp + 2}: group rank k is dp, whose scale is k + 1
        v = np.maximum(np.maximum(z[0], 0) * 1, np.maximum(z[1], 0) * 2)
        np.testing.assert_allclose(vout[r], v, rtol=1e-5, atol=1e-5, err_msg=f"rank {r}")
        np.testing.assert_allclose(out[r], np.stack([v.sum(-1), 2 * v.sum(-1)]), rtol=1e-5, atol=1e-5, err_msg=f"rank {r}")
