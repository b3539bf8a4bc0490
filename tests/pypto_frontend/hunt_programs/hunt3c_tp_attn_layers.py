"""two tensor-parallel attention layers at 2, 3 and 4 ranks (pl.jit forms): the HOST loops over layers
(pl.range) and hands the loop index to the ranks as a pl.Scalar[pl.INDEX]; each rank projects its HL = 2 heads'
Q, K and V in one column-parallel BF16 matmul (FP32 accumulation) out of its layer's view of a layer-stacked
weight (`wqkv[layer]`), runs causal softmax per head in an orchestration pl.range of pl.at tasks (run-time
column offsets into a create_tensor scratch), casts the heads to BF16 (rint) for its row-parallel share of the
output projection, and stores the partial into a window; a HOST pld.tensor.allreduce with a [world_size] signal
(the same signal in both layers) sums the partials, then each rank adds the residual and rmsnorms it in place
(pl.InOut host slice), which is the next layer's input."""
import math

import ml_dtypes
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

S = 16
D = 32
HL = 2
HD = 8
L = 2
EPS = 1e-6
SCALE = 1.0 / math.sqrt(HD)
NR = pl.dynamic("NR")


@pl.jit
def attn_part(h: pl.Tensor[[S, D], pl.FP32], wqkv: pl.Tensor[[L, D, 3 * HL * HD], pl.BF16],
              wo: pl.Tensor[[L, HL * HD, D], pl.BF16], mask: pl.Tensor[[S, S], pl.FP32],
              part: pld.DistributedTensor[[S, D], pl.FP32], layer: pl.Scalar[pl.INDEX]):
    qkv = pl.create_tensor([S, 3 * HL * HD], dtype=pl.FP32)
    heads = pl.create_tensor([S, HL * HD], dtype=pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="qkv"):
        xb = pl.cast(h[:, :], target_type=pl.BF16, mode="rint")
        w = pl.reshape(wqkv[layer:layer + 1, :, :], [D, 3 * HL * HD])
        qkv[:, :] = pl.matmul(xb, w, out_dtype=pl.FP32)
    for j in pl.range(HL):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="head"):
            q = qkv[:, j * HD:j * HD + HD]
            k = qkv[:, (HL + j) * HD:(HL + j) * HD + HD]
            v = qkv[:, (2 * HL + j) * HD:(2 * HL + j) * HD + HD]
            s = pl.add(pl.mul(pl.matmul(q, k, b_trans=True), SCALE), mask[:, :])
            p = pl.exp(pl.row_expand_sub(s, pl.row_max(s)))
            o = pl.row_expand_div(pl.matmul(p, v), pl.row_sum(p))
            heads[:, j * HD:j * HD + HD] = o
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="oproj"):
        hb = pl.cast(heads[:, :], target_type=pl.BF16, mode="rint")
        part[:, :] = pl.matmul(hb, pl.reshape(wo[layer:layer + 1, :, :], [HL * HD, D]), out_dtype=pl.FP32)
    return part


@pl.jit
def post(h: pl.InOut[pl.Tensor[[S, D], pl.FP32]], g: pl.Tensor[[L, D], pl.FP32],
         data: pld.DistributedTensor[[S, D], pl.FP32], layer: pl.Scalar[pl.INDEX]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="norm"):
        y = pl.add(h[:, :], data[:, :])
        ss = pl.row_sum(pl.mul(y, y))
        inv = pl.rsqrt(pl.add(pl.mul(ss, 1.0 / D), EPS), high_precision=True)
        h[:, :] = pl.col_expand_mul(pl.row_expand_mul(y, inv), g[layer:layer + 1, :])
    return h


@pl.jit.host
def host(h: pl.InOut[pl.Tensor[[NR, S, D], pl.FP32]], wqkv: pl.Tensor[[NR, L, D, 3 * HL * HD], pl.BF16],
         wo: pl.Tensor[[NR, L, HL * HD, D], pl.BF16], mask: pl.Tensor[[S, S], pl.FP32], g: pl.Tensor[[L, D], pl.FP32]):
    buf = pld.alloc_window_buffer([S, D], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
    data = pld.window(buf, [S, D], dtype=pl.FP32)
    sig = pld.window(sig_buf, [pld.world_size()], dtype=pl.INT32)
    for layer in pl.range(L):
        for r in pl.range(pld.world_size()):
            attn_part(h[r], wqkv[r], wo[r], mask, data, layer, device=r)
        data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        for r in pl.range(pld.world_size()):
            post(h[r], g, data, layer, device=r)


def golden(x, wqkv, wo, mask, g, p):
    bf = np.dtype(ml_dtypes.bfloat16)
    h = x.astype(np.float64)
    for layer in range(L):
        part_sum = np.zeros((S, D))
        for r in range(p):
            xb = h.astype(np.float32).astype(bf).astype(np.float64)
            qkv = xb @ wqkv[r, layer].astype(np.float64)
            outs = []
            for j in range(HL):
                q, k, v = (qkv[:, (t * HL + j) * HD:(t * HL + j + 1) * HD] for t in range(3))
                s = q @ k.T * SCALE + mask
                e = np.exp(s - s.max(-1, keepdims=True))
                outs.append((e @ v) / e.sum(-1, keepdims=True))
            hb = np.concatenate(outs, -1).astype(np.float32).astype(bf).astype(np.float64)
            part_sum += hb @ wo[r, layer].astype(np.float64)
        y = h + part_sum
        h = y / np.sqrt((y * y).mean(-1, keepdims=True) + EPS) * g[layer]
    return h


def test_tp_attention_layers(device_ids):
    bf = np.dtype(ml_dtypes.bfloat16)
    mask = np.triu(np.full((S, S), -1e9, np.float32), 1)
    for p in (2, 3, 4)[:max(1, len(device_ids) - 1)]:
        rng = np.random.default_rng(300 + p)
        x = rng.standard_normal((S, D)).astype(np.float32)
        wqkv = (rng.standard_normal((p, L, D, 3 * HL * HD)) * 0.25).astype(bf)
        wo = (rng.standard_normal((p, L, HL * HD, D)) * 0.25).astype(bf)
        g = (1 + 0.1 * rng.standard_normal((L, D))).astype(np.float32)
        h = np.stack([x] * p)
        host(h, wqkv, wo, mask, g, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
        want = golden(x, wqkv, wo, mask, g, p)
        for r in range(p):
            np.testing.assert_allclose(h[r], want, rtol=2e-3, atol=2e-3, err_msg=f"P={p} rank {r}")
