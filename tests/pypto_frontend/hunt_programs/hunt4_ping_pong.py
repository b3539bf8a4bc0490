"""A tensor an orchestration loop re-binds to a buffer made in the loop (``cur = nxt``: pypto's own
``OrchRangeCarryRebindProgram`` shape): pypto's SSA carries it, so each iteration reads the buffer the last one
wrote and the loop's result is the last one. Three steps of a recurrence ``h = 2 h + x`` through a kernel task
each, the carried tensor read after the loop (pldemu translates such a loop once per iteration)."""
import numpy as np
import pypto.language as pl
import torch

R, C, STEPS = 4, 16, 3


@pl.jit.incore
def step(h: pl.Tensor[[R, C], pl.FP32], x: pl.Tensor[[R, C], pl.FP32], out: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    t = pl.load(h, [0, 0], [R, C])
    return pl.store(pl.add(pl.add(t, t), pl.load(x, [0, 0], [R, C])), [0, 0], out)


@pl.jit.incore
def copy(src: pl.Tensor[[R, C], pl.FP32], dst: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    return pl.store(pl.load(src, [0, 0], [R, C]), [0, 0], dst)


@pl.jit
def recurrence(x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    cur = pl.create_tensor([R, C], dtype=pl.FP32)
    cur = copy(x, cur)
    for _ in pl.range(STEPS):
        nxt = pl.create_tensor([R, C], dtype=pl.FP32)
        nxt = step(cur, x, nxt)
        cur = nxt
    y = copy(cur, y)
    return y


def test_a_swapped_tensor_carry() -> None:
    x = torch.arange(R * C, dtype=torch.float32).reshape(R, C) / 8
    y = torch.zeros(R, C)
    recurrence(x, y)
    h = x.numpy().copy()
    for _ in range(STEPS):
        h = h + h + x.numpy()
    np.testing.assert_array_equal(y.numpy(), h)
