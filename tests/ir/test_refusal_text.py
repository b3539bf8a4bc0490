"""Refusals speak the user's terms (issue 22 point 5): every expression a refusal shows is printed as the
``.pld`` printer prints it, never as a dataclass repr. This test renders the refusals of the whole
signature table: every op, called with many argument combinations (literal, symbolic and partial valid
shapes, every dtype, wrong kinds, attribute values of the wrong type), and looks at every message."""

from __future__ import annotations

import random
import re

import pytest

from pldemu.ir import DType, Op
from pldemu.ir.enums import MemorySpace, TileLayout
from pldemu.ir.nodes import (
    COMM_CTX,
    BinOp,
    BinOpKind,
    Const,
    ListExpr,
    NotStatic,
    TensorType,
    TileType,
    TupleType,
    Var,
    evaluate,
)
from pldemu.ir.signatures import SIGNATURES, IRTypeError, Kind, make_call

INTERNALS = re.compile(r"Const\(|DType\.|Var\(|ListExpr\(|BinOp\(|TileType\(|TensorType\(|<\w+\.\w+: ")
"""What a dataclass or enum repr looks like in a message."""

N = Var("n", Const(0).type)
NR = Var("NR", Const(0).type)
DTYPES = list(DType)
VALIDS = [None, (Const(1), Const(4)), (N, Const(8)), (Const(16), Const(32)), (BinOp(BinOpKind.ADD, N, Const(1)), N)]


def _tile(rng: random.Random) -> Var:
    shape = rng.choice([(1, 8), (2, 8), (16, 64), (32, 32), (16, 32), (1, 1024), (64, 16)])
    valid = rng.choice(VALIDS)
    layout = rng.choice(list(TileLayout)) if rng.random() < 0.2 else TileLayout.ND
    mem = rng.choice(list(MemorySpace)) if rng.random() < 0.2 else MemorySpace.Vec
    return Var("t", TileType(rng.choice(DTYPES), shape, valid, mem, layout))


def _tensor(rng: random.Random) -> Var:
    shape = rng.choice([(Const(2), Const(8)), (NR, Const(1)), (Const(16),), (BinOp(BinOpKind.MUL, NR, Const(4)), N)])
    valid = rng.choice([None, None, (N, Const(8))]) if len(shape) == 2 else None
    return Var("x", TensorType(rng.choice(DTYPES), shape, valid, window=rng.random() < 0.5))


def _list(rng: random.Random) -> ListExpr:
    k = rng.choice([0, 1, 2, 2, 2, 3])
    return ListExpr(tuple(rng.choice([Const(0), Const(1), Const(8), Const(-1), N, NR, Const(16), Const(32)])
                          for _ in range(k)))


def _arg(rng: random.Random, kind: Kind) -> object:
    if rng.random() < 0.15:  # a wrong kind now and then: the kind refusals render too
        kind = rng.choice(list(Kind))
    if kind in (Kind.LIST, Kind.STATIC_LIST):
        return _list(rng)
    if kind is Kind.TILE:
        return _tile(rng)
    if kind in (Kind.TENSOR, Kind.WINDOW):
        return _tensor(rng)
    if kind is Kind.SCALAR:
        return rng.choice([Const(1), Const(1.5, DType.FP32), N, Const(7, DType.INT32)])
    if kind is Kind.CTX:
        return Var("ctx", COMM_CTX)
    if kind is Kind.TUPLE:
        return Var("tu", TupleType((_tile(rng).type, _tile(rng).type)))
    return rng.choice([_tile(rng), _tensor(rng), Const(2)])


def _attr(rng: random.Random, kind: type) -> object:
    roll = rng.random()
    if roll < 0.2:
        return rng.choice(DTYPES)  # a dtype where something else is expected, too
    if roll < 0.3:
        return rng.choice([3, "bogus", 1.5, True])
    if isinstance(kind, type) and issubclass(kind, __import__("enum").Enum) and kind is not DType:
        return rng.choice(list(kind))
    if kind is DType:
        return rng.choice(DTYPES)
    return rng.choice([0, 1, 2, 16, -1])


def refusals(op: Op, trials: int = 300) -> list[str]:
    rng = random.Random(op.text)
    sig = SIGNATURES[op]
    out = []
    for _ in range(trials):
        n = rng.randint(len([p for p in sig.params if not p.optional]), len(sig.params))
        args = [_arg(rng, p.kind) for p in sig.params[:n]]
        attrs = {a.name: _attr(rng, a.kind) for a in sig.attrs if rng.random() < 0.6}
        try:
            make_call(op, args, attrs)  # type: ignore[arg-type]
        except IRTypeError as err:
            out.append(str(err))
    return out


@pytest.mark.parametrize("op", list(SIGNATURES), ids=lambda op: op.text)
def test_refusals_of_the_signature_table_print_expressions_as_pld(op: Op):
    messages = refusals(op)
    bad = [m for m in messages if INTERNALS.search(m)]
    assert not bad, "\n".join(bad[:5])


def test_the_partial_valid_tquant_mx_refusal_shows_the_values():
    src = Var("x", TileType(DType.FP32, (16, 64), (Const(16), Const(32))))
    with pytest.raises(IRTypeError) as err:
        make_call(Op.TILE_TQUANT_MX, [src], {"dtype": "fp8e4m3fn", "group_axis": 1})
    assert "got valid [16, 32] of [16, 64]" in str(err.value)


def test_a_bad_dtype_attribute_is_named_as_written():
    with pytest.raises(IRTypeError) as err:
        make_call(Op.TUPLE_GET_ITEM, [Var("tu", TupleType((TileType(DType.FP32, (1, 8)),) * 2))],
                  {"index": DType.FP32})
    assert "got fp32" in str(err.value) and "DType." not in str(err.value)


def test_a_non_static_expression_is_printed():
    rank = make_call(Op.RANK, [Var("ctx", COMM_CTX)])
    with pytest.raises(NotStatic) as err:
        evaluate(ListExpr((BinOp(BinOpKind.ADD, rank, Const(1)),)), 4)
    assert str(err.value) == "not a static expression: pld.system.rank(ctx)"
