"""A mesh allreduce split into lanes (pypto's HOST ``core_num``): the structure of the recipe, and its
results and at-rest signal on the lowering simulator at several rank counts, sizes and strides."""

from __future__ import annotations

import pytest
from lowering_helpers import calls_of, simulate

from pldemu.collectives import CollectiveSpec
from pldemu.ir import NR, Assign, DType, For, Program, ProgramBuilder, ReduceOp
from pldemu.ir.nodes import format_expr, static_int
from pldemu.ir.ops import Op
from pldemu.ir.walk import walk_stmts
from pldemu.lowering import lower_composite_ops, lower_composite_ops_with_report


def lanes_program(size: int, lanes: int, stride: int, dtype: DType = DType.FP32,
                  reduce: ReduceOp = ReduceOp.Sum) -> Program:
    """``target`` [1, size] reduced by one allreduce of ``lanes`` lanes on a [NR, stride] signal."""
    pb = ProgramBuilder("lanes")
    target = pb.window("target", dtype.value, [1, size])
    signal = pb.signal("signal", [NR, stride])
    pb.function().pld.tensor.allreduce(target, signal, op=reduce, lanes=lanes)
    return pb.build()


def lane_loops(program: Program) -> list[For]:
    return [s for s in walk_stmts(program.function().body.stmts) if isinstance(s, For) and s.var.name == "lane"]


def test_one_loop_over_the_lanes_and_every_cell_in_the_lane_column() -> None:
    p = lower_composite_ops(lanes_program(4127, 4, 6))
    (loop,) = lane_loops(p)
    assert (static_int(loop.start), static_int(loop.stop)) == (0, 4)
    cells = [c.args[2] for c in calls_of(p, Op.NOTIFY)] + [c.args[1] for c in calls_of(p, Op.WAIT)]
    assert cells and all(format_expr(cell).endswith(", lane]") for cell in cells)


def test_lanes_take_256_element_chunks_block_cyclically() -> None:
    p = lower_composite_ops(lanes_program(4127, 4, 4))
    (load,) = calls_of(p, Op.TILE_LOAD)
    assert format_expr(load.args[2]) == "[1, 256]"  # pypto's builtin tile, not the 16-KiB chunk
    starts = {s.var.name: format_expr(s.value) for s in walk_stmts(p.function().body.stmts)
              if isinstance(s, Assign)}
    assert starts["col"] == "(lane * 256) + (k * 1024)"  # lane c: chunks c, c + 4, c + 8, ...
    assert starts["lane_chunks"] == "((max(4127 - (lane * 256), 0) + 1024) - 1) // 1024"
    assert starts["gen"] == "k + 2" and starts["retire"] == "0 - (lane_chunks + 1)"


def test_a_short_stream_shrinks_the_chunk_and_leaves_lanes_idle() -> None:
    p = lower_composite_ops(lanes_program(1, 2, 2))
    (load,) = calls_of(p, Op.TILE_LOAD)
    assert format_expr(load.args[2]) == "[1, 8]"  # one aligned FP32 row covers the single element


def test_report_counts_lane_zeros_credits() -> None:
    report = lower_composite_ops_with_report(lanes_program(1041, 2, 2))
    line = report.calls[0].summary(nranks=4)
    assert "[op=Sum mode=mesh lanes=2]" in line
    assert "barriers/cell 4" in line and "chunks 5" in line  # 5 chunks of 256: lane 0 takes 3, lane 1 two


@pytest.mark.parametrize(("nranks", "size", "lanes", "stride", "calls"), [
    (2, 1, 2, 2, 1),        # one chunk: lane 1 idle, it only barriers and retires its ready credit
    (2, 4127, 4, 6, 2),     # 17 chunks over 4 lanes; columns 4 and 5 stay untouched
    (4, 1041, 2, 2, 2),     # 5 chunks, the last one short
    (3, 600, 3, 3, 3),      # one chunk per lane, the signal reused back to back
    (5, 2048, 8, 8, 1),     # exactly one chunk per lane
    (1, 300, 2, 2, 2),      # one rank: nothing to exchange, the lanes still run
])
def test_lanes_reduce_exactly_and_leave_every_cell_at_zero(nranks: int, size: int, lanes: int, stride: int,
                                                           calls: int) -> None:
    spec = CollectiveSpec("allreduce", size=size)
    simulate(spec, nranks, seed=size + lanes, calls=calls, program=lanes_program(size, lanes, stride))


@pytest.mark.parametrize("reduce", list(ReduceOp))
def test_lanes_every_reduce_op_in_fp16(reduce: ReduceOp) -> None:
    spec = CollectiveSpec("allreduce", dtype=DType.FP16, size=777, reduce=reduce)
    simulate(spec, 3, seed=int(reduce), calls=2, program=lanes_program(777, 3, 4, DType.FP16, reduce))
