"""P18: pypto-lib's split-K idioms in a pl.spmd fan with a grid-stride loop: acc = pl.create_tensor, then in a
pl.pipeline(stage=2) K loop `if kb == 0: acc = pl.matmul(..., b_trans=True, out_dtype=FP32) else: acc =
pl.matmul_acc(acc, ...)` over valid-shaped slices (a ragged last row block), assembled into a partials
buffer; a rebinding carry (sq = pl.add(sq, ...)) in another pipeline; a BF16 cast of the result."""
import ml_dtypes
import numpy as np
import pypto.language as pl

T = 21
TT = 16
K = 128
KC = 32
N = 32
NB = (T + TT - 1) // TT
TP = NB * TT


@pl.jit
def linear(x: pl.Tensor[[T, K], pl.BF16], w: pl.Tensor[[N, K], pl.BF16], y: pl.Out[pl.Tensor[[T, N], pl.BF16]],
           ss: pl.Out[pl.Tensor[[1, TP], pl.FP32]]):
    part = pl.create_tensor([TP, N], dtype=pl.FP32)
    for blk in pl.spmd(3, name_hint="lin"):
        for task in pl.range(blk, NB, 3):
            t0 = task * TT
            rows = pl.min(TT, T - t0)
            acc = pl.create_tensor([TT, N], dtype=pl.FP32)
            sq = pl.full([1, TT], dtype=pl.FP32, value=0.0)
            for kb in pl.pipeline(0, K // KC, stage=2):
                k0 = kb * KC
                xc = pl.slice(x, [TT, KC], [t0, k0], valid_shape=[rows, KC])
                wc = w[:, k0:k0 + KC]
                if kb == 0:
                    acc = pl.matmul(xc, wc, b_trans=True, out_dtype=pl.FP32)
                else:
                    acc = pl.matmul_acc(acc, xc, wc, b_trans=True)
                xf = pl.fillpad(pl.cast(xc, target_type=pl.FP32), pad_value=pl.PadValue.zero)
                sq = pl.add(sq, pl.reshape(pl.row_sum(pl.mul(xf, xf)), [1, TT]))
            part = pl.assemble(part, acc, [t0, 0])
            ss[0:1, t0:t0 + TT] = sq
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="out"):
        for ob in pl.range(NB):
            o0 = ob * TT
            orows = pl.min(TT, T - o0)
            pv = pl.slice(part, [TT, N], [o0, 0], valid_shape=[orows, N])
            y[o0:o0 + TT, :] = pl.cast(pv, target_type=pl.BF16, mode="rint")
    return y


def test_split_k_idiom_ragged_rows():
    rng = np.random.default_rng(18)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = rng.standard_normal((T, K)).astype(bf16)
    w = rng.standard_normal((N, K)).astype(bf16)
    y = np.zeros((T, N), bf16)
    ss = np.full((1, TP), -1.0, np.float32)
    linear(x, w, y, ss)
    acc = x.astype(np.float64) @ w.astype(np.float64).T
    # FP32 partial sums per K chunk, then the FIXPIPE-like rint to BF16: within one BF16 ulp of the exact product
    np.testing.assert_allclose(y.astype(np.float32), acc.astype(bf16).astype(np.float32), rtol=8e-3, atol=1e-2)
    want = np.zeros(TP)
    want[:T] = (x.astype(np.float64) ** 2).sum(-1)
    np.testing.assert_allclose(ss[0], want, rtol=1e-5, atol=1e-4)
