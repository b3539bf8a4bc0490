"""Scalar arithmetic in pypto's style: credits sent with ``pl.unroll``, reset by a self-notify of
``pl.const(-REPS, pl.INT32)``; ``pl.read`` / ``pl.write`` on a host tensor; INT32 and INDEX mixed
(``pl.cast``), ``pl.min``, ``//`` and ``%``. The device's ``//`` and ``%`` truncate as C's do (what
pypto's code generators emit for its FloorDiv / FloorMod), so every dividend here is non-negative or
divides exactly (a negative dividend divided exactly gives the same on the device as Python's floor
golden below; one that does not is a finding: tests/pypto_frontend/test_truncation.py)."""

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
REPS = 3
FIELDS = 6


@pl.program
class Scalars:
    @pl.function(type=pl.FunctionType.InCore)
    def compute(
        self,
        params: pl.Tensor[[1, 2], pl.INT32],
        out: pl.Out[pl.Tensor[[2, FIELDS], pl.INT32]],
        credit: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[2, FIELDS], pl.INT32]:
        ctx = pld.get_comm_ctx(credit)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        for _ in pl.unroll(REPS):
            pld.system.notify(target=credit, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=credit, offsets=[0, 0], expected=REPS, cmp=pld.WaitCmp.Ge)
        minus: pl.Scalar[pl.INT32] = pl.const(-REPS, pl.INT32)
        pld.system.notify(target=credit, peer=me, offsets=[0, 0], value=minus, op=pld.NotifyOp.AtomicAdd)
        left: pl.Scalar[pl.INT32] = pl.read(credit, [0, 0])
        a = pl.read(params, [0, 0])
        b = pl.read(params, [0, 1])
        k: pl.Scalar[pl.INDEX] = pl.cast(a, pl.INDEX)
        pl.write(out, [0, 0], left)
        pl.write(out, [0, 1], pl.cast((me + 3 * n - 3) % n, pl.INT32))
        pl.write(out, [0, 2], pl.cast(pl.min(k * 2, n + 1), pl.INT32))
        pl.write(out, [0, 3], pl.cast((k + me) // 2, pl.INT32))
        pl.write(out, [0, 4], (b + 12) % 4)
        pl.write(out, [0, 5], (b * 3 - me * 6) // 3)
        for i in pl.unroll(FIELDS):
            pl.write(out, [1, i], me * i - b)
        return out

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        params: pl.Tensor[[1, 2], pl.INT32],
        out: pl.Out[pl.Tensor[[2, FIELDS], pl.INT32]],
        credit: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[2, FIELDS], pl.INT32]:
        return self.compute(params, out, credit, peer)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        params: pl.Tensor[[NR, 1, 2], pl.INT32],
        outputs: pl.Out[pl.Tensor[[NR, 2, FIELDS], pl.INT32]],
    ) -> pl.Tensor[[NR, 2, FIELDS], pl.INT32]:
        credit_buf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            credit = pld.window(credit_buf, [1, 1], dtype=pl.INT32)
            self.chip_orch(params[r], outputs[r], credit, (r + 1) % pld.world_size(), device=r)
        return outputs


def golden(me: int, n: int, a: int, b: int) -> list[list[int]]:
    # Python's // and % floor; the device's truncate: they agree on these operands.
    first = [0, (me - 3) % n, min(a * 2, n + 1), (a + me) // 2, b % 4, b - me * 2]
    return [first, [me * i - b for i in range(FIELDS)]]


@pytest.mark.parametrize("n_ranks", [1, 2, 3, 4, 5])
def test_scalar_arithmetic(test_config, device_ids, n_ranks):
    if len(device_ids) < n_ranks:
        pytest.skip(f"needs {n_ranks} devices, got {device_ids}")
    compiled = ir.compile(Scalars, platform=test_config.platform,
                          distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks]))
    params = torch.tensor([[[r + 1, -5 - r]] for r in range(n_ranks)], dtype=torch.int32)
    outputs = torch.full((n_ranks, 2, FIELDS), 99, dtype=torch.int32)
    compiled(params, outputs)
    expected = torch.tensor([golden(r, n_ranks, r + 1, -5 - r) for r in range(n_ranks)], dtype=torch.int32)
    assert torch.equal(outputs, expected), (outputs, expected)
