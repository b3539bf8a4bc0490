"""a reduce over ranks by atomic puts: a pl.spmd(3) fan, each block exponentiating its 8 rows into a
scratch tensor and putting them (pld.tensor.put, atomic Add, chunk_rows=3, sub-regions) into every rank's
window, then counting on each rank's signal (AtomicAdd); a deferred waiter (defer_wait for 3 * n credits)
and its consumer (deps=) taking log of the sums into a published window; a notify / wait handshake and a
pld.tensor.get of the peer's published rows (ragged: 20 of 24 rows, sub-region)."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

R = 24
B = 8
C = 48
G = 20
NR = pl.dynamic("NR")


@pl.jit
def reduce(x: pl.Tensor[[R, C], pl.FP32], out: pl.Out[pl.Tensor[[R, C], pl.FP32]],
           got: pl.Out[pl.Tensor[[R, C], pl.FP32]],
           acc: pld.DistributedTensor[[R, C], pl.FP32], pub: pld.DistributedTensor[[R, C], pl.FP32],
           sig: pld.DistributedTensor[[1, 1], pl.INT32], sig2: pld.DistributedTensor[[1, 1], pl.INT32]):
    ys = pl.create_tensor([R, C], dtype=pl.FP32)
    with pl.spmd(3, name_hint="push"):
        b = pl.tile.get_block_idx()
        ctx = pld.get_comm_ctx(acc)
        n = pld.nranks(ctx)
        ys[b * B:b * B + B, :] = pl.exp(x[b * B:b * B + B, :])
        for p in pl.range(n):
            pld.tensor.put(acc, p, ys, [b * B, 0], [b * B, 0], [B, C], atomic=pld.AtomicType.Add, chunk_rows=3)
            pld.system.notify(sig, peer=p, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="await") as wt:
        pld.system.defer_wait(signal=sig, offsets=[0, 0], expected=6, cmp=pld.WaitCmp.Ge)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="log", deps=[wt]):
        pub[:, :] = pl.log(acc[:, :])
        out[:, :] = pub[:, :]
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="fetch"):
        ctx2 = pld.get_comm_ctx(pub)
        peer = (pld.rank(ctx2) + 1) % pld.nranks(ctx2)
        pld.system.notify(sig2, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(sig2, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        pld.tensor.get(got, peer, pub, [0, 0], [2, 0], [G, C], chunk_rows=7)
    return out


@pl.jit.host
def host(x: pl.Tensor[[NR, R, C], pl.FP32], out: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]],
         got: pl.Out[pl.Tensor[[NR, R, C], pl.FP32]]):
    abuf = pld.alloc_window_buffer(R * C * 4)
    pbuf = pld.alloc_window_buffer(R * C * 4)
    sbuf = pld.alloc_window_buffer(4)
    s2buf = pld.alloc_window_buffer(4)
    for r in pl.range(pld.world_size()):
        acc = pld.window(abuf, [R, C], dtype=pl.FP32)
        pub = pld.window(pbuf, [R, C], dtype=pl.FP32)
        sig = pld.window(sbuf, [1, 1], dtype=pl.INT32)
        sig2 = pld.window(s2buf, [1, 1], dtype=pl.INT32)
        reduce(x[r], out[r], got[r], acc, pub, sig, sig2, device=r)


def test_atomic_puts_deferred_wait_get(device_ids):
    rng = np.random.default_rng(9)
    p = 2
    x = rng.standard_normal((p, R, C)).astype(np.float32)
    out = np.zeros((p, R, C), np.float32)
    got = np.full((p, R, C), -7.0, np.float32)
    host(x, out, got, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    want = np.log(np.exp(x[0].astype(np.float64)) + np.exp(x[1]))
    g = np.full((R, C), -7.0)
    g[0:G] = want[2:2 + G]
    for r in range(p):
        np.testing.assert_allclose(out[r], want, atol=1e-5)
        np.testing.assert_allclose(got[r], g, atol=1e-5)
