"""a tile-level FFN kernel: ragged M (20 rows in tiles of 16) and ragged K (80 = 32 + 32 + 16) loaded
into Mat with valid_shape, pl.move to Left / Right, matmul_acc with init_cond over the K loop (carry from a
Vec pl.tile.full), SiLU, row_min / col_sum / col_max over partial tiles, col max carried over M tiles,
col_expand_expdif, tile transpose stored with a valid box, concat, pl.unroll."""
import ml_dtypes
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

M = 20
MT = 16
K = 80
KT = 32
N = 48
NR = pl.dynamic("NR")


@pl.jit.incore
def ffn(x: pl.Tensor[[M, K], pl.BF16], w: pl.Tensor[[K, N], pl.BF16], y: pl.Out[pl.Tensor[[M, N], pl.FP32]],
        yt: pl.Out[pl.Tensor[[N, 32], pl.FP32]], rmin: pl.Out[pl.Tensor[[M, 8], pl.FP32]],
        cs: pl.Out[pl.Tensor[[2, N], pl.FP32]], cm: pl.Out[pl.Tensor[[1, N], pl.FP32]],
        ed: pl.Out[pl.Tensor[[M, N], pl.FP32]], cc: pl.Out[pl.Tensor[[M, 2 * N], pl.FP32]]):
    neg = pl.tile.full([1, N], pl.FP32, -1.0e30)
    for mt, (colmax,) in pl.range(2, init_values=(neg,)):
        m0 = mt * MT
        vm = pl.min(MT, M - m0)
        zero = pl.tile.full([MT, N], pl.FP32, 0.0)
        for kc, (acc,) in pl.range(3, init_values=(zero,)):
            k0 = kc * KT
            kv = pl.min(KT, K - k0)
            a = pl.load(x, [m0, k0], [MT, KT], valid_shape=[vm, kv], target_memory=pl.MemorySpace.Mat)
            b = pl.load(w, [k0, 0], [KT, N], valid_shape=[kv, N], target_memory=pl.MemorySpace.Mat)
            a = pl.move(a, target_memory=pl.MemorySpace.Left)
            b = pl.move(b, target_memory=pl.MemorySpace.Right)
            acc2 = pl.matmul_acc(acc, a, b, init_cond=(kc == 0))
            accn = pl.yield_(acc2)
        h = pl.move(accn, target_memory=pl.MemorySpace.Vec)
        h = pl.set_validshape(h, vm, N)
        sg = pl.recip(pl.add(pl.exp(pl.neg(h)), 1.0))
        act = pl.mul(h, sg)
        pl.store(act, [m0, 0], y)
        tmp = pl.create_tile([MT, N], pl.FP32)
        mn = pl.row_min(act, tmp)
        for u in pl.unroll(8):
            pl.store(mn, [m0, u], rmin)
        csum = pl.col_sum(act, tmp)
        pl.store(csum, [mt, 0], cs)
        cmax = pl.col_max(act)
        newmax = pl.maximum(colmax, cmax)
        tr = pl.transpose(act, 0, 1)
        pl.store(tr, [0, m0], yt)
        cat = pl.concat(act, h)
        pl.store(pl.set_validshape(cat, vm, 2 * N), [m0, 0], cc)
        carried = pl.yield_(newmax)
    pl.store(carried, [0, 0], cm)
    for mt2 in pl.range(2):
        r0 = mt2 * MT
        vr = pl.min(MT, M - r0)
        t = pl.load(y, [r0, 0], [MT, N], valid_shape=[vr, N])
        pl.store(pl.col_expand_expdif(t, carried), [r0, 0], ed)
    return y


@pl.jit
def orch(x: pl.Tensor[[M, K], pl.BF16], w: pl.Tensor[[K, N], pl.BF16], y: pl.Out[pl.Tensor[[M, N], pl.FP32]],
         yt: pl.Out[pl.Tensor[[N, 32], pl.FP32]], rmin: pl.Out[pl.Tensor[[M, 8], pl.FP32]],
         cs: pl.Out[pl.Tensor[[2, N], pl.FP32]], cm: pl.Out[pl.Tensor[[1, N], pl.FP32]],
         ed: pl.Out[pl.Tensor[[M, N], pl.FP32]], cc: pl.Out[pl.Tensor[[M, 2 * N], pl.FP32]]):
    return ffn(x, w, y, yt, rmin, cs, cm, ed, cc)


@pl.jit.host
def host(x: pl.Tensor[[NR, M, K], pl.BF16], w: pl.Tensor[[NR, K, N], pl.BF16], y: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]],
         yt: pl.Out[pl.Tensor[[NR, N, 32], pl.FP32]], rmin: pl.Out[pl.Tensor[[NR, M, 8], pl.FP32]],
         cs: pl.Out[pl.Tensor[[NR, 2, N], pl.FP32]], cm: pl.Out[pl.Tensor[[NR, 1, N], pl.FP32]],
         ed: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]], cc: pl.Out[pl.Tensor[[NR, M, 2 * N], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        orch(x[r], w[r], y[r], yt[r], rmin[r], cs[r], cm[r], ed[r], cc[r], device=r)


def test_tile_ffn_partial_tiles(device_ids):
    rng = np.random.default_rng(4)
    p = 2
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = rng.standard_normal((p, M, K)).astype(bf16)
    w = (rng.standard_normal((p, K, N)) * 0.2).astype(bf16)
    outs = dict(y=np.zeros((p, M, N), np.float32), yt=np.full((p, N, 32), 7.0, np.float32),
                rmin=np.zeros((p, M, 8), np.float32), cs=np.zeros((p, 2, N), np.float32),
                cm=np.zeros((p, 1, N), np.float32), ed=np.zeros((p, M, N), np.float32),
                cc=np.zeros((p, M, 2 * N), np.float32))
    host(x, w, *outs.values(), config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    for r in range(p):
        h = x[r].astype(np.float64) @ w[r].astype(np.float64)
        a = h / (1.0 + np.exp(-h))
        yt = np.full((N, 32), 7.0)
        yt[:, :M] = a.T
        want = dict(y=a, yt=yt, rmin=np.repeat(a.min(-1, keepdims=True), 8, -1),
                    cs=np.stack([a[:16].sum(0), a[16:].sum(0)]), cm=a.max(0, keepdims=True),
                    ed=np.exp(a - a.max(0, keepdims=True)), cc=np.concatenate([a, h], -1))
        for name, wv in want.items():
            np.testing.assert_allclose(outs[name][r], wv, atol=1e-4, err_msg=name)
