"""loop carries beyond one tile: (1) a split-K chain in one pl.at task started by pl.matmul on the first K
chunk and carried by pl.range(1, n, init_values=(acc, colmax, count)) with pl.matmul_acc, a running column
max of each chunk's product and an INT32 counter, all re-bound by one pl.yield_; (2) a ping-pong of two
orchestration tensors across pl.at tasks, alternated by the step's parity around an inline stencil (pypto's IR would swap buffers carried by pl.range
with pl.yield_(nxt, cur); pldemu refuses that), the result picked by a pl.yield_ in each branch of an `if` (the
if's phi); (3) a loop whose tile and INT32 carries take their next values from pl.yield_ phis of an `if`
(one branch's INT32 read from a tensor the chain wrote)."""
import numpy as np
import pypto.language as pl

T = 16
K = 96
KC = 32
N = 32
R = 8
C = 32
STEPS = 5


@pl.jit.inline
def stencil(cur: pl.Tensor[[R, C], pl.FP32], nxt: pl.Tensor[[R, C], pl.FP32]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="step"):
        up = pl.add(pl.mul(cur[:, :], 0.5), 1.0)
        nxt[:, :] = up
        nxt[1:R, :] = pl.add(pl.mul(cur[0:R - 1, :], 0.25), up[1:R, :])
    return nxt


@pl.jit
def carries(x: pl.Tensor[[T, K], pl.FP32], w: pl.Tensor[[K, N], pl.FP32], y: pl.Out[pl.Tensor[[T, N], pl.FP32]],
            cm: pl.Out[pl.Tensor[[1, N], pl.FP32]], cnt: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
            a: pl.Tensor[[R, C], pl.FP32], out: pl.Out[pl.Tensor[[R, C], pl.FP32]],
            ph: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="chain"):
        acc0 = pl.matmul(x[:, 0:KC], w[0:KC, :], out_dtype=pl.FP32)
        m0 = pl.col_max(acc0)
        c0 = pl.const(1, pl.INT32)
        for kb, (acc, m, c) in pl.range(1, K // KC, init_values=(acc0, m0, c0)):
            k0 = kb * KC
            prod = pl.matmul(x[:, k0:k0 + KC], w[k0:k0 + KC, :], out_dtype=pl.FP32)
            acc2 = pl.matmul_acc(acc, x[:, k0:k0 + KC], w[k0:k0 + KC, :])
            accf, mf, cf = pl.yield_(acc2, pl.maximum(m, pl.col_max(prod)), c + pl.const(1, pl.INT32))
        y[:, :] = accf
        cm[:, :] = mf
        pl.write(cnt, [0, 0], cf)
    p = pl.create_tensor([R, C], dtype=pl.FP32)
    q = pl.create_tensor([R, C], dtype=pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="seed"):
        p[:, :] = a[:, :]
    for st in pl.range(STEPS):
        if st % 2 == 0:
            stencil(p, q)
        else:
            stencil(q, p)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="final"):
        if STEPS % 2 == 1:  # noqa: SIM108 (an IfStmt with a yield per branch: the if's phi)
            res = pl.yield_(q[:, :])
        else:
            res = pl.yield_(p[:, :])
        out[:, :] = res
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="phis"):
        t0 = a[:, :]
        for i, (acc, tot) in pl.range(4, init_values=(t0, pl.const(0, pl.INT32))):
            if i % 2 == 0:
                f, inc = pl.yield_(pl.mul(acc, 0.5), pl.const(3, pl.INT32))
            else:
                f, inc = pl.yield_(pl.add(acc, 1.0), pl.read(cnt, [0, 0]))
            accn, tot2 = pl.yield_(f, tot + inc)
        ph[:, :] = accn
        pl.write(cnt, [0, 1], tot2)
    return y


def test_carried_chains_and_ping_pong():
    rng = np.random.default_rng(34)
    x = rng.standard_normal((T, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    a = rng.standard_normal((R, C)).astype(np.float32)
    y = np.zeros((T, N), np.float32)
    cm = np.zeros((1, N), np.float32)
    cnt = np.zeros((1, 8), np.int32)
    out = np.zeros((R, C), np.float32)
    ph = np.zeros((R, C), np.float32)
    carries(x, w, y, cm, cnt, a, out, ph)
    xd, wd = x.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(y, xd @ wd, rtol=1e-5, atol=1e-4)
    chunks = [xd[:, k:k + KC] @ wd[k:k + KC] for k in range(0, K, KC)]
    np.testing.assert_allclose(cm[0], np.max([c.max(0) for c in chunks], 0), rtol=1e-5, atol=1e-5)
    assert list(cnt[0, :2]) == [K // KC, 3 + K // KC + 3 + K // KC]
    acc = a.copy()
    for i in range(4):
        acc = acc * np.float32(0.5) if i % 2 == 0 else acc + np.float32(1.0)
    np.testing.assert_array_equal(ph, acc)
    cur = a.astype(np.float32)
    for _ in range(STEPS):
        up = cur * np.float32(0.5) + np.float32(1.0)
        nxt = up.copy()
        nxt[1:] = cur[:-1] * np.float32(0.25) + up[1:]
        cur = nxt
    np.testing.assert_allclose(out, cur, rtol=1e-6)
