"""Golden lowered programs of the tile composites: sin, cos and each select route per backend.

Regenerate after an intended change with ``scripts/regen-goldens.sh`` (PLDEMU_REGEN_GOLDEN=1) and read
the diff of tests/tile/golden/*.pld against the spec before committing it. Each golden also round-trips
(print -> parse -> equal) and is a fixed point of the pass (idempotency).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pldemu.ir import FunctionBuilder, Program, ProgramBuilder, Var, format_program, parse_file, verify
from pldemu.lowering import lower_composite_ops
from pldemu.lowering.backend import BACKENDS

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("PLDEMU_REGEN_GOLDEN") == "1"


def _program(name: str, body: Callable[[FunctionBuilder, Var], Var]) -> Program:
    pb = ProgramBuilder(name)
    x = pb.local("x", "fp32", [16, 128])
    out = pb.local("out", "fp32", [16, 128])
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], [16, 128], valid_shape=[11, 100], hint="t")
    fb.pld.tile.store(body(fb, t), [0, 0], out)
    return pb.build()


def _mask(fb: FunctionBuilder, t: Var) -> Var:
    return fb.pld.tile.cmps(t, 0.0, "GE", hint="m")


CASES: dict[str, tuple[Callable[[FunctionBuilder, Var], Var], str]] = {
    "sin": (lambda fb, t: fb.pld.tile.sin(t, hint="y"), "none"),
    "cos": (lambda fb, t: fb.pld.tile.cos(t, hint="y"), "none"),
    **{f"select_{route}_{b}": (fn, b) for b in ("a2a3", "a5", "none") for route, fn in (
        ("tile_tile", lambda fb, t: fb.pld.tile.select(_mask(fb, t), t, fb.pld.tile.muls(t, 2.0, hint="u"),
                                                       hint="y")),
        ("tile_scalar", lambda fb, t: fb.pld.tile.select(_mask(fb, t), t, 0.0, hint="y")),
        ("scalar_tile", lambda fb, t: fb.pld.tile.select(_mask(fb, t), 7.0, t, hint="y")),
    )},
}


@pytest.mark.parametrize("name", list(CASES))
def test_golden(name: str) -> None:
    body, backend = CASES[name]
    lowered = lower_composite_ops(_program(name, body), backend=BACKENDS[backend])
    verify(lowered)
    text = format_program(lowered)
    path = GOLDEN / f"{name}.pld"
    if REGEN:
        path.write_text(text)
    assert path.read_text() == text, f"{path} is stale (see the module docstring to regenerate)"
    parsed = verify(parse_file(path))
    assert parsed == lowered and format_program(parsed) == text
    assert lower_composite_ops(parsed, backend=BACKENDS[backend]) == parsed  # idempotent


def test_two_composites_share_one_temporary_counter_and_keep_their_targets() -> None:
    pb = ProgramBuilder("two")
    x = pb.local("x", "fp32", [1, 32])
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], [1, 32], hint="t")
    s = fb.pld.tile.sin(t, hint="s")
    c = fb.pld.tile.cos(t, hint="c")
    fb.pld.tile.store(fb.pld.tile.add(s, c, hint="sum"), [0, 0], x)
    lowered = lower_composite_ops(pb.build())
    names = [st.var.name for st in lowered.function().body.stmts if hasattr(st, "var")]
    assert names[1] == "s_x_pi_inv_0" and "s" in names and "c" in names
    first_cos = next(n for n in names if n.startswith("c_"))
    assert first_cos == "c_x_pi_inv_30"  # sin used 0..29; the counter continues across composites of the function
    assert names.index("s") < names.index(first_cos) and names[-1] == "sum"
    assert len(names) == len(set(names))


def test_no_composite_program_comes_back_as_the_same_object() -> None:
    pb = ProgramBuilder("plain")
    x = pb.local("x", "fp32", [1, 32])
    fb = pb.function()
    fb.pld.tile.store(fb.pld.tile.muls(fb.pld.tile.load(x, [0, 0], [1, 32]), 2.0), [0, 0], x)
    program = pb.build()
    assert lower_composite_ops(program, backend=BACKENDS["a2a3"]) is program
