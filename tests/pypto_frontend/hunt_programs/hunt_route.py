"""MoE-style routing: sigmoid scores (exp/recip), per-row sort32 + mrgsort top-k, gather_mask of the
indices and values, a batched per-row gather, set_validshape + fillpad + row_sum normalisation, scalar
writes guarded by a run-time `if` against an active-token count read from a tensor, a pl.array histogram
(loop-carried total through init_values), and a 2-rank exchange of the histograms by pld.tensor.put +
notify / wait, summed."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

T = 10
E = 64
K = 6
KP = 8
NR = pl.dynamic("NR")


@pl.jit
def route(logits: pl.Tensor[[T, E], pl.FP32], ntok: pl.Tensor[[1, 8], pl.INT32],
          idx: pl.Out[pl.Tensor[[T, K], pl.INT32]], wts: pl.Out[pl.Tensor[[T, K], pl.FP32]],
          hist: pl.Out[pl.Tensor[[1, E], pl.INT32]], total: pl.Out[pl.Tensor[[1, 8], pl.INT32]],
          hbox: pld.DistributedTensor[[1, E], pl.INT32], sig: pld.DistributedTensor[[1, 1], pl.INT32]):
    scores = pl.create_tensor([T, E], dtype=pl.FP32)
    topi = pl.create_tensor([T, KP], dtype=pl.INT32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="sigmoid"):
        lg = logits[:, :]
        scores[:, :] = pl.recip(pl.add(pl.exp(pl.neg(lg)), 1.0))
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="topk"):
        for t in pl.range(T):
            row = scores[t:t + 1, :]
            ids = pl.arange(0, [1, E], dtype=pl.UINT32)
            srt = pl.sort32(row, ids)
            srt = pl.mrgsort(srt, block_len=64)
            ii = pl.gather(srt, mask_pattern=pl.tile.MaskPattern.P1010, output_dtype=pl.INT32)
            topi[t:t + 1, :] = ii[:, 0:KP]
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="weights"):
        sc = scores[:, :]
        g = pl.gather(sc, dim=-1, index=topi)
        gv = pl.fillpad(pl.set_validshape(g, T, K), pad_value=pl.PadValue.zero)
        wn = pl.row_expand_div(gv, pl.row_sum(gv))
        n = pl.read(ntok, [0, 0])
        for t in pl.range(T):
            if t < n:
                for j in pl.range(K):
                    pl.write(idx, [t, j], pl.read(topi, [t, j]))
                    pl.write(wts, [t, j], pl.read(wn, [t, j]))
    counts = pl.array.create(E, pl.INT32)
    for e in pl.range(E):
        counts[e] = 0
    zero = pl.const(0, pl.INT32)
    for t, (acc,) in pl.range(T, init_values=(zero,)):
        if t < pl.read(ntok, [0, 0]):
            for j in pl.range(K):
                ex = pl.read(idx, [t, j])
                counts[ex] = counts[ex] + 1
            nacc = pl.cast(acc + K, pl.INT32)
        else:
            nacc = acc
        tot = pl.yield_(nacc)
    pl.write(total, [0, 0], tot)
    for e in pl.range(E):
        pl.write(hist, [0, e], counts[e])
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="exchange"):
        ctx = pld.get_comm_ctx(hbox)
        peer = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        pld.tensor.put(hbox, peer=peer, src=hist)
        pld.system.notify(sig, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(sig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        hist[:, :] = pl.add(hist[:, :], hbox[:, :])
    return hist


@pl.jit.host
def host(logits: pl.Tensor[[NR, T, E], pl.FP32], ntok: pl.Tensor[[NR, 1, 8], pl.INT32],
         idx: pl.Out[pl.Tensor[[NR, T, K], pl.INT32]], wts: pl.Out[pl.Tensor[[NR, T, K], pl.FP32]],
         hist: pl.Out[pl.Tensor[[NR, 1, E], pl.INT32]], total: pl.Out[pl.Tensor[[NR, 1, 8], pl.INT32]]):
    hbuf = pld.alloc_window_buffer(E * 4)
    sbuf = pld.alloc_window_buffer(4)
    for r in pl.range(pld.world_size()):
        hbox = pld.window(hbuf, [1, E], dtype=pl.INT32)
        sig = pld.window(sbuf, [1, 1], dtype=pl.INT32)
        route(logits[r], ntok[r], idx[r], wts[r], hist[r], total[r], hbox, sig, device=r)


def golden(logits, n):
    s = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    order = np.argsort(-s, axis=-1, kind="stable")[:, :K].astype(np.int32)
    v = np.take_along_axis(s, order, -1)
    w = v / v.sum(-1, keepdims=True)
    idx = np.zeros((T, K), np.int32)
    wts = np.zeros((T, K))
    idx[:n], wts[:n] = order[:n], w[:n]
    h = np.bincount(idx[:n].ravel(), minlength=E).astype(np.int32)
    return idx, wts, h, n * K


def test_sort_topk_gather_histogram(device_ids):
    rng = np.random.default_rng(3)
    p = 2
    logits = (rng.standard_normal((p, T, E)) * 2).astype(np.float32)
    ntok = np.zeros((p, 1, 8), np.int32)
    ntok[0, 0, 0], ntok[1, 0, 0] = 7, 10
    idx = np.zeros((p, T, K), np.int32)
    wts = np.zeros((p, T, K), np.float32)
    hist = np.zeros((p, 1, E), np.int32)
    total = np.zeros((p, 1, 8), np.int32)
    host(logits, ntok, idx, wts, hist, total, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    gs = [golden(logits[r], int(ntok[r, 0, 0])) for r in range(p)]
    for r in range(p):
        gi, gw, gh, gt = gs[r]
        np.testing.assert_array_equal(idx[r], gi)
        np.testing.assert_allclose(wts[r], gw, atol=1e-6)
        np.testing.assert_array_equal(hist[r, 0], gh + gs[1 - r][2])
        assert total[r, 0, 0] == gt
