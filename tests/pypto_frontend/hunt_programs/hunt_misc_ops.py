"""assorted ops in one kernel: a reverse loop (negative step) carrying a tile and an INT32 scalar,
a_trans matmul, batch matmul [2,M,K] x [K,N], 3-D transpose, tile subscript write, pl.tile.read/write,
FP32 -> INT32 casts in five modes, integer division by a negative scalar, INT8 wrap-around, row/col expands,
maximum/minimum with scalars, pl.unroll with a step."""
import numpy as np
import pypto.language as pl

R = 4
C = 16
M = 8
K = 16
N = 8
NR = pl.dynamic("NR")


@pl.jit.incore
def kern(x: pl.Tensor[[R * 4, C], pl.FP32], a: pl.Tensor[[K, M], pl.FP32], b: pl.Tensor[[K, N], pl.FP32],
         a3: pl.Tensor[[2, M, K], pl.FP32], i8: pl.Tensor[[4, 32], pl.INT8], iv: pl.Tensor[[4, 8], pl.INT32],
         rev: pl.Out[pl.Tensor[[R * 4, C], pl.FP32]], cnt: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
         mt: pl.Out[pl.Tensor[[M, N], pl.FP32]], bm: pl.Out[pl.Tensor[[2, M, N], pl.FP32]],
         tr: pl.Out[pl.Tensor[[K, M, 2], pl.FP32]], casts: pl.Out[pl.Tensor[[5, 4, C], pl.INT32]],
         idiv: pl.Out[pl.Tensor[[4, 8], pl.INT32]], i8o: pl.Out[pl.Tensor[[4, 32], pl.INT8]],
         ex: pl.Out[pl.Tensor[[4, C], pl.FP32]]):
    zero = pl.tile.full([4, C], pl.FP32, 0.0)
    c0 = pl.const(0, pl.INT32)
    for i, (acc, n) in pl.range(R - 1, -1, -1, init_values=(zero, c0)):
        blk = pl.load(x, [i * 4, 0], [4, C])
        acc2 = pl.add(acc, blk)
        pl.store(acc2, [i * 4, 0], rev)
        n2 = pl.cast(n + i, pl.INT32)
        accf, nf = pl.yield_(acc2, n2)
    t = pl.tile.full([1, 8], pl.INT32, 0)
    pl.tile.write(t, [0, 0], nf)
    pl.tile.write(t, [0, 1], pl.tile.read(pl.cast(accf, target_type=pl.INT32, mode="trunc"), [0, 0]))
    pl.store(t, [0, 0], cnt)
    pl.store(pl.matmul(a, b, a_trans=True, out_dtype=pl.FP32), [0, 0], mt)
    bmm = pl.matmul(a3, b, out_dtype=pl.FP32)
    bm = pl.assemble(bm, bmm, [0, 0, 0])
    t3 = pl.transpose(a3, 0, 2)
    tr = pl.assemble(tr, t3, [0, 0, 0])
    src = pl.load(x, [0, 0], [4, C])
    scaled = pl.mul(src, 2.5)
    casts = pl.assemble(casts, pl.reshape(pl.cast(scaled, target_type=pl.INT32, mode="rint"), [1, 4, C]), [0, 0, 0])
    casts = pl.assemble(casts, pl.reshape(pl.cast(scaled, target_type=pl.INT32, mode="round"), [1, 4, C]), [1, 0, 0])
    casts = pl.assemble(casts, pl.reshape(pl.cast(scaled, target_type=pl.INT32, mode="floor"), [1, 4, C]), [2, 0, 0])
    casts = pl.assemble(casts, pl.reshape(pl.cast(scaled, target_type=pl.INT32, mode="ceil"), [1, 4, C]), [3, 0, 0])
    casts = pl.assemble(casts, pl.reshape(pl.cast(scaled, target_type=pl.INT32, mode="trunc"), [1, 4, C]), [4, 0, 0])
    pl.store(pl.div(pl.load(iv, [0, 0], [4, 8]), -3), [0, 0], idiv)
    q = pl.load(i8, [0, 0], [4, 32])
    pl.store(pl.add(pl.mul(q, 3), 100), [0, 0], i8o)
    rv = pl.row_max(src, pl.create_tile([4, C], pl.FP32))
    cv = pl.col_min(src)
    e = pl.col_expand_sub(pl.row_expand_add(src, rv), cv)
    e = pl.maximum(pl.minimum(e, 3.0), -3.0)
    sub = pl.tile.full([2, 8], pl.FP32, 9.0)
    e[1:3, 4:12] = sub
    for u in pl.unroll(0, 4, 2):
        pl.store(pl.slice(e, [2, C], [u, 0]), [u, 0], ex)
    return ex


