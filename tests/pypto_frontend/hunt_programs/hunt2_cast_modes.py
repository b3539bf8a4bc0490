"""casts in every rounding mode, where the device's chains round twice: FP32 -> BF16 (native) in rint, round,
floor, ceil, trunc and odd, by name and by number, on values at and next to BF16 ties; FP32 -> INT8 (a2a3's
chain FP32 -> FP16 -> INT8, each hop in the mode: 2.5 + 2^-12 becomes 2 under rint, not 3); INT32 -> BF16
(INT32 -> FP32 -> BF16) on integers past 2^24; BF16 -> INT32 floor / ceil; and the tensor / tile spellings
(pl.tensor.cast, pl.tile.cast of a pl.load) in a pl.at task and an InCore kernel. Goldens are exact:
Fractions rounded hop by hop."""
from fractions import Fraction

import ml_dtypes
import numpy as np
import pypto.language as pl

N = 32
MODES = ["rint", "round", "floor", "ceil", "trunc"]
MODE_NO = {"none": 0, "rint": 1, "round": 2, "floor": 3, "ceil": 4, "trunc": 5, "odd": 6}


@pl.jit.incore
def tile_casts(xb: pl.Tensor[[2, N], pl.BF16], bi: pl.Out[pl.Tensor[[2, 2, N], pl.INT32]]):
    t = pl.load(xb, [0, 0], [2, N])
    bi = pl.assemble(bi, pl.reshape(pl.tile.cast(t, pl.INT32, mode="floor"), [1, 2, N]), [0, 0, 0])
    bi = pl.assemble(bi, pl.reshape(pl.tile.cast(t, pl.INT32, mode=4), [1, 2, N]), [1, 0, 0])
    return bi


@pl.jit
def casts(x: pl.Tensor[[2, N], pl.FP32], xi: pl.Tensor[[1, N], pl.INT32], xb: pl.Tensor[[2, N], pl.BF16],
          ob: pl.Out[pl.Tensor[[6, 2, N], pl.BF16]], o8: pl.Out[pl.Tensor[[5, 2, N], pl.INT8]],
          oi: pl.Out[pl.Tensor[[5, 1, N], pl.BF16]], bi: pl.Out[pl.Tensor[[2, 2, N], pl.INT32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="casts"):
        xt = x[:, :]
        ob[0:1, :, :] = pl.reshape(pl.cast(xt, target_type=pl.BF16, mode="rint"), [1, 2, N])
        ob[1:2, :, :] = pl.reshape(pl.cast(xt, target_type=pl.BF16, mode=MODE_NO["round"]), [1, 2, N])
        ob[2:3, :, :] = pl.reshape(pl.tensor.cast(xt, pl.BF16, mode="floor"), [1, 2, N])
        ob[3:4, :, :] = pl.reshape(pl.cast(xt, pl.BF16, "ceil"), [1, 2, N])
        ob[4:5, :, :] = pl.reshape(pl.cast(xt, target_type=pl.BF16, mode=5), [1, 2, N])
        ob[5:6, :, :] = pl.reshape(pl.cast(xt, target_type=pl.BF16, mode="odd"), [1, 2, N])
        for mi in pl.unroll(5):
            o8[mi:mi + 1, :, :] = pl.reshape(pl.cast(xt, target_type=pl.INT8, mode=mi + 1), [1, 2, N])
            oi[mi:mi + 1, :, :] = pl.reshape(pl.cast(xi[:, :], target_type=pl.BF16, mode=mi + 1), [1, 1, N])
    bi = tile_casts(xb, bi)
    return ob


def _exponent(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


def rnd(x: Fraction, bits: int | None, mode: str) -> Fraction:
    """x rounded to a float of ``bits`` significant bits (normal range), or to an integer (None)."""
    if x == 0:
        return x
    ulp = Fraction(1) if bits is None else Fraction(2) ** (_exponent(abs(x)) - bits + 1)
    q = x / ulp
    fl = q.numerator // q.denominator
    frac = q - fl
    if frac == 0:
        return x
    up = {"rint": frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2 == 1),
          "round": frac > Fraction(1, 2) or (frac == Fraction(1, 2) and x > 0),
          "floor": False, "ceil": True, "trunc": x < 0, "odd": fl % 2 == 0}[mode]
    return (fl + 1 if up else fl) * ulp


def test_cast_modes_and_chains():
    rng = np.random.default_rng(27)
    bf = ml_dtypes.bfloat16
    x = (rng.standard_normal((2, N)) * 40).astype(np.float32)
    ties = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), -(1 + 3 * 2 ** -8), 2.5 + 2 ** -12, -2.5 - 2 ** -12,
            2.5, -2.5, 3.5, -0.5, 0.0, 100.25, -100.75, 1 + 2 ** -9, 7.5 + 2 ** -11, 96.5 + 2 ** -10]
    x[0, :len(ties)] = ties
    xi = np.zeros((1, N), np.int32)
    xi[0, :8] = [2 ** 24 + 2 ** 16 + 1, 2 ** 24 + 1, -(2 ** 24 + 2 ** 16 + 1), 2 ** 30 + 3, 123457, -7, 0, 2 ** 31 - 1]
    xi[0, 8:] = rng.integers(-2 ** 31, 2 ** 31, N - 8)
    xb = (rng.standard_normal((2, N)) * 20).astype(bf)
    ob = np.zeros((6, 2, N), bf)
    o8 = np.zeros((5, 2, N), np.int8)
    oi = np.zeros((5, 1, N), bf)
    bi = np.zeros((2, 2, N), np.int32)
    casts(x, xi, xb, ob, o8, oi, bi)
    for k, mode in enumerate([*MODES, "odd"]):
        want = [float(rnd(Fraction(float(v)), 8, mode)) for v in x.flat]
        np.testing.assert_array_equal(ob[k].astype(np.float64).ravel(), want, err_msg=f"FP32 -> BF16 {mode}")
    for k, mode in enumerate(MODES):
        w8 = [float(rnd(rnd(Fraction(float(v)), 11, mode), None, mode)) for v in x.flat]
        np.testing.assert_array_equal(o8[k].astype(np.float64).ravel(), np.clip(w8, -128, 127),
                                      err_msg=f"FP32 -> FP16 -> INT8 {mode}")
        wi = [float(rnd(rnd(Fraction(int(v)), 24, mode), 8, mode)) for v in xi.flat]
        np.testing.assert_array_equal(oi[k].astype(np.float64).ravel(), wi, err_msg=f"INT32 -> FP32 -> BF16 {mode}")
    np.testing.assert_array_equal(bi[0], np.floor(xb.astype(np.float64)))
    np.testing.assert_array_equal(bi[1], np.ceil(xb.astype(np.float64)))
