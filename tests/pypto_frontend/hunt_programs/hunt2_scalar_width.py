"""arithmetic where the width matters, in a kernel: INT32 scalars read from a tensor whose sum overflows (the
device's i32 add wraps) deciding a run-time `if`; INT64 slot ids beyond 2^32 split by // and % into block and
offset, their square overflowing INT64, a cast to INT32 truncating the high bits; an FP32 scalar carried
through a pl.range that takes 2^-24 off a negative step each trip (rounded to FP32 every time, so it never
moves off 1.0) deciding an `if`; INT8 tiles added and multiplied by scalars (wrap-around); a UINT32 arange
across 2^32 plus a scalar; INT64 tiles doubled and tripled near 2^63; everything written back with pl.write /
pl.store."""
import numpy as np
import pypto.language as pl

C = 32


@pl.jit.incore
def kern(i32: pl.Tensor[[1, 8], pl.INT32], i64: pl.Tensor[[1, 8], pl.INT64], f32: pl.Tensor[[1, 8], pl.FP32], a8: pl.Tensor[[2, C], pl.INT8],
         b8: pl.Tensor[[2, C], pl.INT8], t64: pl.Tensor[[2, 8], pl.INT64],
         flags: pl.Out[pl.Tensor[[1, 8], pl.INT32]], slots: pl.Out[pl.Tensor[[4, 8], pl.INT64]],
         low: pl.Out[pl.Tensor[[1, 8], pl.INT32]], o8: pl.Out[pl.Tensor[[3, C], pl.INT8]],
         ou: pl.Out[pl.Tensor[[1, C], pl.UINT32]], o64: pl.Out[pl.Tensor[[2, 8], pl.INT64]]):
    a = pl.read(i32, [0, 0])
    b = pl.read(i32, [0, 1])
    s = a + b
    if s < 0:
        pl.write(flags, [0, 0], 1)
    else:
        pl.write(flags, [0, 0], 0)
    pl.write(flags, [0, 1], s)
    d = a - b
    pl.write(flags, [0, 2], d)
    for i in pl.range(4):
        v = pl.read(i64, [0, i])
        blk = v // 4096
        off = v % 4096
        pl.write(slots, [0, i], blk)
        pl.write(slots, [1, i], off)
        sq = v * v
        pl.write(slots, [2, i], sq)
        if sq < 0:
            pl.write(slots, [3, i], 1)
        else:
            pl.write(slots, [3, i], 0)
        pl.write(low, [0, i], pl.cast(v, pl.INT32))
    f0 = pl.read(f32, [0, 0])
    for _k, (acc,) in pl.range(8, init_values=(f0,)):
        nacc = pl.yield_(acc - pl.read(f32, [0, 1]))
    if nacc > f0:
        pl.write(flags, [0, 3], 1)
    else:
        pl.write(flags, [0, 3], 2)
    x = pl.load(a8, [0, 0], [2, C])
    y = pl.load(b8, [0, 0], [2, C])
    pl.store(pl.add(x, y), [0, 0], o8)
    pl.store(pl.slice(pl.mul(x, 3), [1, C], [0, 0]), [2, 0], o8)
    u = pl.arange(4294967290, [1, C], dtype=pl.UINT32)
    pl.store(pl.add(u, 3), [0, 0], ou)
    t = pl.load(t64, [0, 0], [2, 8])
    pl.store(pl.add(pl.add(t, t), pl.mul(t, 3)), [0, 0], o64)
    return flags


@pl.jit
def ints(i32: pl.Tensor[[1, 8], pl.INT32], i64: pl.Tensor[[1, 8], pl.INT64], f32: pl.Tensor[[1, 8], pl.FP32], a8: pl.Tensor[[2, C], pl.INT8],
         b8: pl.Tensor[[2, C], pl.INT8], t64: pl.Tensor[[2, 8], pl.INT64],
         flags: pl.Out[pl.Tensor[[1, 8], pl.INT32]], slots: pl.Out[pl.Tensor[[4, 8], pl.INT64]],
         low: pl.Out[pl.Tensor[[1, 8], pl.INT32]], o8: pl.Out[pl.Tensor[[3, C], pl.INT8]],
         ou: pl.Out[pl.Tensor[[1, C], pl.UINT32]], o64: pl.Out[pl.Tensor[[2, 8], pl.INT64]]):
    return kern(i32, i64, f32, a8, b8, t64, flags, slots, low, o8, ou, o64)


def wrap(v, dtype):
    bits = np.iinfo(dtype).bits
    v = int(v) % (1 << bits)
    if np.iinfo(dtype).min < 0 and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def test_integer_wrap_around():
    rng = np.random.default_rng(24)
    i32 = np.zeros((1, 8), np.int32)
    i32[0, :2] = [2_000_000_000, 1_500_000_000]
    i64 = np.zeros((1, 8), np.int64)
    i64[0, :4] = [6_000_000_123, 4097, 3_037_000_499, 3_037_000_500]  # the last squared passes 2^63
    a8 = rng.integers(-128, 128, (2, C)).astype(np.int8)
    b8 = rng.integers(-128, 128, (2, C)).astype(np.int8)
    t64 = rng.integers(-(1 << 62), 1 << 62, (2, 8)).astype(np.int64)
    f32 = np.zeros((1, 8), np.float32)
    f32[0, :2] = [1.0, -(2.0 ** -24)]
    outs = dict(flags=np.full((1, 8), 5, np.int32), slots=np.zeros((4, 8), np.int64), low=np.zeros((1, 8), np.int32),
                o8=np.zeros((3, C), np.int8), ou=np.zeros((1, C), np.uint32), o64=np.zeros((2, 8), np.int64))
    ints(i32, i64, f32, a8, b8, t64, *outs.values())
    s = wrap(2_000_000_000 + 1_500_000_000, np.int32)
    want_flags = np.full((1, 8), 5, np.int32)
    want_flags[0, :4] = [1 if s < 0 else 0, s, 500_000_000, 2]  # 1 + 2^-24 is 1 in FP32, every trip
    np.testing.assert_array_equal(outs["flags"], want_flags)
    slots = np.zeros((4, 8), np.int64)
    for i in range(4):
        v = int(i64[0, i])
        sq = wrap(v * v, np.int64)
        slots[:, i] = [v // 4096, v % 4096, sq, 1 if sq < 0 else 0]
    np.testing.assert_array_equal(outs["slots"], slots)
    low = np.zeros((1, 8), np.int32)
    low[0, :4] = [wrap(int(v), np.int32) for v in i64[0, :4]]
    np.testing.assert_array_equal(outs["low"], low)
    o8 = np.concatenate([(a8.astype(np.int64) + b8).astype(np.int8), (a8[:1].astype(np.int64) * 3).astype(np.int8)])
    np.testing.assert_array_equal(outs["o8"], o8)
    np.testing.assert_array_equal(outs["ou"][0], [(4294967290 + k + 3) % (1 << 32) for k in range(C)])
    o64 = np.array([[wrap(5 * int(v), np.int64) for v in row] for row in t64], np.int64)
    np.testing.assert_array_equal(outs["o64"], o64)
