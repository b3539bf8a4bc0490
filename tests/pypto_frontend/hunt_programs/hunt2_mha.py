"""multi-head attention on 3-D operands: in a pl.at task, tensor-level batched QK^T split over the head dim
(pl.matmul of [H, S, 16] slices with b_trans, then pl.matmul_acc), a causal bias added per head, softmax by
row_max / row_expand_sub / exp / row_sum / row_expand_div on the [H, S, S] scores, BF16 probabilities and a
batched P @ V; heads moved next to each other by a 3-D pl.transpose and a reshape to [S, H * D], and again by pl.concat of
3-D tile slices reshaped to 2-D (also with a set_validshape'd left operand, whose valid columns it packs). The same
scores again in an InCore kernel at the tile level: 3-D loads into Mat, pl.move to Left / Right, a 3-D tile
transpose of K and pl.batch_matmul (Acc), stored through pl.store of a rank-3 tile."""
import ml_dtypes
import numpy as np
import pypto.language as pl

H = 2
S = 16
D = 32
DH = 16
NEG = -1.0e30


@pl.jit.incore
def tile_scores(q: pl.Tensor[[H, S, D], pl.BF16], k: pl.Tensor[[H, S, D], pl.BF16],
                sc: pl.Out[pl.Tensor[[H, S, S], pl.FP32]]):
    qt = pl.load(q, [0, 0, 0], [H, S, D], target_memory=pl.MemorySpace.Mat)
    kt = pl.load(k, [0, 0, 0], [H, S, D])
    ktt = pl.transpose(kt, 1, 2)
    a = pl.move(qt, target_memory=pl.MemorySpace.Left)
    b = pl.move(ktt, target_memory=pl.MemorySpace.Right)
    s = pl.batch_matmul(a, b)
    pl.store(s, [0, 0, 0], sc)
    return sc


@pl.jit
def mha(q: pl.Tensor[[H, S, D], pl.BF16], k: pl.Tensor[[H, S, D], pl.BF16], v: pl.Tensor[[H, S, D], pl.BF16],
        mask: pl.Tensor[[S, S], pl.FP32], out: pl.Out[pl.Tensor[[S, H * D], pl.FP32]],
        sc: pl.Out[pl.Tensor[[H, S, S], pl.FP32]], cat: pl.Out[pl.Tensor[[S, H * D], pl.FP32]],
        packed: pl.Out[pl.Tensor[[S, H * D], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="attn"):
        s = pl.matmul(q[:, :, 0:DH], k[:, :, 0:DH], b_trans=True, out_dtype=pl.FP32)
        s = pl.matmul_acc(s, q[:, :, DH:D], k[:, :, DH:D], b_trans=True)
        s = pl.mul(s, 1.0 / 8.0)
        m = mask[:, :]
        for hh in pl.unroll(H):
            s[hh:hh + 1, :, :] = pl.reshape(pl.add(pl.reshape(s[hh:hh + 1, :, :], [S, S]), m), [1, S, S])
        e = pl.exp(pl.row_expand_sub(s, pl.row_max(s)))
        p = pl.cast(pl.row_expand_div(e, pl.row_sum(e)), target_type=pl.BF16, mode="rint")
        o = pl.matmul(p, v, out_dtype=pl.FP32)
        out[:, :] = pl.reshape(pl.transpose(o, 0, 1), [S, H * D])
        o0 = pl.reshape(o[0:1, :, :], [S, D])
        o1 = pl.reshape(o[1:2, :, :], [S, D])
        cat[:, :] = pl.concat(o0, o1)
        packed[:, :] = pl.concat(pl.set_validshape(o0, S, DH), o1)
    sc = tile_scores(q, k, sc)
    return out


def test_batched_attention_3d():
    rng = np.random.default_rng(25)
    bf = np.dtype(ml_dtypes.bfloat16)
    q = rng.standard_normal((H, S, D)).astype(bf)
    k = rng.standard_normal((H, S, D)).astype(bf)
    v = rng.standard_normal((H, S, D)).astype(bf)
    mask = np.triu(np.full((S, S), NEG, np.float32), 1)
    out = np.zeros((S, H * D), np.float32)
    sc = np.zeros((H, S, S), np.float32)
    cat = np.zeros((S, H * D), np.float32)
    packed = np.full((S, H * D), 5.0, np.float32)
    mha(q, k, v, mask, out, sc, cat, packed)
    qf, kf, vf = (a.astype(np.float64) for a in (q, k, v))
    raw = qf @ kf.transpose(0, 2, 1)
    np.testing.assert_allclose(sc, raw, rtol=1e-6, atol=1e-5)
    s = raw / 8.0 + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    p = (e / e.sum(-1, keepdims=True)).astype(bf).astype(np.float64)
    o = p @ vf
    np.testing.assert_allclose(out, o.transpose(1, 0, 2).reshape(S, H * D), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(cat, out)  # the heads side by side, by concat this time
    np.testing.assert_array_equal(packed[:, :DH], out[:, :DH])  # a partial source packs its valid columns
    np.testing.assert_array_equal(packed[:, DH:DH + D], out[:, D:])
