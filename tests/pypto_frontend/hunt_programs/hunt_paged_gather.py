"""kernel-driven paged gather into L1 over two layers: the orchestration loop hands each layer's blocks of
a layer-stacked BF16 KV pool to an inline helper as a slice (a view at a run-time offset), which reshapes it
flat; one lane per token gathers its pages with pl.gather_row into a pl.create_l1 tile, one multi-row
transfer per page whose static window is the whole tile (so a later page's window overhangs the tile) and
whose valid_shape is the page's run-time row count, then a tail of finite rows; a -inf bias masks the
lanes past the token's length, then softmax and P @ V on the cube."""
import ml_dtypes
import numpy as np
import pypto.language as pl

LAY = 2
NBLK = 4  # pages per layer
BS = 8  # rows per page
KT = 16  # rows gathered per token: two pages
HD = 32
QH = 16  # query heads per token
TOK = 2
NEG = -1.0e30


@pl.jit.inline
def attend(q: pl.Tensor[[TOK * QH, HD], pl.BF16], kv: pl.Tensor[[NBLK, BS, HD], pl.BF16],
           table: pl.Tensor[[TOK, 8], pl.INT32], lens: pl.Tensor[[TOK, 8], pl.INT32],
           out: pl.Tensor[[TOK * QH, HD], pl.FP32]):
    nb = pl.tensor.dim(kv, 0)
    flat = pl.reshape(kv, [nb * BS, HD])
    with pl.spmd(TOK, name_hint="gather_attend"):
        t = pl.tile.get_block_idx()
        n = pl.cast(pl.read(lens, [t, 0]), pl.INDEX)
        acc = pl.create_l1([KT, HD], pl.BF16)
        for page in pl.unroll(2):
            lo = page * BS
            rows = pl.min(pl.max(n - lo, 0), BS)
            if rows > 0:
                blk = pl.cast(pl.read(table, [t, page]), pl.INDEX)
                acc = pl.gather_row(acc, flat, [lo, 0], [blk * BS, 0], [KT, HD], valid_shape=[rows, HD])
        if n < KT:  # lanes past the length get finite rows; the bias masks them
            acc = pl.gather_row(acc, flat, [n, 0], [0, 0], [KT, HD], valid_shape=[KT - n, HD])
        bias = pl.full([1, KT], dtype=pl.FP32, value=0.0)
        for c in pl.range(KT):
            if c >= n:
                pl.write(bias, [0, c], NEG)
        qt = q[t * QH:t * QH + QH, 0:HD]
        s = pl.col_expand_add(pl.matmul(qt, acc, b_trans=True, out_dtype=pl.FP32), bias)
        e = pl.exp(pl.row_expand_sub(s, pl.row_max(s)))
        p = pl.cast(pl.row_expand_div(e, pl.row_sum(e)), target_type=pl.BF16, mode="rint")
        out[t * QH:t * QH + QH, 0:HD] = pl.matmul(p, acc, out_dtype=pl.FP32)
    return out


@pl.jit
def paged(q: pl.Tensor[[TOK * QH, HD], pl.BF16], pool: pl.Tensor[[LAY * NBLK, BS, HD], pl.BF16],
          table: pl.Tensor[[TOK, 8], pl.INT32], lens: pl.Tensor[[TOK, 8], pl.INT32],
          out: pl.Out[pl.Tensor[[LAY, TOK * QH, HD], pl.FP32]]):
    for layer in pl.range(LAY):
        kv = pl.slice(pool, [NBLK, BS, HD], [layer * NBLK, 0, 0])
        o = pl.create_tensor([TOK * QH, HD], dtype=pl.FP32)
        with pl.scope():
            o = attend(q, kv, table, lens, o)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="store"):
            out[layer, 0:TOK * QH, 0:HD] = o[0:TOK * QH, 0:HD]
    return out


def golden(q, pool, table, lens):
    bf = ml_dtypes.bfloat16
    out = np.zeros((LAY, TOK * QH, HD), np.float32)
    for layer in range(LAY):
        for t in range(TOK):
            n = int(lens[t, 0])
            pages = [pool[layer * NBLK + table[t, p]] for p in range(2)]
            rows = np.concatenate(pages)[:n]
            kv = np.concatenate([rows, np.repeat(pool[layer * NBLK][:1], KT - n, 0)]).astype(np.float32)
            s = q[t * QH:(t + 1) * QH].astype(np.float32) @ kv.T
            s[:, n:] = -np.inf
            e = np.exp(s - s.max(-1, keepdims=True))
            p = (e / e.sum(-1, keepdims=True)).astype(bf).astype(np.float32)
            out[layer, t * QH:(t + 1) * QH] = p @ kv
    return out


def test_paged_gather_from_a_layer_view():
    rng = np.random.default_rng(5)
    q = (rng.standard_normal((TOK * QH, HD)) * 0.3).astype(ml_dtypes.bfloat16)
    pool = rng.standard_normal((LAY * NBLK, BS, HD)).astype(ml_dtypes.bfloat16)
    table = np.zeros((TOK, 8), np.int32)
    table[0, :2], table[1, :2] = [3, 1], [2, 0]
    lens = np.zeros((TOK, 8), np.int32)
    lens[:, 0] = [13, 6]  # a partial second page; one page only
    out = np.zeros((LAY, TOK * QH, HD), np.float32)
    paged(q, pool, table, lens, out)
    np.testing.assert_allclose(out, golden(q, pool, table, lens), atol=2e-3, rtol=2e-3)
