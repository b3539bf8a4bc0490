"""sequence-parallel decode with a KV cache kept in persistent windows of a prepared worker, at 3 ranks (class
form, compiled.prepare(persistent=True, reset_persistent_windows=False)): six dispatches, one per decoded token,
each with new data and the position as a host pl.Scalar[pl.INDEX]; token t's K / V row goes to rank t % 3's cache
window at row t // 3 (rank-dependent run-time `if`), each rank attends over its own cached rows (a run-time
count (pos + n - me) // n, ragged valid_shape loads, an empty shard taking the other branch of an `if`), and two
HOST allreduces (Max of the row maximum, then Sum of [o * alpha | l * alpha] packed in one window row) merge
the shards; the same [world_size] signal serves both allreduces in every dispatch. Goldens: numpy attention
over the tokens so far."""
import math

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import pytest
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

P = 3
HD = 16
CAP = 8
W = HD + 8
SCALE = 1.0 / math.sqrt(HD)


@pl.program
class Decode:
    @pl.function(type=pl.FunctionType.InCore)
    def append_attend(self, q: pl.Tensor[[1, HD], pl.FP32], k: pl.Tensor[[1, HD], pl.FP32],
                      v: pl.Tensor[[1, HD], pl.FP32], ck: pl.InOut[pld.DistributedTensor[[CAP, HD], pl.FP32]],
                      cv: pl.InOut[pld.DistributedTensor[[CAP, HD], pl.FP32]],
                      mw: pl.InOut[pld.DistributedTensor[[1, 8], pl.FP32]],
                      part: pl.Out[pl.Tensor[[1, W], pl.FP32]], pos: pl.Scalar[pl.INDEX]):
        ctx = pld.get_comm_ctx(ck)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        if pos % n == me:
            ck = pl.store(pl.load(k, [0, 0], [1, HD]), [pos // n, 0], ck)
            cv = pl.store(pl.load(v, [0, 0], [1, HD]), [pos // n, 0], cv)
        cnt = (pos + n - me) // n
        if cnt > 0:
            kt = pl.load(ck, [0, 0], [CAP, HD], valid_shape=[cnt, HD])
            vt = pl.fillpad(pl.load(cv, [0, 0], [CAP, HD], valid_shape=[cnt, HD]), pad_value=pl.PadValue.zero)
            s = pl.mul(pl.matmul(pl.load(q, [0, 0], [1, HD]), pl.transpose(kt, 0, 1)), SCALE)
            s = pl.fillpad(s, pad_value=pl.PadValue.min)
            m = pl.row_max(s, pl.create_tile([1, CAP], dtype=pl.FP32))
            p = pl.exp(pl.row_expand_sub(s, m))
            lsum = pl.row_sum(p, pl.create_tile([1, CAP], dtype=pl.FP32))
            o = pl.matmul(p, vt)
            m1, l1, o1 = pl.yield_(m, lsum, o)
        else:
            m1, l1, o1 = pl.yield_(pl.full([1, 1], pl.FP32, -1.0e30), pl.full([1, 1], pl.FP32, 0.0),
                                   pl.full([1, HD], pl.FP32, 0.0))
        mw = pl.store(pl.row_expand(pl.full([1, 8], pl.FP32, 0.0), m1), [0, 0], mw)
        part = pl.store(o1, [0, 0], part)
        part = pl.store(pl.row_expand(pl.full([1, 8], pl.FP32, 0.0), l1), [0, HD], part)
        return part

    @pl.function(type=pl.FunctionType.Orchestration)
    def step1(self, q: pl.Tensor[[1, HD], pl.FP32], k: pl.Tensor[[1, HD], pl.FP32], v: pl.Tensor[[1, HD], pl.FP32],
              ck: pl.InOut[pld.DistributedTensor[[CAP, HD], pl.FP32]],
              cv: pl.InOut[pld.DistributedTensor[[CAP, HD], pl.FP32]],
              mw: pl.InOut[pld.DistributedTensor[[1, 8], pl.FP32]], part: pl.Out[pl.Tensor[[1, W], pl.FP32]],
              pos: pl.Scalar[pl.INDEX]):
        self.append_attend(q, k, v, ck, cv, mw, part, pos)

    @pl.function(type=pl.FunctionType.InCore)
    def rescale(self, part: pl.Tensor[[1, W], pl.FP32], mw: pld.DistributedTensor[[1, 8], pl.FP32],
                ow: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]]):
        # every rank's local max is in part's own rows; the global one in mw after the Max allreduce
        ow = pl.store(pl.load(part, [0, 0], [1, W]), [0, 0], ow)

    @pl.function(type=pl.FunctionType.InCore)
    def scale_by(self, lm: pl.Tensor[[1, 8], pl.FP32], mw: pld.DistributedTensor[[1, 8], pl.FP32],
                 ow: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]]):
        alpha = pl.exp(pl.sub(pl.load(lm, [0, 0], [1, 8]), pl.load(mw, [0, 0], [1, 8])))
        a1 = pl.reshape(pl.row_max(alpha, pl.create_tile([1, 8], dtype=pl.FP32)), [1, 1])
        ow = pl.store(pl.row_expand_mul(pl.load(ow, [0, 0], [1, W]), a1), [0, 0], ow)

    @pl.function(type=pl.FunctionType.Orchestration)
    def step2(self, part: pl.Tensor[[1, W], pl.FP32], lm: pl.Tensor[[1, 8], pl.FP32],
              mw: pld.DistributedTensor[[1, 8], pl.FP32], ow: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]]):
        self.rescale(part, mw, ow)
        self.scale_by(lm, mw, ow)

    @pl.function(type=pl.FunctionType.InCore)
    def finish(self, ow: pld.DistributedTensor[[1, W], pl.FP32], out: pl.Out[pl.Tensor[[1, HD], pl.FP32]]):
        tot = pl.load(ow, [0, HD], [1, 8])
        l1 = pl.reshape(pl.row_max(tot, pl.create_tile([1, 8], dtype=pl.FP32)), [1, 1])
        out = pl.store(pl.row_expand_div(pl.load(ow, [0, 0], [1, HD]), l1), [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def step3(self, ow: pld.DistributedTensor[[1, W], pl.FP32], out: pl.Out[pl.Tensor[[1, HD], pl.FP32]]):
        self.finish(ow, out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, q: pl.Tensor[[1, HD], pl.FP32], k: pl.Tensor[[1, HD], pl.FP32], v: pl.Tensor[[1, HD], pl.FP32],
             part: pl.Out[pl.Tensor[[P, 1, W], pl.FP32]], lm: pl.Out[pl.Tensor[[P, 1, 8], pl.FP32]],
             out: pl.Out[pl.Tensor[[P, 1, HD], pl.FP32]], pos: pl.Scalar[pl.INDEX]):
        ckb = pld.alloc_window_buffer([CAP, HD], dtype=pl.FP32)
        cvb = pld.alloc_window_buffer([CAP, HD], dtype=pl.FP32)
        mb = pld.alloc_window_buffer([1, 8], dtype=pl.FP32)
        ob = pld.alloc_window_buffer([1, W], dtype=pl.FP32)
        sb = pld.alloc_window_buffer(pld.world_size() * 4)
        ck = pld.window(ckb, [CAP, HD], dtype=pl.FP32)
        cv = pld.window(cvb, [CAP, HD], dtype=pl.FP32)
        mw = pld.window(mb, [1, 8], dtype=pl.FP32)
        ow = pld.window(ob, [1, W], dtype=pl.FP32)
        sig = pld.window(sb, [pld.world_size()], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            self.step1(q, k, v, ck, cv, mw, part[r], pos, device=r)
        for r1 in pl.range(pld.world_size()):
            self.keep_max(mw, lm[r1], device=r1)
        mw = pld.tensor.allreduce(mw, sig, op=pld.ReduceOp.Max)
        for r2 in pl.range(pld.world_size()):
            self.step2(part[r2], lm[r2], mw, ow, device=r2)
        ow = pld.tensor.allreduce(ow, sig, op=pld.ReduceOp.Sum)
        for r3 in pl.range(pld.world_size()):
            self.step3(ow, out[r3], device=r3)

    @pl.function(type=pl.FunctionType.InCore)
    def copy_max(self, mw: pld.DistributedTensor[[1, 8], pl.FP32], lm: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
        lm = pl.store(pl.load(mw, [0, 0], [1, 8]), [0, 0], lm)

    @pl.function(type=pl.FunctionType.Orchestration)
    def keep_max(self, mw: pld.DistributedTensor[[1, 8], pl.FP32], lm: pl.Out[pl.Tensor[[1, 8], pl.FP32]]):
        self.copy_max(mw, lm)


def test_prepared_sequence_parallel_decode(device_ids):
    if len(device_ids) < P:
        pytest.skip(f"needs {P} devices")
    compiled = ir.compile(Decode, distributed_config=DistributedConfig(device_ids=device_ids[:P]))
    rng = np.random.default_rng(61)
    steps = 6
    qs, ks, vs = (rng.standard_normal((steps, 1, HD)).astype(np.float32) for _ in range(3))
    part = np.zeros((P, 1, W), np.float32)
    lm = np.zeros((P, 1, 8), np.float32)
    with compiled.prepare(persistent=True, reset_persistent_windows=False) as rt:
        for t in range(steps):
            out = np.zeros((P, 1, HD), np.float32)
            rt(qs[t], ks[t], vs[t], part, lm, out, np.array(t, np.int64))
            keys = ks[:t + 1, 0].astype(np.float64)
            s = qs[t, 0].astype(np.float64) @ keys.T * SCALE
            e = np.exp(s - s.max())
            want = (e @ vs[:t + 1, 0]) / e.sum()
            for r in range(P):
                np.testing.assert_allclose(out[r, 0], want, rtol=1e-4, atol=1e-5, err_msg=f"step {t} rank {r}")
