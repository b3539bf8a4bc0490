"""break / continue, which pypto's CtrlFlowTransform removes (pldemu refused both): a decode-attention kernel
walking KV blocks with an online softmax (running max m, sum l and output o re-bound each block, no
init_values) that `break`s at the run-time block count read from a tensor and `continue`s past blocks a mask
table marks empty; a `while True:` loop counting down a run-time budget with a `break`; and an orchestration
pl.range of pl.at tasks that `continue`s on odd steps."""
import numpy as np
import pypto.language as pl

D = 16
BS = 16
NB = 6


@pl.jit.incore
def decode(q: pl.Tensor[[16, D], pl.FP32], k: pl.Tensor[[NB * BS, D], pl.FP32], v: pl.Tensor[[NB * BS, D], pl.FP32],
           meta: pl.Tensor[[1, 8], pl.INT32], skip: pl.Tensor[[1, 8], pl.INT32],
           out: pl.Out[pl.Tensor[[16, D], pl.FP32]], cnt: pl.Out[pl.Tensor[[1, 8], pl.INT32]]):
    nblk = pl.read(meta, [0, 0])
    qt = q[:, :]
    m = pl.tile.full([16, 1], pl.FP32, -1e30)
    lsum = pl.tile.full([16, 1], pl.FP32, 0.0)
    o = pl.tile.full([16, D], pl.FP32, 0.0)
    seen = pl.const(0, pl.INT32)
    for b in pl.range(NB):
        if b >= nblk:
            break
        if pl.read(skip, [0, b]) != 0:
            continue
        kt = k[b * BS:(b + 1) * BS, :]
        vt = v[b * BS:(b + 1) * BS, :]
        s = pl.mul(pl.matmul(qt, kt, b_trans=True), 0.25)
        mb = pl.row_max(s)
        m_new = pl.maximum(m, mb)
        p = pl.exp(pl.row_expand_sub(s, m_new))
        alpha = pl.exp(pl.sub(m, m_new))
        lsum = pl.add(pl.mul(lsum, alpha), pl.row_sum(p))
        o = pl.add(pl.row_expand_mul(o, alpha), pl.matmul(p, vt))
        m = m_new
        seen = seen + pl.const(1, pl.INT32)
    out = pl.store(pl.row_expand_div(o, lsum), [0, 0], out)
    budget = pl.read(meta, [0, 1])
    steps = pl.const(0, pl.INT32)
    while True:
        if budget <= pl.const(0, pl.INT32):
            break
        budget = budget - pl.const(3, pl.INT32)
        steps = steps + pl.const(1, pl.INT32)
    c = pl.tile.full([1, 8], pl.INT32, 0)
    pl.tile.write(c, [0, 0], seen)
    pl.tile.write(c, [0, 1], steps)
    pl.tile.write(c, [0, 2], budget)
    cnt = pl.store(c, [0, 0], cnt)
    return out


@pl.jit
def orch(q: pl.Tensor[[16, D], pl.FP32], k: pl.Tensor[[NB * BS, D], pl.FP32], v: pl.Tensor[[NB * BS, D], pl.FP32],
         meta: pl.Tensor[[1, 8], pl.INT32], skip: pl.Tensor[[1, 8], pl.INT32],
         out: pl.Out[pl.Tensor[[16, D], pl.FP32]], cnt: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
         rows: pl.InOut[pl.Tensor[[4, D], pl.FP32]]):
    out = decode(q, k, v, meta, skip, out, cnt)
    for i in pl.range(4):
        if i % 2 == 1:
            continue
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="row"):
            rows[i:i + 1, :] = pl.add(out[i:i + 1, :], 1.0)
    return rows


def test_early_exit():
    rng = np.random.default_rng(41)
    f = np.float32
    q = rng.standard_normal((16, D)).astype(f)
    k = rng.standard_normal((NB * BS, D)).astype(f)
    v = rng.standard_normal((NB * BS, D)).astype(f)
    meta = np.array([[5, 10, 0, 0, 0, 0, 0, 0]], np.int32)
    skip = np.array([[0, 1, 0, 0, 1, 0, 0, 0]], np.int32)
    out, cnt, rows = np.zeros((16, D), f), np.zeros((1, 8), np.int32), np.full((4, D), 7.0, f)
    orch(q, k, v, meta, skip, out, cnt, rows)
    used = [b for b in range(5) if not skip[0, b]]
    kk = np.concatenate([k[b * BS:(b + 1) * BS] for b in used]).astype(np.float64)
    vv = np.concatenate([v[b * BS:(b + 1) * BS] for b in used]).astype(np.float64)
    s = q.astype(np.float64) @ kk.T * 0.25
    p = np.exp(s - s.max(1, keepdims=True))
    want = (p @ vv) / p.sum(1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(cnt[0, :3], [len(used), 4, -2])
    wr = np.full((4, D), 7.0, f)
    wr[0], wr[2] = out[0] + 1, out[2] + 1
    np.testing.assert_array_equal(rows, wr)
