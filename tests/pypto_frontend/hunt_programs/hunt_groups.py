"""P16: 4 ranks as 2 tensor-parallel pairs: each pair {0,1} / {2,3} has its own group windows (a window
passed only by dispatches to that pair) and runs a row-split matmul whose partials are summed by a kernel
allreduce over the pair's [2, 1] signal (group-local ranks from the window's comm ctx); then every rank
pushes its pair's result into a world window row (remote_store to peer (r + 2) % 4) so each rank ends with
both pairs' outputs (data-parallel microbatches), added."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import pytest
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

T = 8
DH = 16
N = 24
NR = pl.dynamic("NR")


@pl.jit.incore
def tp(x: pl.Tensor[[T, DH], pl.FP32], w: pl.Tensor[[DH, N], pl.FP32], part: pld.DistributedTensor[[T, N], pl.FP32],
       sig: pld.DistributedTensor[[2, 1], pl.INT32]):
    part = pl.store(pl.matmul(pl.load(x, [0, 0], [T, DH]), pl.load(w, [0, 0], [DH, N])), [0, 0], part)
    part = pld.tensor.allreduce(part, sig, op=pld.ReduceOp.Sum)
    return part


@pl.jit.incore
def swap(part: pld.DistributedTensor[[T, N], pl.FP32], box: pld.DistributedTensor[[T, N], pl.FP32],
         bsig: pld.DistributedTensor[[1, 1], pl.INT32], y: pl.Out[pl.Tensor[[T, N], pl.FP32]]):
    ctx = pld.get_comm_ctx(box)
    me = pld.rank(ctx)
    peer = (me + 2) % pld.nranks(ctx)
    mine = pl.load(part, [0, 0], [T, N])
    pld.tile.remote_store(mine, box, peer, [0, 0])
    pld.system.notify(bsig, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(bsig, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    pl.store(pl.add(mine, pl.load(box, [0, 0], [T, N])), [0, 0], y)
    return y


@pl.jit
def tp_orch(x: pl.Tensor[[T, DH], pl.FP32], w: pl.Tensor[[DH, N], pl.FP32], part: pld.DistributedTensor[[T, N], pl.FP32],
            sig: pld.DistributedTensor[[2, 1], pl.INT32]):
    return tp(x, w, part, sig)


@pl.jit
def swap_orch(part: pld.DistributedTensor[[T, N], pl.FP32], box: pld.DistributedTensor[[T, N], pl.FP32],
              bsig: pld.DistributedTensor[[1, 1], pl.INT32], y: pl.Out[pl.Tensor[[T, N], pl.FP32]]):
    return swap(part, box, bsig, y)


@pl.jit.host
def host(x: pl.Tensor[[NR, T, DH], pl.FP32], w: pl.Tensor[[NR, DH, N], pl.FP32], y: pl.Out[pl.Tensor[[NR, T, N], pl.FP32]]):
    pa = pld.alloc_window_buffer(T * N * 4)
    pb = pld.alloc_window_buffer(T * N * 4)
    sa = pld.alloc_window_buffer(8)
    sb = pld.alloc_window_buffer(8)
    box = pld.alloc_window_buffer(T * N * 4)
    bs = pld.alloc_window_buffer(4)
    for r in pl.range(0, 2):
        tp_orch(x[r], w[r], pld.window(pa, [T, N], dtype=pl.FP32), pld.window(sa, [2, 1], dtype=pl.INT32), device=r)
    for r2 in pl.range(2, 4):
        tp_orch(x[r2], w[r2], pld.window(pb, [T, N], dtype=pl.FP32), pld.window(sb, [2, 1], dtype=pl.INT32), device=r2)
    swap_orch(pld.window(pa, [T, N], dtype=pl.FP32), pld.window(box, [T, N], dtype=pl.FP32),
              pld.window(bs, [1, 1], dtype=pl.INT32), y[0], device=0)
    swap_orch(pld.window(pa, [T, N], dtype=pl.FP32), pld.window(box, [T, N], dtype=pl.FP32),
              pld.window(bs, [1, 1], dtype=pl.INT32), y[1], device=1)
    swap_orch(pld.window(pb, [T, N], dtype=pl.FP32), pld.window(box, [T, N], dtype=pl.FP32),
              pld.window(bs, [1, 1], dtype=pl.INT32), y[2], device=2)
    swap_orch(pld.window(pb, [T, N], dtype=pl.FP32), pld.window(box, [T, N], dtype=pl.FP32),
              pld.window(bs, [1, 1], dtype=pl.INT32), y[3], device=3)


def test_tensor_parallel_pairs(device_ids):
    if len(device_ids) < 4:
        pytest.skip(f"needs 4 devices, got {device_ids}")
    rng = np.random.default_rng(16)
    p = 4
    x = rng.standard_normal((p, T, DH)).astype(np.float32)
    w = (rng.standard_normal((p, DH, N)) * 0.3).astype(np.float32)
    y = np.zeros((p, T, N), np.float32)
    host(x, w, y, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    xd = x.astype(np.float64)
    want = sum(xd[r] @ w[r] for r in range(p))
    for r in range(p):
        np.testing.assert_allclose(y[r], want, atol=1e-4)
