"""pypto's single-chip system tests (``tests/st/runtime`` of a pypto checkout) through the plugin: their
``test_runner`` fixture is pypto's own harness (``tests/st/harness``, ``TestRunner``), which compiles each
test case with pldemu's ``ir.compile`` and runs it on pldemu (``pldemu.pypto.harness_build``). Needs the
checkout pldemu follows at ``PYPTO_SOURCE`` (default ``/work/ext/pypto``); skipped without it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PYPTO = Path(os.environ.get("PYPTO_SOURCE", "/work/ext/pypto"))
HARNESS = PYPTO / "tests/st/harness"
pytestmark = pytest.mark.skipif(not (HARNESS / "core/test_runner.py").is_file(),
                                reason=f"no pypto checkout at {PYPTO} (set PYPTO_SOURCE)")


def pldemu_pytest(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "pldemu.pypto", "-p", "no:cacheprovider", "-q",
                           *args], cwd=where, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, stdin=subprocess.DEVNULL)


def show(res: subprocess.CompletedProcess[str]) -> str:
    return f"exit {res.returncode}\n{res.stdout[-6000:]}\n{res.stderr[-3000:]}"


def test_pyptos_abs_and_row_reduction_files_pass() -> None:
    """Two of pypto's files, unchanged: Tile and Tensor level ``abs`` (Opaque ``pl.at`` programs and an
    InCore + Orchestration one) and the row reductions."""
    res = pldemu_pytest(PYPTO, "tests/st/runtime/ops/test_abs.py", "tests/st/runtime/ops/test_row_min.py")
    assert res.returncode == 0, show(res)
    assert " passed" in res.stdout and "failed" not in res.stdout, show(res)


CASES = """
    import pypto.language as pl
    import torch
    from harness.core.harness import DataType, PTOTestCase, TensorSpec
    from pypto.runtime.runner import RunConfig

    R, C = 8, 32


    @pl.program
    class AddScaled:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.BF16],
                   out: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
            ta = pl.load(a, [0, 0], [R, C])
            tb = pl.cast(pl.load(b, [0, 0], [R, C]), target_type=pl.FP32)
            return pl.store(pl.add(ta, pl.mul(tb, 2.0)), [0, 0], out)

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, a: pl.Tensor[[R, C], pl.FP32], b: pl.Tensor[[R, C], pl.BF16],
                 out: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> pl.Tensor[[R, C], pl.FP32]:
            return self.kernel(a, b, out)


    class AddScaledCase(PTOTestCase):
        __test__ = False

        def __init__(self, wrong: bool = False, **kw):
            super().__init__(RunConfig(rtol=1e-3, atol=1e-3), **kw)
            self.wrong = wrong

        def get_name(self):
            return "add_scaled_wrong" if self.wrong else "add_scaled"

        def define_tensors(self):
            return [TensorSpec("a", [R, C], DataType.FP32, init_value=torch.randn),
                    TensorSpec("b", [R, C], DataType.BF16, init_value=1.5),
                    TensorSpec("out", [R, C], DataType.FP32, is_output=True)]

        def get_program(self):
            return AddScaled

        def compute_expected(self, tensors, params=None):
            tensors["out"][:] = tensors["a"] + tensors["b"].float() * (3.0 if self.wrong else 2.0)


    def test_right(test_runner):
        result = test_runner.run(AddScaledCase())
        assert result.passed, result.error


    def test_wrong_golden_is_reported(test_runner):
        result = test_runner.run(AddScaledCase(wrong=True))
        assert not result.passed
        assert "Output 'out' does not match golden" in result.error
        assert "Mismatched elements: 256/256" in result.error
"""


def test_harness_runs_and_compares_a_case(tmp_path: Path) -> None:
    """A case of our own through pypto's harness: a BF16 input filled by value, an FP32 one from
    ``torch.randn``, the case's own tolerances; a wrong golden fails with every element listed as
    mismatched."""
    st = tmp_path / "tests" / "st"
    (st / "runtime").mkdir(parents=True)
    (st / "harness").symlink_to(HARNESS, target_is_directory=True)
    (st / "runtime" / "test_cases.py").write_text(textwrap.dedent(CASES))
    res = pldemu_pytest(tmp_path, "tests/st/runtime/test_cases.py")
    assert res.returncode == 0, show(res)
    assert "2 passed" in res.stdout, show(res)


def test_platform_list_and_parametrized_variants(tmp_path: Path) -> None:
    """``--platform`` takes pypto's comma-separated list: a ``platform``-parametrized test runs for the listed
    ids only (the others deselected), a ``platforms`` marker skips unless one of its ids is listed."""
    (tmp_path / "test_p.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("platform", ["a2a3sim", "a5sim", "a2a3", "a5"])
        def test_variant(platform, test_config):
            assert test_config.platform == "a2a3sim"

        @pytest.mark.platforms("a2a3")
        def test_onboard():
            pass
    """))
    res = pldemu_pytest(tmp_path, "--platform", "a2a3sim,a2a3", "-rs", "test_p.py")
    assert res.returncode == 0, show(res)
    assert "3 passed, 2 deselected" in res.stdout, show(res)
    res = pldemu_pytest(tmp_path, "-rs", "test_p.py")
    assert "1 passed, 1 skipped, 3 deselected" in res.stdout, show(res)
    assert "for platforms a2a3, not --platform a2a3sim" in res.stdout, show(res)
