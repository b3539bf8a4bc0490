"""``compiled.output_dir``: the translated program, the rank job's program file, and per host-level
collective pldemu's lowered builtin kernel, laid out as pypto's compiler lays its own
(``next_levels/builtin.tensor.<op>__<variant>/``: ``kernel.pld``, the lowered program of that one
collective, and ``kernel_config.py``, which describes it)."""

from __future__ import annotations

import pickle
import pprint
from pathlib import Path

from pldemu.ir import format_program
from pldemu.pypto.session import FrontendOptions
from pldemu.pypto.translate.program import Built

PROGRAM_FILE = "program.py"
_LOADER = '''"""The rank job's program: the translated pypto program, pickled beside this file (origins kept)."""
import pathlib
import pickle

program = pickle.loads((pathlib.Path(__file__).parent / "program.pickle").read_bytes())
'''


def write_artifacts(built: Built, output_dir: Path, opts: FrontendOptions) -> Path:
    """Write everything; the path of the program file the ranks load."""
    from pldemu.lowering import lower_composite_ops

    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "program.pickle").write_bytes(pickle.dumps(built.program))
    (output_dir / PROGRAM_FILE).write_text(_LOADER)
    (output_dir / "translated.pld").write_text(format_program(built.program))
    (output_dir / "lowered.pld").write_text(format_program(lower_composite_ops(built.program)))
    for coll in built.collectives:
        _builtin_kernel(built, coll.op, coll.args, dict(coll.kwargs), output_dir, opts)
    return output_dir / PROGRAM_FILE


def variant_name(op: str, kwargs: dict[str, object], dtype: str) -> str:
    """``builtin.tensor.allreduce__sum__fp32``: pypto's name of the builtin kernel of one collective."""
    short = op.rsplit(".", 1)[1]
    parts = [short]
    if short in ("allreduce", "reduce_scatter"):
        reduce = kwargs.get("op")
        parts.append(getattr(reduce, "name", "Sum").lower())
    parts.append(dtype)
    return "builtin.tensor." + "__".join(parts)


def _builtin_kernel(built: Built, op: str, args: tuple[object, ...], kwargs: dict[str, object],
                    output_dir: Path, opts: FrontendOptions) -> None:
    from pldemu.pypto.translate.values import HostView

    target = args[1] if op.endswith(("allgather", "all_to_all", "all_to_all_v")) else args[0]
    dtype = target.dtype.ir.value if isinstance(target, HostView) else "fp32"
    folder = output_dir / "next_levels" / variant_name(op, kwargs, dtype)
    folder.mkdir(parents=True, exist_ok=True)
    from pldemu.lowering import lower_composite_ops

    (folder / "kernel.pld").write_text(format_program(lower_composite_ops(built.program)))
    config = {"op": op, "dtype": dtype, "platform": opts.platform, "line": _line(built, op),
              "attrs": {k: getattr(v, "name", v) for k, v in kwargs.items()}}
    (folder / "kernel_config.py").write_text(
        '"""pldemu builtin kernel of one host-level collective (see kernel.pld beside this file)."""\n\n'
        f"KERNEL = {pprint.pformat(config)}\n")


def _line(built: Built, op: str) -> int:
    return next((c.line for c in built.collectives if c.op == op), 0)


__all__ = ["PROGRAM_FILE", "variant_name", "write_artifacts"]
