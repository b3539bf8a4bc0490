"""``pldemu python --estimate FUNCTION SCRIPT``: the memory a call needs at least, from the function's annotated
parameters, without running the script's ``__main__`` block (a model script builds its inputs there, for
minutes, before the first call pldemu could estimate); 0 when it fits this machine, 2 with the estimate when
it does not. The programs are written here in the style of pypto-lib's model scripts."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from mpi_launch import IN_JOB_ENV, REPO_ROOT, MpiResult, job_env, run_tracked

from pldemu.job.resources import GIB, MIB, RUN_COPIES, ResourceError, check_bytes
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.estimate import entry_function, signature_estimate
from pldemu.pypto.surface import language as pl

pytestmark = pytest.mark.launcher

NR = pl.dynamic("NR")
RANKS, EXPERTS, D, F = 2, 8, 512, 1024


@pl.jit
def layer(x: pl.Tensor[[RANKS, 16, D], pl.BF16], w1: pl.Tensor[[RANKS, EXPERTS * D, F], pl.INT8],
          scale: pl.Tensor[[RANKS, EXPERTS * F], pl.FP32], cache: pl.InOut[pl.Tensor[[RANKS, NR, D], pl.BF16]],
          y: pl.Out[pl.Tensor[[RANKS, 16, D], pl.FP32]], step: pl.Scalar[pl.INT32]) -> None:
    pass


def test_static_parameters_counted_dynamic_ones_named() -> None:
    est = signature_estimate(entry_function({"layer": layer}, "layer", "model.py"))
    assert dict(est.sized) == {"x": RANKS * 16 * D * 2, "w1": RANKS * EXPERTS * D * F, "scale": RANKS * EXPERTS * F * 4,
                               "y": RANKS * 16 * D * 4}
    assert [n for n, _ in est.sized][:2] == ["w1", "scale"]
    assert est.unsized == ("cache",)
    assert est.total == (1 + RUN_COPIES) * (RANKS * EXPERTS * D * F + RANKS * EXPERTS * F * 4 + RANKS * 16 * D * 6)
    text = est.describe()
    assert text.startswith("at least 24 MiB (8 MiB of parameters x (1 in the caller + 2 in the ranks))")
    assert "biggest parameters: w1 8 MiB, scale 64 KiB" in text and "sized at run time: cache" in text


def test_a_name_that_is_no_program_is_one_error() -> None:
    with pytest.raises(FrontendError, match=r"'main' is not a pl\.jit function or a @pl\.program"):
        entry_function({"main": print}, "main", "model.py")


def test_check_bytes_says_what_needs_the_memory() -> None:
    with pytest.raises(ResourceError, match=r"^layer needs 3 GiB, but this machine has 1.0 GiB available \(2.0 GiB"):
        check_bytes(3 * GIB, "layer needs 3 GiB", available=1 * GIB, total=2 * GIB)
    check_bytes(512 * MIB, "layer", available=1 * GIB, total=2 * GIB)


MODEL = '''\
import argparse
import sys
import pypto.language as pl

parser = argparse.ArgumentParser()
parser.add_argument("--experts", type=int, default=4)
EXPERTS = parser.parse_known_args()[0].experts   # parsed at import, as pypto-lib's moe.py does
ROWS = pl.dynamic("ROWS")


@pl.jit
def l3_layer(w: pl.Tensor[[2, EXPERTS * 1024, 1024], pl.BF16], kv: pl.InOut[pl.Tensor[[2, ROWS, 64], pl.FP32]],
             out: pl.Out[pl.Tensor[[2, 8, 1024], pl.FP32]]) -> None:
    pass


if __name__ == "__main__":
    print("building inputs")    # must not run for an estimate
    sys.exit(7)
'''


def pldemu_python(*argv: str) -> MpiResult:
    env = job_env({"PYTHONDONTWRITEBYTECODE": "1"})
    env.pop(IN_JOB_ENV, None)
    return run_tracked([sys.executable, "-m", "pldemu", "python", *argv], 120.0, env, REPO_ROOT)


def test_estimate_from_the_command_line(tmp_path: Path) -> None:
    """The script is imported with its own flags and its ``__main__`` block skipped; a call that fits exits 0
    with the estimate, one beyond any machine exits 2 with it, printed once."""
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent(MODEL))
    fits = pldemu_python("--estimate", "l3_layer", str(script))
    assert fits.returncode == 0, fits.stderr
    assert "building inputs" not in fits.stdout
    assert "l3_layer needs at least 48 MiB (16 MiB of parameters" in fits.stdout
    assert "sized at run time: kv" in fits.stdout and "it fits this machine's memory now" in fits.stdout
    huge = pldemu_python("--estimate", "l3_layer", str(script), "--experts", str(1 << 20))
    assert huge.returncode == 2, huge.stdout + huge.stderr
    assert huge.stderr.count(f"{script}: l3_layer needs at least ") == 1
    assert "biggest parameters: w 4096.0 GiB" in huge.stderr and "in all); use fewer ranks" in huge.stderr
    wrong = pldemu_python("--estimate", "missing", str(script))
    assert wrong.returncode == 2 and "'missing' is not a pl.jit function" in wrong.stderr
