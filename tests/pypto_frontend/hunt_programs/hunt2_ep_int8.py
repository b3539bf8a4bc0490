"""expert parallelism over 3 ranks with INT8 payloads, in moe's dispatch / combine style: each rank quantises
its tokens per row (rint INT32 -> round FP16 -> trunc INT8), routes each to one expert rank (a table), counts
per destination in an on-core pl.array, pushes the INT8 row with pld.tensor.put into the owner's receive window
at (source block + slot), an aux row (scale, gate, token id) with pld.tile.remote_store, and a meta row of counts;
one AtomicAdd notify per peer, a Ge wait for all. The owner dequantises nothing: it multiplies the ragged INT8
block of each source (valid_shape = the count read from the meta window) by its INT8 weight (INT32 accumulate),
scales rows and columns, casts to BF16 with rint, and puts each row back to its token's slot on the source
(token id read back from the aux row: an FP32 -> INT32 scalar cast); a second notify / wait; then the source
weighs the returned rows by the gate. Last, a kernel allgather of every rank's counts."""
import ml_dtypes
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

P = 3
T = 8
D = 64
NR = pl.dynamic("NR")


@pl.jit
def ep(x: pl.Tensor[[T, D], pl.FP32], route: pl.Tensor[[T, 8], pl.INT32], gate: pl.Tensor[[T, 8], pl.FP32],
       w: pl.Tensor[[D, D], pl.INT8], ws: pl.Tensor[[1, D], pl.FP32], out: pl.Out[pl.Tensor[[T, D], pl.FP32]],
       counts: pl.Out[pl.Tensor[[NR, 8], pl.INT32]],
       recv_x: pld.DistributedTensor[[NR * T, D], pl.INT8], recv_aux: pld.DistributedTensor[[NR * T, 8], pl.FP32],
       meta: pld.DistributedTensor[[NR, 8], pl.INT32], ret: pld.DistributedTensor[[T, D], pl.BF16],
       arrived: pld.DistributedTensor[[1, 1], pl.INT32], done: pld.DistributedTensor[[1, 1], pl.INT32],
       mine: pld.DistributedTensor[[1, 8], pl.INT32], allc: pld.DistributedTensor[[NR, 8], pl.INT32],
       sig: pld.DistributedTensor[[NR, 1], pl.INT32]):
    xq = pl.create_tensor([T, D], dtype=pl.INT8)
    xs = pl.create_tensor([T, 1], dtype=pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="quant"):
        xt = x[:, :]
        amax = pl.maximum(pl.row_max(pl.maximum(xt, pl.neg(xt))), 1e-4)
        sq = pl.div(pl.full([T, 1], dtype=pl.FP32, value=127.0), amax)
        xs[:, :] = pl.recip(sq)
        q32 = pl.cast(pl.row_expand_mul(xt, sq), target_type=pl.INT32, mode="rint")
        xq[:, :] = pl.cast(pl.cast(q32, target_type=pl.FP16, mode="round"), target_type=pl.INT8, mode="trunc")
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="dispatch"):
        ctx = pld.get_comm_ctx(recv_x)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        cnt = pl.array.create(4, pl.INT32)
        for d in pl.range(n):
            cnt[d] = 0
        aux = pl.tile.full([1, 8], dtype=pl.FP32, value=0.0)
        for t in pl.range(T):
            dst = pl.read(route, [t, 0])
            slot = cnt[dst]
            cnt[dst] = slot + 1
            row = me * T + pl.cast(slot, pl.INDEX)
            pld.tensor.put(recv_x, dst, xq, [row, 0], [t, 0], [1, D])
            pl.tile.write(aux, [0, 0], pl.read(xs, [t, 0]))
            pl.tile.write(aux, [0, 1], pl.read(gate, [t, 0]))
            pl.tile.write(aux, [0, 2], pl.cast(pl.cast(t, pl.INT32), pl.FP32))
            pld.tile.remote_store(aux, target=recv_aux, peer=dst, offsets=[row, 0])
        mrow = pl.tile.full([1, 8], dtype=pl.INT32, value=0)
        for d2 in pl.range(n):
            pl.tile.write(mrow, [0, d2], cnt[d2])
        pl.store(mrow, [0, 0], mine)
        for d3 in pl.range(n):
            pl.tile.write(mrow, [0, 0], cnt[d3])
            pld.tile.remote_store(mrow, target=meta, peer=d3, offsets=[me, 0])
            pld.system.notify(arrived, peer=d3, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(arrived, offsets=[0, 0], expected=n, cmp=pld.WaitCmp.Ge)
    yb = pl.create_tensor([NR * T, D], dtype=pl.BF16)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="expert"):
        ctx2 = pld.get_comm_ctx(recv_x)
        n2 = pld.nranks(ctx2)
        for src in pl.range(n2):
            k = pl.cast(pl.read(meta, [src, 0]), pl.INDEX)
            if k > 0:
                b0 = src * T
                a = pl.slice(recv_x, [T, D], [b0, 0], valid_shape=[k, D])
                acc = pl.matmul(a, w, out_dtype=pl.INT32)
                f = pl.cast(acc, target_type=pl.FP32, mode="none")
                f = pl.col_expand_mul(pl.row_expand_mul(f, recv_aux[b0:b0 + T, 0:1]), ws[:, :])
                yb[b0:b0 + T, :] = pl.cast(f, target_type=pl.BF16, mode="rint")
                for i in pl.range(k):
                    tok = pl.cast(pl.cast(pl.read(recv_aux, [b0 + i, 2]), pl.INT32), pl.INDEX)
                    pld.tensor.put(ret, src, yb, [tok, 0], [b0 + i, 0], [1, D])
            pld.system.notify(done, peer=src, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(done, offsets=[0, 0], expected=n2, cmp=pld.WaitCmp.Ge)
        for t2 in pl.range(T):
            g = pl.read(gate, [t2, 0])
            out[t2:t2 + 1, :] = pl.mul(pl.cast(ret[t2:t2 + 1, :], target_type=pl.FP32), g)
    allc = pld.tensor.allgather(mine, allc, sig)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="counts"):
        counts[:, :] = allc[:, :]
    return out


