"""loop-carried values at the edges: a zero-trip run-time loop leaving its init, nested pl.range with
an inner carry seeded from the outer one (tile + INDEX scalar), a float scalar read from a tile deciding a
run-time `if` (tiles bound in both branches), `for b in pl.spmd(n)` blocks, a_trans matmul of a valid-shaped
slice, a python-int init_values scalar accumulating INT32 reads."""
import numpy as np
import pypto.language as pl

R = 8
C = 16
NR = pl.dynamic("NR")


@pl.jit
def carries(x: pl.Tensor[[R, C], pl.FP32], n: pl.Tensor[[1, 8], pl.INT32], a: pl.Tensor[[C, R], pl.FP32],
            y0: pl.Out[pl.Tensor[[R, C], pl.FP32]], y1: pl.Out[pl.Tensor[[R, C], pl.FP32]],
            y2: pl.Out[pl.Tensor[[R, C], pl.FP32]], y3: pl.Out[pl.Tensor[[4, C], pl.FP32]],
            y4: pl.Out[pl.Tensor[[R, R], pl.FP32]], s: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="carry"):
        xt = pl.load(x, [0, 0], [R, C])
        zero_trips = pl.read(n, [0, 0])
        for _i, (acc,) in pl.range(zero_trips, init_values=(xt,)):
            acc2 = pl.yield_(pl.mul(acc, 100.0))
        pl.store(acc2, [0, 0], y0)
        outer_n = pl.read(n, [0, 1])
        for o, (ot, cnt) in pl.range(outer_n, init_values=(xt, 0)):
            for _j, (it, c2) in pl.range(o + 1, init_values=(ot, cnt)):
                it2, c3 = pl.yield_(pl.add(it, 1.0), c2 + 1)
            ot2, cnt2 = pl.yield_(pl.mul(it2, 0.5), c3)
        pl.store(ot2, [0, 0], y1)
        v = pl.tile.read(xt, [0, 0])
        if v > 0.0:  # noqa: SIM108 - a run-time branch of the DSL
            z = pl.add(xt, 10.0)
        else:
            z = pl.sub(xt, 10.0)
        pl.store(z, [0, 0], y2)
        tot = 0
        for q, (sacc,) in pl.range(4, init_values=(tot,)):
            sacc2 = pl.yield_(sacc + pl.read(n, [0, q]))
        pl.write(s, [0, 0], pl.cast(sacc2, pl.INT32))
        pl.write(s, [0, 1], pl.cast(cnt2, pl.INT32))
        av = pl.slice(a, [C, R], [0, 0], valid_shape=[C, 5])
        pl.store(pl.matmul(av, pl.load(a, [0, 0], [C, R]), a_trans=True), [0, 0], y4)
    for b in pl.spmd(4, name_hint="rows"):
        rows = x[b * 2:b * 2 + 1, :]
        y3[b:b + 1, :] = pl.mul(rows, pl.cast(pl.cast(b + 1, pl.INT32), pl.FP32))  # no INDEX -> FP32 cast on the core
    return y0


def test_loop_carries_at_the_edges():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((R, C)).astype(np.float32)
    x[0, 0] = -0.5
    n = np.array([[0, 3, 5, 7, 0, 0, 0, 0]], np.int32)
    a = rng.standard_normal((C, R)).astype(np.float32)
    outs = [np.zeros((R, C), np.float32), np.zeros((R, C), np.float32), np.zeros((R, C), np.float32),
            np.zeros((4, C), np.float32), np.full((R, R), 3.0, np.float32), np.zeros((1, 8), np.int32)]
    carries(x, n, a, *outs)
    w1 = x.copy()
    cnt = 0
    for o in range(3):
        for _ in range(o + 1):
            w1 = w1 + np.float32(1.0)
            cnt += 1
        w1 = w1 * np.float32(0.5)
    w4 = np.full((R, R), 3.0)
    w4[:5] = a[:, :5].T.astype(np.float64) @ a
    want = [x, w1, x - np.float32(10.0), np.stack([x[2 * b] * (b + 1) for b in range(4)]), w4]
    for i, wv in enumerate(want):
        np.testing.assert_allclose(outs[i], wv, atol=1e-5, err_msg=f"y{i}")
    assert outs[5][0, :2].tolist() == [15, cnt]
