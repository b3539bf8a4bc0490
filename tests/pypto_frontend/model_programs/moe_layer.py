"""A small expert-parallel MoE layer in pypto's style, at 2 and 4 ranks: each rank gates its tokens (gate
matmul, softmax, top-2 with renormalised weights), dispatches them with their routing weights to every
expert rank (E = 8 experts, E / NR per rank; dense dispatch: capacity for every token, a zero weight for an expert not chosen), runs its
local experts (up matmul, ReLU, down matmul, scaled by each token's weight) and sends each token's
partial sum back to its owner, which combines them. Golden: torch (the stand-in) in one process."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

T = 8  # tokens per rank
D = 16  # hidden
F = 32  # expert FFN width
E = 8  # experts in all (a gate row of 8 FP32 is one 32-byte tile row)
NR = pl.dynamic("NR")
EL = pl.dynamic("EL")  # experts per rank: E / NR
BIG = 1.0e30  # turns "not the row's maximum" (a negative difference) into a weight of 0


@pl.jit.incore
def top1(p: pl.Tile[[T, E], pl.FP32]):
    """1.0 where p is its row's maximum, else 0.0."""
    d = pl.row_expand_sub(p, pl.row_max(p, pl.create_tile([T, E], pl.FP32)))
    return pl.maximum(pl.add(pl.mul(d, BIG), 1.0), 0.0)


@pl.jit.incore
def moe_rank(
    x: pl.Tensor[[T, D], pl.FP32],
    wg: pl.Tensor[[D, E], pl.FP32],
    w1: pl.Tensor[[EL, D, F], pl.FP32],
    w2: pl.Tensor[[EL, F, D], pl.FP32],
    y: pl.Out[pl.Tensor[[T, D], pl.FP32]],
    xs: pld.DistributedTensor[[NR, T, D], pl.FP32],
    gs: pld.DistributedTensor[[NR, E, T], pl.FP32],  # weights per expert row: [T, 1] columns are not 32-byte rows
    parts: pld.DistributedTensor[[NR, T, D], pl.FP32],
    sig: pld.DistributedTensor[[2, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(xs)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    tok = pl.load(x, [0, 0], [T, D])
    logits = pl.matmul(tok, pl.load(wg, [0, 0], [D, E]))
    scratch = pl.create_tile([T, E], pl.FP32)
    m = pl.row_max(logits, scratch)
    p = pl.exp(pl.row_expand_sub(logits, m))
    p = pl.row_expand_div(p, pl.row_sum(p, scratch))
    first = top1(p)
    second = top1(pl.sub(p, pl.mul(first, 2.0)))
    chosen = pl.mul(p, pl.add(first, second))
    gate = pl.row_expand_div(chosen, pl.row_sum(chosen, scratch))
    el = pl.tensor.dim(w1, 0)
    for peer in pl.range(n):  # dispatch: my tokens and their weights into every rank's slot `me`
        pld.tile.remote_store(tok, xs, peer=peer, offsets=[me, 0, 0])
        pld.tile.remote_store(pl.transpose(gate, 0, 1), gs, peer=peer, offsets=[me, 0, 0])
        pld.system.notify(sig, peer, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [0, 0], n, cmp=pld.WaitCmp.Ge)
    for src in pl.range(n):  # experts: every rank's tokens through my EL experts
        xin = pl.reshape(pl.load(xs, [src, 0, 0], [1, T, D]), [T, D])
        acc = pl.full([T, D], pl.FP32, 0.0)
        for j in pl.range(el):
            up = pl.reshape(pl.load(w1, [j, 0, 0], [1, D, F]), [D, F])
            down = pl.reshape(pl.load(w2, [j, 0, 0], [1, F, D]), [F, D])
            h = pl.maximum(pl.matmul(xin, up), 0.0)
            out = pl.matmul(h, down)
            wcol = pl.reshape(pl.load(gs, [src, me * el + j, 0], [1, 1, T]), [T, 1])
            acc = pl.add(acc, pl.row_expand_mul(out, wcol))
        pld.tile.remote_store(acc, parts, peer=src, offsets=[me, 0, 0])  # combine: back to the owner
        pld.system.notify(sig, src, [1, 0], 1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, [1, 0], n, cmp=pld.WaitCmp.Ge)
    total = pl.full([T, D], pl.FP32, 0.0)
    for src in pl.range(n):
        total = pl.add(total, pl.reshape(pl.load(parts, [src, 0, 0], [1, T, D]), [T, D]))
    return pl.store(total, [0, 0], y)


@pl.jit
def per_rank(x, wg, w1, w2, y, xs, gs, parts, sig):
    return moe_rank(x, wg, w1, w2, y, xs, gs, parts, sig)


@pl.jit.host
def moe_layer(
    x: pl.Tensor[[NR, T, D], pl.FP32],
    wg: pl.Tensor[[D, E], pl.FP32],
    w1: pl.Tensor[[NR, EL, D, F], pl.FP32],
    w2: pl.Tensor[[NR, EL, F, D], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, T, D], pl.FP32]],
):
    nr = pld.world_size()
    xs_buf = pld.alloc_window_buffer([nr, T, D], dtype=pl.FP32)
    gs_buf = pld.alloc_window_buffer([nr, E, T], dtype=pl.FP32)
    parts_buf = pld.alloc_window_buffer([nr, T, D], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(nr):
        xs = pld.window(xs_buf, [nr, T, D], dtype=pl.FP32)
        gs = pld.window(gs_buf, [nr, E, T], dtype=pl.FP32)
        parts = pld.window(parts_buf, [nr, T, D], dtype=pl.FP32)
        sig = pld.window(sig_buf, [2, 1], dtype=pl.INT32)
        per_rank(x[r], wg, w1[r], w2[r], y[r], xs, gs, parts, sig, device=r)


def golden(x, wg, w1, w2):
    """torch: softmax gate, top-2 renormalised, every expert's ReLU FFN weighted, summed per token."""
    nr = x.shape[0]
    tokens = x.reshape(nr * T, D)
    p = torch.softmax(tokens @ wg, -1)
    vals, idx = p.topk(2)
    el = w1.shape[1]
    weights = torch.zeros(nr * T, E)
    for t in range(nr * T):
        for k in range(2):
            weights[t, int(idx[t, k])] = vals[t, k] / vals[t].sum()
    experts_up = w1.reshape(nr * el, D, F)
    experts_down = w2.reshape(nr * el, F, D)
    out = torch.zeros(nr * T, D)
    for e in range(nr * el):
        h = (tokens @ experts_up[e]).clamp_min(0.0)
        out = out + (h @ experts_down[e]) * weights[:, e:e + 1]
    return out.reshape(nr, T, D)


@pytest.mark.parametrize("devices", [2, 4])
def test_moe_layer(device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    torch.manual_seed(devices)
    x = torch.randn(devices, T, D)
    wg = torch.randn(D, E)
    w1 = torch.randn(devices, E // devices, D, F) * 0.25
    w2 = torch.randn(devices, E // devices, F, D) * 0.25
    y = torch.zeros(devices, T, D)
    config = RunConfig(platform="a2a3sim", distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    moe_layer(x, wg, w1, w2, y, config=config)
    torch.testing.assert_close(y, golden(x, wg, w1, w2), rtol=1e-4, atol=1e-4)
