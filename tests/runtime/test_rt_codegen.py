"""The generated Python of the interpreter (``pldemu.runtime.compiler``) at one rank: what it looks like,
that program text never becomes code, deep nesting (outlined blocks), evaluation order and locations."""

from __future__ import annotations

import re

import pytest
from helpers import instance
from rt_helpers import printed_line

from pldemu.ir import (
    Assign,
    Const,
    DType,
    Eval,
    For,
    Function,
    ListExpr,
    Op,
    Program,
    ProgramBuilder,
    Return,
    Seq,
    Var,
    make_call,
)
from pldemu.ir.nodes import INDEX, BinOp, BinOpKind, ExprLike
from pldemu.runtime import OpCounter, ProgramError, ProgramInstance


def _source(inst: ProgramInstance, traced: bool = False) -> str:
    if not traced:
        return inst.python_source()
    return inst._prepared.functions[("main", True)].source


def _nested_program(depth: int, fault: bool) -> Program:
    """``depth`` nested one-trip loops; the innermost writes the sum of the loop variables (or divides
    by zero) and returns early, so the write after the loops never happens."""
    pb = ProgramBuilder("deep")
    out = pb.local("out", "int64", [2])
    fb = pb.function()
    loops = []
    for i in range(depth):
        loops.append(fb.for_range(i, i + 1, 1))
    variables = [loop.__enter__() for loop in loops]
    total: ExprLike = 0
    for v in variables:
        total = total + v
    if fault:
        fb.let("q", total // (variables[0] - variables[0]))
    fb.pld.tensor.write(out, [0], total)
    fb.ret()
    for loop in reversed(loops):
        loop.__exit__(None, None, None)
    fb.pld.tensor.write(out, [1], 1)
    return pb.build()


def test_plain_function_is_one_python_function_with_locals_and_loops() -> None:
    pb = ProgramBuilder("p")
    out = pb.local("out", "int64", [1])
    fb = pb.function()
    with fb.for_range(0, 4, 1) as i, fb.if_(i.gt(1)):
        fb.pld.tensor.write(out, [0], i)
    with instance(pb.build()) as inst:
        inst.run()
        assert inst.local("out")[0] == 3
        src = _source(inst)
    assert src.count("def ") == 1 and "f[" not in src.split("\n", 2)[2]
    assert "for v2_i in _range(0, 4, 1):" in src and "if (v2_i > 1):" in src
    assert re.search(r"\b_h\d+\(_m, _s\d+, ", src) and not re.search(r"\b_c\d+\(", src)  # no monitor code


@pytest.mark.parametrize("depth", [3, 14, 30])
def test_deeply_nested_loops_run_and_return_early(depth: int) -> None:
    with instance(_nested_program(depth, fault=False)) as inst:
        inst.local("out")[...] = -1
        inst.run()
        assert list(inst.local("out")) == [sum(range(depth)), -1]
        src = _source(inst)
    assert ("def _b0(f):" in src) == (depth > 12)  # outlined beyond Python's nesting limits


@pytest.mark.parametrize("depth", [3, 30])
def test_a_fault_in_a_deep_block_is_located_at_its_statement(depth: int) -> None:
    program = _nested_program(depth, fault=True)
    with instance(program) as inst, pytest.raises(ProgramError, match=r"ZeroDivisionError") as info:
        inst.run()
    where = str(info.value).split(":", 2)
    assert where[0] == "main" and printed_line(program, int(where[1].split()[0])).startswith("q = ")


def test_names_that_are_not_identifiers_never_become_code() -> None:
    odd = "x = 1; import os #\u00e9"
    v = Var(odd, INDEX)
    pb = ProgramBuilder("odd")
    buf = pb.local("out", "int64", [1])
    write = make_call(Op.TENSOR_WRITE, (buf, _list(0), v))
    body = Seq((Assign(v, Const(0)), For(v, Const(2), Const(5), Const(1), Seq((Eval(write),))), Return((v,))))
    program = Program("odd", pb.build().buffers, (Function("main", (), body),))
    with instance(program) as inst:
        assert inst.run().returned == (4,)
        assert inst.local("out")[0] == 4
        src = _source(inst)
    assert odd not in src and "import os" not in src and "v2_x___1__import_os___ = 0" in src


def _list(*items: int) -> ListExpr:
    return ListExpr(tuple(Const(i) for i in items))


def test_an_operand_that_faults_stops_the_calls_to_its_right() -> None:
    # q = 10 // n + read(n): the division faults before the read may run (left-to-right order).
    pb = ProgramBuilder("order")
    nbuf = pb.local("n", "int32", [1])
    fb = pb.function()
    n = fb.pld.tensor.read(nbuf, [0])
    again = make_call(Op.TENSOR_READ, (nbuf, _list(0)))
    fb.let("q", BinOp(BinOpKind.ADD, BinOp(BinOpKind.FLOORDIV, Const(10, DType.INT32), n), again))
    program = pb.build()
    counter = OpCounter()
    with instance(program) as inst:
        inst.local("n")[0] = 0
        inst.add_listener(counter)
        with pytest.raises(ProgramError, match=r"^main:\d+ q = \(10:int32 // n_val\) \+ tensor.read\(n, \[0\]\): ZeroDivision"):
            inst.run()
        assert counter.counts[Op.TENSOR_READ] == 1
        assert re.search(r"\b_c\d+\(", _source(inst, traced=True))  # sites called through the listeners


def test_a_fault_in_a_range_bound_is_located_at_the_for() -> None:
    pb = ProgramBuilder("range")
    nbuf = pb.local("n", "int32", [1])
    fb = pb.function()
    n = fb.pld.tensor.read(nbuf, [0])
    with fb.for_range(0, 4, n):
        fb.let("k", 1)
    program = pb.build()
    with instance(program) as inst:
        inst.local("n")[0] = 0
        with pytest.raises(ProgramError, match=r"^main:\d+ for \w+ in range\(0, 4, n_val\): ValueError"):
            inst.run()


def test_only_functions_that_may_compute_on_numpy_data_run_under_errstate() -> None:
    from pldemu.collectives import CollectiveSpec, collective_program
    from pldemu.lowering import lower_composite_ops

    barrier = lower_composite_ops(collective_program(CollectiveSpec("barrier")).program)
    with instance(barrier) as inst:
        assert not inst._function("main", traced=False).numeric  # signal ops and rank queries only
        inst.add_listener(OpCounter())  # a listener may do anything: its variant keeps np.errstate
        inst.run()
        assert inst._function("main", traced=True).numeric
    pb = ProgramBuilder("write")
    out = pb.local("out", "int32", [1])
    pb.function().pld.tensor.write(out, [0], 1)
    with instance(pb.build()) as inst:
        assert inst._function("main", traced=False).numeric
