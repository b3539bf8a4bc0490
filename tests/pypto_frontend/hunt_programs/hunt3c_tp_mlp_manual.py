"""three tensor-parallel MLP layers at 3 ranks in ONE kernel, the collectives written by hand: a pl.range over
layers carries the [12, 32] activation tile; each rank multiplies by its column shard of W1 (ReLU) and row
shard of W2 (weights of the layer loaded at a run-time offset of a layer-stacked tensor), then reduce-scatters
its partial by atomic-Add pld.tensor.put of each 4-row block into the owner's accumulation window (a
create_tensor staging the partial); the owner waits (Ge 3 * (layer + 1), one counter reused by every layer),
adds the residual, rmsnorms its block, zeroes its accumulation window for the next layer, and allgathers
the block with pld.tile.remote_store into every rank's gather window (second counter row), which is the next
layer's input."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import pytest
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

P = 3
RB = 4
S = P * RB
D = 32
FP = 16
L = 3
EPS = 1e-6


@pl.jit.incore
def mlp_layers(x: pl.Tensor[[S, D], pl.FP32], w1: pl.Tensor[[L * D, FP], pl.FP32], w2: pl.Tensor[[L * FP, D], pl.FP32],
               g: pl.Tensor[[L, D], pl.FP32], out: pl.Out[pl.Tensor[[S, D], pl.FP32]],
               stage: pl.InOut[pl.Tensor[[S, D], pl.FP32]],
               acc: pld.DistributedTensor[[RB, D], pl.FP32], gath: pld.DistributedTensor[[S, D], pl.FP32],
               sig: pld.DistributedTensor[[2, 1], pl.INT32]):
    ctx = pld.get_comm_ctx(acc)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    h0 = pl.load(x, [0, 0], [S, D])
    for layer, (h,) in pl.range(L, init_values=(h0,)):
        a = pl.relu(pl.matmul(h, pl.load(w1, [layer * D, 0], [D, FP])))
        y = pl.matmul(a, pl.load(w2, [layer * FP, 0], [FP, D]))
        stage = pl.store(y, [0, 0], stage)
        for j in pl.range(n):
            pld.tensor.put(acc, j, stage, [0, 0], [j * RB, 0], [RB, D], atomic=pld.AtomicType.Add)
            pld.system.notify(sig, peer=j, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(sig, offsets=[0, 0], expected=n * (layer + 1), cmp=pld.WaitCmp.Ge)
        blk = pl.add(pl.load(acc, [0, 0], [RB, D]), pl.slice(h, [RB, D], [me * RB, 0]))
        ss = pl.row_sum(pl.mul(blk, blk), pl.create_tile([RB, D], dtype=pl.FP32))
        inv = pl.rsqrt(pl.add(pl.mul(ss, 1.0 / D), EPS))
        nb = pl.col_expand_mul(pl.row_expand_mul(blk, inv), pl.load(g, [layer, 0], [1, D]))
        acc = pl.store(pl.full([RB, D], pl.FP32, 0.0), [0, 0], acc)
        for j2 in pl.range(n):
            pld.tile.remote_store(nb, gath, j2, [me * RB, 0])
            pld.system.notify(sig, peer=j2, offsets=[1, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(sig, offsets=[1, 0], expected=n * (layer + 1), cmp=pld.WaitCmp.Ge)
        hn = pl.load(gath, [0, 0], [S, D])
        h_out = pl.yield_(hn)
    out = pl.store(h_out, [0, 0], out)
    return out


@pl.jit
def orch(x: pl.Tensor[[S, D], pl.FP32], w1: pl.Tensor[[L * D, FP], pl.FP32], w2: pl.Tensor[[L * FP, D], pl.FP32],
         g: pl.Tensor[[L, D], pl.FP32], out: pl.Out[pl.Tensor[[S, D], pl.FP32]],
         acc: pld.DistributedTensor[[RB, D], pl.FP32], gath: pld.DistributedTensor[[S, D], pl.FP32],
         sig: pld.DistributedTensor[[2, 1], pl.INT32]):
    stage = pl.create_tensor([S, D], dtype=pl.FP32)
    return mlp_layers(x, w1, w2, g, out, stage, acc, gath, sig)


@pl.jit.host
def host(x: pl.Tensor[[S, D], pl.FP32], w1: pl.Tensor[[P, L * D, FP], pl.FP32], w2: pl.Tensor[[P, L * FP, D], pl.FP32],
         g: pl.Tensor[[L, D], pl.FP32], out: pl.Out[pl.Tensor[[P, S, D], pl.FP32]]):
    acc_b = pld.alloc_window_buffer([RB, D], dtype=pl.FP32)
    gath_b = pld.alloc_window_buffer([S, D], dtype=pl.FP32)
    sig_b = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        orch(x, w1[r], w2[r], g, out[r], pld.window(acc_b, [RB, D], dtype=pl.FP32),
             pld.window(gath_b, [S, D], dtype=pl.FP32), pld.window(sig_b, [2, 1], dtype=pl.INT32), device=r)


def test_tp_mlp_manual(device_ids):
    if len(device_ids) < P:
        pytest.skip(f"needs {P} devices")
    rng = np.random.default_rng(31)
    x = rng.standard_normal((S, D)).astype(np.float32)
    w1 = (rng.standard_normal((P, L * D, FP)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((P, L * FP, D)) * 0.3).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal((L, D))).astype(np.float32)
    out = np.zeros((P, S, D), np.float32)
    host(x, w1, w2, g, out, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:P])))
    h = x.astype(np.float64)
    for layer in range(L):
        y = np.zeros((S, D))
        for r in range(P):
            a = np.maximum(h @ w1[r, layer * D:(layer + 1) * D].astype(np.float64), 0)
            y += a @ w2[r, layer * FP:(layer + 1) * FP].astype(np.float64)
        y += h
        h = y / np.sqrt((y * y).mean(-1, keepdims=True) + EPS) * g[layer]
    for r in range(P):
        np.testing.assert_allclose(out[r], h, rtol=1e-4, atol=1e-4, err_msg=f"rank {r}")
