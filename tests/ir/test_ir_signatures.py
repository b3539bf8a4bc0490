"""The signature table: complete, and make_call's errors name the op and the argument."""

from __future__ import annotations

import pytest

from pldemu.ir import (
    NR,
    SIGNATURES,
    AllreduceMode,
    Const,
    DType,
    IRTypeError,
    ListExpr,
    MemorySpace,
    Op,
    ProgramBuilder,
    ReduceOp,
    TensorType,
    Var,
    make_call,
)
from pldemu.ir.nodes import COMM_CTX, Arg
from pldemu.ir.signatures import Kind

WINDOW = Var("win", TensorType(DType.FP32, (Const(4), Const(64)), None, True))
LOCAL = Var("loc", TensorType(DType.INT32, (Const(2), Const(2)), None, False))
CTX = Var("ctx", COMM_CTX)

# For each parameter kind, an argument of the wrong kind.
WRONG: dict[Kind, Arg] = {
    Kind.TENSOR: CTX,
    Kind.WINDOW: LOCAL,
    Kind.TILE: WINDOW,
    Kind.TENSOR_OR_TILE: Const(1),
    Kind.SCALAR: WINDOW,
    Kind.LIST: Const(1),
    Kind.STATIC_LIST: Const(1),
    Kind.CTX: Const(1),
    Kind.TUPLE: Const(1),
    Kind.VALUE: CTX,
}


def test_signatures_cover_every_op() -> None:
    assert set(SIGNATURES) == set(Op)


@pytest.mark.parametrize("op", [o for o in Op if any(not p.optional for p in SIGNATURES[o].params)],
                         ids=lambda o: o.text)
def test_make_call_rejects_a_wrong_kind_naming_op_and_argument(op: Op) -> None:
    sig = SIGNATURES[op]
    required = [p for p in sig.params if not p.optional]
    first = sig.params[0]
    args = [WRONG[first.kind]] * len(required)
    attrs = {s.name: (DType.FP32 if s.kind is DType else 0) for s in sig.attrs if s.default is None}
    with pytest.raises(IRTypeError) as info:
        make_call(op, args, attrs)
    err = info.value
    assert (err.op, err.arg) == (op, first.name)
    assert str(err).startswith(f"{op.text}: argument '{first.name}' must be ")


@pytest.mark.parametrize(
    ("op", "args", "attrs", "message"),
    [
        (Op.NOTIFY, [LOCAL, Const(0), ListExpr((Const(0), Const(0))), Const(1)], {},
         "pld.system.notify: argument 'signal' must be a window tensor, got tensor int32[2-d]"),
        (Op.WAIT, [WINDOW, ListExpr((Const(0), Const(0))), Const(1)], {},
         "pld.system.wait: argument 'signal' must be an INT32 window, got window fp32[2-d]"),
        (Op.RANK, [WINDOW], {}, "pld.system.rank: argument 'ctx' must be a comm context, got window fp32[2-d]"),
        (Op.BARRIER, [], {}, "pld.tensor.barrier takes (signal), got 0 arguments"),
        (Op.ALLREDUCE, [WINDOW, WINDOW], {"op": "Avg"},
         "pld.tensor.allreduce: argument 'op' must be one of Sum, Max, Min, Prod, got 'Avg'"),
        (Op.ALLREDUCE, [WINDOW, WINDOW], {"opp": "Sum"},
         "pld.tensor.allreduce: argument 'opp' must be a known attribute: op, mode"),
        (Op.BROADCAST, [WINDOW, WINDOW], {}, "pld.tensor.broadcast: argument 'root' must be given"),
        (Op.BROADCAST, [WINDOW, WINDOW], {"root": True}, "pld.tensor.broadcast: argument 'root' must be an integer"),
        (Op.TILE_CREATE, [ListExpr((Const(4), Var("n", Const(0).type)))], {"dtype": "fp32"},
         "tile.create: argument 'shape' must be a list of integer literals (static shape)"),
        (Op.TILE_CAST, [WINDOW], {"dtype": "fp32"}, "tile.cast: argument 'tile' must be a tile, got window"),
    ],
)
def test_make_call_messages(op: Op, args: list[Arg], attrs: dict[str, object], message: str) -> None:
    with pytest.raises(IRTypeError) as info:
        make_call(op, args, attrs)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)


def test_put_region_comes_together() -> None:
    pb = ProgramBuilder("p")
    win = pb.window("win", "fp32", [NR, 64])
    stage = make_call(Op.TILE_CREATE, [ListExpr((Const(1), Const(64)))], {"dtype": "fp32"})
    region = ListExpr((Const(0), Const(0)))
    with pytest.raises(IRTypeError, match=r"pld\.tile\.put: argument 'dst_offsets' must be given together with"):
        make_call(Op.PUT, [win, Const(0), win, stage, region])


def test_make_call_canonicalizes_attributes() -> None:
    call = make_call(Op.ALLREDUCE, [WINDOW, WINDOW], {"mode": "RING", "op": "max"})
    assert call.attrs == (("op", ReduceOp.Max), ("mode", AllreduceMode.ring), ("lanes", 1))
    create = make_call(Op.TILE_CREATE, [ListExpr((Const(2), Const(8)))], {"dtype": "FP16"})
    assert create.attrs == (("dtype", DType.FP16), ("mem", MemorySpace.Vec))


def test_fence_and_cacheinvalid_forms() -> None:
    assert make_call(Op.FENCE, []).args == ()
    assert make_call(Op.CACHEINVALID, []).args == ()
    region = make_call(Op.CACHEINVALID, [WINDOW, ListExpr((Const(4), Const(64))), ListExpr((Const(0), Const(0)))])
    assert len(region.args) == 3
    with pytest.raises(IRTypeError, match=r"takes \(tensor, shapes, offsets\) or \(\), got 1 argument"):
        make_call(Op.CACHEINVALID, [WINDOW])
    with pytest.raises(IRTypeError, match="shapes"):
        make_call(Op.CACHEINVALID, [WINDOW, ListExpr((Const(4),)), ListExpr((Const(0), Const(0)))])
    with pytest.raises(IRTypeError, match=r"takes \(\), got 1 argument"):
        make_call(Op.FENCE, [WINDOW])
