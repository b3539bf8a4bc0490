"""``compiled.output_dir``: the translated program, the rank job's program file, and per host-level
collective pldemu's lowered builtin kernel, laid out as pypto's compiler lays its own
(``next_levels/builtin.tensor.<op>__<variant>/``: ``kernel.pld``, the lowered program of that one
collective, and ``kernel_config.py``, which describes it)."""

from __future__ import annotations

import ast
import dataclasses
import pickle
import pprint
from pathlib import Path
from typing import Any

from pldemu.ir import format_program
from pldemu.pypto.capture import CapturedProgram
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.session import FrontendOptions
from pldemu.pypto.translate.evaluator import Evaluator
from pldemu.pypto.translate.program import Built
from pldemu.pypto.translate.values import HostCollective, HostView
from pldemu.pypto.types import DslOp, PyDType

PROGRAM_FILE = "program.py"
MARKER = "PLDEMU.txt"
"""The file that marks a folder as a ``compiled.output_dir`` pldemu wrote (and says what it holds)."""
_MARKER_TEXT = """pldemu's compiled.output_dir: next_levels/builtin.tensor.<op>__<variant>/ (kernel_config.py at
ir.compile; kernel.pld, the lowered program, at each call), translated.pld, lowered.pld, program.py and
program.pickle. pldemu generates no pypto code: no orchestration/ host or chip sources, no kernels.
"""
_LOADER = '''"""The rank job's program: the translated pypto program, pickled beside this file (origins kept)."""
import pathlib
import pickle

program = pickle.loads((pathlib.Path(__file__).parent / "program.pickle").read_bytes())
'''


def write_artifacts(built: Built, output_dir: Path, opts: FrontendOptions) -> Path:
    """Write a call's programs (and each host collective's lowered kernel); the rank job's program file."""
    from pldemu.lowering import lower_composite_ops

    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "program.pickle").write_bytes(pickle.dumps(built.program))
    (output_dir / PROGRAM_FILE).write_text(_LOADER)
    (output_dir / "translated.pld").write_text(format_program(built.program))
    lowered = format_program(lower_composite_ops(built.program))
    (output_dir / "lowered.pld").write_text(lowered)
    for coll in built.collectives:
        folder = output_dir / "next_levels" / variant_name(coll.op, dict(coll.kwargs), _dtype_of(coll))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kernel.pld").write_text(lowered)
    return output_dir / PROGRAM_FILE


def write_compile_artifacts(prog: CapturedProgram, output_dir: Path, platform: str) -> None:
    """At ``ir.compile`` time (before the rank count is known): one folder per host-level collective
    with its ``kernel_config.py``; the lowered kernel (``kernel.pld``) is added by each call."""
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / MARKER).write_text(_MARKER_TEXT)
    for found in host_collectives(prog):
        folder = output_dir / "next_levels" / variant_name(found.op, found.attrs, found.dtype)
        folder.mkdir(parents=True, exist_ok=True)
        config = {"op": found.op, "dtype": found.dtype, "platform": platform,
                  "source": f"{prog.file}:{found.line}",
                  "attrs": {k: getattr(v, "name", v) for k, v in found.attrs.items()}}
        (folder / "kernel_config.py").write_text(
            '"""pldemu builtin kernel of one host-level collective (kernel.pld beside it, once called)."""\n\n'
            f"KERNEL = {pprint.pformat(config)}\n")


def output_dir_of(path: Path) -> Path | None:
    """The pldemu ``compiled.output_dir`` that ``path`` lies in, or None."""
    return next((d for d in path.parents if (d / MARKER).is_file()), None)


def variant_name(op: str, attrs: dict[str, object], dtype: str) -> str:
    """``builtin.tensor.allreduce__sum__fp32``: pypto's name of the builtin kernel of one collective."""
    short = op.rsplit(".", 1)[1]
    parts = [short + ("_ring" if short == "allreduce" and attrs.get("mode") == "ring" else "")]
    if short in ("allreduce", "reduce_scatter"):
        reduce = attrs.get("op")
        parts.append(getattr(reduce, "name", "Sum").lower())
    if short == "broadcast":
        parts.append(f"root{attrs.get('root', 0)}")
    # pypto names the barrier's builtin after its default element type: it moves no data.
    parts.append("fp32" if short == "barrier" else dtype)
    return "builtin.tensor." + "__".join(parts)


_TARGET_INDEX = {"pld.tensor.allgather": 1, "pld.tensor.all_to_all": 1, "pld.tensor.all_to_all_v": 1}


def _dtype_of(coll: HostCollective) -> str:
    args = coll.args
    i = _TARGET_INDEX.get(coll.op, 0)
    target = args[i] if len(args) > i else None
    return target.dtype.ir.value if isinstance(target, HostView) else "fp32"


@dataclasses.dataclass(frozen=True)
class FoundCollective:
    """A host-level collective found statically in the host body."""

    op: str
    attrs: dict[str, Any]
    dtype: str
    line: int


def host_collectives(prog: CapturedProgram) -> list[FoundCollective]:
    """The ``pld.tensor.*`` calls of the HOST body, with the dtype of the window view they target (the
    latest ``name = pld.window(..., dtype=...)`` above the call); none in an L2-only program."""
    if not prog.distributed:
        return []
    host = prog.host()
    ev = Evaluator(prog, {}, {})
    views: dict[str, str] = {}
    out: list[FoundCollective] = []
    for node in sorted((n for n in ast.walk(host.node) if isinstance(n, (ast.Assign, ast.Expr))),
                       key=lambda n: n.lineno):
        call = node.value
        if not isinstance(call, ast.Call):
            continue
        name = _dsl_name(ev, call.func)
        if name == "pld.window" and isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            value = _static(ev, next((kw.value for kw in call.keywords if kw.arg == "dtype"), None))
            views[node.targets[0].id] = value.ir.value if isinstance(value, PyDType) else "fp32"
        elif name is not None and name.startswith("pld.tensor."):
            i = _TARGET_INDEX.get(name, 0)
            target = call.args[i] if len(call.args) > i else None
            found = views.get(target.id, "fp32") if isinstance(target, ast.Name) else "fp32"
            attrs = {kw.arg: _static(ev, kw.value) for kw in call.keywords if kw.arg is not None}
            out.append(FoundCollective(name, attrs, found, call.lineno))
    return out


def _dsl_name(ev: Evaluator, func: ast.expr) -> str | None:
    value = _static(ev, func)
    return value.name if isinstance(value, DslOp) else None


def _static(ev: Evaluator, node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        return ev.eval(node)
    except FrontendError:
        return None


__all__ = ["MARKER", "PROGRAM_FILE", "host_collectives", "output_dir_of", "variant_name", "write_artifacts", "write_compile_artifacts"]
