"""an indexer's top-k in decode_indexer's style: one pl.spmd lane per token (allow_early_resolve), each
writing -1 over its output row first, then, under a run-time `if` on its visible length (read from a tensor),
a 256-score row masked past that length (set_validshape + fillpad min), sort32 with a UINT32 arange,
mrgsort block_len=64 then the two 256-slot halves merged (format 2), the top 16 (value, index) pairs split by
gather_mask P1010 (INT32 indices) and P0101 (values), the indices cut to min(16, visible) by
set_validshape and offset by a run-time INT32 scalar, a payload gathered by them (pl.gather dim=-1); ties
among equal scores keep source order (pypto-lib's golden: a stable argsort). A second sort keyed by an INT32
arange starting at 1000, and a row reversed by a descending arange gather."""
import numpy as np
import pypto.language as pl

T = 6
L = 256
TOPK = 16


@pl.jit
def topk(score: pl.Tensor[[T, L], pl.FP32], payload: pl.Tensor[[T, L], pl.FP32], lens: pl.Tensor[[T, 8], pl.INT32],
         offs: pl.Tensor[[1, 8], pl.INT32], out_idx: pl.Out[pl.Tensor[[T, TOPK], pl.INT32]],
         out_val: pl.Out[pl.Tensor[[T, TOPK], pl.FP32]], out_pay: pl.Out[pl.Tensor[[T, TOPK], pl.FP32]],
         keyed: pl.Out[pl.Tensor[[T, TOPK], pl.INT32]], rev: pl.Out[pl.Tensor[[T, L], pl.FP32]]):
    for t in pl.spmd(T, name_hint="topk", allow_early_resolve=True):
        out_idx[t:t + 1, :] = pl.full([1, TOPK], dtype=pl.INT32, value=-1)
        vis = pl.read(lens, [t, 0])
        if vis > 0:
            off = pl.read(offs, [0, 0])
            raw = score[t:t + 1, 0:L]
            full = pl.fillpad(pl.set_validshape(raw, 1, vis), pad_value=pl.PadValue.min)
            ids = pl.arange(0, [1, L], dtype=pl.UINT32)
            srt = pl.sort32(full, ids)
            srt = pl.mrgsort(srt, block_len=64)
            srt = pl.mrgsort(srt[:, 0:L], srt[:, L:2 * L])
            pairs = srt[:, 0:2 * TOPK]
            ii = pl.gather(pairs, mask_pattern=pl.tile.MaskPattern.P1010, output_dtype=pl.INT32)
            vv = pl.gather(pairs, mask_pattern=pl.tile.MaskPattern.P0101)
            nv = pl.min(TOPK, vis)
            ii_valid = pl.set_validshape(ii, 1, nv)
            out_idx[t:t + 1, 0:TOPK] = pl.add(ii_valid, off)
            out_val[t:t + 1, 0:TOPK] = vv
            pay = pl.gather(payload[t:t + 1, 0:L], dim=-1, index=ii)
            out_pay[t:t + 1, 0:TOPK] = pay
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="keyed"):
        for t2 in pl.range(T):
            row = payload[t2:t2 + 1, 0:L]
            kidx = pl.arange(1000, [1, L], dtype=pl.INT32)
            s2 = pl.mrgsort(pl.sort32(row, kidx), block_len=64)
            s2 = pl.mrgsort(s2, block_len=256)
            keyed[t2:t2 + 1, :] = pl.gather(s2[:, 0:2 * TOPK], mask_pattern=pl.tile.MaskPattern.P1010,
                                            output_dtype=pl.INT32)
            back = pl.arange(L - 1, [1, L], dtype=pl.INT32, descending=True)
            rev[t2:t2 + 1, :] = pl.gather(row, dim=-1, index=back)
    return out_idx


def stable_desc(v):
    return np.argsort(-v, kind="stable")


def test_topk_ragged_rows_ties():
    rng = np.random.default_rng(23)
    score = rng.standard_normal((T, L)).astype(np.float32)
    score[1, 40:60] = 2.5  # a run of ties inside the top 16
    score[1, 200] = 2.5  # and one in the other half
    score[2, :] = np.round(score[2, :])  # many ties
    payload = rng.standard_normal((T, L)).astype(np.float32)
    payload[4, 10:80] = 0.75
    lens = np.zeros((T, 8), np.int32)
    lens[:, 0] = [256, 180, 37, 0, 5, 1]
    offs = np.zeros((1, 8), np.int32)
    offs[0, 0] = 1000000
    out_idx = np.full((T, TOPK), 7, np.int32)
    out_val = np.full((T, TOPK), 7.0, np.float32)
    out_pay = np.full((T, TOPK), 7.0, np.float32)
    keyed = np.zeros((T, TOPK), np.int32)
    rev = np.zeros((T, L), np.float32)
    topk(score, payload, lens, offs, out_idx, out_val, out_pay, keyed, rev)
    fmin = -np.inf  # PadValue.min of FP32 on the device
    for t in range(T):
        n = int(lens[t, 0])
        want_idx = np.full(TOPK, -1)
        if n > 0:
            masked = np.where(np.arange(L) < n, score[t], fmin).astype(np.float32)
            order = stable_desc(masked)[:TOPK]
            k = min(TOPK, n)
            want_idx[:k] = order[:k] + offs[0, 0]
            np.testing.assert_array_equal(out_val[t], masked[order], err_msg=f"values {t}")
            np.testing.assert_array_equal(out_pay[t], payload[t][order], err_msg=f"payload {t}")
        else:
            np.testing.assert_array_equal(out_val[t], 7.0)
            np.testing.assert_array_equal(out_pay[t], 7.0)
        np.testing.assert_array_equal(out_idx[t], want_idx, err_msg=f"indices {t}")
        np.testing.assert_array_equal(keyed[t], stable_desc(payload[t])[:TOPK] + 1000, err_msg=f"keyed {t}")
    np.testing.assert_array_equal(rev, payload[:, ::-1])
