"""MoE-style local dispatch: a pl.at task groups tokens by expert with on-core pl.array counters
(rows copied at run-time offsets, a position table written with pl.write); the orchestration reads each
expert's count and fans out pl.parallel over its run-time number of row tiles, each a pl.spmd(2) over
column halves (valid rows = the tile's ragged share: set_validshape + fillpad); a combine task scatters the
rows back through the position table; then the ranks exchange results (remote_store + notify/wait)."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

T = 13
D = 32
N = 32
NH = 16
E = 3
RT = 4
NR = pl.dynamic("NR")


@pl.jit
def moe(x: pl.Tensor[[T, D], pl.FP32], route: pl.Tensor[[1, 16], pl.INT32], w: pl.Tensor[[E, D, N], pl.FP32],
        out: pl.Out[pl.Tensor[[T, N], pl.FP32]], cnt: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
        box: pld.DistributedTensor[[T, N], pl.FP32], sig: pld.DistributedTensor[[1, 1], pl.INT32]):
    xg = pl.create_tensor([E * T + RT, D], dtype=pl.FP32)
    yg = pl.create_tensor([E * T + RT, N], dtype=pl.FP32)
    pos = pl.create_tensor([1, 16], dtype=pl.INT32)
    mine = pl.create_tensor([T, N], dtype=pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="dispatch"):
        counts = pl.array.create(E, pl.INT32)
        for e0 in pl.range(E):
            counts[e0] = 0
        for t in pl.range(T):
            e = pl.read(route, [0, t])
            s = counts[e]
            slot = e * T + s
            xg[slot:slot + 1, :] = x[t:t + 1, :]
            pl.write(pos, [0, t], pl.cast(slot, pl.INT32))
            counts[e] = s + 1
        for e1 in pl.range(E):
            pl.write(cnt, [0, e1], counts[e1])
    for ex in pl.range(E):
        n = pl.read(cnt, [0, ex])
        ntiles = (n + RT - 1) // RT
        for ti in pl.parallel(ntiles):
            r0 = ex * T + ti * RT
            vr = pl.min(RT, n - ti * RT)
            with pl.spmd(2, name_hint="expert_mm"):
                h = pl.tile.get_block_idx()
                rows = pl.slice(xg, [RT, D], [r0, 0], valid_shape=[vr, D])
                rows = pl.fillpad(rows, pad_value=pl.PadValue.zero)
                wt = pl.slice(w, [1, D, NH], [ex, 0, h * NH], drop_dims=[0])
                y = pl.maximum(pl.matmul(rows, wt), 0.0)
                yg[r0:r0 + RT, h * NH:h * NH + NH] = pl.set_validshape(y, vr, NH)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine"):
        for t2 in pl.range(T):
            p = pl.read(pos, [0, t2])
            mine[t2:t2 + 1, :] = yg[p:p + 1, :]
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="exchange"):
        ctx = pld.get_comm_ctx(box)
        peer = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        m = mine[:, :]
        pld.tile.remote_store(m, box, peer, [0, 0])
        pld.system.notify(sig, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        out[:, :] = pl.add(m, box[:, :])
    return out


@pl.jit.host
def host(x: pl.Tensor[[NR, T, D], pl.FP32], route: pl.Tensor[[NR, 1, 16], pl.INT32], w: pl.Tensor[[NR, E, D, N], pl.FP32],
         out: pl.Out[pl.Tensor[[NR, T, N], pl.FP32]], cnt: pl.Out[pl.Tensor[[NR, 1, 8], pl.INT32]]):
    bbuf = pld.alloc_window_buffer(T * N * 4)
    sbuf = pld.alloc_window_buffer(4)
    for r in pl.range(pld.world_size()):
        box = pld.window(bbuf, [T, N], dtype=pl.FP32)
        sig = pld.window(sbuf, [1, 1], dtype=pl.INT32)
        moe(x[r], route[r], w[r], out[r], cnt[r], box, sig, device=r)


def test_moe_dispatch_combine(device_ids):
    rng = np.random.default_rng(10)
    p = 2
    x = rng.standard_normal((p, T, D)).astype(np.float32)
    route = np.zeros((p, 1, 16), np.int32)
    route[0, 0, :T] = rng.integers(0, E, T)
    route[1, 0, :T] = [2, 2, 2, 2, 2, 2, 0, 2, 2, 0, 2, 2, 0]  # expert 1 empty: a zero-trip fan
    w = (rng.standard_normal((p, E, D, N)) * 0.3).astype(np.float32)
    out = np.zeros((p, T, N), np.float32)
    cnt = np.zeros((p, 1, 8), np.int32)
    host(x, route, w, out, cnt, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    ys = [np.stack([np.maximum(x[r, t].astype(np.float64) @ w[r, route[r, 0, t]], 0.0) for t in range(T)])
          for r in range(p)]
    for r in range(p):
        np.testing.assert_allclose(out[r], ys[r] + ys[1 - r], atol=1e-4)
        np.testing.assert_array_equal(cnt[r, 0, :E], np.bincount(route[r, 0, :T], minlength=E))
