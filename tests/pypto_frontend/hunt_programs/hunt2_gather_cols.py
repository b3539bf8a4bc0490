"""kernel-driven gathers in sparse attention's style, two ways: (1) K^T built column by column in a pl.create_l1
accumulator with pl.gather_row(..., transpose=True) (each GM row placed as an L1 column, the selected row ids
read with pl.read from an index table, the first column peeled by pl.unroll(0, 1) and the rest by a pl.range),
then Q @ K^T with no b_trans; (2) V gathered into a Vec pl.create_tile by multi-row transfers of 4-row pages
whose run-time row counts are valid_shape (a block table and per-page counts read from tensors), the unfilled
tail rows zeroed by fillpad of a set_validshape; then softmax over the gathered keys and P @ V. The pools are
the inline helper's views of a layer-stacked pool (a pl.slice at a run-time layer offset in an orchestration
pl.range), reshaped flat inside the helper; one pl.spmd lane per query group."""
import ml_dtypes
import numpy as np
import pypto.language as pl

LAY = 2
NPOOL = 40
D = 32
KT = 16
PG = 4
NPG = KT // PG
QG = 2
QR = 16


@pl.jit.inline
def attend(q: pl.Tensor[[QG * QR, D], pl.BF16], pool: pl.Tensor[[NPOOL // PG, PG, D], pl.BF16],
           ids: pl.Tensor[[QG, KT], pl.INT32], pages: pl.Tensor[[QG, 8], pl.INT32],
           cnt: pl.Tensor[[QG, 8], pl.INT32], out: pl.Tensor[[QG * QR, D], pl.FP32],
           s_out: pl.Tensor[[QG * QR, KT], pl.FP32]):
    npg = pl.tensor.dim(pool, 0)
    flat = pl.reshape(pool, [npg * PG, D])
    with pl.spmd(QG, name_hint="gather_attend", allow_early_resolve=True):
        g = pl.tile.get_block_idx()
        kt = pl.create_l1([D, KT], pl.BF16)
        for j0 in pl.unroll(0, 1):
            r0 = pl.cast(pl.read(ids, [g, j0]), pl.INDEX)
            kt = pl.gather_row(kt, flat, [0, j0], [r0, 0], [1, D], transpose=True)
        for j in pl.range(1, KT):
            r = pl.cast(pl.read(ids, [g, j]), pl.INDEX)
            kt = pl.gather_row(kt, flat, [0, j], [r, 0], [1, D], True)
        qt = q[g * QR:g * QR + QR, :]
        s = pl.matmul(qt, kt, out_dtype=pl.FP32)
        s_out[g * QR:g * QR + QR, :] = s
        vt = pl.create_tile([KT, D], pl.BF16)
        filled = pl.const(0, pl.INT32)
        for p in pl.range(NPG):
            blk = pl.cast(pl.read(pages, [g, p]), pl.INDEX)
            n = pl.read(cnt, [g, p])
            if n > 0:
                vt = pl.gather_row(vt, flat, [pl.cast(filled, pl.INDEX), 0], [blk * PG, 0], [PG, D],
                                   valid_shape=[pl.cast(n, pl.INDEX), D])
            filled = filled + n
        vz = pl.fillpad(pl.set_validshape(vt, pl.cast(filled, pl.INDEX), D), pad_value=pl.PadValue.zero)
        e = pl.exp(pl.row_expand_sub(s, pl.row_max(s)))
        p_bf = pl.cast(pl.row_expand_div(e, pl.row_sum(e)), target_type=pl.BF16, mode="rint")
        vm = pl.move(vz, target_memory=pl.MemorySpace.Mat)
        out[g * QR:g * QR + QR, :] = pl.matmul(p_bf, vm, out_dtype=pl.FP32)
    return out


@pl.jit
def gather_cols(q: pl.Tensor[[QG * QR, D], pl.BF16], pool: pl.Tensor[[LAY * NPOOL // PG, PG, D], pl.BF16],
                ids: pl.Tensor[[QG, KT], pl.INT32], pages: pl.Tensor[[QG, 8], pl.INT32],
                cnt: pl.Tensor[[QG, 8], pl.INT32], out: pl.Out[pl.Tensor[[LAY, QG * QR, D], pl.FP32]],
                s_out: pl.Out[pl.Tensor[[LAY, QG * QR, KT], pl.FP32]]):
    for layer in pl.range(LAY):
        lp = pl.slice(pool, [NPOOL // PG, PG, D], [layer * (NPOOL // PG), 0, 0])
        with pl.scope():
            attend(q, lp, ids, pages, cnt, out[layer], s_out[layer])
    return out


def test_gathered_columns_and_pages():
    rng = np.random.default_rng(29)
    bf = np.dtype(ml_dtypes.bfloat16)
    q = rng.standard_normal((QG * QR, D)).astype(bf)
    pool = rng.standard_normal((LAY * NPOOL // PG, PG, D)).astype(bf)
    ids = np.stack([rng.choice(NPOOL, KT, replace=False) for _ in range(QG)]).astype(np.int32)
    pages = np.zeros((QG, 8), np.int32)
    cnt = np.zeros((QG, 8), np.int32)
    pages[0, :NPG], cnt[0, :NPG] = [9, 2, 5, 0], [4, 3, 0, 2]  # 9 rows, a page skipped
    pages[1, :NPG], cnt[1, :NPG] = [1, 7, 3, 8], [4, 4, 4, 4]  # all 16
    out = np.zeros((LAY, QG * QR, D), np.float32)
    s_out = np.zeros((LAY, QG * QR, KT), np.float32)
    gather_cols(q, pool, ids, pages, cnt, out, s_out)
    for layer in range(LAY):
        flat = pool[layer * NPOOL // PG:(layer + 1) * NPOOL // PG].reshape(NPOOL, D).astype(np.float64)
        for g in range(QG):
            qg = q[g * QR:(g + 1) * QR].astype(np.float64)
            s = qg @ flat[ids[g]].T
            np.testing.assert_allclose(s_out[layer, g * QR:(g + 1) * QR], s, rtol=1e-5, atol=1e-4)
            v = np.zeros((KT, D))
            f = 0
            for p in range(NPG):
                n = cnt[g, p]
                v[f:f + n] = flat[pages[g, p] * PG:pages[g, p] * PG + n]
                f += n
            e = np.exp(s - s.max(-1, keepdims=True))
            pr = (e / e.sum(-1, keepdims=True)).astype(bf).astype(np.float64)
            np.testing.assert_allclose(out[layer, g * QR:(g + 1) * QR], pr @ v, rtol=1e-4, atol=1e-4)