@pl.jit.host
def host(x: pl.Tensor[[NR, T, D], pl.FP32], route: pl.Tensor[[NR, T, 8], pl.INT32],
         gate: pl.Tensor[[NR, T, 8], pl.FP32], w: pl.Tensor[[NR, D, D], pl.INT8], ws: pl.Tensor[[NR, 1, D], pl.FP32],
         out: pl.Out[pl.Tensor[[NR, T, D], pl.FP32]], counts: pl.Out[pl.Tensor[[NR, NR, 8], pl.INT32]]):
    xb = pld.alloc_window_buffer(pld.world_size() * T * D)
    ab = pld.alloc_window_buffer(pld.world_size() * T * 8 * 4)
    mb = pld.alloc_window_buffer(pld.world_size() * 8 * 4)
    rb = pld.alloc_window_buffer(T * D * 2)
    s1 = pld.alloc_window_buffer(4)
    s2 = pld.alloc_window_buffer(4)
    cb = pld.alloc_window_buffer(8 * 4)
    gb = pld.alloc_window_buffer(pld.world_size() * 8 * 4)
    s3 = pld.alloc_window_buffer(pld.world_size() * 4)
    for r in pl.range(pld.world_size()):
        ep(x[r], route[r], gate[r], w[r], ws[r], out[r], counts[r],
           pld.window(xb, [pld.world_size() * T, D], dtype=pl.INT8),
           pld.window(ab, [pld.world_size() * T, 8], dtype=pl.FP32),
           pld.window(mb, [pld.world_size(), 8], dtype=pl.INT32), pld.window(rb, [T, D], dtype=pl.BF16),
           pld.window(s1, [1, 1], dtype=pl.INT32), pld.window(s2, [1, 1], dtype=pl.INT32),
           pld.window(cb, [1, 8], dtype=pl.INT32), pld.window(gb, [pld.world_size(), 8], dtype=pl.INT32),
           pld.window(s3, [pld.world_size(), 1], dtype=pl.INT32), device=r)


def test_expert_parallel_int8(device_ids):
    rng = np.random.default_rng(32)
    f32, bf = np.float32, ml_dtypes.bfloat16
    x = (rng.standard_normal((P, T, D)) * 3).astype(f32)
    route = np.zeros((P, T, 8), np.int32)
    route[:, :, 0] = rng.integers(0, P, (P, T))
    route[1, :, 0] = 2  # every token of rank 1 to rank 2: rank 1 receives nothing from itself
    gate = np.zeros((P, T, 8), f32)
    gate[:, :, 0] = rng.random((P, T)) + 0.5
    w = rng.integers(-127, 128, (P, D, D)).astype(np.int8)
    ws = (rng.random((P, 1, D)) * 0.001 + 0.0005).astype(f32)
    out = np.zeros((P, T, D), f32)
    counts = np.zeros((P, P, 8), np.int32)
    host(x, route, gate, w, ws, out, counts,
         config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:P])))
    want_counts = np.zeros((P, 8), np.int32)
    for r in range(P):
        amax = np.maximum(np.abs(x[r]).max(-1, keepdims=True), f32(1e-4)).astype(f32)
        sq = (f32(127.0) / amax).astype(f32)
        dq = (f32(1.0) / sq).astype(f32)
        q = np.rint((x[r] * sq).astype(f32)).astype(np.int64)
        for t in range(T):
            e = route[r, t, 0]
            want_counts[r, e] += 1
            acc = q[t] @ w[e].astype(np.int64)
            y = ((acc.astype(f32) * dq[t]).astype(f32) * ws[e, 0]).astype(f32).astype(bf).astype(f32)
            np.testing.assert_array_equal(out[r, t], (y * gate[r, t, 0]).astype(f32), err_msg=f"rank {r} token {t}")
    for r in range(P):
        np.testing.assert_array_equal(counts[r], want_counts)
