"""per-head (pl.spmd(H) over heads) rope on BF16 q/k, split-K QK^T (matmul then matmul_acc carried by
pl.range init_values), a ragged key length (L=20 keys in a 32-wide tile: valid_shape, fillpad min/zero),
softmax with row_max / exp / row_sum / log (logsumexp), P@V with BF16 p, FP32 out. Two ranks, independent."""
import ml_dtypes
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

H = 2
S = 12
L = 20
LP = 32
HD = 32
HH = HD // 2
NR = pl.dynamic("NR")
SCALE = 0.17
BF16 = np.dtype(ml_dtypes.bfloat16)


@pl.jit
def attn(q: pl.Tensor[[H, S, HD], pl.BF16], k: pl.Tensor[[H, L, HD], pl.BF16], v: pl.Tensor[[H, L, HD], pl.BF16],
         cos: pl.Tensor[[S, HH], pl.FP32], sin: pl.Tensor[[S, HH], pl.FP32],
         o: pl.Out[pl.Tensor[[H, S, HD], pl.FP32]], lse: pl.Out[pl.Tensor[[H, 1, S], pl.FP32]]):
    qr = pl.create_tensor([H, S, HD], dtype=pl.BF16)
    with pl.spmd(H, name_hint="rope"):
        h = pl.tile.get_block_idx()
        q1 = pl.cast(q[h, :, 0:HH], target_type=pl.FP32)
        q2 = pl.cast(q[h, :, HH:HD], target_type=pl.FP32)
        c = cos[:, :]
        s = sin[:, :]
        r1 = pl.sub(pl.mul(q1, c), pl.mul(q2, s))
        r2 = pl.add(pl.mul(q1, s), pl.mul(q2, c))
        qr[h, :, 0:HH] = pl.cast(r1, target_type=pl.BF16, mode="rint")
        qr[h, :, HH:HD] = pl.cast(r2, target_type=pl.BF16, mode="rint")
    with pl.spmd(H, name_hint="attend"):
        h = pl.tile.get_block_idx()
        kk = pl.slice(k, [1, LP, HD], [h, 0, 0], valid_shape=[1, L, HD], drop_dims=[0])
        kk = pl.fillpad(kk, pad_value=pl.PadValue.zero)
        qa = qr[h, :, :]
        acc0 = pl.matmul(qa[:, 0:HH], kk[:, 0:HH], b_trans=True, out_dtype=pl.FP32)
        for j, (acc,) in pl.range(1, 2, init_values=(acc0,)):
            nxt = pl.matmul_acc(acc, qa[:, j * HH:j * HH + HH], kk[:, j * HH:j * HH + HH], b_trans=True)
            sc = pl.yield_(nxt)
        sc = pl.mul(sc, SCALE)
        sc = pl.fillpad(pl.set_validshape(sc, S, L), pad_value=pl.PadValue.min)
        mx = pl.row_max(sc)
        e = pl.exp(pl.row_expand_sub(sc, mx))
        den = pl.row_sum(e)
        p = pl.row_expand_div(e, den)
        lse[h, :, :] = pl.reshape(pl.add(pl.log(den), mx), [1, S])
        vv = pl.slice(v, [1, LP, HD], [h, 0, 0], valid_shape=[1, L, HD], drop_dims=[0])
        vv = pl.fillpad(vv, pad_value=pl.PadValue.zero)
        o[h, :, :] = pl.matmul(pl.cast(p, target_type=pl.BF16, mode="rint"), vv, out_dtype=pl.FP32)
    return o


@pl.jit.host
def host(q: pl.Tensor[[NR, H, S, HD], pl.BF16], k: pl.Tensor[[NR, H, L, HD], pl.BF16],
         v: pl.Tensor[[NR, H, L, HD], pl.BF16], cos: pl.Tensor[[S, HH], pl.FP32], sin: pl.Tensor[[S, HH], pl.FP32],
         o: pl.Out[pl.Tensor[[NR, H, S, HD], pl.FP32]], lse: pl.Out[pl.Tensor[[NR, H, 1, S], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        attn(q[r], k[r], v[r], cos, sin, o[r], lse[r], device=r)


def _bf(a):
    return a.astype(np.float32).astype(BF16).astype(np.float32)


def golden(q, k, v, cos, sin):
    qf = q.astype(np.float32)
    q1, q2 = qf[..., :HH], qf[..., HH:]
    qr = _bf(np.concatenate([q1 * cos - q2 * sin, q1 * sin + q2 * cos], -1))
    sc = (qr.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)) * SCALE
    mx = sc.max(-1, keepdims=True)
    e = np.exp(sc - mx)
    den = e.sum(-1, keepdims=True)
    p = _bf(e / den)
    return p @ v.astype(np.float64), np.swapaxes(np.log(den) + mx, -1, -2)


def test_rope_split_k_softmax(device_ids):
    rng = np.random.default_rng(2)
    p = 2
    q = rng.standard_normal((p, H, S, HD)).astype(BF16)
    k = rng.standard_normal((p, H, L, HD)).astype(BF16)
    v = rng.standard_normal((p, H, L, HD)).astype(BF16)
    ang = (rng.random((S, HH)) * 3).astype(np.float32)
    cos, sin = np.cos(ang), np.sin(ang)
    o = np.zeros((p, H, S, HD), np.float32)
    lse = np.zeros((p, H, 1, S), np.float32)
    host(q, k, v, cos, sin, o, lse, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    for r in range(p):
        wo, wl = golden(q[r], k[r], v[r], cos, sin)
        np.testing.assert_allclose(o[r], wo, atol=2e-2)
        np.testing.assert_allclose(lse[r], wl, atol=1e-3)
