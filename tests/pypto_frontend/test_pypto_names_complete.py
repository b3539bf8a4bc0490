"""Every public name of pypto's ``pypto.language`` (``pl.X``) and of its sub-namespaces (``pl.tensor.X``,
``pl.tile.X``, ``pl.system.X``, ``pl.array.X``, ``pl.prefetch.X``, ``pl.optimizations.X``), and of its distributed
module ``pypto.language.distributed`` (``pld.X``, listed as ``distributed.X``) and that module's sub-namespaces
(``pld.system.X``, ``pld.tensor.X``, ``pld.tile.X``), is one pldemu runs or one it refuses saying why
(``pldemu.pypto.errors.NOT_RUN``); a name pypto adds is neither until someone decides.

The names are checked in (``pypto_names.txt``), read from the ``__all__`` lists of pypto's source by their AST
(pypto is not installed here, nor imported). To regenerate it from a pypto checkout::

    python tests/pypto_frontend/test_pypto_names_complete.py /path/to/pypto > tests/pypto_frontend/pypto_names.txt

and decide, for each new name, to run it or add it to ``NOT_RUN``. When the checkout pldemu follows is at
``PYPTO_SOURCE`` (default ``/work/ext/pypto``), the first test checks the list is still its."""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pldemu.pypto.errors import NOT_RUN, missing_pypto_name
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.language import distributed as pld
from pldemu.pypto.translate.ops import DEVICE_OPS
from pldemu.pypto.translate.tasks import TASK_OPS
from pldemu.pypto.types import DslOp

LISTED = Path(__file__).with_name("pypto_names.txt")
MODULES = {"": "__init__.py", "tensor": "op/tensor_ops.py", "tile": "op/tile_ops.py", "system": "op/system_ops.py",
           "array": "op/array_ops.py", "prefetch": "op/prefetch_ops.py", "optimizations": "optimizations.py",
           "distributed": "distributed/__init__.py", "distributed.system": "distributed/op/system_ops.py",
           "distributed.tensor": "distributed/op/tensor_ops.py", "distributed.tile": "distributed/op/tile_ops.py"}
"""``pl``'s and ``pld``'s namespaces and the modules of pypto's ``python/pypto/language`` whose ``__all__`` lists
their names."""

UNDISPATCHED = {
    "tile.MaskPattern": "a class of constants (pl.tile.MaskPattern.P0101 is an int), not a call",
    **{f"optimizations.{n}": "an entry of optimizations= in pl.at / pl.spmd, which changes no value and is not "
                             "evaluated" for n in ("split", "cross_core_slot", "Split", "CrossCoreSlot",
                                                    "Optimization")},
}
"""Sub-namespace names pldemu has that no translation rule dispatches on, and why that is running them."""

HOST_OPS = frozenset({"pld.alloc_window_buffer", "pld.window"})
"""The ops only the HOST orchestrator's translator dispatches on (``translate/host.py``: ``call_dsl``)."""
SPACES = {"": pl, "distributed": pld}
"""The modules a listed name's first segments name (``distributed.tile.remote_load``: ``pld.tile``)."""


def pypto_names(root: Path) -> list[str]:
    """The names of ``MODULES``' ``__all__`` in the pypto checkout at ``root``, namespace-qualified
    (``tile.extract``), top-level ones bare."""
    names: list[str] = []
    for space, module in MODULES.items():
        tree = ast.parse((root / "python/pypto/language" / module).read_text())
        listed = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets))
        names += sorted(f"{space}.{n}" if space else n for n in listed)
    return names


def _listed() -> list[str]:
    return [line for line in LISTED.read_text().splitlines() if line and not line.startswith("#")]


def _header() -> str:
    return "".join(line + "\n" for line in LISTED.read_text().splitlines() if line.startswith("#"))


def test_the_list_is_pyptos() -> None:
    root = Path(os.environ.get("PYPTO_SOURCE", "/work/ext/pypto"))
    if not (root / "python/pypto/language/__init__.py").is_file():
        pytest.skip(f"no pypto checkout at {root} (set PYPTO_SOURCE)")
    assert _listed() == pypto_names(root), "regenerate pypto_names.txt (see this module's docstring)"


def _owner(space: str) -> Any:
    """The module or namespace of pldemu's surface a listed name's namespace (``tile``, ``distributed.system``)
    is."""
    module, _, sub = space.partition(".") if space.startswith("distributed") else ("", "", space)
    return getattr(SPACES[module], sub) if sub else SPACES[module]


def _runs(name: str) -> bool:
    """pldemu's surface has ``name`` and a rule dispatches on it: a sub-namespace's or ``pld``'s op is one the
    device, task or HOST translator has (``pld.system.rank`` is ``pld.rank``'s op), a module's other names
    (types, enums, namespaces, ``pl``'s scopes) are there."""
    space, _, attr = name.rpartition(".")
    value = vars(_owner(space)).get(attr)
    if value is None:
        return False
    if not space or name in UNDISPATCHED:
        return True
    if isinstance(value, DslOp):
        return value.name in DEVICE_OPS or value.name in TASK_OPS or value.name in HOST_OPS
    return space == "distributed"


def _access(name: str) -> Callable[[], Any]:
    space, _, attr = name.rpartition(".")
    return lambda: getattr(_owner(space), attr)


@pytest.mark.parametrize("name", _listed())
def test_a_pypto_name_runs_or_is_refused_saying_why(name: str) -> None:
    full = f"pypto.language.{name}"
    if full not in NOT_RUN:
        assert _runs(name), f"pl.{name}: pypto has it, pldemu neither runs it nor refuses it (errors.NOT_RUN)"
        return
    assert not _runs(name), f"pl.{name} runs and is in NOT_RUN"
    with pytest.raises(AttributeError) as err:
        _access(name)()
    assert missing_pypto_name(err.value) == full
    assert str(err.value).startswith(f"{full} is not provided by pldemu's pypto layer ({NOT_RUN[full]}")


def test_the_check_fails_for_a_name_pldemu_neither_runs_nor_refuses() -> None:
    with pytest.raises(AssertionError, match="neither runs it nor refuses it"):
        test_a_pypto_name_runs_or_is_refused_saying_why("tile.a_name_pypto_might_add")
    assert not _runs("tensor.alloc") and _runs("tile.extract") and _runs("system.bar_v")
    with pytest.raises(AssertionError, match="neither runs it nor refuses it"):
        test_a_pypto_name_runs_or_is_refused_saying_why("distributed.system.a_name_pypto_might_add")
    assert _runs("distributed.system.rank") and _runs("distributed.tensor.window") and _runs("distributed.CommCtx")


if __name__ == "__main__":
    sys.stdout.write(_header() + "".join(n + "\n" for n in pypto_names(Path(sys.argv[1]))))
