"""The launcher of ``pldemu run`` (the process outside MPI that parses, lowers, verifies and prechecks
the program, then spawns ``mpiexec``) imports neither numpy nor ml_dtypes: about 150 ms of a trivial
job's start-up on this machine (docs/benchmarks.md, issue 23). Only a flag that reads arrays
(``--inputs``, ``--expect``) loads numpy there. ``pldemu check`` (whose launcher builds its cases with
the numpy harness) loads ml_dtypes for the MX check only. Each probe runs the real command, spawn included, in a
fresh interpreter and lists what the launching process imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pldemu.bench.startup import TRIVIAL_PROGRAM

pytestmark = pytest.mark.launcher

PROBE = """\
import sys
from pldemu.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "ml_dtypes"))
print("LAUNCHER-IMPORTED", code, " ".join(heavy) or "-")
"""

COMPOSITES = """\
program launcher_imports {
  window acc: fp32[1, 16]
  signal sig: int32[NR, 1]
  local half: bf16[1, 16]

  func main() {
    t = tile.full([1, 16], 0.5, dtype=fp32)
    c = tile.cos(tile.sin(t))
    y = tile.select(tile.cmps(c, 0.0, cmp_type=GE), c, 2.0)
    tile.store(y, [0, 0], acc)
    r = pld.tensor.allreduce(acc, sig, op=Sum, mode=mesh)
    tile.store(tile.cast(tile.load(acc, [0, 0], [1, 16]), dtype=bf16, mode=RINT), [0, 0], half)
    pld.tensor.barrier(sig)
  }
}
"""
"""Every lowering family whose recipe has float constants or integer limits (sin / cos, select), a
collective, a barrier and a bf16 buffer: what the launcher lowers and prechecks."""


def _launcher_imports(tmp_path: Path, text: str, *flags: str) -> tuple[int, list[str]]:
    program = tmp_path / "p.pld"
    program.write_text(text)
    return _command_imports("run", str(program), "-n", "2", *flags)


def _command_imports(*argv: str) -> tuple[int, list[str]]:
    """(exit code, numpy and ml_dtypes modules the launching process imported) of ``pldemu ARGV``."""
    res = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True,
                         text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    line = next((x for x in res.stdout.splitlines() if x.startswith("LAUNCHER-IMPORTED")), None)
    assert line is not None, res.stdout + res.stderr
    _, code, heavy = line.split(" ", 2)
    return int(code), [] if heavy == "-" else heavy.split()


@pytest.mark.parametrize("text", [TRIVIAL_PROGRAM, COMPOSITES], ids=["trivial", "composites"])
def test_the_launcher_imports_no_numpy(tmp_path: Path, text: str) -> None:
    code, heavy = _launcher_imports(tmp_path, text, "--report", str(tmp_path / "r.json"))
    assert code == 0
    assert heavy == [], f"the launcher of `pldemu run` imported {heavy}"


@pytest.mark.parametrize(("good", "bad"), [("tile.store(y, [0, 0], acc)", "tile.store(y, [0, 8], acc)"),
                                           ("cmp_type=GE), c, 2.0)", "cmp_type=GE), c, 300:int8)")],
                         ids=["precheck", "literal-range"])
def test_a_refused_program_is_refused_without_numpy(tmp_path: Path, good: str, bad: str) -> None:
    code, heavy = _launcher_imports(tmp_path, COMPOSITES.replace(good, bad))
    assert code == 2 and heavy == []


def test_inputs_load_numpy_when_they_are_given(tmp_path: Path) -> None:
    """The probe sees numpy when the launcher does read arrays (a probe that sees nothing fails)."""
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", np.ones((1, 16), np.float32))
    code, heavy = _launcher_imports(tmp_path, TRIVIAL_PROGRAM, "--inputs", str(tmp_path / "in"))
    assert code == 0 and "numpy" in heavy and "ml_dtypes" not in heavy


def test_a_collective_check_does_not_load_ml_dtypes() -> None:
    """``pldemu check`` builds its cases with the numpy harness, but ml_dtypes (0.5 s to import with
    some releases) only for the MX check."""
    code, heavy = _command_imports("check", "allreduce", "-n", "1", "--iters", "1")
    assert code == 0 and "numpy" in heavy and "ml_dtypes" not in heavy
