"""a ragged feature pipeline in one kernel: a running max / sum over column blocks whose last block is ragged
(pl.part_max / pl.part_add keep the running value's cells where the ragged block has none), ring positions
folded with pl.tile.rems (negative positions land in [0, P), as Python's %), pl.lrelu then pl.tile.prelu with a
per-cell slope, and pl.tile.sels capping the activations."""
import numpy as np
import pypto.language as pl

R = 8
C = 32
B = 4  # column blocks; the last one is ragged
TAIL = 20
P = 10
CAP = 4.0


@pl.jit.incore
def kern(x: pl.Tensor[[R, B * C], pl.FP32], pos: pl.Tensor[[R, C], pl.INT32], slope: pl.Tensor[[R, C], pl.FP32],
         run_max: pl.Out[pl.Tensor[[R, C], pl.FP32]], run_sum: pl.Out[pl.Tensor[[R, C], pl.FP32]],
         ring: pl.Out[pl.Tensor[[R, C], pl.INT32]], act: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    mx = pl.load(x, [0, 0], [R, C])
    sm = pl.load(x, [0, 0], [R, C])
    for blk in pl.range(1, B - 1):
        cur = pl.load(x, [0, blk * C], [R, C])
        mx = pl.part_max(mx, cur)
        sm = pl.part_add(sm, cur)
    tail = pl.load(x, [0, (B - 1) * C], [R, C], valid_shape=[R, TAIL])
    mx = pl.tile.part_max(mx, tail)
    sm = pl.tile.part_add(sm, tail)
    pl.store(mx, [0, 0], run_max)
    pl.store(sm, [0, 0], run_sum)
    p = pl.load(pos, [0, 0], [R, C])
    pl.store(pl.tile.rems(p, P, pl.tile.create([1, C + 2], pl.INT32)), [0, 0], ring)
    h = pl.lrelu(sm, 0.125)
    h = pl.tile.prelu(h, pl.load(slope, [0, 0], [R, C]), pl.tile.create([R + 1, 32], pl.UINT8))
    keep = pl.tile.cmps(h, CAP, cmp_type=3)  # h <= CAP
    pl.store(pl.tile.sels(keep, h, pl.tile.create([1, C], pl.FP32), CAP), [0, 0], act)
    return act


@pl.jit
def orch(x: pl.Tensor[[R, B * C], pl.FP32], pos: pl.Tensor[[R, C], pl.INT32], slope: pl.Tensor[[R, C], pl.FP32],
         run_max: pl.Out[pl.Tensor[[R, C], pl.FP32]], run_sum: pl.Out[pl.Tensor[[R, C], pl.FP32]],
         ring: pl.Out[pl.Tensor[[R, C], pl.INT32]], act: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    return kern(x, pos, slope, run_max, run_sum, ring, act)


def test_ragged_running_max_sum_ring_and_activation():
    rng = np.random.default_rng(41)
    x = rng.standard_normal((R, B * C)).astype(np.float32) * np.float32(3)
    pos = rng.integers(-500, 500, (R, C)).astype(np.int32)
    slope = rng.uniform(0.0, 0.5, (R, C)).astype(np.float32)
    outs = [np.zeros((R, C), np.float32), np.zeros((R, C), np.float32), np.zeros((R, C), np.int32),
            np.zeros((R, C), np.float32)]
    orch(x, pos, slope, *outs)
    blocks = [x[:, b * C:(b + 1) * C] for b in range(B)]
    mx, sm = blocks[0].copy(), blocks[0].copy()
    for blk in blocks[1:B - 1]:
        mx, sm = np.maximum(mx, blk), sm + blk  # float32 steps, in the kernel's order
    mx[:, :TAIL] = np.maximum(mx[:, :TAIL], blocks[-1][:, :TAIL])
    sm[:, :TAIL] = sm[:, :TAIL] + blocks[-1][:, :TAIL]
    h = np.where(sm > 0, sm, sm * np.float32(0.125))
    h = np.where(h > 0, h, h * slope)
    want = [mx, sm, np.array([[int(v) % P for v in row] for row in pos], np.int32),
            np.where(h <= CAP, h, np.float32(CAP))]
    for got, w, name in zip(outs, want, ("run_max", "run_sum", "ring", "act"), strict=True):
        np.testing.assert_array_equal(got, w, err_msg=name)
