"""A name bound to another name's fresh value (``prev = cur`` right after ``cur = ...``), in a loop that carries
both, in a ``pl.unroll`` that re-binds both each step, and for task ids kept in a ``pl.array`` between waves
(pypto-lib dspark ``prefill_sparse_attn``'s ``prior_merge_tid = merge_tids[0]; merge_tid = prior_merge_tid``):
each name keeps its own value. Was: the second binding took the first's definition over, so ``cur`` kept a
stale value and the next wave's task depended on the first wave's dummy (a race on the shared scratch)."""
import numpy as np
import pypto.language as pl
import torch

R, C, W = 4, 16, 3


@pl.jit.inline(auto_scope=False)
def wave(x: pl.Tensor, scratch: pl.Tensor, out: pl.Tensor, prior: pl.Scalar[pl.TASK_ID], w: pl.Scalar[pl.INDEX]
         ) -> pl.Scalar[pl.TASK_ID]:
    with pl.spmd(2, name_hint="stage", deps=[prior]) as s_tid:
        b = pl.tile.get_block_idx()
        scratch[b * 2:b * 2 + 2, :] = pl.add(x[w * R + b * 2:w * R + b * 2 + 2, :], 1.0)
    with pl.spmd(2, name_hint="use", deps=[s_tid]) as u_tid:
        b = pl.tile.get_block_idx()
        out[w * R + b * 2:w * R + b * 2 + 2, :] = pl.mul(scratch[b * 2:b * 2 + 2, :], 2.0)
    with pl.spmd(1, name_hint="merge", deps=[u_tid]) as merge_tid:
        out[0:1, 0:1] = pl.add(out[0:1, 0:1], 0.0)
    return merge_tid


@pl.jit
def aliases(x: pl.Tensor[[W * R, C], pl.FP32], out: pl.Out[pl.Tensor[[W * R, C], pl.FP32]],
            y: pl.Out[pl.Tensor[[R, C], pl.FP32]], rows: pl.Scalar[pl.INDEX]):
    tids = pl.array.create(1, pl.TASK_ID)
    tids[0] = pl.system.task_dummy(deps=[])
    with pl.scope():
        scratch = pl.create_tensor([R, C], dtype=pl.FP32)
        for w in pl.unroll(W):
            prior = tids[0]
            merge_tid = prior
            if w * R < rows:
                merge_tid = wave(x, scratch, out, prior, w)
            tids[0] = merge_tid
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="carry", deps=[tids[0]]):
        t = x[0:R, :]
        cur = pl.full([R, C], dtype=pl.FP32, value=0.0)
        prev = pl.full([R, C], dtype=pl.FP32, value=0.0)
        for _i in pl.range(3):
            cur = pl.add(t, 1.0)
            prev = cur
            t = pl.add(cur, prev)
        for _j in pl.unroll(2):
            cur = pl.mul(t, 0.5)
            prev = cur
            t = pl.sub(t, prev)
        y[:, :] = pl.add(t, cur)
    return out


def test_aliases_keep_their_values() -> None:
    x = torch.arange(W * R * C, dtype=torch.float32).reshape(W * R, C) / 16
    out, y = torch.zeros(W * R, C), torch.zeros(R, C)
    aliases(x, out, y, W * R)
    np.testing.assert_array_equal(out.numpy(), ((x + 1) * 2).numpy())
    t = x[:R].numpy().copy()
    for _ in range(3):
        cur = t + np.float32(1.0)
        t = cur + cur
    for _ in range(2):
        cur = t * np.float32(0.5)
        t = t - cur
    np.testing.assert_array_equal(y.numpy(), t + cur)
