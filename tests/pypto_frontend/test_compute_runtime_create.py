"""An Orchestration ``pl.create_tensor`` whose extents are run-time scalars: pypto's orchestration codegen
allocates it when the statement runs, at the extents evaluated then, so pldemu's ``tensor.create`` makes a
fresh rank-local buffer each time (a different size per loop iteration and per call). Seeded by a ``pl.at``
task, filled by ``pl.spmd`` blocks (one column band each), read back; an access past its run-time
extent is refused at the user's line when it runs. Run on one and two ranks against numpy."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.job.precheck import static_buffers
from pldemu.job.resources import job_memory
from pldemu.pypto.execute import ProgramRunError, translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
ROWS, KDIM, COLS = 48, 32, 16
"""x is ROWS x KDIM, w is KDIM x COLS; y = x @ w for the first ``n`` rows (``n`` a run-time scalar)."""
TILE, MT, CT = 32, 8, 8
"""The token tile the Orchestration walks (the last one is short), the row tile, a block's column band."""


@pl.program
class Padded:
    """Per token tile of ``rows = min(TILE, n - t0)`` rows: a scratch of ``rows`` rounded up to MT rows (a
    run-time extent) is zeroed by a ``pl.at`` task, each ``pl.spmd`` block writes its column band of x @ w
    into it, and a second block set copies the padded rows out (band by band)."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[ROWS, KDIM], pl.FP32], w: pl.Tensor[[KDIM, COLS], pl.FP32],
             y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]], n: pl.Scalar[pl.INDEX]) -> None:
        for t0 in pl.range(0, n, TILE):
            rows = pl.min(TILE, n - t0)
            padded = ((rows + MT - 1) // MT) * MT
            acc = pl.create_tensor([padded, COLS], dtype=pl.FP32)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="seed"):
                for s0 in pl.range(0, padded, MT):
                    acc[s0:s0 + MT, 0:COLS] = pl.full([MT, COLS], dtype=pl.FP32, value=0.0)
            for blk in pl.spmd(COLS // CT, name_hint="bands"):
                c0 = blk * CT
                for r0 in pl.range(0, padded, MT):
                    part = pl.matmul(x[t0 + r0:t0 + r0 + MT, 0:KDIM], w[0:KDIM, c0:c0 + CT], out_dtype=pl.FP32)
                    acc = pl.assemble(acc, part, [r0, c0])
            for blk in pl.spmd(COLS // CT, name_hint="copy_out"):
                c0 = blk * CT
                for r0 in pl.range(0, padded, MT):
                    y = pl.assemble(y, acc[r0:r0 + MT, c0:c0 + CT], [t0 + r0, c0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, ROWS, KDIM], pl.FP32], w: pl.Tensor[[NR, KDIM, COLS], pl.FP32],
                  y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]], n: pl.Scalar[pl.INDEX]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(x[r], w[r], y[r], n, device=r)


def _args(nranks: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(41)
    x = rng.integers(-4, 5, (nranks, ROWS, KDIM)).astype(np.float32)  # small integers: every sum is exact
    w = rng.integers(-4, 5, (nranks, KDIM, COLS)).astype(np.float32)
    return x, w, np.zeros((nranks, ROWS, COLS), np.float32)


@pytest.mark.launcher
@pytest.mark.parametrize("nranks", [1, 2])
def test_a_run_time_sized_scratch_is_seeded_filled_and_read_back(nranks: int) -> None:
    compiled = ir.compile(Padded, distributed_config=DistributedConfig(device_ids=list(range(nranks))))
    for n in (40, 21):  # tiles of 32 + 8 rows, then 21 rows padded to 24: four run-time sizes in one session
        x, w, y = _args(nranks)
        compiled(x, w, y, n)
        filled = max(t0 + -(-min(TILE, n - t0) // MT) * MT for t0 in range(0, n, TILE))
        want = x @ w
        np.testing.assert_array_equal(y[:, :filled], want[:, :filled])
        np.testing.assert_array_equal(y[:, filled:], 0)


def test_the_scratch_is_a_tensor_create_not_a_declared_buffer() -> None:
    built, _ = translate(Padded, 1, (*_args(1), 40))
    calls = [c for f in built.program.functions for c in function_calls(f)]
    assert [c.op for c in calls].count(Op.TENSOR_CREATE) == 1
    assert not [d for d in built.program.buffers if d.var.name.startswith("acc")]


@pl.program
class Overrun:
    """The copy-out reads one row tile past the scratch's run-time extent."""

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, x: pl.Tensor[[ROWS, KDIM], pl.FP32], y: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
             n: pl.Scalar[pl.INDEX]) -> None:
        for t0 in pl.range(0, n, TILE):
            rows = pl.min(TILE, n - t0)
            acc = pl.create_tensor([rows, COLS], dtype=pl.FP32)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="fill"):
                for s0 in pl.range(0, rows, MT):
                    acc[s0:s0 + MT, 0:COLS] = x[t0 + s0:t0 + s0 + MT, 0:COLS]  # MARK-overrun
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="out"):
                y[t0:t0 + MT, 0:COLS] = acc[0:MT, 0:COLS]

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[NR, ROWS, KDIM], pl.FP32], y: pl.Out[pl.Tensor[[NR, ROWS, COLS], pl.FP32]],
                  n: pl.Scalar[pl.INDEX]) -> None:
        for r in pl.range(pld.world_size()):
            self.orch(x[r], y[r], n, device=r)


@pytest.mark.launcher
def test_an_access_past_the_run_time_extent_is_refused_at_the_users_line() -> None:
    x, _, y = _args(1)
    compiled = ir.compile(Overrun, distributed_config=DistributedConfig(device_ids=[0]))
    compiled(x, y, 40)  # 32 + 8 rows: every store fits
    with pytest.raises(ProgramRunError, match=re.escape("in view [12, 16]: dim 0 covers [8, 16) outside [0, 12)")) as err:
        compiled(x, y, 44)  # the second tile has 12 rows: its second MT store runs 4 rows past them
    src = Path(__file__).read_text().splitlines()
    line = next(i + 1 for i, text in enumerate(src) if "MARK-overrun" in text and "next(" not in text)
    assert f"[{Path(__file__).name}:{line}]" in str(err.value)


def test_the_memory_estimate_names_what_it_cannot_count() -> None:
    built, _ = translate(Padded, 1, (*_args(1), 40))
    estimate = job_memory(static_buffers(built.program, 1).values(), 1, False, program=built.program)
    assert [n.split("_")[0] for n in estimate.unsized] == ["acc"]
    assert f"not counted, sized at run time: {estimate.unsized[0]}" in estimate.describe()
