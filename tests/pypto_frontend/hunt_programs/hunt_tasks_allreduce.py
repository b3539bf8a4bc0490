"""a task pipeline per rank: layernorm in a pl.spmd(3) fan (block rows from get_block_idx) into a
create_tensor scratch; a second pl.spmd(3) counting positives per column with INT32 atomic assembles into
a tensor created with init_value=0; a pl.at projection task with deps= on the
layernorm's TaskId (added to the automatic edges); an orchestration drain (pl.read of the count) choosing by a run-time `if` which task
runs next; an allreduce-like exchange: each rank pushes its partial into every rank's [2, T, N] window slot
(remote_store of a 2-D tile into a 3-D window), notifies with Set on its own signal row, waits for all rows."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

T = 24
B = 8
D = 64
N = 32
P = 2
NR = pl.dynamic("NR")
EPS = 1e-5


@pl.jit
def layer(x: pl.Tensor[[T, D], pl.FP32], w: pl.Tensor[[D, N], pl.FP32], out: pl.Out[pl.Tensor[[T, N], pl.FP32]],
          cnt: pl.Out[pl.Tensor[[1, D], pl.INT32]],
          box: pld.DistributedTensor[[P, T, N], pl.FP32], sig: pld.DistributedTensor[[P, 1], pl.INT32]):
    ln = pl.create_tensor([T, D], dtype=pl.FP32)
    part = pl.create_tensor([T, N], dtype=pl.FP32)
    pos = pl.create_tensor([1, D], dtype=pl.INT32, init_value=0)
    with pl.spmd(3, name_hint="ln") as ln_tid:
        b = pl.tile.get_block_idx()
        xb = x[b * B:b * B + B, :]
        mean = pl.mul(pl.row_sum(xb), 1.0 / D)
        xc = pl.row_expand_sub(xb, mean)
        var = pl.mul(pl.row_sum(pl.mul(xc, xc)), 1.0 / D)
        ln[b * B:b * B + B, :] = pl.row_expand_mul(xc, pl.rsqrt(pl.add(var, EPS)))
    with pl.spmd(3, name_hint="count", deps=[ln_tid]) as cnt_tid:
        c = pl.tile.get_block_idx()
        yb = ln[c * B:c * B + B, :]
        gt = pl.cmp(yb, 0.0, cmp_type=4)
        ones = pl.cast(gt, target_type=pl.INT32, mode="round")
        pos = pl.assemble(pos, pl.col_sum(ones), [0, 0], atomic=pl.AtomicType.Add)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="proj", deps=[ln_tid]):
        part[:, :] = pl.matmul(ln[:, :], w[:, :])
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="copy", deps=[cnt_tid]):
        cnt[:, :] = pos[:, :]
    first = pl.read(cnt, [0, 0])
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="exchange"):
        ctx = pld.get_comm_ctx(box)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        mine = part[:, :]
        for p in pl.range(n):
            pld.tile.remote_store(mine, box, p, [me, 0, 0])
            pld.system.notify(sig, peer=p, offsets=[me, 0], value=1, op=pld.NotifyOp.Set)
        for q in pl.range(n):
            pld.system.wait(sig, offsets=[q, 0], expected=1, cmp=pld.WaitCmp.Ge)
        acc = pl.full([T, N], dtype=pl.FP32, value=0.0)
        for q2, (a,) in pl.range(n, init_values=(acc,)):
            s = pl.yield_(pl.add(a, pl.reshape(box[q2:q2 + 1, :, :], [T, N])))
        out[:, :] = s
    if first > 12:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="double"):
            out[:, :] = pl.mul(out[:, :], 2.0)
    else:
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="bump"):
            out[:, :] = pl.add(out[:, :], 1.0)
    return out


@pl.jit.host
def host(x: pl.Tensor[[NR, T, D], pl.FP32], w: pl.Tensor[[NR, D, N], pl.FP32], out: pl.Out[pl.Tensor[[NR, T, N], pl.FP32]],
         cnt: pl.Out[pl.Tensor[[NR, 1, D], pl.INT32]]):
    bbuf = pld.alloc_window_buffer(P * T * N * 4)
    sbuf = pld.alloc_window_buffer(P * 4)
    for r in pl.range(pld.world_size()):
        box = pld.window(bbuf, [P, T, N], dtype=pl.FP32)
        sig = pld.window(sbuf, [P, 1], dtype=pl.INT32)
        layer(x[r], w[r], out[r], cnt[r], box, sig, device=r)


def test_task_pipeline_exchange(device_ids):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((P, T, D)) + 0.3).astype(np.float32)
    x[1, :, 0] -= 5.0  # rank 1's column 0 mostly negative: the other branch
    w = (rng.standard_normal((P, D, N)) * 0.1).astype(np.float32)
    out = np.zeros((P, T, N), np.float32)
    cnt = np.zeros((P, 1, D), np.int32)
    host(x, w, out, cnt, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:P])))
    xd = x.astype(np.float64)
    mean = xd.mean(-1, keepdims=True)
    lns = (xd - mean) / np.sqrt(((xd - mean) ** 2).mean(-1, keepdims=True) + EPS)
    tot = sum(lns[r] @ w[r] for r in range(P))
    for r in range(P):
        c = (lns[r] > 0).sum(0, keepdims=True)
        np.testing.assert_array_equal(cnt[r], c)
        want = tot * 2.0 if c[0, 0] > 12 else tot + 1.0
        np.testing.assert_allclose(out[r], want, atol=1e-4)
