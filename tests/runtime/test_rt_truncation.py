"""The compiled ``tdiv`` / ``trem`` at one rank (``pldemu.runtime.compiler``, ``pldemu.runtime.truncation``):
the device's C truncation computed, the floor operator inline where both agree, and each site whose value
differs from floor semantics recorded once, with its operands, both values and the call."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import instance

from pldemu.ir import BinOp, BinOpKind, Program, ProgramBuilder
from pldemu.runtime import ProgramError
from pldemu.runtime.truncation import Truncation, merge

PAIRS = [(7, 2), (6, 3), (-8, 4), (-1, 4), (-7, 2), (7, -2), (-7, -2), (0, -5), (-9, 3)]


def _program(floor_only: bool = False) -> Program:
    """Row i of ``out``: ``tdiv(a, b)`` and ``trem(a * one, b * one)`` of row i of ``ops`` (``one`` = 1, read
    at run time: the second operator's operands are expressions)."""
    pb = ProgramBuilder("trunc")
    ops = pb.local("ops", "int64", [len(PAIRS), 2])
    out = pb.local("out", "int64", [len(PAIRS), 2])
    ones = pb.local("ones", "int64", [1])
    fb = pb.function()
    div, rem = (BinOpKind.FLOORDIV, BinOpKind.MOD) if floor_only else (BinOpKind.TDIV, BinOpKind.TREM)
    one = fb.pld.tensor.read(ones, [0])
    with fb.for_range(0, len(PAIRS), 1) as i:
        a = fb.pld.tensor.read(ops, [i, 0])
        b = fb.pld.tensor.read(ops, [i, 1])
        fb.pld.tensor.write(out, [i, 0], BinOp(div, a, b))
        fb.pld.tensor.write(out, [i, 1], BinOp(rem, a * one, b * one))
    return pb.build()


def _load(inst, pairs=PAIRS) -> None:  # type: ignore[no-untyped-def]
    """``pairs`` into ``ops``, repeated to fill its rows."""
    inst.local("ops")[...] = np.array([pairs[i % len(pairs)] for i in range(len(PAIRS))], np.int64)
    inst.local("ones")[...] = 1


def test_the_device_value_is_computed_and_each_site_recorded_once() -> None:
    program = _program()
    with instance(program) as inst:
        _load(inst)
        inst.run()
        inst.run()  # a second call finds the same sites again: still one record each, from call 1
        got = inst.local("out").tolist()
        found = inst.truncations
    assert got == [[int(a / b), int(math.fmod(a, b))] for a, b in PAIRS]
    assert [(t.op, t.lhs, t.rhs, t.device, t.floor, t.rank, t.call) for t in found] == [
        ("tdiv", -1, 4, 0, -1, 0, 1), ("trem", -1, 4, -1, 3, 0, 1)]  # (-8, 4) divides exactly: no finding
    div, rem = found
    assert div.expr == "tdiv(ops_val, ops_val_1)" and rem.expr == "trem(ops_val * ones_val, ops_val_1 * ones_val)"
    assert div.where.startswith("main:") and "tensor.write(out, [i, 0], tdiv(ops_val, ops_val_1))" in div.where
    assert div.origin.startswith("test_rt_truncation.py:")


def test_operands_where_both_families_agree_make_no_finding() -> None:
    with instance(_program()) as inst:
        _load(inst, [(a, b) for a, b in PAIRS if (a < 0) == (b < 0) or a % b == 0])
        inst.run()
        assert inst.truncations == ()


def test_the_floor_operator_runs_inline_and_the_site_only_off_the_fast_path() -> None:
    with instance(_program()) as inst:
        src = inst.python_source()
    assert src.count("else _tq") == 2  # two sites
    assert "(v6_ops_val // v7_ops_val_1 if v6_ops_val >= 0 < v7_ops_val_1 else _tq" in src
    # Operands that are expressions are evaluated once each, both before the test.
    assert "(_w1 % _w2 if ((_w1 := (v6_ops_val * v4_ones_val)) >= 0) & ((_w2 := (v7_ops_val_1 * v4_ones_val)) > 0)" in src
    with instance(_program(floor_only=True)) as inst:
        assert "_tq" not in inst.python_source()  # no truncating operator, no cost


def test_a_zero_divisor_is_a_located_program_error() -> None:
    with instance(_program()) as inst:
        _load(inst, [(-1, 0)])
        with pytest.raises(ProgramError, match=r"^main:\d+ tensor.write\(out, \[i, 0\], tdiv\(ops_val, ops_val_1\)\): "
                                               r"ZeroDivisionError"):
            inst.run()


def _finding(rank: int, call: int, expr: str = "trem(me - 1, nr)", where: str = "main:5 x = trem(me - 1, nr)",
             origin: str = "p.pld:5") -> Truncation:
    return Truncation("trem", expr, origin, where, -rank - 1, 3, -rank - 1, 2 - rank, rank, call)


def test_merge_keeps_one_record_per_site_with_every_rank() -> None:
    merged = merge([_finding(2, 1), _finding(1, 3), _finding(0, 1, origin="p.pld:9")])
    assert [(t.origin, t.rank, t.ranks) for t in merged] == [("p.pld:9", 0, (0,)), ("p.pld:5", 2, (1, 2))]
    assert merged[1].describe() == ("p.pld:5: `trem(me - 1, nr)` with a negative dividend (-3 % 3): the device "
                                    "computes -3 (C truncation), pypto's IR and Python give 0 (floor); ranks 1, 2 "
                                    "(the values of rank 2), first seen at call 1")
    assert Truncation.from_json(merged[1].to_json()) == merged[1]
    # Without a user line the printed location is the site; a front end's own text names it when known.
    bare = merge([_finding(0, 1, origin=""), _finding(1, 1, origin="")])
    assert len(bare) == 1 and bare[0].describe().startswith("main:5 x = trem(me - 1, nr): `trem(me - 1, nr)`")
