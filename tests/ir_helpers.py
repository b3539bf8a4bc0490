"""Shared IR test helpers: text round trip with a readable report of the first structural difference.

Any suite can do ``from ir_helpers import roundtrip`` (tests/conftest.py puts tests/ on sys.path) and
call it on every program it builds, e.g. before and after lowering.
"""

from __future__ import annotations

import dataclasses
import difflib
import math

from pldemu.ir import Program, Seq, format_program, parse_program
from pldemu.ir.nodes import For, Function, If, Stmt, While


def roundtrip(program: Program) -> Program:
    """Print, parse and print again: assert the two texts are identical and the parsed program equals
    ``program`` structurally (nested ``Seq`` statements flattened, as the printer does; NaN equals NaN).
    Returns the parsed program."""
    text = format_program(program)
    parsed = parse_program(text, filename=f"<roundtrip of {program.name}>")
    again = format_program(parsed)
    if again != text:
        diff = "\n".join(difflib.unified_diff(text.splitlines(), again.splitlines(), "printed", "reprinted",
                                              lineterm=""))
        raise AssertionError(f"print -> parse -> print changed the text:\n{diff}")
    where = first_difference(flatten_seqs(program), parsed)
    if where is not None:
        raise AssertionError(f"parse(print(p)) differs from p structurally at {where}\n--- text ---\n{text}")
    return parsed


def flatten_seqs(program: Program) -> Program:
    """The program with statement-level nested ``Seq`` blocks spliced into their parents."""
    funcs = tuple(Function(f.name, f.params, _flat(f.body)) for f in program.functions)
    return dataclasses.replace(program, functions=funcs)


def _flat(seq: Seq) -> Seq:
    out: list[Stmt] = []
    for s in seq.stmts:
        if isinstance(s, Seq):
            out.extend(_flat(s).stmts)
        elif isinstance(s, (For, While)):
            out.append(dataclasses.replace(s, body=_flat(s.body)))
        elif isinstance(s, If):
            out.append(If(s.cond, _flat(s.then), None if s.orelse is None else _flat(s.orelse)))
        else:
            out.append(s)
    return Seq(tuple(out))


def first_difference(a: object, b: object, path: str = "program") -> str | None:
    """A path like ``program.functions[0].body.stmts[3].value.args[1]`` to the first place where ``a``
    and ``b`` differ (with both values), or None when they are structurally equal."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return None
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {a!r} != {type(b).__name__} {b!r}"
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            if not f.compare:  # not part of the node's identity (a statement's source origin)
                continue
            found = first_difference(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            if found is not None:
                return found
        return None
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"
