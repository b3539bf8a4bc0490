"""Statements remember the line of the user's file they came from (issue 13): the ``.pld`` line, the
line of a Python builder file, and through LowerCompositeOps the line of the composite a recipe
statement was lowered from. The origin is not part of a statement's identity."""

from __future__ import annotations

from pathlib import Path

from shared_programs import LONE_BARRIER

from pldemu.ir import Assign, Eval, SourcePos, walk_stmts
from pldemu.ir.parser import parse_program
from pldemu.ir.source import load_source
from pldemu.lowering import lower_composite_ops

BUILDER = """\
from pldemu.ir import NR, ProgramBuilder

pb = ProgramBuilder("p")
sig = pb.signal("sig", [NR, 1])
fb = pb.function("main")
ctx = fb.pld.system.get_comm_ctx(sig, hint="ctx")
fb.pld.system.notify(sig, 0, [0, 0], 1)
program = pb.build()
"""


def _origins(program: object) -> list[SourcePos | None]:
    main = program.function()  # type: ignore[attr-defined]
    return [s.origin for s in walk_stmts(main.body.stmts) if isinstance(s, (Assign, Eval))]


def test_a_pld_statement_knows_its_line_and_a_lowered_recipe_its_composite() -> None:
    program = parse_program(LONE_BARRIER, "lone.pld")
    assert _origins(program) == [SourcePos("lone.pld", 4), SourcePos("lone.pld", 5), SourcePos("lone.pld", 7)]
    lowered = _origins(lower_composite_ops(program))
    assert lowered[:2] == [SourcePos("lone.pld", 4), SourcePos("lone.pld", 5)]
    recipe = lowered[2:]
    assert len(recipe) > 3 and set(recipe) == {SourcePos("lone.pld", 7, "pld.tensor.barrier")}
    assert str(recipe[0]) == "lone.pld:7, lowered from pld.tensor.barrier"


def test_a_builder_statement_knows_the_line_of_the_python_file(tmp_path: Path) -> None:
    path = tmp_path / "built.py"
    path.write_text(BUILDER)
    origins = _origins(load_source(path))
    assert origins == [SourcePos(str(path), 6), SourcePos(str(path), 7)]


def test_the_origin_is_not_part_of_the_statement() -> None:
    a, b = parse_program(LONE_BARRIER, "a.pld"), parse_program("\n" + LONE_BARRIER, "b.pld")
    assert a == b and hash(a.function().body) == hash(b.function().body)
