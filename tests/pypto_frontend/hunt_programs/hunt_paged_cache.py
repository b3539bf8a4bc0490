"""paged KV cache decode over two layers: the orchestration takes per-layer views of a 4-D cache by
a scalar index (cache[layer]) and passes them to an inline helper; a task appends the new token's K/V row
at the block the block table names (run-time position, // and %), then decodes one query over the pos+1
cached tokens block by block (run-time block count, 3-D slices at run-time offsets, ragged last block
masked by set_validshape + fillpad min), online softmax carried through the block loop; the layer output
feeds the next layer's query (a create_tensor handed between tasks)."""
import numpy as np
import pypto.language as pl

LAY = 2
NB = 4
BS = 8
HD = 32
QR = 8  # query rows (heads), all attend the same cache
NR = pl.dynamic("NR")


@pl.jit.inline
def decode_layer(q: pl.Tensor[[QR, HD], pl.FP32], knew: pl.Tensor[[1, HD], pl.FP32],
                 kc: pl.Tensor[[NB, BS, HD], pl.FP32], vc: pl.Tensor[[NB, BS, HD], pl.FP32],
                 table: pl.Tensor[[1, 8], pl.INT32], pos: pl.Scalar[pl.INDEX], o: pl.Tensor[[QR, HD], pl.FP32]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="append"):
        blk = pl.cast(pl.read(table, [0, pos // BS]), pl.INDEX)
        kc[blk:blk + 1, pos % BS:pos % BS + 1, :] = pl.reshape(knew[:, :], [1, 1, HD])
        vc[blk:blk + 1, pos % BS:pos % BS + 1, :] = pl.reshape(pl.mul(knew[:, :], -1.0), [1, 1, HD])
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="attend"):
        qt = q[:, :]
        n = pos + 1
        nblk = (n + BS - 1) // BS
        m0 = pl.full([QR, 1], dtype=pl.FP32, value=-1.0e30)
        l0 = pl.full([QR, 1], dtype=pl.FP32, value=0.0)
        o0 = pl.full([QR, HD], dtype=pl.FP32, value=0.0)
        for j, (m, lsum, acc) in pl.range(nblk, init_values=(m0, l0, o0)):
            pb = pl.cast(pl.read(table, [0, j]), pl.INDEX)
            kv = pl.min(BS, n - j * BS)
            kb = pl.reshape(kc[pb:pb + 1, :, :], [BS, HD])
            vb = pl.reshape(vc[pb:pb + 1, :, :], [BS, HD])
            s = pl.matmul(qt, kb, b_trans=True)
            s = pl.fillpad(pl.set_validshape(s, QR, kv), pad_value=pl.PadValue.min)
            mn = pl.maximum(m, pl.row_max(s))
            al = pl.exp(pl.sub(m, mn))
            p = pl.exp(pl.row_expand_sub(s, mn))
            ln = pl.add(pl.mul(lsum, al), pl.row_sum(p))
            an = pl.add(pl.row_expand_mul(acc, al), pl.matmul(p, vb))
            _mf, lf, af = pl.yield_(mn, ln, an)
        o[:, :] = pl.row_expand_div(af, lf)
    return o


@pl.jit
def decode(q: pl.Tensor[[QR, HD], pl.FP32], knew: pl.Tensor[[LAY, 1, HD], pl.FP32],
           kcache: pl.InOut[pl.Tensor[[LAY, NB, BS, HD], pl.FP32]], vcache: pl.InOut[pl.Tensor[[LAY, NB, BS, HD], pl.FP32]],
           table: pl.Tensor[[1, 8], pl.INT32], posv: pl.Tensor[[1, 8], pl.INT32], out: pl.Out[pl.Tensor[[QR, HD], pl.FP32]]):
    pos = pl.cast(pl.read(posv, [0, 0]), pl.INDEX)
    h0 = pl.create_tensor([QR, HD], dtype=pl.FP32)
    h1 = pl.create_tensor([QR, HD], dtype=pl.FP32)
    h0 = decode_layer(q, knew[0], kcache[0], vcache[0], table, pos, h0)
    h1 = decode_layer(h0, knew[1], kcache[1], vcache[1], table, pos, h1)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="out"):
        out[:, :] = h1[:, :]
    return out


def golden(q, knew, kc, vc, table, pos):
    kc, vc = kc.copy(), vc.copy()
    h = q.astype(np.float64)
    for layer in range(LAY):
        b = table[0, pos // BS]
        kc[layer, b, pos % BS] = knew[layer, 0]
        vc[layer, b, pos % BS] = -knew[layer, 0]
        ks = np.concatenate([kc[layer, table[0, j]] for j in range(NB)])[:pos + 1].astype(np.float64)
        vs = np.concatenate([vc[layer, table[0, j]] for j in range(NB)])[:pos + 1].astype(np.float64)
        s = h @ ks.T
        e = np.exp(s - s.max(-1, keepdims=True))
        h = (e / e.sum(-1, keepdims=True)) @ vs
    return h, kc, vc


def test_paged_cache_decode():
    rng = np.random.default_rng(12)
    q = (rng.standard_normal((QR, HD)) * 0.3).astype(np.float32)
    knew = (rng.standard_normal((LAY, 1, HD)) * 0.3).astype(np.float32)
    kc = (rng.standard_normal((LAY, NB, BS, HD)) * 0.3).astype(np.float32)
    vc = rng.standard_normal((LAY, NB, BS, HD)).astype(np.float32)
    table = np.array([[2, 0, 3, 1, 0, 0, 0, 0]], np.int32)
    pos = 19
    posv = np.array([[pos, 0, 0, 0, 0, 0, 0, 0]], np.int32)
    out = np.zeros((QR, HD), np.float32)
    wh, wk, wv = golden(q, knew, kc, vc, table, pos)
    decode(q, knew, kc, vc, table, posv, out)
    np.testing.assert_allclose(out, wh, atol=1e-4)
    np.testing.assert_array_equal(kc, wk)
    np.testing.assert_array_equal(vc, wv)
