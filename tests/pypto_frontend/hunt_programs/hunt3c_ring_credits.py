"""a 3-rank ring pipeline with one single-slot mailbox per rank and one [2, 1] signal reused for all of its
steps (pl.jit.incore, a pl.range of 6 steps): at step i each rank puts (pld.tensor.put of a create_tensor
staging row) its running state into its successor's slot, counting data credits on the successor's row 0
(AtomicAdd), waits for its own i + 1-th data credit (Ge), folds the predecessor's row into its state (x * 0.5 +
prev), and hands the slot back with an ack credit on the predecessor's row 1; before the next put it waits for
the successor's i + 1-th ack, so the slot is never overwritten while still unread. Predecessor as
(me + n - 1) % n."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import pytest
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

P = 3
C = 16
STEPS = 6


@pl.jit.incore
def ring(x: pl.Tensor[[1, C], pl.FP32], out: pl.Out[pl.Tensor[[STEPS, C], pl.FP32]],
         stage: pl.InOut[pl.Tensor[[1, C], pl.FP32]], slot: pld.DistributedTensor[[1, C], pl.FP32],
         sig: pld.DistributedTensor[[2, 1], pl.INT32]):
    ctx = pld.get_comm_ctx(slot)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prv = (me + n - 1) % n
    s0 = pl.load(x, [0, 0], [1, C])
    for i, (s,) in pl.range(STEPS, init_values=(s0,)):
        stage = pl.store(s, [0, 0], stage)
        if i > 0:
            pld.system.wait(sig, offsets=[1, 0], expected=i, cmp=pld.WaitCmp.Ge)  # the successor read step i - 1
        pld.tensor.put(slot, nxt, stage)
        pld.system.notify(sig, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(sig, offsets=[0, 0], expected=i + 1, cmp=pld.WaitCmp.Ge)
        got = pl.load(slot, [0, 0], [1, C])
        pld.system.notify(sig, peer=prv, offsets=[1, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        s2 = pl.add(pl.mul(s, 0.5), got)
        out = pl.store(s2, [i, 0], out)
        _last = pl.yield_(s2)
    return out


@pl.jit
def orch(x: pl.Tensor[[1, C], pl.FP32], out: pl.Out[pl.Tensor[[STEPS, C], pl.FP32]],
         slot: pld.DistributedTensor[[1, C], pl.FP32], sig: pld.DistributedTensor[[2, 1], pl.INT32]):
    stage = pl.create_tensor([1, C], dtype=pl.FP32)
    return ring(x, out, stage, slot, sig)


@pl.jit.host
def host(x: pl.Tensor[[P, 1, C], pl.FP32], out: pl.Out[pl.Tensor[[P, STEPS, C], pl.FP32]]):
    sb = pld.alloc_window_buffer([1, C], dtype=pl.FP32)
    gb = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        orch(x[r], out[r], pld.window(sb, [1, C], dtype=pl.FP32), pld.window(gb, [2, 1], dtype=pl.INT32), device=r)


def test_ring_credits(device_ids):
    if len(device_ids) < P:
        pytest.skip(f"needs {P} devices")
    rng = np.random.default_rng(90)
    x = rng.standard_normal((P, 1, C)).astype(np.float32)
    out = np.zeros((P, STEPS, C), np.float32)
    host(x, out, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:P])))
    s = x[:, 0].astype(np.float64)
    for i in range(STEPS):
        s = s * 0.5 + np.roll(s, 1, axis=0)  # rank r gets its predecessor's state
        np.testing.assert_allclose(out[:, i], s, rtol=1e-5, atol=1e-5, err_msg=f"step {i}")
