"""pldemu.collectives: the program factory (buffer shapes by role, spec validation)."""

from __future__ import annotations

import pytest

from pldemu.collectives import COLLECTIVE_NAMES, CollectiveSpec, collective_program
from pldemu.ir import NR, AllreduceMode, BufferKind, Call, DType, ReduceOp, TensorType, format_expr, verify
from pldemu.ir.ops import Op


def shapes(spec: CollectiveSpec) -> dict[str, tuple[str, str, str]]:
    out = {}
    for b in collective_program(spec).program.buffers:
        t = b.var.type
        assert isinstance(t, TensorType)
        out[b.var.name] = (b.kind.value, t.dtype.value, "[" + ", ".join(format_expr(d) for d in t.shape) + "]")
    return out


def test_names() -> None:
    assert COLLECTIVE_NAMES == ("allreduce", "allgather", "reduce_scatter", "broadcast", "barrier", "all_to_all",
                                "all_to_all_v")


@pytest.mark.parametrize("spec,want", [
    (CollectiveSpec("allreduce", size=17), {"target": ("window", "fp32", "[1, 17]"),
                                            "signal": ("signal", "int32", "[NR, 1]")}),
    (CollectiveSpec("allreduce", mode=AllreduceMode.ring, dtype=DType.FP16, size=9),
     {"target": ("window", "fp16", "[1, 9]"), "signal": ("signal", "int32", "[2 * (NR - 1), NR]")}),
    (CollectiveSpec("allgather", size=8), {"local_data": ("local", "fp32", "[1, 8]"),
                                           "target": ("window", "fp32", "[NR, 8]"),
                                           "signal": ("signal", "int32", "[NR, 1]")}),
    (CollectiveSpec("reduce_scatter", size=8), {"target": ("window", "fp32", "[NR, 8]"),
                                                "signal": ("signal", "int32", "[NR, 1]")}),
    (CollectiveSpec("broadcast", shape=(3, 16)), {"target": ("window", "fp32", "[3, 16]"),
                                                  "signal": ("signal", "int32", "[NR, 1]")}),
    (CollectiveSpec("barrier"), {"signal": ("signal", "int32", "[NR, 1]")}),
    (CollectiveSpec("all_to_all", size=8), {"input": ("local", "fp32", "[NR, 8]"),
                                            "target": ("window", "fp32", "[NR, 8]"),
                                            "signal": ("signal", "int32", "[NR, 1]")}),
    (CollectiveSpec("all_to_all_v", size=8, max_recv=3), {
        "input": ("local", "fp32", "[3 * NR, 8]"), "target": ("window", "fp32", "[3 * NR, 8]"),
        "signal": ("signal", "int32", "[NR, 1]"), "send_counts": ("local", "int32", "[NR]"),
        "recv_counts": ("signal", "int32", "[NR, 1]")}),
], ids=lambda x: str(x)[:40])
def test_buffers_by_role(spec: CollectiveSpec, want: dict[str, tuple[str, str, str]]) -> None:
    assert shapes(spec) == want
    cp = collective_program(spec)
    verify(cp.program)
    assert cp.program.nranks is None and cp.spec is spec
    declared = {b.var.name for b in cp.program.buffers}
    roles = [cp.target, cp.signal, cp.local_data, cp.input, cp.send_counts, cp.recv_counts]
    assert {r for r in roles if r is not None} == declared


def test_one_call_in_main_not_lowered() -> None:
    spec = CollectiveSpec("allreduce", reduce=ReduceOp.Prod, mode=AllreduceMode.ring, nranks=4)
    cp = collective_program(spec)
    (stmt,) = cp.program.function("main").body.stmts
    call = stmt.value  # type: ignore[union-attr]
    assert isinstance(call, Call)
    assert call.op is Op.ALLREDUCE and call.attr("op") is ReduceOp.Prod and call.attr("mode") is AllreduceMode.ring
    assert cp.program.nranks == 4


def test_valid_shape_and_barrier_roles() -> None:
    cp = collective_program(CollectiveSpec("allreduce", shape=(8, 16), valid_shape=(3, 10)))
    t = cp.program.buffer("target").var.type
    assert isinstance(t, TensorType) and t.valid_shape is not None
    assert [format_expr(d) for d in t.valid_shape] == ["3", "10"]
    bar = collective_program(CollectiveSpec("barrier"))
    assert bar.target is None and bar.signal == "signal"
    assert cp.program.buffer("signal").kind is BufferKind.SIGNAL
    assert NR.name == "NR"


@pytest.mark.parametrize("kwargs,fragment", [
    ({"name": "gather"}, "unknown collective 'gather'"),
    ({"name": "allreduce", "size": 0}, "size must be >= 1"),
    ({"name": "allreduce", "size": -3}, "size must be >= 1"),
    ({"name": "all_to_all_v", "max_recv": 0}, "max_recv must be >= 1"),
    ({"name": "barrier", "nranks": 0}, "nranks must be >= 1"),
    ({"name": "allgather", "shape": (1, 8)}, "shape applies to allreduce and broadcast"),
    ({"name": "allreduce", "shape": (0, 8)}, "positive integers"),
    ({"name": "broadcast", "valid_shape": (1, 8)}, "valid_shape applies to allreduce only"),
    ({"name": "allreduce", "valid_shape": (1, 2000)}, "within the target shape (1, 1024)"),
    ({"name": "allreduce", "valid_shape": (1,)}, "within the target shape"),
    ({"name": "allreduce", "dtype": "fp32"}, "dtype must be a DType"),
    ({"name": "allreduce", "mode": "ring"}, "mode must be a AllreduceMode"),
    ({"name": "allreduce", "size": 2.5}, "size must be an integer"),
])
def test_spec_validation(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        CollectiveSpec(**kwargs)  # type: ignore[arg-type]
    assert fragment in str(info.value)
