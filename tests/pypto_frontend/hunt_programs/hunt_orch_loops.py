"""orchestration-level loops of tasks: split-K accumulation into a create_tensor (init_value) by a
sequential pl.range of pl.at tasks over orchestration views of x and w (InOut promotion chains them);
a pl.parallel fan writing disjoint row blocks of a tensor; a run-time trip count (pl.read of a tensor)
driving pl.spmd tasks over the ragged tail; an orchestration pl.write between batches read by the next
task; a task_dummy join; then at the HOST a signal-less allreduce over a window the dispatches fill
(ragged 36-wide rows), and a second dispatch that reads it back."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

T = 20
TB = 8
K = 96
KT = 32
N = 40
NR = pl.dynamic("NR")


@pl.jit
def stage1(x: pl.Tensor[[T, K], pl.FP32], w: pl.Tensor[[K, N], pl.FP32], nt: pl.Tensor[[1, 8], pl.INT32],
           scale: pl.Out[pl.Tensor[[1, 8], pl.FP32]], data: pld.DistributedTensor[[T, N], pl.FP32]):
    acc = pl.create_tensor([T, N], dtype=pl.FP32, init_value=0.0)
    for kc in pl.range(K // KT):
        xk = x[:, kc * KT:kc * KT + KT]
        wk = w[kc * KT:kc * KT + KT, :]
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="mm"):
            acc[:, :] = pl.add(acc[:, :], pl.matmul(xk, wk))
    sq = pl.create_tensor([T, N], dtype=pl.FP32)
    for i in pl.parallel(2):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="square"):
            blk = acc[i * TB:i * TB + TB, :]
            sq[i * TB:i * TB + TB, :] = pl.mul(blk, blk)
    pl.write(scale, [0, 0], pl.cast(pl.read(nt, [0, 0]), pl.FP32))
    n_tail = pl.read(nt, [0, 0])
    for t in pl.range(n_tail):
        r0 = 2 * TB + t
        with pl.spmd(1, name_hint="tail") as tail_tid:
            row = acc[r0:r0 + 1, :]
            s = pl.read(scale, [0, 0])
            sq[r0:r0 + 1, :] = pl.mul(pl.mul(row, row), s)
        pl.system.task_dummy(deps=[tail_tid])
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="publish"):
        data[:, :] = sq[:, :]
    return data


@pl.jit
def stage2(data: pld.DistributedTensor[[T, N], pl.FP32], out: pl.Out[pl.Tensor[[T, N], pl.FP32]]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="readback"):
        out[:, :] = pl.sqrt(data[:, :])
    return out


@pl.jit.host
def host(x: pl.Tensor[[NR, T, K], pl.FP32], w: pl.Tensor[[NR, K, N], pl.FP32], nt: pl.Tensor[[NR, 1, 8], pl.INT32],
         scale: pl.Out[pl.Tensor[[NR, 1, 8], pl.FP32]], out: pl.Out[pl.Tensor[[NR, T, N], pl.FP32]]):
    dbuf = pld.alloc_window_buffer(T * N * 4)
    data = pld.window(dbuf, [T, N], dtype=pl.FP32)
    for r in pl.range(pld.world_size()):
        stage1(x[r], w[r], nt[r], scale[r], data, device=r)
    data = pld.tensor.allreduce(data, op=pld.ReduceOp.Sum)
    for r in pl.range(pld.world_size()):
        stage2(data, out[r], device=r)


def test_orchestration_loops_host_allreduce(device_ids):
    rng = np.random.default_rng(8)
    p = 2
    x = rng.standard_normal((p, T, K)).astype(np.float32)
    w = (rng.standard_normal((p, K, N)) * 0.2).astype(np.float32)
    nt = np.zeros((p, 1, 8), np.int32)
    nt[0, 0, 0], nt[1, 0, 0] = 4, 3
    scale = np.zeros((p, 1, 8), np.float32)
    out = np.zeros((p, T, N), np.float32)
    host(x, w, nt, scale, out, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:p])))
    tot = np.zeros((T, N))
    for r in range(p):
        a = x[r].astype(np.float64) @ w[r]
        n = int(nt[r, 0, 0])
        s = np.zeros((T, N))  # rows past the tail are never written: the scratch's zeros
        s[:16] = a[:16] ** 2
        s[16:16 + n] = a[16:16 + n] ** 2 * n
        tot += s
    for r in range(p):
        np.testing.assert_allclose(out[r], np.sqrt(tot), atol=1e-3)
        assert scale[r, 0, 0] == nt[r, 0, 0]
