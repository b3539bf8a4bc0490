"""The text form (``.pld``): a printer whose output the parser (pldemu.ir.parser) reads back.

Grammar sketch (the parser is the authority)::

    program NAME [nranks=INT] [entry=NAME] {
      window NAME: DTYPE[DIMS] [valid [DIMS]] [layout DN] [strides [INTS]]
      signal NAME: int32[DIMS]
      local  NAME: DTYPE[DIMS]
      func NAME(PARAM: PTYPE, ...) {
        NAME = EXPR
        CALL
        for NAME in range(EXPR, EXPR, EXPR) { ... }       (also parallel(...), pipeline(...))
        task [TID =] KIND[(EXPR) [block NAME]] ["NAME"] [deps [EXPR, ...]] [nodep [NAME, ...]] [early] { ... }
                                                          (KIND: kernel, core_group, spmd; dummy has no body)
        scope auto|manual { ... }
        while EXPR { ... }
        if EXPR { ... } else { ... }
        return [EXPR, ...]
      }
    }

Expressions: integer/float literals (``5``, ``2.5``, ``inf``; non-default dtypes as ``5:int32``),
``true``/``false``, names, ``a + b`` (any nested infix operand is parenthesised), ``min(a, b)``,
``max(a, b)``, and calls ``op.name(arg, [list], attr=Value)`` with every attribute spelled out.

Parameter types (PTYPE): a scalar dtype (``index``), a tensor (``fp32[4, NR]``, with the buffer options),
a window tensor (``window fp32[4]``), a tile (``tile fp32[16, 16] [valid [DIMS]] [mem Mat]``), or ``ctx``.
"""

from __future__ import annotations

from collections.abc import Callable

from pldemu.ir import nodes as ir
from pldemu.ir.enums import Layout, MemorySpace, TileLayout, enum_text
from pldemu.ir.nodes import format_dims, format_expr

INDENT = "  "


def format_buffer_type(t: ir.TensorType) -> str:
    text = f"{t.dtype.value}{format_dims(t.shape)}"
    if t.valid_shape is not None:
        text += f" valid {format_dims(t.valid_shape)}"
    if t.layout is not Layout.ND:
        text += f" layout {enum_text(t.layout)}"
    if t.strides is not None:
        text += " strides [" + ", ".join(str(s) for s in t.strides) + "]"
    return text


StmtNote = Callable[[ir.Stmt], str]
"""A comment for a statement's line (empty: none): ``format_program(p, note=...)`` annotates a listing."""


def _stmt_lines(s: ir.Stmt, depth: int, out: list[str], note: StmtNote | None = None) -> None:
    pad = INDENT * depth
    if isinstance(s, ir.Assign | ir.Eval):
        text = f"{s.var.name} = {format_expr(s.value)}" if isinstance(s, ir.Assign) else format_expr(s.call)
        comment = note(s) if note is not None else ""
        out.append(f"{pad}{text}" + (f"  # {comment}" if comment else ""))
    elif isinstance(s, ir.Seq):
        for sub in s.stmts:
            _stmt_lines(sub, depth, out, note)
    elif isinstance(s, ir.For):
        rng = f"{s.kind.value}({format_expr(s.start)}, {format_expr(s.stop)}, {format_expr(s.step)})"
        out.append(f"{pad}for {s.var.name} in {rng} {{")
        _stmt_lines(s.body, depth + 1, out, note)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.While):
        out.append(f"{pad}while {format_expr(s.cond)} {{")
        _stmt_lines(s.body, depth + 1, out, note)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.If):
        out.append(f"{pad}if {format_expr(s.cond)} {{")
        _stmt_lines(s.then, depth + 1, out, note)
        if s.orelse is not None:
            out.append(f"{pad}}} else {{")
            _stmt_lines(s.orelse, depth + 1, out, note)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.Task):
        comment = note(s) if note is not None else ""
        head = f"{pad}{format_task_head(s)}"
        if s.kind is ir.TaskKind.DUMMY:
            out.append(head + (f"  # {comment}" if comment else ""))
            return
        out.append(head + " {" + (f"  # {comment}" if comment else ""))
        _stmt_lines(s.body, depth + 1, out, note)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.TaskScope):
        out.append(f"{pad}scope {'manual' if s.manual else 'auto'} {{")
        _stmt_lines(s.body, depth + 1, out, note)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.Return):
        vals = ", ".join(format_expr(v) for v in s.values)
        out.append(f"{pad}return {vals}".rstrip())
    else:
        raise TypeError(f"not a statement: {s!r}")


def format_task_head(t: ir.Task) -> str:
    """``task [TID =] KIND[(BLOCKS) block B] ["NAME"] [deps [..]] [nodep [..]] [early]`` (no brace)."""
    text = "task " + (f"{t.tid.name} = " if t.tid is not None else "") + t.kind.value
    if t.kind is ir.TaskKind.SPMD:
        text += f"({format_expr(t.blocks)})" + (f" block {t.block_var.name}" if t.block_var is not None else "")
    if t.name:
        text += " " + ir.format_attr(t.name)
    if t.deps:
        text += " deps [" + ", ".join(format_expr(d) for d in t.deps) + "]"
    if t.no_dep:
        text += " nodep [" + ", ".join(v.name for v in t.no_dep) + "]"
    return text + (" early" if t.early_resolve else "")


def format_function(f: ir.Function, depth: int = 0, note: StmtNote | None = None) -> str:
    pad = INDENT * depth
    params = ", ".join(f"{p.name}: {_param_type(p)}" for p in f.params)
    lines = [f"{pad}func {f.name}({params}) {{"]
    _stmt_lines(f.body, depth + 1, lines, note)
    lines.append(f"{pad}}}")
    return "\n".join(lines)


def _param_type(p: ir.Var) -> str:
    t = p.type
    if isinstance(t, ir.TensorType):
        return ("window " if t.window else "") + format_buffer_type(t)
    if isinstance(t, ir.TileType):
        text = "tile " + t.dtype.value + "[" + ", ".join(str(d) for d in t.shape) + "]"
        if t.valid_shape is not None:
            text += f" valid {format_dims(t.valid_shape)}"
        if t.memory is not MemorySpace.Vec:
            text += f" mem {enum_text(t.memory)}"
        if t.layout is not TileLayout.ND:
            text += f" layout {enum_text(t.layout)}"
        return text
    if isinstance(t, ir.CommCtxType):
        return "ctx"
    if isinstance(t, ir.ScalarType):
        return t.dtype.value
    return "none"  # not a legal parameter type; printed for debugging only


def format_program(p: ir.Program, note: StmtNote | None = None) -> str:
    """The canonical text of a program (ends with a newline); ``note``: a comment after a statement."""
    head = f"program {p.name}" + (f" nranks={p.nranks}" if p.nranks is not None else "")
    head += (f" entry={p.entry}" if p.entry != "main" else "") + " {"
    lines = [head]
    for b in p.buffers:
        assert isinstance(b.var.type, ir.TensorType)
        group = "" if b.group is None else " group [" + ", ".join(map(str, b.group)) + "]"
        lines.append(f"{INDENT}{b.kind.value} {b.var.name}: {format_buffer_type(b.var.type)}{group}")
    for f in p.functions:
        lines.append("")
        lines.append(format_function(f, 1, note))
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["format_expr", "format_function", "format_program"]
