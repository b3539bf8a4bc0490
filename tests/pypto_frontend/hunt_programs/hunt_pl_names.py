"""a decoder step's pieces written with pypto's pl.-level names: a biased projection (pl.matmul_bias, BF16 in,
an FP32 bias row), rope through pl.sin / pl.cos with a residual three-way add (pl.addc), causal scores masked by a
pl.tri triangle through pl.cmps / pl.sel and clamped by pl.maximums / pl.minimums, the decode row's projection as
pl.gemv then pl.gemv_acc over two K halves, a ragged tail padded to a full tile by pl.fillpad_expand, a running
chunk sum over a run-time number of chunks in a pl.while_ loop, and a pl.spmd row scaling whose blocks stride by
pl.get_block_num(); shapes checked by pl.static_assert."""
import math

import ml_dtypes
import numpy as np
import pypto.language as pl

S = 16
D = 32
H = D // 2
CH = 4
TR, TC, VR, VC = 8, 16, 5, 10  # the ragged tail: a [TR, TC] tile valid [VR, VC], padded to [TR, D]
CLAMP = 30.0
BLOCKS = 4


@pl.jit.incore
def project(x: pl.Tensor[[S, D], pl.BF16], w: pl.Tensor[[D, D], pl.BF16], bias: pl.Tensor[[1, D], pl.FP32],
            proj: pl.Out[pl.Tensor[[S, D], pl.FP32]]):
    pl.static_assert(D % 16 == 0 and S % CH == 0, "cube-aligned shapes")
    xt = pl.load(x, [0, 0], [S, D], target_memory=pl.Mem.Mat)
    wt = pl.load(w, [0, 0], [D, D], target_memory=pl.Mem.Mat)
    pl.store(pl.matmul_bias(xt, wt, pl.load(bias, [0, 0], [1, D])), [0, 0], proj)
    return proj


@pl.jit.incore
def rope(proj: pl.Tensor[[S, D], pl.FP32], ang: pl.Tensor[[S, D], pl.FP32], res: pl.Tensor[[S, D], pl.FP32],
         out: pl.Out[pl.Tensor[[S, D], pl.FP32]]):
    h = pl.load(proj, [0, 0], [S, D])
    a = pl.load(ang, [0, 0], [S, D])
    turned = pl.tile.create([S, D], pl.FP32)
    turned[:, 0:H] = pl.neg(h[:, H:D])
    turned[:, H:D] = h[:, 0:H]
    pl.store(pl.addc(pl.mul(h, pl.cos(a)), pl.mul(turned, pl.sin(a)), pl.load(res, [0, 0], [S, D])), [0, 0], out)
    return out


@pl.jit.incore
def causal(scores: pl.Tensor[[S, S], pl.FP32], masked: pl.Out[pl.Tensor[[S, S], pl.FP32]]):
    keep = pl.cmps(pl.tri(0, [S, S], dtype=pl.FP32), 0.5, cmp_type=4)
    sc = pl.minimums(pl.maximums(pl.load(scores, [0, 0], [S, S]), -CLAMP), CLAMP)
    floor = pl.tile.full([S, S], pl.FP32, -CLAMP)
    pl.store(pl.sel(keep, sc, floor, pl.tile.create([1, 32], pl.UINT8)), [0, 0], masked)
    return masked


@pl.jit.incore
def decode(x: pl.Tensor[[S, D], pl.BF16], w: pl.Tensor[[D, D], pl.BF16], row: pl.Out[pl.Tensor[[1, D], pl.FP32]]):
    lo = pl.load(x, [S - 1, 0], [1, H], target_memory=pl.Mem.Mat)
    hi = pl.load(x, [S - 1, H], [1, H], target_memory=pl.Mem.Mat)
    acc = pl.gemv(lo, pl.load(w, [0, 0], [H, D], target_memory=pl.Mem.Mat), acc_phase="partial")
    acc = pl.gemv_acc(acc, hi, pl.load(w, [H, 0], [H, D], target_memory=pl.Mem.Mat), acc_phase="final")
    pl.store(acc, [0, 0], row)
    return row


@pl.jit.incore
def pad_tail(tail: pl.Tensor[[TR, TC], pl.FP32], padded: pl.Out[pl.Tensor[[TR, D], pl.FP32]]):
    part = pl.load(tail, [0, 0], [TR, TC], valid_shape=[VR, VC])
    pl.store(pl.fillpad_expand(part, [TR, D], pad_value=-math.inf), [0, 0], padded)
    return padded


