"""qwen3_32b decode_4d's layout in a @pl.program (Opaque entry): activations and weights as 4-D block tensors
[KB, 1, B, KC] / [KB, NB, KC, NC], an rmsnorm whose sum of squares runs in a pl.pipeline(stage=2) over the K blocks
(row_sum of [1, 1, B, KC] tiles reshaped to [1, B]), the scale re-shaped to a [B, 1] column expanding the 4-D
chunks (row_expand_mul) and a [1, 1, 1, KC] gamma (col_expand_mul); a projection per output block of a
pl.parallel, its accumulator a matmul of 4-D slices then matmul_acc in a pl.pipeline, assembled into a 4-D
tensor; a last pl.at reading a 2-D reshape of a slice of it (pl.reshape of [1, 1, B, NC] into [B, NC])."""
import ml_dtypes
import numpy as np
import pypto.language as pl
import torch
from pypto import ir

KB, KC, B, NB, NC = 4, 32, 16, 2, 32
HID = KB * KC
EPS = 1e-6


@pl.program
class Blocks4D:
    @pl.function
    def layer(self, x: pl.Tensor[[KB, 1, B, KC], pl.BF16], gamma: pl.Tensor[[KB, 1, 1, KC], pl.FP32],
              w: pl.Tensor[[KB, NB, KC, NC], pl.BF16],
              out: pl.Out[pl.Tensor[[B, NB * NC], pl.FP32]]) -> pl.Tensor[[B, NB * NC], pl.FP32]:
        normed = pl.create_tensor([KB, 1, B, KC], dtype=pl.BF16)
        proj = pl.create_tensor([NB, 1, B, NC], dtype=pl.FP32)
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="rmsnorm"):
            sq = pl.full([1, B], dtype=pl.FP32, value=0.0)
            for kb in pl.pipeline(KB, stage=2):
                xc = pl.cast(x[kb:kb + 1, :, :, :], target_type=pl.FP32)
                sq = pl.add(sq, pl.reshape(pl.row_sum(pl.mul(xc, xc)), [1, B]))
            inv = pl.recip(pl.sqrt(pl.add(pl.mul(sq, 1.0 / HID), EPS)))
            inv_col = pl.reshape(inv, [B, 1])
            for kb in pl.pipeline(KB, stage=2):
                xc = pl.cast(x[kb:kb + 1, :, :, :], target_type=pl.FP32)
                nrm = pl.col_expand_mul(pl.row_expand_mul(xc, inv_col), gamma[kb:kb + 1, :, :, :])
                normed = pl.assemble(normed, pl.cast(nrm, target_type=pl.BF16), [kb, 0, 0, 0])
        for nb in pl.parallel(NB):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="proj"):
                acc = pl.matmul(normed[0:1, :, :, :], w[0:1, nb:nb + 1, :, :], out_dtype=pl.FP32)
                for kb in pl.pipeline(1, KB, stage=2):
                    acc = pl.matmul_acc(acc, normed[kb:kb + 1, :, :, :], w[kb:kb + 1, nb:nb + 1, :, :])
                proj = pl.assemble(proj, acc, [nb, 0, 0, 0])
        for nb in pl.parallel(NB):
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="act"):
                p2 = pl.reshape(proj[nb:nb + 1, :, :, :], [B, NC])
                out = pl.assemble(out, pl.mul(p2, pl.recip(pl.add(pl.exp(pl.neg(p2)), 1.0))), [0, nb * NC])
        return out


def _bf16(a: np.ndarray) -> np.ndarray:
    return a.astype(ml_dtypes.bfloat16).astype(np.float32)


def test_4d_blocks() -> None:
    rng = np.random.default_rng(21)
    x = _bf16(rng.standard_normal((B, HID)).astype(np.float32))
    gamma = (1 + 0.1 * rng.standard_normal(HID)).astype(np.float32)
    w = _bf16(rng.standard_normal((HID, NB * NC)).astype(np.float32) * 0.1)
    x4 = x.reshape(B, KB, KC).transpose(1, 0, 2)[:, None]
    g4 = gamma.reshape(KB, 1, 1, KC)
    w4 = w.reshape(KB, KC, NB, NC).transpose(0, 2, 1, 3)
    out = torch.zeros((B, NB * NC))
    ir.compile(Blocks4D)(torch.from_numpy(np.ascontiguousarray(x4)).to(torch.bfloat16), torch.from_numpy(g4),
                         torch.from_numpy(np.ascontiguousarray(w4)).to(torch.bfloat16), out)
    inv = 1 / np.sqrt((x * x).sum(1, keepdims=True) / HID + EPS)
    normed = _bf16(x * inv * gamma)
    proj = normed.astype(np.float64) @ w
    want = proj / (1 + np.exp(-proj))
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-3, atol=2e-3)
