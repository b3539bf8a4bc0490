"""Values made in one ``pl.at`` task and read by later ones, as pypto-lib's deepseek_v3_2 decode_front writes
them: pypto's OutlineIncoreScopes makes a value used after its scope an output of the outlined kernel (a tensor
of the orchestration), so a later task reads what the earlier one left. Per head of a ``pl.parallel`` loop: a
projection's matmul (an accumulator tile) made in one task, a softmax over it in a second (max, exp, sum, and a
``pl.full`` made there too), a cast in a third and a second projection whose result a fourth task assembles into
a row; rows by a run-time valid count, padded with zeros by the last task. A name a task binds only in
a loop (pypto's SSA ends it with the loop) and binds again in a later task is no output."""
import ml_dtypes
import numpy as np
import pypto.language as pl
import torch

B, H, D, K, V = 2, 3, 32, 16, 16


@pl.jit
def heads(x: pl.Tensor[[B * 16, D], pl.BF16], wq: pl.Tensor[[H * D, K], pl.BF16], wv: pl.Tensor[[H * K, V], pl.BF16],
          valid: pl.Tensor[[B], pl.INT32], out: pl.Out[pl.Tensor[[B * 16, H * V], pl.FP32]]):
    for b in pl.parallel(B):
        n = pl.read(valid, [b])
        for h in pl.parallel(H):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="proj"):
                q = pl.matmul(x[b * 16:b * 16 + 16, :], wq[h * D:h * D + D, :], out_dtype=pl.FP32)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="softmax"):
                m = pl.row_max(q)
                e = pl.exp(pl.row_expand_sub(q, m))
                p = pl.row_expand_div(e, pl.row_sum(e))
                for _ in pl.range(1):
                    scratch = pl.add(p, 0.0)  # a loop's local: not an output though the name is read later
                bias = pl.full([16, V], dtype=pl.FP32, value=0.25)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="cast"):
                pb = pl.cast(p, target_type=pl.BF16)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="vproj"):
                o = pl.add(pl.matmul(pb, wv[h * K:h * K + K, :], out_dtype=pl.FP32), bias)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="write"):
                scratch = pl.mul(o, 1.0)
                rows = pl.slice(scratch, [16, V], [0, 0], valid_shape=[n, V])
                out = pl.assemble(out, pl.fillpad(rows, pad_value=pl.PadValue.zero), [b * 16, h * V])
    return out


def _bf16(a: np.ndarray) -> np.ndarray:
    return a.astype(ml_dtypes.bfloat16).astype(np.float32)


def test_values_cross_tasks() -> None:
    rng = np.random.default_rng(5)
    x = _bf16(rng.standard_normal((B * 16, D)).astype(np.float32))
    wq = _bf16(rng.standard_normal((H * D, K)).astype(np.float32) * 0.2)
    wv = _bf16(rng.standard_normal((H * K, V)).astype(np.float32))
    valid = np.array([16, 5], np.int32)
    out = torch.zeros((B * 16, H * V))
    heads(torch.from_numpy(x).to(torch.bfloat16), torch.from_numpy(wq).to(torch.bfloat16),
          torch.from_numpy(wv).to(torch.bfloat16), torch.from_numpy(valid), out)
    want = np.zeros((B * 16, H * V), np.float32)
    for b in range(B):
        for h in range(H):
            q = x[b * 16:b * 16 + 16] @ wq[h * D:h * D + D]
            e = np.exp(q - q.max(1, keepdims=True))
            p = _bf16(e / e.sum(1, keepdims=True))
            o = p @ wv[h * K:h * K + K] + np.float32(0.25)
            want[b * 16:b * 16 + valid[b], h * V:h * V + V] = o[:valid[b]]
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-3, atol=2e-3)
