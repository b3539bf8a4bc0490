"""comparisons and selections at both levels: tensor-level pl.cmp in all six modes on FP32 and on INT32
(0 / 1 results in lhs's dtype, cast to INT32 as pypto-lib does), a where(x > y, x, y * 2) built from pl.cmp
masks arithmetic, tile-level pl.tile.cmps / pl.tile.cmp masks feeding pl.tile.sel and pl.tile.sels (a UINT8
scratch), a clamp by pl.maximums / pl.minimums on an FP16 tile, and pl.full in FP32 / INT32 / FP16 / BF16 /
INT8 added to each input (the literal converted once to the dtype)."""
import ml_dtypes
import numpy as np
import pypto.language as pl

R, C = 8, 32


@pl.jit
def cmpsel(x: pl.Tensor[[R, C], pl.FP32], y: pl.Tensor[[R, C], pl.FP32], a: pl.Tensor[[R, C], pl.INT32],
           h: pl.Tensor[[R, C], pl.FP16], b16: pl.Tensor[[R, C], pl.BF16], i8: pl.Tensor[[R, C], pl.INT8],
           cm: pl.Out[pl.Tensor[[12, R, C], pl.INT32]], wh: pl.Out[pl.Tensor[[3, R, C], pl.FP32]],
           hc: pl.Out[pl.Tensor[[R, C], pl.FP16]], fb: pl.Out[pl.Tensor[[R, C], pl.BF16]],
           f8: pl.Out[pl.Tensor[[R, C], pl.INT8]], fi: pl.Out[pl.Tensor[[R, C], pl.INT32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="cmp"):
        for m in pl.unroll(6):
            cm[m, :, :] = pl.cast(pl.cmp(x[:, :], y[:, :], cmp_type=m), pl.INT32, mode="round")
            cm[m + 6, :, :] = pl.cmp(a[:, :], 3, cmp_type=m)
        gt = pl.cmp(x[:, :], y[:, :], cmp_type=4)
        wh[0, :, :] = pl.add(pl.mul(gt, x[:, :]), pl.mul(pl.add(pl.neg(gt), 1.0),
                                                                pl.mul(y[:, :], 2.0)))
        hc[:, :] = pl.minimum(pl.maximum(pl.mul(h[:, :], 3.0), -2.5), 2.5)
        fb[:, :] = pl.add(b16[:, :], pl.full([R, C], pl.BF16, 0.1))
        f8[:, :] = pl.add(i8[:, :], pl.full([R, C], pl.INT8, 100))
        fi[:, :] = pl.add(a[:, :], pl.full([R, C], pl.INT32, -7))
    wh = tile_sel(x, y, wh)
    return wh


@pl.jit.incore
def tile_sel(x: pl.Tensor[[R, C], pl.FP32], y: pl.Tensor[[R, C], pl.FP32],
             wh: pl.InOut[pl.Tensor[[3, R, C], pl.FP32]]):
    xt = pl.load(x, [0, 0], [R, C])
    yt = pl.load(y, [0, 0], [R, C])
    tmp = pl.tile.create([1, 32], pl.UINT8)
    neg = pl.tile.cmps(xt, 0.0, cmp_type=2)
    s1 = pl.tile.sel(neg, pl.neg(xt), xt, tmp)
    le = pl.tile.cmp(xt, yt, cmp_type=3)
    s2 = pl.tile.sels(le, yt, tmp, -1.0)
    wh = pl.assemble(wh, pl.reshape(s1, [1, R, C]), [1, 0, 0])
    wh = pl.assemble(wh, pl.reshape(s2, [1, R, C]), [2, 0, 0])
    return wh


def test_cmp_and_select():
    rng = np.random.default_rng(61)
    bf = ml_dtypes.bfloat16
    x = rng.integers(-4, 5, (R, C)).astype(np.float32)
    y = rng.integers(-4, 5, (R, C)).astype(np.float32)
    a = rng.integers(0, 7, (R, C)).astype(np.int32)
    h = rng.standard_normal((R, C)).astype(np.float16)
    b16 = rng.standard_normal((R, C)).astype(bf)
    i8 = rng.integers(-128, 128, (R, C)).astype(np.int8)
    cm, wh = np.zeros((12, R, C), np.int32), np.zeros((3, R, C), np.float32)
    hc, fb = np.zeros((R, C), np.float16), np.zeros((R, C), bf)
    f8, fi = np.zeros((R, C), np.int8), np.zeros((R, C), np.int32)
    cmpsel(x, y, a, h, b16, i8, cm, wh, hc, fb, f8, fi)
    ops = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]
    for m, op in enumerate(ops):
        np.testing.assert_array_equal(cm[m], op(x, y).astype(np.int32), err_msg=f"fp32 cmp {m}")
        np.testing.assert_array_equal(cm[m + 6], op(a, 3).astype(np.int32), err_msg=f"int32 cmp {m}")
    np.testing.assert_array_equal(wh[0], np.where(x > y, x, y * 2))
    np.testing.assert_array_equal(wh[1], np.abs(x))
    np.testing.assert_array_equal(wh[2], np.where(x <= y, y, np.float32(-1.0)))
    np.testing.assert_array_equal(hc, np.clip(h * np.float16(3.0), np.float16(-2.5), np.float16(2.5)))
    np.testing.assert_array_equal(fb.astype(np.float32),
                                  (b16.astype(np.float32) + np.float32(bf(0.1))).astype(bf).astype(np.float32))
    np.testing.assert_array_equal(f8, (i8.astype(np.int32) + 100).astype(np.int8))
    np.testing.assert_array_equal(fi, a - 7)
