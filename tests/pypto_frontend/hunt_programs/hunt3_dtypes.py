"""element dtypes beyond FP32 at the tensor level in one pl.at task: FP16 add / mul / exp / sqrt(abs) /
maximum with a float scalar, BF16 mul-by-scalar then sub (each op rounded to BF16), recip, row_expand_mul by
a BF16 row_max; INT16 mul (wraps), div by a tile (truncates toward zero), sub of an int scalar, minimum, abs;
INT32 mul by 65537 (wraps), col_expand_sub of a col_max; UINT8 -> FP16 -> INT32 (a2a3 has no direct UINT8 ->
INT32 cast: pldemu refuses it as pypto's LegalizeTileCast does); row_sum of FP16 / BF16 / INT32 and row_min of
INT16, cast to FP32 for the output."""
import ml_dtypes
import numpy as np
import pypto.language as pl

R, C = 8, 32

@pl.jit
def orch(h: pl.Tensor[[R, C], pl.FP16], b: pl.Tensor[[R, C], pl.BF16], i16: pl.Tensor[[R, C], pl.INT16],
         i32: pl.Tensor[[R, C], pl.INT32], u8: pl.Tensor[[R, C], pl.UINT8],
         oh: pl.Out[pl.Tensor[[4, R, C], pl.FP16]], ob: pl.Out[pl.Tensor[[3, R, C], pl.BF16]],
         oi: pl.Out[pl.Tensor[[4, R, C], pl.INT16]], o32: pl.Out[pl.Tensor[[3, R, C], pl.INT32]],
         rs: pl.Out[pl.Tensor[[R, 4], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="dt"):
        ht = h[:, :]
        oh[0, :, :] = pl.mul(pl.add(ht, ht), ht)
        oh[1, :, :] = pl.exp(ht)
        oh[2, :, :] = pl.sqrt(pl.abs(ht))
        oh[3, :, :] = pl.maximum(pl.neg(ht), 0.5)
        bt = b[:, :]
        ob[0, :, :] = pl.sub(pl.mul(bt, 3.0), bt)
        ob[1, :, :] = pl.recip(pl.add(pl.abs(bt), 1.0))
        ob[2, :, :] = pl.row_expand_mul(bt, pl.row_max(bt))
        it = i16[:, :]
        oi[0, :, :] = pl.mul(it, it)
        oi[1, :, :] = pl.div(it, pl.add(pl.abs(it), 1))
        oi[2, :, :] = pl.minimum(pl.sub(it, 7), it)
        oi[3, :, :] = pl.abs(it)
        jt = i32[:, :]
        o32[0, :, :] = pl.mul(jt, 65537)
        o32[1, :, :] = pl.cast(pl.cast(u8[:, :], pl.FP16, mode="none"), pl.INT32, mode="rint")
        o32[2, :, :] = pl.col_expand_sub(jt, pl.col_max(jt))
        rs[:, 0:1] = pl.cast(pl.row_sum(ht), pl.FP32)
        rs[:, 1:2] = pl.cast(pl.row_sum(bt), pl.FP32)
        rs[:, 2:3] = pl.cast(pl.row_sum(jt), pl.FP32)
        rs[:, 3:4] = pl.cast(pl.row_min(it), pl.FP32)
    return rs

def test_tensor_level_dtypes():
    rng = np.random.default_rng(1)
    bf = ml_dtypes.bfloat16
    h = (rng.standard_normal((R, C)) * 2).astype(np.float16)
    b = (rng.standard_normal((R, C)) * 2).astype(bf)
    i16 = rng.integers(-300, 300, (R, C)).astype(np.int16)
    i32 = rng.integers(-2**20, 2**20, (R, C)).astype(np.int32)
    u8 = rng.integers(0, 256, (R, C)).astype(np.uint8)
    oh, ob, oi = np.zeros((4, R, C), np.float16), np.zeros((3, R, C), bf), np.zeros((4, R, C), np.int16)
    o32, rs = np.zeros((3, R, C), np.int32), np.zeros((R, 4), np.float32)
    orch(h, b, i16, i32, u8, oh, ob, oi, o32, rs)
    f = np.float32
    np.testing.assert_array_equal(oh[0], (h + h) * h)
    np.testing.assert_allclose(oh[1].astype(f), np.exp(h.astype(f)).astype(np.float16).astype(f), rtol=2e-3)
    np.testing.assert_array_equal(oh[2], np.sqrt(np.abs(h).astype(f)).astype(np.float16))
    np.testing.assert_array_equal(oh[3], np.maximum(-h, np.float16(0.5)))
    bb = b.astype(f)
    np.testing.assert_array_equal(ob[0].astype(f), (((bb * 3).astype(bf).astype(f)) - bb).astype(bf).astype(f))
    np.testing.assert_array_equal(ob[1].astype(f), (1 / (np.abs(bb) + 1).astype(bf).astype(f)).astype(bf).astype(f))
    np.testing.assert_array_equal(ob[2].astype(f), (bb * bb.max(1, keepdims=True)).astype(bf).astype(f))
    i = i16.astype(np.int32)
    np.testing.assert_array_equal(oi[0], (i * i).astype(np.int16))
    np.testing.assert_array_equal(oi[1], np.trunc(i / (np.abs(i) + 1)).astype(np.int16))
    np.testing.assert_array_equal(oi[2], np.minimum(i - 7, i).astype(np.int16))
    np.testing.assert_array_equal(oi[3], np.abs(i).astype(np.int16))
    np.testing.assert_array_equal(o32[0], (i32.astype(np.int64) * 65537).astype(np.int32))
    np.testing.assert_array_equal(o32[1], u8.astype(np.int32))
    np.testing.assert_array_equal(o32[2], i32 - i32.max(0, keepdims=True))
    np.testing.assert_allclose(rs[:, 0], h.astype(f).sum(1), rtol=5e-3, atol=5e-2)
    np.testing.assert_allclose(rs[:, 1], bb.sum(1), rtol=2e-2, atol=2e-1)
    np.testing.assert_array_equal(rs[:, 2], i32.sum(1).astype(f))
    np.testing.assert_array_equal(rs[:, 3], i16.min(1).astype(f))
