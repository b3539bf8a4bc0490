"""P19: a vocab-parallel LM head on 2 ranks in pypto-lib's lm_head style: a pl.spmd(2) fan grid-striding over
ragged vocab tiles (40 = 16 + 16 + 8 per rank) with a split-K matmul chain (pl.pipeline), set_validshape to the
full box, a pl.split_aiv UP_DOWN region carrying the accumulator with pl.aiv_shard into a GM scratch, and
pushes of valid_shape slices (tensor-level remote_store) into every rank's full-vocab window; notifies counted
per block; a wait task ordered by deps=; then a log-softmax over the whole vocab."""
import ml_dtypes
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

G = 8
D = 64
KT = 32
VP = 40
VT = 16
NT = 3
V = 2 * VP
VW = 96
BLK = 2
NR = pl.dynamic("NR")


@pl.jit
def lm_head(h: pl.Tensor[[G, D], pl.BF16], w: pl.Tensor[[VP, D], pl.BF16], out: pl.Out[pl.Tensor[[G, V], pl.FP32]],
            win: pld.DistributedTensor[[G, VW], pl.FP32], done: pld.DistributedTensor[[2, 8], pl.INT32]):
    shards = pl.create_tensor([G, NT * VT], dtype=pl.FP32)
    with pl.spmd(BLK, name_hint="push") as push_tid:
        core = pl.tile.get_block_idx()
        ctx = pld.get_comm_ctx(win)
        me = pld.rank(ctx)
        for ob in pl.range(core, NT, BLK):
            o0 = ob * VT
            vn = pl.min(VP - o0, VT)
            w0 = pl.slice(w, [VT, KT], [o0, 0], valid_shape=[vn, KT])
            acc = pl.matmul(h[:, 0:KT], w0, b_trans=True, out_dtype=pl.FP32)
            for kb in pl.pipeline(1, D // KT, stage=2):
                k0 = kb * KT
                wk = pl.slice(w, [VT, KT], [o0, k0], valid_shape=[vn, KT])
                acc = pl.matmul_acc(acc, h[:, k0:k0 + KT], wk, b_trans=True)
            acc = pl.set_validshape(acc, G, VT)
            for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
                sh = pl.aiv_shard(acc)
                r0 = aiv_id * (G // 2)
                shards[r0:r0 + G // 2, o0:o0 + VT] = sh
                for p in pl.range(2):
                    pld.tensor.remote_store(
                        pl.slice(shards, [G // 2, VT], [r0, o0], valid_shape=[G // 2, pl.min(VP - o0, VT)]),
                        win, p, [r0, me * VP + o0])
        for aiv2 in pl.split_aiv(2, mode=pl.SplitMode.NONE):
            pld.system.notify(done, peer=aiv2, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="wait", deps=[push_tid]) as wait_tid:
        for src in pl.range(2):
            pld.system.wait(done, offsets=[src, 0], expected=BLK, cmp=pld.WaitCmp.Ge)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="softmax", deps=[wait_tid]):
        lg = pl.slice(win, [G, VW], [0, 0], valid_shape=[G, V])
        lg = pl.fillpad(lg, pad_value=pl.PadValue.min)
        mx = pl.row_max(lg)
        lse = pl.add(pl.log(pl.row_sum(pl.exp(pl.row_expand_sub(lg, mx)))), mx)
        res = pl.row_expand_sub(lg, lse)
        out[:, :] = pl.slice(res, [G, V], [0, 0])
    return out


@pl.jit.host
def host(h: pl.Tensor[[G, D], pl.BF16], w: pl.Tensor[[NR, VP, D], pl.BF16], out: pl.Out[pl.Tensor[[NR, G, V], pl.FP32]]):
    wb = pld.alloc_window_buffer(G * VW * 4)
    db = pld.alloc_window_buffer(2 * 8 * 4)
    for r in pl.range(pld.world_size()):
        lm_head(h, w[r], out[r], pld.window(wb, [G, VW], dtype=pl.FP32), pld.window(db, [2, 8], dtype=pl.INT32),
                device=r)


def test_vocab_parallel_log_softmax(device_ids):
    rng = np.random.default_rng(19)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    h = rng.standard_normal((G, D)).astype(bf16)
    w = (rng.standard_normal((2, VP, D)) * 0.3).astype(bf16)
    out = np.zeros((2, G, V), np.float32)
    host(h, w, out, config=RunConfig(distributed_config=DistributedConfig(device_ids=device_ids[:2])))
    logits = h.astype(np.float64) @ np.concatenate([w[0], w[1]]).astype(np.float64).T
    mx = logits.max(-1, keepdims=True)
    want = logits - (np.log(np.exp(logits - mx).sum(-1, keepdims=True)) + mx)
    for r in range(2):
        np.testing.assert_allclose(out[r], want, atol=1e-4)
