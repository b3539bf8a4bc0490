"""A tensor-parallel attention block in pypto's style, at 2 and 4 ranks: H = 4 heads sharded over the
ranks (H / NR each, Megatron's column split of the Q, K and V projections and row split of the output
projection). Every rank holds the whole sequence, projects its heads' Q, K and V, runs causal softmax
attention per head and its share of the output projection; a device-level allreduce over a window sums
the ranks' partial outputs into every rank's result. Golden: torch (the stand-in) in one process, all
heads at once."""

import math

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

S = 8  # sequence length
D = 32  # hidden
H = 4  # heads in all
HD = 8  # head width (one 32-byte FP32 tile row)
NR = pl.dynamic("NR")
HL = pl.dynamic("HL")  # heads per rank: H / NR
SCALE = 1.0 / math.sqrt(HD)
MASKED = -1.0e9  # added above the diagonal: exp() of it is 0


@pl.program
class AttentionTP:
    @pl.function(type=pl.FunctionType.InCore)
    def attend(
        self,
        x: pl.Tensor[[S, D], pl.FP32],
        wq: pl.Tensor[[HL, D, HD], pl.FP32],
        wk: pl.Tensor[[HL, D, HD], pl.FP32],
        wv: pl.Tensor[[HL, D, HD], pl.FP32],
        wo: pl.Tensor[[HL, HD, D], pl.FP32],
        mask: pl.Tensor[[S, S], pl.FP32],
        out: pl.Out[pl.Tensor[[S, D], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[S, D], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[S, D], pl.FP32]:
        tok = pl.load(x, [0, 0], [S, D])
        bias = pl.load(mask, [0, 0], [S, S])
        scratch = pl.create_tile([S, S], pl.FP32)
        zero = pl.full([S, D], pl.FP32, 0.0)
        for h, (acc,) in pl.range(pl.tensor.dim(wq, 0), init_values=(zero,)):
            q = pl.matmul(tok, pl.reshape(pl.load(wq, [h, 0, 0], [1, D, HD]), [D, HD]))
            k = pl.matmul(tok, pl.reshape(pl.load(wk, [h, 0, 0], [1, D, HD]), [D, HD]))
            v = pl.matmul(tok, pl.reshape(pl.load(wv, [h, 0, 0], [1, D, HD]), [D, HD]))
            scores = pl.add(pl.mul(pl.matmul(q, pl.transpose(k, 0, 1)), SCALE), bias)
            p = pl.exp(pl.row_expand_sub(scores, pl.row_max(scores, scratch)))
            p = pl.row_expand_div(p, pl.row_sum(p, scratch))
            head = pl.matmul(p, v)
            part = pl.matmul(head, pl.reshape(pl.load(wo, [h, 0, 0], [1, HD, D]), [HD, D]))
            summed = pl.yield_(pl.add(acc, part))
        data = pl.store(summed, [0, 0], data)
        data = pld.tensor.allreduce(data, signal, op=pld.ReduceOp.Sum)  # the row-split projection's sum
        return pl.store(pl.load(data, [0, 0], [S, D]), [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        x: pl.Tensor[[S, D], pl.FP32],
        wq: pl.Tensor[[HL, D, HD], pl.FP32],
        wk: pl.Tensor[[HL, D, HD], pl.FP32],
        wv: pl.Tensor[[HL, D, HD], pl.FP32],
        wo: pl.Tensor[[HL, HD, D], pl.FP32],
        mask: pl.Tensor[[S, S], pl.FP32],
        out: pl.Out[pl.Tensor[[S, D], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[S, D], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[S, D], pl.FP32]:
        out = self.attend(x, wq, wk, wv, wo, mask, out, data, signal)
        return out

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        x: pl.Tensor[[S, D], pl.FP32],
        wq: pl.Tensor[[NR, HL, D, HD], pl.FP32],
        wk: pl.Tensor[[NR, HL, D, HD], pl.FP32],
        wv: pl.Tensor[[NR, HL, D, HD], pl.FP32],
        wo: pl.Tensor[[NR, HL, HD, D], pl.FP32],
        mask: pl.Tensor[[S, S], pl.FP32],
        out: pl.Out[pl.Tensor[[NR, S, D], pl.FP32]],
    ) -> pl.Tensor[[NR, S, D], pl.FP32]:
        data_buf = pld.alloc_window_buffer(S * D * pl.FP32.get_byte())
        signal_buf = pld.alloc_window_buffer(pld.world_size() * pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [S, D], dtype=pl.FP32)
            signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
            self.chip_orch(x, wq[r], wk[r], wv[r], wo[r], mask, out[r], data, signal, device=r)
        return out


def causal_mask() -> torch.Tensor:
    mask = torch.zeros(S, S)
    for i in range(S):
        for j in range(i + 1, S):
            mask[i, j] = MASKED
    return mask


def golden(x, wq, wk, wv, wo):
    """torch: the unsharded block, every head's causal softmax attention, heads concatenated, projected."""
    nr, hl = wq.shape[0], wq.shape[1]
    heads = []
    for g in range(nr * hl):
        r, j = divmod(g, hl)
        q, k, v = x @ wq[r, j], x @ wk[r, j], x @ wv[r, j]
        p = torch.softmax((q @ k.t()) * SCALE + causal_mask(), -1)
        heads.append(p @ v)
    return torch.cat(heads, -1) @ wo.reshape(nr * hl * HD, D)


@pytest.mark.parametrize("devices", [2, 4])
def test_attention_tp(test_config, device_ids, devices):
    if len(device_ids) < devices:
        pytest.skip(f"needs {devices} devices, got {device_ids}")
    torch.manual_seed(40 + devices)
    hl = H // devices
    x = torch.randn(S, D)
    wq, wk, wv = (torch.randn(devices, hl, D, HD) * 0.2 for _ in range(3))
    wo = torch.randn(devices, hl, HD, D) * 0.2
    out = torch.zeros(devices, S, D)
    compiled = ir.compile(AttentionTP, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:devices]))
    compiled(x, wq, wk, wv, wo, causal_mask(), out)
    want = golden(x, wq, wk, wv, wo)
    for r in range(devices):
        torch.testing.assert_close(out[r], want, rtol=1e-4, atol=1e-4)
