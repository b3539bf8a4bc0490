"""pypto-lib's separate-task grid style (hc_pre's "separate" implementation): three pl.spmd(4) tasks (the
`with ... :` and `for core in pl.spmd(n)` forms, allow_early_resolve=True) whose blocks grid-stride over work
items (pl.range(core, n, 4)): split-K partial row sums, their reduction (other blocks' partials, ordered by the
tensor edges between the tasks), an rsqrt. (The fused form, one task with pl.system.syncall between the phases,
is refused by pldemu: syncall is modelled only as the barrier of a pl.split_aiv region's lanes.)"""
import numpy as np
import pypto.language as pl

T = 24
TT = 8
K = 64
KS = 2
KC = K // KS
CORES = 4


@pl.jit
def grid(x: pl.Tensor[[T, K], pl.FP32], y: pl.Out[pl.Tensor[[1, T], pl.FP32]]):
    parts = pl.create_tensor([KS, T], dtype=pl.FP32)
    tot = pl.create_tensor([1, T], dtype=pl.FP32)
    with pl.spmd(CORES, name_hint="phase1", allow_early_resolve=True):
        core = pl.tile.get_block_idx()
        for task in pl.range(core, (T // TT) * KS, CORES):
            t0 = (task // KS) * TT
            ks = task % KS
            xc = x[t0:t0 + TT, ks * KC:ks * KC + KC]
            parts[ks:ks + 1, t0:t0 + TT] = pl.reshape(pl.row_sum(pl.mul(xc, xc)), [1, TT])
    for core2 in pl.spmd(CORES, name_hint="phase2", allow_early_resolve=True):
        for task2 in pl.range(core2, T // TT, CORES):
            r0 = task2 * TT
            s = parts[0:1, r0:r0 + TT]
            for k2 in pl.range(1, KS):
                s = pl.add(s, parts[k2:k2 + 1, r0:r0 + TT])
            tot[0:1, r0:r0 + TT] = s
    with pl.spmd(CORES, name_hint="phase3"):
        core3 = pl.tile.get_block_idx()
        for task3 in pl.range(core3, T // TT, CORES):
            r1 = task3 * TT
            y[0:1, r1:r1 + TT] = pl.rsqrt(pl.add(pl.mul(tot[0:1, r1:r1 + TT], 1.0 / K), 1e-6))
    return y


def test_grid_stride_phases():
    x = np.random.default_rng(14).standard_normal((T, K)).astype(np.float32)
    y = np.zeros((1, T), np.float32)
    grid(x, y)
    np.testing.assert_allclose(y[0], 1.0 / np.sqrt((x.astype(np.float64) ** 2).mean(-1) + 1e-6), rtol=1e-5)
