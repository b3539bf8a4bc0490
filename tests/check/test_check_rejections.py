"""Sizes the check matrix does not run because the protocol rejects them, and the harness's view of
each collective's buffers (``case_from_spec``) against the programs ``collective_program`` builds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pldemu.collectives import COLLECTIVE_NAMES, CollectiveSpec, collective_program
from pldemu.harness.check import CheckError, case_from_spec, default_block
from pldemu.harness.data import COLLECTIVES
from pldemu.ir import AllreduceMode, DType, ReduceOp
from pldemu.ir.nodes import NR, BinOp, Expr, Var, fold_binop, static_int
from pldemu.lowering import LoweringError, lower_composite_ops

PUSH = ("allgather", "broadcast", "all_to_all", "all_to_all_v")


def _eval(e: Expr, nr: int) -> int:
    """A buffer dimension with the rank-count symbol NR bound to ``nr``."""
    if isinstance(e, Var) and e.name == NR.name:
        return nr
    if isinstance(e, BinOp):
        return int(fold_binop(e.op, _eval(e.lhs, nr), _eval(e.rhs, nr)))
    value = static_int(e)
    assert value is not None, e
    return value


@pytest.mark.parametrize("dtype", [DType.FP16, DType.FP32])
@pytest.mark.parametrize("name", PUSH)
def test_size_1_push_collectives_are_rejected(name: str, dtype: DType) -> None:
    """SIZE=1 is below one 32-byte alignment unit: no legal stage width, a clear LoweringError."""
    cp = collective_program(CollectiveSpec(name, dtype=dtype, size=1))
    with pytest.raises(LoweringError, match="alignment unit"):
        lower_composite_ops(cp.program)


def test_oversized_partial_valid_rectangle_is_rejected() -> None:
    spec = CollectiveSpec("allreduce", shape=(2, 4097), valid_shape=(2, 4000), dtype=DType.FP32)
    with pytest.raises(LoweringError):
        lower_composite_ops(collective_program(spec).program)


def test_harness_knows_every_collective() -> None:
    assert set(COLLECTIVE_NAMES) == set(COLLECTIVES)


@pytest.mark.parametrize("name", COLLECTIVE_NAMES)
def test_case_geometry_matches_the_program(name: str) -> None:
    nr = 5
    spec = CollectiveSpec(
        name,
        dtype=DType.FP16,
        size=40,
        max_recv=3,
        root=2,
        reduce=ReduceOp.Min,
        mode=AllreduceMode.ring,
        nranks=nr,
    )
    cp = collective_program(spec)
    case = case_from_spec(spec, nr, seed=9)
    assert case.dtype == np.dtype(np.float16) and case.seed == 9 and case.root == 2
    assert case.reduce is ReduceOp.Min and case.max_recv == 3
    buffers = {b.var.name: b.var.type for b in cp.program.buffers}

    def shape(role: str) -> tuple[int, ...]:
        t = buffers[getattr(cp, role)]
        return tuple(_eval(d, nr) for d in t.shape)  # type: ignore[union-attr]

    if cp.target is None:
        assert case.target_shape is None
    else:
        assert case.target_shape == shape("target")
        assert case.target_bytes == math.prod(shape("target")) * 2
    if cp.local_data:
        assert shape("local_data") == (1, 40)
    if cp.input:
        assert shape("input") == (nr * (3 if name == "all_to_all_v" else 1), 40)
    if cp.send_counts:
        assert shape("send_counts") == (nr,)
        assert shape("recv_counts") == (nr, 1)


def test_case_from_spec_rejects_a_pinned_mismatch() -> None:
    spec = CollectiveSpec("barrier", nranks=4)
    with pytest.raises(CheckError, match="built for 4 ranks"):
        case_from_spec(spec, 3)


def test_default_block_makes_about_8_rows() -> None:
    assert default_block(1) == 1
    assert default_block(20) == 3
    assert default_block(100) == 13
    for iters in (1, 7, 20, 64, 1000):
        rows = math.ceil(iters / default_block(iters))
        assert rows <= 8 and (rows >= 5 or iters < 5)
