"""The house rules of pldemu's import graph, read from the source (every import statement, including
the ones inside functions and under ``TYPE_CHECKING``): no circle, no import from a lower floor to a
higher one, the launcher side (``pldemu.job``) free of mpi4py, the Python API free of the CLI, no
command module importing another, and no folder holding more than a quarter of the package."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pldemu"

FLOORS: tuple[tuple[str, ...], ...] = (
    ("pldemu.npdtypes", "pldemu.ir", "pldemu.mismatch"),
    ("pldemu.neuron", "pldemu.lowering", "pldemu.collectives", "pldemu.mutants", "pldemu.mpi", "pldemu.windows"),
    ("pldemu.runtime",),
    ("pldemu.job", "pldemu.pool"),
    ("pldemu.harness",),
    ("pldemu.bench",),
    ("pldemu.cli", "pldemu.api", "pldemu.pool.resident", "pldemu.pytest_plugin", "pldemu.examples", "pldemu.pypto",
     "pldemu.torchlite"),
    ("pldemu.__main__", "pldemu.pool.server", "pldemu.pool.resident_server"),
)
"""Floors from the lowest: a module may import its own floor and the ones below, never one above.
The compiler half (IR, then the pass, windows and MPI toolkit) at the bottom; one rank's runtime;
the launcher side; the harnesses run in a job; the benchmarks; the front doors (command line,
Python API, pytest plugin, the pypto front end and its torch stand-in); the rank entry points (a job's, a warm job's loop).
A module is on the floor of its longest prefix (``pldemu.pool`` is launcher side, its servers rank
entry points; a resident job's client is Python API: it answers with ``pldemu.api.RunResult``). The package root ``pldemu`` (lazy names only) is no floor: importing it from anywhere
is free."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the import statements under ``if TYPE_CHECKING:`` (annotations only, never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imported(path: Path, name: str, *, type_only: bool = True) -> Iterator[str]:
    """Every module ``path`` imports (absolute names; ``from P import M`` is P.M alone when M is a module:
    Python runs P's ``__init__`` for any import below P, which is no design dependency)."""
    modules = _modules()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip = set() if type_only else _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            if len(submodules) < len(node.names):  # a name defined in ``base`` itself
                yield base
            yield from submodules


@cache
def _graph(type_only: bool = True) -> dict[str, frozenset[str]]:
    """pldemu module -> the pldemu modules it imports (the root package left out); ``type_only``: with
    the imports under ``if TYPE_CHECKING:`` (annotations), which the floors count and a circle does not."""
    modules = _modules()
    return {name: frozenset(m for m in _imported(path, name, type_only=type_only) if m in modules
                            and m not in ("pldemu", name))
            for name, path in modules.items()}


def _floor(module: str) -> int:
    found = [(len(p), level) for level, prefixes in enumerate(FLOORS) for p in prefixes
             if module == p or module.startswith(p + ".")]
    if not found:
        raise AssertionError(f"{module} is on no floor of FLOORS: give it one")
    return max(found)[1]


def test_every_module_has_a_floor() -> None:
    for module in _graph():
        if module != "pldemu":
            _floor(module)


def test_no_import_from_a_lower_floor_to_a_higher_one() -> None:
    upward = sorted(f"{m} (floor {_floor(m)}) imports {d} (floor {_floor(d)})"
                    for m, deps in _graph().items() if m != "pldemu" for d in deps if _floor(d) > _floor(m))
    assert not upward, "\n".join(upward)


def _cycle(within: str = "pldemu", annotations: bool = False) -> list[str] | None:
    """One import circle among the modules under ``within``, or None (depth-first search, colours).
    Imports that run count, deferred ones inside functions included; an annotation-only import counts
    with ``annotations`` (it never runs, but its two modules still know each other)."""
    graph = {m: frozenset(d for d in deps if d.startswith(within)) for m, deps in
             _graph(type_only=annotations).items() if m.startswith(within)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return [*stack[stack.index(d):], d]
            if d not in state and (found := visit(d)) is not None:
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_no_import_circle() -> None:
    circle = _cycle()
    assert circle is None, " -> ".join(circle or [])


def test_the_pypto_front_end_has_no_circle_even_through_annotations() -> None:
    # its rule tables (translate/ops.py, regions.py) see the translator through translate/level.py
    circle = _cycle("pldemu.pypto", annotations=True)
    assert circle is None, " -> ".join(circle or [])


def test_the_python_api_imports_nothing_from_the_cli() -> None:
    for module in ("pldemu.api", "pldemu.pytest_plugin"):
        assert not [d for d in _graph()[module] if d.startswith("pldemu.cli")], module


def test_no_command_module_imports_another() -> None:
    commands = {m for m in _graph() if m.startswith("pldemu.cli.commands.")}
    assert len(commands) >= 9
    crossing = sorted(f"{m} imports {d}" for m in commands for d in _graph()[m] if d in commands)
    assert not crossing, "\n".join(crossing)


def test_the_launcher_side_never_imports_mpi4py_in_its_source() -> None:
    for name, path in _modules().items():
        if name.startswith("pldemu.job"):
            assert not [m for m in _imported(path, name) if m.split(".")[0] == "mpi4py"], name


def test_the_launcher_side_runs_its_prechecks_without_mpi4py(tmp_path: Path) -> None:
    """Import every module of ``pldemu.job`` and load, lower and precheck a program (the launcher's
    whole path before ``mpiexec``): mpi4py must still be unimported."""
    program = tmp_path / "ring.pld"
    program.write_text("program ring {\n  window target: fp32[1, 64]\n  signal signal: int32[NR, 1]\n\n"
                       "  func main() {\n    target_out = pld.tensor.allreduce(target, signal, op=Sum, mode=mesh)\n"
                       "  }\n}\n")
    code = (
        "import importlib, pkgutil, sys\n"
        "import pldemu.job\n"
        "for info in pkgutil.iter_modules(pldemu.job.__path__):\n"
        "    importlib.import_module('pldemu.job.' + info.name)\n"
        "from pldemu.job.load import load_program\n"
        "from pldemu.job.flags import options_argv\n"
        "from pldemu.runtime.options import RuntimeOptions\n"
        f"program = load_program({str(program)!r}, nranks=4, options=RuntimeOptions(), force=True)\n"
        "assert options_argv(RuntimeOptions(race_detect=True)), 'no argv'\n"
        "assert program.name == 'ring'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mpi4py'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_a_bad_program_is_refused_by_the_launcher_side_without_mpi4py(tmp_path: Path) -> None:
    program = tmp_path / "bad.pld"
    program.write_text("program bad {\n  func main() {\n    x = pld.tensor.allreduce(nowhere)\n  }\n}\n")
    code = (
        "import sys\n"
        "from pldemu.job.exits import UsageError\n"
        "from pldemu.job.load import load_program\n"
        "try:\n"
        f"    load_program({str(program)!r}, nranks=2)\n"
        "except UsageError as err:\n"
        "    print('refused:', err)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'mpi4py']\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused:"), out.stdout


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


@pytest.mark.parametrize("deep", [False, True], ids=["own-files", "with-subfolders"])
def test_no_folder_holds_more_than_a_quarter_of_the_package(deep: bool) -> None:
    files = list(PACKAGE.rglob("*.py"))
    total = sum(_lines(p) for p in files)
    for folder in {p.parent for p in files} - {PACKAGE}:
        mine = sum(_lines(p) for p in files if (folder in p.parents if deep else p.parent == folder))
        assert mine <= total / 4, f"{folder.relative_to(PACKAGE)}: {mine} of {total} lines"


def test_importing_every_command_leaves_mpi_uninitialised() -> None:
    """A launcher imports the command modules (building the parser): none may pull in ``mpi4py.MPI``,
    whose import initialises MPI (what runs inside the job imports it there, on first use)."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import pldemu.cli.commands, pldemu.cli.check_kinds\n"
        "for pkg in (pldemu.cli.commands, pldemu.cli.check_kinds):\n"
        "    for info in pkgutil.iter_modules(pkg.__path__):\n"
        "        importlib.import_module(pkg.__name__ + '.' + info.name)\n"
        "import pldemu.api, pldemu.harness.run, pldemu.harness.report, pldemu.harness.plan\n"
        "print('mpi4py.MPI' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", out.stdout