@pl.jit
def orch(x: pl.Tensor[[R * 4, C], pl.FP32], a: pl.Tensor[[K, M], pl.FP32], b: pl.Tensor[[K, N], pl.FP32],
         a3: pl.Tensor[[2, M, K], pl.FP32], i8: pl.Tensor[[4, 32], pl.INT8], iv: pl.Tensor[[4, 8], pl.INT32],
         rev: pl.Out[pl.Tensor[[R * 4, C], pl.FP32]], cnt: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
         mt: pl.Out[pl.Tensor[[M, N], pl.FP32]], bm: pl.Out[pl.Tensor[[2, M, N], pl.FP32]],
         tr: pl.Out[pl.Tensor[[K, M, 2], pl.FP32]], casts: pl.Out[pl.Tensor[[5, 4, C], pl.INT32]],
         idiv: pl.Out[pl.Tensor[[4, 8], pl.INT32]], i8o: pl.Out[pl.Tensor[[4, 32], pl.INT8]],
         ex: pl.Out[pl.Tensor[[4, C], pl.FP32]]):
    return kern(x, a, b, a3, i8, iv, rev, cnt, mt, bm, tr, casts, idiv, i8o, ex)


def test_assorted_ops():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((R * 4, C)).astype(np.float32)
    x[0, :8] = [0.2, 0.6, 1.0, -0.2, -0.6, -1.0, 0.4, -0.4]  # times 2.5: ties at .5
    a, b = rng.standard_normal((K, M)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    a3 = rng.standard_normal((2, M, K)).astype(np.float32)
    i8 = rng.integers(-128, 128, (4, 32)).astype(np.int8)
    iv = rng.integers(-100, 100, (4, 8)).astype(np.int32)
    outs = dict(rev=np.zeros((R * 4, C), np.float32), cnt=np.zeros((1, 8), np.int32), mt=np.zeros((M, N), np.float32),
                bm=np.zeros((2, M, N), np.float32), tr=np.zeros((K, M, 2), np.float32),
                casts=np.zeros((5, 4, C), np.int32), idiv=np.zeros((4, 8), np.int32), i8o=np.zeros((4, 32), np.int8),
                ex=np.zeros((4, C), np.float32))
    orch(x, a, b, a3, i8, iv, *outs.values())
    rev = np.zeros((R * 4, C), np.float32)
    acc = np.zeros((4, C), np.float32)
    for i in range(R - 1, -1, -1):
        acc = acc + x[i * 4:i * 4 + 4]
        rev[i * 4:i * 4 + 4] = acc
    cnt = np.zeros((1, 8), np.int32)
    cnt[0, :2] = [sum(range(R)), int(np.trunc(acc[0, 0]))]
    sc = x[:4] * np.float32(2.5)
    casts = np.stack([np.rint(sc), np.sign(sc) * np.floor(np.abs(sc) + 0.5), np.floor(sc), np.ceil(sc), np.trunc(sc)])
    src = x[:4]
    e = np.clip(src + src.max(-1, keepdims=True) - src.min(0, keepdims=True), -3.0, 3.0)
    e[1:3, 4:12] = 9.0
    want = dict(rev=rev, cnt=cnt, mt=a.T.astype(np.float64) @ b, bm=a3.astype(np.float64) @ b,
                tr=np.transpose(a3, (2, 1, 0)), casts=casts.astype(np.int32),
                idiv=np.trunc(iv / -3.0).astype(np.int32), i8o=(i8.astype(np.int32) * 3 + 100).astype(np.int8), ex=e)
    for name, wv in want.items():
        np.testing.assert_allclose(outs[name].astype(np.float64), wv.astype(np.float64), atol=1e-4, err_msg=name)
