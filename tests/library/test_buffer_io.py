"""The buffer-file layout and the comparison (single process, no MPI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from library_helpers import ALLREDUCE_PLD, save

from pldemu.ir import parse_program
from pldemu.job.buffer_io import BufferFileError, Tolerance, compare, mismatch_report, scan
from pldemu.job.precheck import static_buffers

PROGRAM = parse_program(ALLREDUCE_PLD)


def specs(nranks: int = 3):
    return static_buffers(PROGRAM, nranks)


def test_specs_bind_nr():
    s = specs(5)
    assert s["x"].shape == (2, 64) and s["x"].dtype == np.float32
    assert s["y"].shape == (1, 5) and s["y"].dtype == np.int32


def test_shared_file_and_per_rank_override(tmp_path: Path):
    save(tmp_path, "x", np.zeros((2, 64), np.float32))
    save(tmp_path, "x", np.ones((2, 64), np.float32), rank=1)
    files = scan(tmp_path, specs(), 3, what="--inputs")
    assert float(files.load(0)["x"].sum()) == 0 and float(files.load(1)["x"].sum()) == 128
    assert files.names() == {"x"}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: save(d, "x", np.zeros((2, 64), np.float64)), "dtype float64 but buffer x is float32"),
        (lambda d: save(d, "x", np.zeros((2, 63), np.float32)), "shape [2, 63] but buffer x is [2, 64]"),
        (lambda d: save(d, "z", np.zeros((2, 64), np.float32)), "the program has no buffer 'z'"),
        (lambda d: save(d, "x", np.zeros((2, 64), np.float32), rank=0), "rank1/x.npy: missing"),
        (lambda d: save(d, "x", np.zeros((2, 64), np.float32), rank=7), "the job has 3 ranks (0..2), no rank 7"),
        (lambda d: (d / "x.npy").write_text("not an array"), "not a readable .npy array"),
        (lambda d: None, "no NAME.npy or rankR/NAME.npy file"),
        (lambda d: save(d, "y", np.zeros((1, 4), np.int32)), "shape [1, 4] but buffer y is [1, 3]"),
    ],
    ids=["dtype", "shape", "unknown-name", "missing-rank-file", "rank-beyond-job", "not-npy", "empty", "nr-shape"],
)
def test_bad_directories_are_refused(tmp_path: Path, setup, message: str):
    setup(tmp_path)
    with pytest.raises(BufferFileError) as err:
        scan(tmp_path, specs(), 3, what="--inputs")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_directory(tmp_path: Path):
    with pytest.raises(BufferFileError, match="no such directory"):
        scan(tmp_path / "nope", specs(), 3, what="--expect")


def test_compare_exact_and_tolerant():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = a.copy()
    b[1, 2] += np.float32(1e-3)
    m = compare(0, "x", a, b)
    assert m is not None and m.wrong == 1 and m.index == (1, 2)
    assert "first at [1, 2]" in m.describe() and "#wrong 1/6" in m.describe()
    assert compare(0, "x", a, b, Tolerance(atol=1e-2)) is None
    assert compare(0, "x", a, b, Tolerance(rtol=1e-5)) is not None


def test_nan_equals_nan_and_shape_mismatch():
    a = np.array([np.nan, 1.0], np.float32)
    assert compare(0, "x", a, a.copy()) is None
    assert compare(0, "x", a, np.array([0.0, 1.0], np.float32)) is not None
    m = compare(2, "x", a, np.zeros(3, np.float32))
    assert m is not None and "shape" in m.got


def test_integer_compare_and_report():
    m = compare(1, "y", np.array([1, 2, 3], np.int32), np.array([1, 2, 4], np.int32))
    assert m is not None and m.got == "3" and m.expected == "4"
    text = mismatch_report([m], 4, Tolerance())
    assert "1 of 4 differ (exact)" in text and "rank 1 y: #wrong 1/3" in text
    assert "all 4 match" in mismatch_report([], 4, Tolerance())
