"""per-lane work lists in moe's dispatch style: a pl.spmd(3) task (allow_early_resolve) whose lanes read their
own row lists from a table (count clamped by a re-binding run-time `if`, rows as INDEX casts of INT32 reads),
scale their rows by a lane-dependent factor (INT32 -> FP32 scalar cast) and record per-lane counts with pl.write
into a manual_dep scratch; a pl.at task with deps= on the lanes (the scratch has no automatic edge) summing the
counts through an INDEX carry (`b = b + n`) and an INT32 one (`acc = acc + count`); a pl.parallel fan of pl.at
tasks, their TaskIds kept in a pl.array of TASK_ID, each a pl.pipeline(stage=2) column loop carrying a row sum;
a pl.unroll(1, 4) peeled loop; and a task_dummy join with deps built by a list comprehension."""
import numpy as np
import pypto.language as pl

R = 24
C = 64
CC = 16
NL = 3
MAXW = 10
NB = 3
RB = R // NB


@pl.jit
def lanes(x: pl.Tensor[[R, C], pl.FP32], wl: pl.Tensor[[NL, 16], pl.INT32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]],
          tot: pl.Out[pl.Tensor[[1, 8], pl.INT32]], rs: pl.Out[pl.Tensor[[R, CC], pl.FP32]],
          pk: pl.Out[pl.Tensor[[R, C], pl.FP32]]):
    cnt = pl.create_tensor([NL, 8], dtype=pl.INT32, manual_dep=True)
    with pl.spmd(NL, name_hint="lanes", allow_early_resolve=True) as lane_tid:
        lane = pl.tile.get_block_idx()
        n = pl.cast(pl.read(wl, [lane, 0]), pl.INDEX)
        if n > MAXW:
            n = pl.cast(MAXW, pl.INDEX)
        f = pl.cast(pl.cast(lane, pl.INT32) + pl.cast(1, pl.INT32), pl.FP32)
        for j in pl.range(n):
            r = pl.cast(pl.read(wl, [lane, 1 + j]), pl.INDEX)
            y[r:r + 1, :] = pl.mul(pl.exp(x[r:r + 1, :]), f)
        pl.write(cnt, [lane, 0], pl.cast(n, pl.INT32))
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="total", deps=[lane_tid]) as tot_tid:
        b = pl.cast(0, pl.INDEX)
        acc = pl.const(0, pl.INT32)
        for ln in pl.range(NL):
            c = pl.read(cnt, [ln, 0])
            b = b + pl.cast(c, pl.INDEX)
            acc = acc + c
        pl.write(tot, [0, 0], pl.cast(b, pl.INT32))
        pl.write(tot, [0, 1], acc)
    tids = pl.array.create(NB, pl.TASK_ID)
    for i in pl.parallel(NB):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="rowsum") as rtid:
            r0 = i * RB
            s = pl.full([RB, CC], dtype=pl.FP32, value=0.0)
            for cb in pl.pipeline(C // CC, stage=2):
                s = pl.add(s, y[r0:r0 + RB, cb * CC:cb * CC + CC])
            rs[r0:r0 + RB, :] = s
        tids[i] = rtid
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="peel") as peel_tid:
        first = x[0:RB, :]
        pk[0:RB, :] = pl.mul(first, 2.0)
        for u in pl.unroll(1, 4):
            if u < NB:
                pk[u * RB:u * RB + RB, :] = pl.add(x[u * RB:u * RB + RB, :], pl.mul(first, 1.0 * u))
    pl.system.task_dummy(deps=[tids[g] for g in range(NB)] + [tot_tid, peel_tid])
    return y


def test_lane_work_lists_task_graph():
    rng = np.random.default_rng(26)
    x = rng.standard_normal((R, C)).astype(np.float32)
    perm = rng.permutation(R)
    split = [perm[:5], perm[5:15], perm[15:]]  # the last lane lists 9 rows; the second 10
    wl = np.zeros((NL, 16), np.int32)
    for ln, rows in enumerate(split):
        wl[ln, 0] = len(rows)
        wl[ln, 1:1 + len(rows)] = rows
    wl[1, 0] = 14  # claims more than MAXW: clamped to the 10 listed
    y = np.zeros((R, C), np.float32)
    tot = np.zeros((1, 8), np.int32)
    rs = np.zeros((R, CC), np.float32)
    pk = np.zeros((R, C), np.float32)
    lanes(x, wl, y, tot, rs, pk)
    want = np.zeros((R, C), np.float32)
    for ln, rows in enumerate(split):
        want[rows] = np.exp(x[rows]) * (ln + 1)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    assert list(tot[0, :2]) == [R, R]
    np.testing.assert_allclose(rs, want.reshape(R, C // CC, CC).sum(1), rtol=1e-5, atol=1e-5)
    wpk = np.concatenate([2 * x[:RB]] + [x[u * RB:(u + 1) * RB] + u * x[:RB] for u in range(1, NB)])
    np.testing.assert_allclose(pk, wpk, rtol=1e-6)
