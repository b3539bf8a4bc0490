"""The verifier: scoping, recorded types, canonical attributes, buffer declarations, entry function."""

from __future__ import annotations

import dataclasses

import pytest
from ir_corpus import all_programs
from ir_helpers import roundtrip

from pldemu.ir import (
    NR,
    Assign,
    BufferDecl,
    BufferKind,
    Call,
    Const,
    DType,
    Eval,
    Function,
    Op,
    Program,
    ProgramBuilder,
    ReduceOp,
    ScalarType,
    Seq,
    Stmt,
    TensorType,
    Var,
    VerifyError,
    While,
    format_program,
    make_call,
    parse_program,
    verify,
)
from pldemu.ir.nodes import COMM_CTX, INDEX, INT32, NONE


def problems(program: Program) -> list[str]:
    with pytest.raises(VerifyError) as info:
        verify(program)
    return info.value.problems


def with_body(program: Program, *stmts: Stmt) -> Program:
    """``program``'s buffers with one function ``main`` running ``stmts``."""
    return Program(program.name, program.buffers, (Function("main", (), Seq(stmts)),))


def base() -> tuple[ProgramBuilder, Var, Var]:
    pb = ProgramBuilder("v")
    data = pb.window("data", "fp32", [4, 64])
    sig = pb.signal("sig", [NR, 1])
    return pb, data, sig


def test_corpus_is_valid() -> None:
    for p in all_programs():
        assert verify(p) is p


def test_use_before_definition() -> None:
    pb, _, sig = base()
    fb = pb.function()
    ghost = Var("ctx", COMM_CTX)
    fb.emit(Assign(Var("me", INT32), make_call(Op.RANK, [ghost])))
    fb.pld.system.get_comm_ctx(sig)  # defined only afterwards
    assert problems(pb.build()) == ["func main: ctx used before it is defined"]


def test_name_defined_in_one_branch_is_undefined_after_the_if() -> None:
    pb, _, _ = base()
    fb = pb.function()
    with fb.if_(NR.gt(2)):
        x = fb.let("x", 1)
    fb.let("y", x + 1)
    assert problems(pb.build()) == ["func main: x used before it is defined"]


def test_name_defined_in_both_branches_is_defined_after_the_if() -> None:
    pb, _, _ = base()
    fb = pb.function()
    with fb.if_(NR.gt(2)):
        x = fb.let("x", 1)
    with fb.else_():
        fb.assign_to(x, Const(2))
    fb.let("y", x + 1)
    verify(pb.build())


def test_name_defined_in_a_loop_body_is_undefined_after_the_loop() -> None:
    pb, _, _ = base()
    fb = pb.function()
    with fb.for_range(3) as i:
        x = fb.let("x", i * 2)
    fb.let("y", x + 1)
    with fb.while_(Const(False)):
        z = fb.let("z", 1)
    fb.let("w", z)
    assert problems(pb.build()) == ["func main: x used before it is defined", "func main: z used before it is defined"]


def test_wrong_recorded_types() -> None:
    pb, data, sig = base()
    call = make_call(Op.ALLREDUCE, [data, sig])
    wrong_call = dataclasses.replace(call, type=sig.type)
    program = with_body(pb.build(), Assign(Var("x", INT32), Const(1)), Eval(wrong_call),
                        Assign(Var("out", data.type), call), Assign(Var("y", INDEX), Var("out", INDEX)))
    assert problems(program) == [
        "func main: x: declared type differs from its value's type",
        "func main: pld.tensor.allreduce: recorded result type differs from the deduced one",
        "func main: out used with a type that differs from its definition",
    ]


def test_rebinding_with_another_type() -> None:
    pb, _, _ = base()
    program = with_body(pb.build(), Assign(Var("x", INDEX), Const(1)),
                        Assign(Var("x", ScalarType(DType.FP32)), Const(1.0, DType.FP32)))
    assert problems(program) == ["func main: x re-assigned with a different type"]


