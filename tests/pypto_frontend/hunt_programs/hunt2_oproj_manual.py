"""a grouped output projection in decode_sparse_attn's style, inside pl.manual_scope (every edge explicit): a
pl.parallel over groups, each a chain of three tasks linked by deps= (a seed pl.at outside the scope first):
(a) a pl.spmd of column blocks multiplying the group's ragged token rows (valid_shape slices of a padded
buffer) by the group's slab of a 3-D weight (`wo_a[g:g + 1, n0:n0 + N, k0:k0 + K]`: a 2-D x 3-D matmul with
b_trans, the batch broadcast) with a split-K matmul / matmul_acc chain in pl.pipeline(1, n), its [1, 16, 16]
result assembled into a 2-D buffer at the group's columns; (b) a pl.at quantising the group's columns per row
(pl.abs, row_max, eps floor, 127 / amax, rint -> FP16 -> trunc INT8) and zeroing the pad rows under a static
`if`; (c) a pl.spmd INT8 x INT8 -> INT32 projection whose split-K pipeline picks its slices in both branches of
`if kb == 0` (names the branches bind). Their TaskIds go into a pl.array of TASK_ID; after the scope a pl.spmd
with deps on every group's last task dequantises the INT32 partials per group and row, sums the groups,
scales per column and stores BF16 rows (pl.assemble of a valid box)."""
import ml_dtypes
import numpy as np
import pypto.language as pl

G = 2
T = 8
TP = 16
GI = 64
KC = 32
OL = 32
NT = 16
D = 32
DT = 16
KB = 16
EPS = 1e-4