@pl.jit.incore
def chunk_sum(x: pl.Tensor[[S, D], pl.FP32], count: pl.Tensor[[1, 8], pl.INT32],
              total: pl.Out[pl.Tensor[[CH, D], pl.FP32]]):
    n = pl.read(count, [0, 0])
    for (i, acc) in pl.while_(init_values=(0, pl.tile.full([CH, D], pl.FP32, 0.0))):
        pl.cond(i < n)
        _i_next, acc_next = pl.yield_(i + 1, pl.add(acc, pl.load(x, [i * CH, 0], [CH, D])))
    pl.store(acc_next, [0, 0], total)
    return total


@pl.jit
def step(x: pl.Tensor[[S, D], pl.BF16], w: pl.Tensor[[D, D], pl.BF16], bias: pl.Tensor[[1, D], pl.FP32],
         ang: pl.Tensor[[S, D], pl.FP32], res: pl.Tensor[[S, D], pl.FP32], scores: pl.Tensor[[S, S], pl.FP32],
         tail: pl.Tensor[[TR, TC], pl.FP32], count: pl.Tensor[[1, 8], pl.INT32],
         proj: pl.Out[pl.Tensor[[S, D], pl.FP32]], out: pl.Out[pl.Tensor[[S, D], pl.FP32]],
         masked: pl.Out[pl.Tensor[[S, S], pl.FP32]], row: pl.Out[pl.Tensor[[1, D], pl.FP32]],
         padded: pl.Out[pl.Tensor[[TR, D], pl.FP32]], total: pl.Out[pl.Tensor[[CH, D], pl.FP32]],
         scaled: pl.Out[pl.Tensor[[S, D], pl.FP32]]):
    proj = project(x, w, bias, proj)
    out = rope(proj, ang, res, out)
    masked = causal(scores, masked)
    row = decode(x, w, row)
    padded = pad_tail(tail, padded)
    total = chunk_sum(res, count, total)
    with pl.spmd(BLOCKS):
        for r in pl.range(pl.get_block_idx(), S, pl.get_block_num()):
            scaled[r:r + 1, :] = pl.mul(res[r:r + 1, :], 2.0)
    return scaled


def _dot(a, b, start=None):
    """Each cell: the exact dot product (plus ``start``), rounded once to FP32."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    first = np.zeros((a.shape[0], b.shape[1])) if start is None else start.astype(np.float64)
    return np.array([[math.fsum([*(a[i] * b[:, j]), first[i, j]]) for j in range(b.shape[1])]
                     for i in range(a.shape[0])]).astype(np.float32)


def test_decoder_step_with_pl_level_names():
    rng = np.random.default_rng(29)
    x = rng.standard_normal((S, D)).astype(ml_dtypes.bfloat16)
    w = (rng.standard_normal((D, D)) / 4).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal((1, D)).astype(np.float32)
    ang = rng.uniform(-math.pi, math.pi, (S, D)).astype(np.float32)
    res = rng.standard_normal((S, D)).astype(np.float32)
    scores = (rng.standard_normal((S, S)) * 20).astype(np.float32)
    tail = rng.standard_normal((TR, TC)).astype(np.float32)
    count = np.zeros((1, 8), np.int32)
    count[0, 0] = 3
    outs = [np.zeros((S, D), np.float32), np.zeros((S, D), np.float32), np.zeros((S, S), np.float32),
            np.zeros((1, D), np.float32), np.zeros((TR, D), np.float32), np.zeros((CH, D), np.float32),
            np.zeros((S, D), np.float32)]
    step(x, w, bias, ang, res, scores, tail, count, *outs)
    proj, out, masked, row, padded, total, scaled = outs
    np.testing.assert_array_equal(proj, _dot(x, w, np.repeat(bias, S, 0)))
    turned = np.concatenate([-proj[:, H:], proj[:, :H]], axis=1)
    np.testing.assert_allclose(out, proj * np.cos(ang) + turned * np.sin(ang) + res, rtol=1e-5, atol=1e-5)
    want = np.where(np.tril(np.ones((S, S))) > 0.5, np.clip(scores, -CLAMP, CLAMP), np.float32(-CLAMP))
    np.testing.assert_array_equal(masked, want)
    half = _dot(x[S - 1:, :H], w[:H])
    np.testing.assert_array_equal(row, _dot(x[S - 1:, H:], w[H:], half))  # two roundings: gemv, then gemv_acc
    want_pad = np.full((TR, D), -np.inf, np.float32)
    want_pad[:VR, :VC] = tail[:VR, :VC]
    np.testing.assert_array_equal(padded, want_pad)
    acc = np.zeros((CH, D), np.float32)
    for i in range(3):
        acc = acc + res[i * CH:(i + 1) * CH]
    np.testing.assert_array_equal(total, acc)
    np.testing.assert_array_equal(scaled, res * np.float32(2))
