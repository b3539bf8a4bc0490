"""The tile checks and the mixed example from the command line (multi-rank jobs, one at a time)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import pldemu
from test_tile_trig import mirror  # the independent NumPy mirror of the recipe

from pldemu.harness.tilecheck import TrigStats

pytestmark = pytest.mark.launcher

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "pldemu" / "examples" / "sin_select_allreduce.pld"


def test_lower_backend_names_what_select_became() -> None:
    res = pldemu("lower", "--after-only", "--backend", "a2a3", str(EXAMPLE))
    assert res.returncode == 0, res.stderr
    assert "tile.select at func main > stmt 6: TSELS, scratch fp32[1, 64]" in res.stdout
    assert "tile.sin at func main > stmt 5: FP32 Cody-Waite + Horner" in res.stdout
    bad = pldemu("lower", "--backend", "a9", str(EXAMPLE))
    assert bad.returncode == 2 and "invalid choice: 'a9'" in bad.stderr


def test_check_sin_and_cos_pass_with_rows() -> None:
    for fn in ("sin", "cos"):
        res = pldemu("check", fn, "-n", "2", "--iters", "2", "--size", "256", "--jitter", "10")
        assert res.returncode == 0, res.stdout + res.stderr
        row = next(line for line in res.stdout.splitlines() if line.split()[:1] == [fn])
        assert row.endswith("PASS") and " 0 " in row and "ok" in row


def test_check_select_is_bit_exact_on_a5() -> None:
    res = pldemu("check", "select", "-n", "2", "--backend", "a5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "cases bit-exact, 2 ranks" in res.stdout and "FAIL" not in res.stdout
    assert "TSELS, scratch uint8[1, 32]" in res.stdout


def test_a_trig_error_over_tolerance_fails_the_row() -> None:
    s = TrigStats(points=10, max_abs=2e-5, over_tol=1)
    assert not s.ok
    assert not TrigStats(nan_ok=False).ok and TrigStats().ok


def test_example_runs_under_races_invariants_jitter_and_sums_relu_sin(tmp_path: Path) -> None:
    res = pldemu("run", str(EXAMPLE), "-n", "2", "--races", "--invariants", "--jitter", "20", "--dump", str(tmp_path / "out"),
                  "--timeout", "60")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "races: none" in res.stdout and "invariants: none broken" in res.stdout
    idx = np.arange(4 * 64, dtype=np.float64).reshape(4, 64)
    want = np.zeros((4, 64), np.float32)
    for r in range(2):
        x = (idx * 0.37 - r * 1.5 - 40.0).astype(np.float32)
        y = mirror(x, cos=False)
        want = (want + np.where(y >= 0, y, np.float32(0))).astype(np.float32)
    for r in range(2):
        for name in ("mesh_out", "ring_out"):
            got = np.load(tmp_path / "out" / f"rank{r}" / f"{name}.npy")
            assert np.array_equal(got, want), name


def test_check_all_includes_the_tile_checks() -> None:
    res = pldemu("check", "all", "-n", "2", "--iters", "2", "--size", "64", "--windows", "rma")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "# summary" in res.stdout and "# select on backend none:" in res.stdout
    assert sum(line.split()[:1] in (["sin"], ["cos"]) and line.endswith("PASS")
               for line in res.stdout.splitlines()) == 2
