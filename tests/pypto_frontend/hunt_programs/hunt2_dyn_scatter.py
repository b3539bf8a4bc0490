"""a compressor-style projection and cache scatter over dynamic shapes (pl.dynamic B, S and block count, bound by
bind_dynamic; the program called at two sizes): pl.tensor.dim of the dynamic axes, a reshape of [B, S, D] to
[B * S, D] and of the [NBLK, BS, D2] cache to rows, a pl.spmd whose block count is computed from them, ragged
row tiles (valid_shape, pl.min / pl.max of dynamic scalars) through a split-K pl.pipeline with b_trans into a
padded scratch; then one pl.at task looping pl.range(b_dim) x pl.pipeline(s_dim) that reads INT64 slot ids
(negative: skip) and INT32 positions (a `%` picking a row of a position table) and writes rows into the
InOut cache."""
import numpy as np
import pypto.language as pl

B_DYN = pl.dynamic("B_DYN")
S_DYN = pl.dynamic("S_DYN")
NB_DYN = pl.dynamic("NB_DYN")
D = 64
KC = 32
D2 = 32
TT = 8
PAD = 64
BS = 4
R = 4


@pl.jit
def compress(x: pl.Tensor[[B_DYN, S_DYN, D], pl.FP32], w: pl.Tensor[[D2, D], pl.FP32],
             ape: pl.Tensor[[R, D2], pl.FP32], pos: pl.Tensor[[B_DYN, S_DYN], pl.INT32],
             slots: pl.Tensor[[B_DYN, S_DYN], pl.INT64], cache: pl.InOut[pl.Tensor[[NB_DYN, BS, D2], pl.FP32]]):
    x.bind_dynamic(0, B_DYN)
    x.bind_dynamic(1, S_DYN)
    cache.bind_dynamic(0, NB_DYN)
    b_dim = pl.tensor.dim(x, 0)
    s_dim = pl.tensor.dim(x, 1)
    bs = b_dim * s_dim
    nblk = pl.tensor.dim(cache, 0)
    x_flat = pl.reshape(x, [bs, D])
    rows_all = pl.reshape(cache, [nblk * BS, D2])
    proj = pl.create_tensor([PAD, D2], dtype=pl.FP32)
    t_cover = pl.max(bs, TT)
    with pl.spmd((t_cover + TT - 1) // TT, name_hint="proj") as proj_tid:
        blk = pl.tile.get_block_idx()
        r0 = blk * TT
        rows = pl.min(TT, bs - r0)
        acc = pl.create_tensor([TT, D2], dtype=pl.FP32)
        for kb in pl.pipeline(0, D // KC, stage=2):
            k0 = kb * KC
            xt = pl.slice(x_flat, [TT, KC], [r0, k0], valid_shape=[rows, KC])
            if kb == 0:
                acc = pl.matmul(xt, w[:, k0:k0 + KC], b_trans=True, out_dtype=pl.FP32)
            else:
                acc = pl.matmul_acc(acc, xt, w[:, k0:k0 + KC], b_trans=True)
        proj[r0:r0 + TT, :] = pl.set_validshape(acc, rows, D2)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="scatter", deps=[proj_tid]):
        for bi in pl.range(b_dim):
            for si in pl.pipeline(s_dim, stage=2):
                row = bi * s_dim + si
                p = pl.read(pos, [bi, si])
                slot = pl.read(slots, [bi, si])
                if slot >= 0:
                    srow = pl.cast(slot, pl.INDEX)
                    arow = pl.cast(p % R, pl.INDEX)
                    rows_all[srow:srow + 1, :] = pl.add(proj[row:row + 1, :], ape[arow:arow + 1, :])
    return cache


def run(b, s, nb, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, s, D)).astype(np.float32)
    w = (rng.standard_normal((D2, D)) * 0.1).astype(np.float32)
    ape = rng.standard_normal((R, D2)).astype(np.float32)
    pos = rng.integers(0, 1000, (b, s)).astype(np.int32)
    slots = rng.permutation(nb * BS)[:b * s].reshape(b, s).astype(np.int64)
    slots[0, 0] = -1
    slots[-1, -1] = -5
    cache = rng.standard_normal((nb, BS, D2)).astype(np.float32)
    want = cache.copy().reshape(nb * BS, D2)
    compress(x, w, ape, pos, slots, cache)
    pr = x.reshape(b * s, D).astype(np.float64) @ w.T.astype(np.float64)
    for i in range(b):
        for j in range(s):
            if slots[i, j] >= 0:
                want[slots[i, j]] = pr[i * s + j] + ape[pos[i, j] % R]
    np.testing.assert_allclose(cache.reshape(nb * BS, D2), want, rtol=1e-5, atol=1e-5)


def test_dynamic_projection_scatter():
    run(3, 7, 8, 30)  # 21 rows: 3 blocks, the last with 5
    run(1, 5, 3, 31)  # fewer rows than a tile: pl.max keeps one block
