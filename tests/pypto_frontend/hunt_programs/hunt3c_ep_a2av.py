"""expert-parallel MoE round trip through two HOST pld.tensor.all_to_all_v calls (pl.program class form, one
program per rank count built by a factory, run at 2, 3 and 4 ranks with one expert per rank): each rank gates its
tokens (FP32 matmul plus a bias row that masks the padded expert columns, row_max / row_argmax with a scratch,
the top-1 probability as recip of the softmax denominator), packs each token into its expert's block of a stage
window in arrival order (on-core pl.array counters zeroed first, run-time INDEX offsets from pl.tile.read of the argmax
column), publishes its per-destination counts in a window and records (expert, slot) per token; the experts run a
ReLU FFN on each source's ragged block (pl.load with a run-time valid_shape, skipped under a run-time `if` when
empty) and send the rows back with the received counts as the new send counts (the same signal window reused by
both exchanges); each source combines x + p * expert(x) from the (expert, slot) table."""
import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

T = 6
D = 16
F = 32
EP = 8  # gate columns, padded to a 32-byte row


def build(nr: int):
    tot = nr * T

    @pl.program
    class MoeA2AV:
        @pl.function(type=pl.FunctionType.InCore)
        def route(self, x: pl.Tensor[[T, D], pl.FP32], wg: pl.Tensor[[D, EP], pl.FP32],
                  bias: pl.Tensor[[1, EP], pl.FP32], stage: pl.Out[pld.DistributedTensor[[tot, D], pl.FP32]],
                  counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
                  table: pl.Out[pl.Tensor[[T, 2], pl.INT32]], gate: pl.Out[pl.Tensor[[T, 1], pl.FP32]]):
            logits = pl.col_expand_add(pl.matmul(pl.load(x, [0, 0], [T, D]), pl.load(wg, [0, 0], [D, EP])),
                                       pl.load(bias, [0, 0], [1, EP]))
            tmp = pl.create_tile([T, EP], dtype=pl.FP32)
            mx = pl.row_max(logits, tmp)
            idx = pl.row_argmax(logits, tmp)
            den = pl.row_sum(pl.exp(pl.row_expand_sub(logits, mx)), tmp)
            gate = pl.store(pl.recip(den), [0, 0], gate)
            cnt = pl.array.create(8, pl.INT32)
            for z in pl.range(8):
                cnt[z] = 0
            for t in pl.range(T):
                e = pl.tile.read(idx, [t, 0])
                c = cnt[e]
                slot = pl.cast(e, pl.INDEX) * T + pl.cast(c, pl.INDEX)
                stage = pl.store(pl.load(x, [t, 0], [1, D]), [slot, 0], stage)
                pl.write(table, [t, 0], e)
                pl.write(table, [t, 1], c)
                cnt[e] = c + 1
            for d in pl.range(nr):
                pl.write(counts, [d, 0], cnt[d])

        @pl.function(type=pl.FunctionType.Orchestration)
        def route_orch(self, x: pl.Tensor[[T, D], pl.FP32], wg: pl.Tensor[[D, EP], pl.FP32],
                       bias: pl.Tensor[[1, EP], pl.FP32], stage: pl.Out[pld.DistributedTensor[[tot, D], pl.FP32]],
                       counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
                       table: pl.Out[pl.Tensor[[T, 2], pl.INT32]], gate: pl.Out[pl.Tensor[[T, 1], pl.FP32]]):
            self.route(x, wg, bias, stage, counts, table, gate)

        @pl.function(type=pl.FunctionType.InCore)
        def expert(self, data: pld.DistributedTensor[[tot, D], pl.FP32],
                   recv: pld.DistributedTensor[[nr, 1], pl.INT32], w1: pl.Tensor[[D, F], pl.FP32],
                   w2: pl.Tensor[[F, D], pl.FP32], back: pl.Out[pld.DistributedTensor[[tot, D], pl.FP32]],
                   counts2: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]]):
            a = pl.load(w1, [0, 0], [D, F])
            b = pl.load(w2, [0, 0], [F, D])
            for src in pl.range(nr):
                n32 = pl.read(recv, [src, 0])
                pl.write(counts2, [src, 0], n32)
                n = pl.cast(n32, pl.INDEX)
                if n > 0:
                    xs = pl.load(data, [src * T, 0], [T, D], valid_shape=[n, D])
                    y = pl.matmul(pl.relu(pl.matmul(xs, a)), b)
                    back = pl.store(y, [src * T, 0], back)

        @pl.function(type=pl.FunctionType.Orchestration)
        def expert_orch(self, data: pld.DistributedTensor[[tot, D], pl.FP32],
                        recv: pld.DistributedTensor[[nr, 1], pl.INT32], w1: pl.Tensor[[D, F], pl.FP32],
                        w2: pl.Tensor[[F, D], pl.FP32], back: pl.Out[pld.DistributedTensor[[tot, D], pl.FP32]],
                        counts2: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]]):
            self.expert(data, recv, w1, w2, back, counts2)

        @pl.function(type=pl.FunctionType.InCore)
        def combine(self, x: pl.Tensor[[T, D], pl.FP32], ret: pld.DistributedTensor[[tot, D], pl.FP32],
                    table: pl.Tensor[[T, 2], pl.INT32], gate: pl.Tensor[[T, 1], pl.FP32],
                    out: pl.Out[pl.Tensor[[T, D], pl.FP32]]):
            for t in pl.range(T):
                e = pl.cast(pl.read(table, [t, 0]), pl.INDEX)
                s = pl.cast(pl.read(table, [t, 1]), pl.INDEX)
                row = pl.load(ret, [e * T + s, 0], [1, D])
                p = pl.read(gate, [t, 0])
                out = pl.store(pl.add(pl.load(x, [t, 0], [1, D]), pl.mul(row, p)), [t, 0], out)

        @pl.function(type=pl.FunctionType.Orchestration)
        def combine_orch(self, x: pl.Tensor[[T, D], pl.FP32], ret: pld.DistributedTensor[[tot, D], pl.FP32],
                         table: pl.Tensor[[T, 2], pl.INT32], gate: pl.Tensor[[T, 1], pl.FP32],
                         out: pl.Out[pl.Tensor[[T, D], pl.FP32]]):
            self.combine(x, ret, table, gate, out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[nr, T, D], pl.FP32], wg: pl.Tensor[[D, EP], pl.FP32],
                      bias: pl.Tensor[[1, EP], pl.FP32], w1: pl.Tensor[[nr, D, F], pl.FP32],
                      w2: pl.Tensor[[nr, F, D], pl.FP32], table: pl.Out[pl.Tensor[[nr, T, 2], pl.INT32]],
                      gate: pl.Out[pl.Tensor[[nr, T, 1], pl.FP32]], out: pl.Out[pl.Tensor[[nr, T, D], pl.FP32]]):
            stage_b = pld.alloc_window_buffer(tot * D * 4)
            data_b = pld.alloc_window_buffer(tot * D * 4)
            back_b = pld.alloc_window_buffer(tot * D * 4)
            ret_b = pld.alloc_window_buffer(tot * D * 4)
            sig_b = pld.alloc_window_buffer(nr * 4)
            c1_b = pld.alloc_window_buffer(nr * 4)
            r1_b = pld.alloc_window_buffer(nr * 4)
            c2_b = pld.alloc_window_buffer(nr * 4)
            r2_b = pld.alloc_window_buffer(nr * 4)
            stage = pld.window(stage_b, [tot, D], dtype=pl.FP32)
            data = pld.window(data_b, [tot, D], dtype=pl.FP32)
            back = pld.window(back_b, [tot, D], dtype=pl.FP32)
            ret = pld.window(ret_b, [tot, D], dtype=pl.FP32)
            sig = pld.window(sig_b, [nr, 1], dtype=pl.INT32)
            c1 = pld.window(c1_b, [nr, 1], dtype=pl.INT32)
            r1 = pld.window(r1_b, [nr, 1], dtype=pl.INT32)
            c2 = pld.window(c2_b, [nr, 1], dtype=pl.INT32)
            r2 = pld.window(r2_b, [nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                self.route_orch(x[r], wg, bias, stage, c1, table[r], gate[r], device=r)
            data = pld.tensor.all_to_all_v(stage, data, sig, c1, r1)
            for r in pl.range(pld.world_size()):
                self.expert_orch(data, r1, w1[r], w2[r], back, c2, device=r)
            ret = pld.tensor.all_to_all_v(back, ret, sig, c2, r2)
            for r in pl.range(pld.world_size()):
                self.combine_orch(x[r], ret, table[r], gate[r], out[r], device=r)

    return MoeA2AV


def test_moe_all_to_all_v(device_ids):
    for nr in (2, 3, 4)[:max(1, len(device_ids) - 1)]:
        check(device_ids, nr)


def check(device_ids, nr):
    rng = np.random.default_rng(70 + nr)
    x = rng.standard_normal((nr, T, D)).astype(np.float32)
    wg = rng.standard_normal((D, EP)).astype(np.float32)
    bias = np.where(np.arange(EP) < nr, 0.0, -1e30).astype(np.float32).reshape(1, EP)
    w1 = (rng.standard_normal((nr, D, F)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((nr, F, D)) * 0.3).astype(np.float32)
    table = np.zeros((nr, T, 2), np.int32)
    gate = np.zeros((nr, T, 1), np.float32)
    out = np.zeros((nr, T, D), np.float32)
    compiled = ir.compile(build(nr), distributed_config=DistributedConfig(device_ids=device_ids[:nr]))
    compiled(x, wg, bias, w1, w2, table, gate, out)
    xd = x.astype(np.float64)
    for r in range(nr):
        lg = xd[r] @ wg + bias
        e = lg.argmax(-1)
        p = 1.0 / np.exp(lg - lg.max(-1, keepdims=True)).sum(-1)
        slots = [int((e[:t] == e[t]).sum()) for t in range(T)]
        np.testing.assert_array_equal(table[r, :, 0], e)
        np.testing.assert_array_equal(table[r, :, 1], slots)
        np.testing.assert_allclose(gate[r, :, 0], p, rtol=1e-5)
        y = np.stack([np.maximum(xd[r, t] @ w1[e[t]], 0) @ w2[e[t]] for t in range(T)])
        np.testing.assert_allclose(out[r], xd[r] + p[:, None] * y, rtol=1e-4, atol=1e-4, err_msg=f"rank {r}")