@pl.jit
def oproj(o_packed: pl.Tensor[[G * TP, GI], pl.BF16], wo_a: pl.Tensor[[G, OL, GI], pl.BF16],
          wo_b: pl.Tensor[[D, G * OL], pl.INT8], ws: pl.Tensor[[1, D], pl.FP32],
          out: pl.Out[pl.Tensor[[T, D], pl.BF16]], q_out: pl.Out[pl.Tensor[[TP, G * OL], pl.INT8]]):
    o_r = pl.create_tensor([TP, G * OL], dtype=pl.FP32)
    o_i8 = pl.create_tensor([TP, G * OL], dtype=pl.INT8)
    dq = pl.create_tensor([G, TP], dtype=pl.FP32)
    partials = pl.create_tensor([TP, G * D], dtype=pl.INT32)
    tids = pl.array.create(G, pl.TASK_ID)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="seed") as seed_tid:
        o_r[:, :] = pl.full([TP, G * OL], dtype=pl.FP32, value=0.0)
    with pl.manual_scope():
        for g in pl.parallel(G):
            col_g = g * OL
            with pl.spmd(OL // NT, name_hint="proj_a", deps=[seed_tid], allow_early_resolve=True) as pa_tid:
                nf = pl.tile.get_block_idx()
                n0 = nf * NT
                xa = pl.slice(o_packed, [TP, KC], [g * TP, 0], valid_shape=[T, KC])
                acc = pl.matmul(xa, wo_a[g:g + 1, n0:n0 + NT, 0:KC], b_trans=True, out_dtype=pl.FP32)
                for kb in pl.pipeline(1, GI // KC, stage=2):
                    k0 = kb * KC
                    xk = pl.slice(o_packed, [TP, KC], [g * TP, k0], valid_shape=[T, KC])
                    acc = pl.matmul_acc(acc, xk, wo_a[g:g + 1, n0:n0 + NT, k0:k0 + KC], b_trans=True)
                o_r = pl.assemble(o_r, acc, [0, col_g + n0])
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="quant", deps=[pa_tid]) as q_tid:
                blk = o_r[:, col_g:col_g + OL]
                amax = pl.maximum(pl.full([1, TP], dtype=pl.FP32, value=EPS),
                                  pl.reshape(pl.row_max(pl.abs(blk)), [1, TP]))
                sq = pl.div(pl.full([1, TP], dtype=pl.FP32, value=127.0), amax)
                dq[g:g + 1, :] = pl.recip(sq)
                q32 = pl.cast(pl.row_expand_mul(blk, pl.reshape(sq, [TP, 1])), target_type=pl.INT32, mode="rint")
                o_i8[:, col_g:col_g + OL] = pl.cast(pl.cast(q32, target_type=pl.FP16, mode="round"),
                                                    target_type=pl.INT8, mode="trunc")
                if TP > T:
                    zero8 = pl.cast(pl.full([TP - T, OL], dtype=pl.FP16, value=0.0), target_type=pl.INT8,
                                    mode="trunc")
                    o_i8[T:TP, col_g:col_g + OL] = zero8
            with pl.spmd(D // DT, name_hint="proj_b", deps=[q_tid], allow_early_resolve=True) as pb_tid:
                dc = pl.tile.get_block_idx()
                d0 = dc * DT
                accb = pl.create_tensor([TP, DT], dtype=pl.INT32)
                for kb2 in pl.pipeline(0, OL // KB, stage=2):
                    k2 = col_g + kb2 * KB
                    if kb2 == 0:
                        act = o_i8[:, col_g:col_g + KB]
                        wt = wo_b[d0:d0 + DT, col_g:col_g + KB]
                        accb = pl.matmul(act, wt, b_trans=True, out_dtype=pl.INT32)
                    else:
                        act = o_i8[:, k2:k2 + KB]
                        wt = wo_b[d0:d0 + DT, k2:k2 + KB]
                        accb = pl.matmul_acc(accb, act, wt, b_trans=True)
                partials[:, g * D + d0:g * D + d0 + DT] = accb
            tids[g] = pb_tid
    with pl.spmd(D // DT, name_hint="act", deps=[tids[i] for i in range(G)]) as act_tid:
        ac = pl.tile.get_block_idx()
        a0 = ac * DT
        y = pl.full([TP, DT], dtype=pl.FP32, value=0.0)
        for gg in pl.range(G):
            pf = pl.cast(partials[:, gg * D + a0:gg * D + a0 + DT], target_type=pl.FP32, mode="none")
            y = pl.add(y, pl.row_expand_mul(pf, pl.reshape(dq[gg:gg + 1, :], [TP, 1])))
        yb = pl.cast(pl.col_expand_mul(y, ws[:, a0:a0 + DT]), target_type=pl.BF16, mode="rint")
        out = pl.assemble(out, pl.set_validshape(yb, T, DT), [0, a0])
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="copy", deps=[act_tid]):
        q_out[:, :] = o_i8[:, :]
    return out


def test_grouped_projection_manual_scope():
    rng = np.random.default_rng(35)
    bf = ml_dtypes.bfloat16
    f32 = np.float32
    o_packed = np.zeros((G * TP, GI), bf)
    for g in range(G):
        o_packed[g * TP:g * TP + T] = rng.standard_normal((T, GI)).astype(bf)
        o_packed[g * TP + T:(g + 1) * TP] = 99.0  # pad rows: outside every valid_shape
    wo_a = (rng.standard_normal((G, OL, GI)) * 0.2).astype(bf)
    wo_b = rng.integers(-127, 128, (D, G * OL)).astype(np.int8)
    ws = (rng.random((1, D)) * 0.01 + 0.001).astype(f32)
    out = np.zeros((T, D), bf)
    q_out = np.full((TP, G * OL), 7, np.int8)
    oproj(o_packed, wo_a, wo_b, ws, out, q_out)
    y = np.zeros((TP, D), f32)
    want_q = np.zeros((TP, G * OL), np.int8)
    for g in range(G):
        x = np.zeros((TP, GI))
        x[:T] = o_packed[g * TP:g * TP + T].astype(np.float64)
        w = wo_a[g].astype(np.float64)
        a = (x[:, :KC] @ w[:, :KC].T).astype(f32)
        a = (a.astype(np.float64) + x[:, KC:] @ w[:, KC:].T).astype(f32)  # one FP32 rounding per K chunk
        amax = np.maximum(np.abs(a).max(-1, keepdims=True), f32(EPS)).astype(f32)
        sq = (f32(127.0) / amax).astype(f32)
        q = np.rint((a * sq).astype(f32)).astype(np.int8)
        q[T:] = 0
        want_q[:, g * OL:(g + 1) * OL] = q
        part = q.astype(np.int64) @ wo_b[:, g * OL:(g + 1) * OL].astype(np.int64).T
        y = (y + (part.astype(f32) * (f32(1.0) / sq).astype(f32)).astype(f32)).astype(f32)
    np.testing.assert_array_equal(q_out, want_q)
    want = (y * ws).astype(f32).astype(bf)
    np.testing.assert_array_equal(out.astype(f32), want[:T].astype(f32))