def test_non_canonical_attrs() -> None:
    pb, data, sig = base()
    call = make_call(Op.ALLREDUCE, [data, sig], {"op": "Max"})
    missing_default = Call(Op.ALLREDUCE, call.args, (("op", ReduceOp.Max),), call.type)
    reordered = Call(Op.ALLREDUCE, call.args, tuple(reversed(call.attrs)), call.type)
    as_text = Call(Op.ALLREDUCE, call.args, (("op", "Max"), call.attrs[1]), call.type)
    program = with_body(pb.build(), Eval(call), Eval(missing_default), Eval(reordered), Eval(as_text))
    assert problems(program) == ["func main: pld.tensor.allreduce: attributes are not canonical"] * 3


def test_ill_typed_call_is_reported() -> None:
    pb, _, sig = base()
    notify = Call(Op.NOTIFY, (sig, Const(0), Const(0), Const(1)), (), NONE)  # offsets not a list
    program = with_body(pb.build(), Eval(notify))
    assert problems(program) == ["func main: pld.system.notify: argument 'offsets' must be a [list] of scalars, "
                                 "got Const"]


def test_signal_must_be_int32() -> None:
    sig = Var("sig", TensorType(DType.FP32, (NR, Const(1)), None, True))
    program = Program("v", (BufferDecl(sig, BufferKind.SIGNAL),), (Function("main", (), Seq()),))
    assert problems(program) == ["signal sig must be int32, got fp32"]
    # The parser does not judge: the printed program reads back and fails verification the same way.
    assert problems(roundtrip(program)) == ["signal sig must be int32, got fp32"]


def test_buffer_declarations() -> None:
    t = TensorType(DType.FP32, (Const(4),), None, True)
    program = Program("v", (
        BufferDecl(Var("a", t), BufferKind.LOCAL),
        BufferDecl(Var("a", t), BufferKind.WINDOW),
        BufferDecl(Var("NR", t), BufferKind.WINDOW),
        BufferDecl(Var("b", TensorType(DType.FP32, (Var("n", INDEX),), None, True)), BufferKind.WINDOW),
    ), (Function("main", (), Seq()),))
    assert problems(program) == [
        "buffer a: kind local disagrees with window=True",
        "buffer a declared twice or shadows NR",
        "buffer NR declared twice or shadows NR",
        "n used before it is defined",
    ]


def test_missing_entry_function() -> None:
    pb, _, sig = base()
    fb = pb.function("kernel")
    fb.pld.tensor.barrier(sig)
    assert problems(pb.build()) == ["entry function 'main' is not defined"]
    program = pb.build(entry="kernel")
    verify(program)
    assert roundtrip(program).entry == "kernel"
    assert problems(dataclasses.replace(program, entry="start")) == ["entry function 'start' is not defined"]


def test_duplicate_functions_and_bad_nranks() -> None:
    main = Function("main", (), Seq())
    assert problems(Program("v", (), (main, main), nranks=0)) == [
        "nranks must be >= 1, got 0", "function names must be unique"]


def test_conditions_and_bounds_must_be_scalar_ints_or_bools() -> None:
    pb, _, _ = base()
    program = with_body(pb.build(), While(Const(1.5, DType.FP32), Seq()))
    assert problems(program) == ["func main: while condition must be a boolean or integer scalar"]


def test_float_constant_with_integer_dtype() -> None:
    pb, _, _ = base()
    program = with_body(pb.build(), Assign(Var("x", INDEX), Const(2.5)))  # Const's default dtype is INDEX
    assert problems(program) == ["func main: constant 2.5 has the non-float dtype index"]


def test_assigning_a_call_that_returns_nothing() -> None:
    pb, data, _ = base()
    fb = pb.function()
    t = fb.pld.tile.load(data, [0, 0], [4, 64])
    fb.emit(Assign(Var("x", NONE), fb.call(Op.TILE_STORE, [t, [0, 0], data])))
    assert problems(pb.build()) == ["func main: x is assigned the result of a call that returns nothing"]


def test_every_problem_is_listed_in_the_message() -> None:
    pb, _, _ = base()
    program = with_body(pb.build(), Assign(Var("x", INT32), Const(1)), Assign(Var("y", INDEX), Var("z", INDEX)))
    with pytest.raises(VerifyError) as info:
        verify(program)
    text = str(info.value)
    assert text.startswith("program v failed verification:\n")
    assert "x: declared type differs" in text and "z used before it is defined" in text


def test_verifier_accepts_what_the_parser_builds_from_text() -> None:
    program = parse_program(format_program(all_programs()[0]))
    verify(program)
