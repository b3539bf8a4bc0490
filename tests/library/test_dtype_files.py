"""Every dtype through files both ways (issue 22 point 1): what ``np.save`` of a NumPy / ml_dtypes array
writes is accepted by ``--inputs`` and ``--expect``, what ``--dump`` writes is accepted back unchanged,
and ``pldemu.launch`` takes and returns ml_dtypes arrays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from library_helpers import save, write_program

import pldemu
from pldemu.ir import DType, parse_program
from pldemu.job.buffer_io import BufferFileError, as_declared, scan
from pldemu.job.precheck import static_buffers

SHAPE = (2, 4)
NAMES = {d: f"b_{d.value}" for d in DType}
"""One buffer per dtype pldemu has (half windows, half rank-local)."""
PLD = ("program every_dtype {\n"
       + "".join(f"  {'window' if i % 2 else 'local'} {NAMES[d]}: {d.value}[{SHAPE[0]}, {SHAPE[1]}]\n"
                 for i, d in enumerate(DType))
       + "  func main() {\n    k = 1\n  }\n}\n")
PROGRAM = parse_program(PLD)


def values(d: DType, rank: int) -> np.ndarray:
    """Distinct, exactly representable values of ``d`` (as a NumPy + ml_dtypes user makes them)."""
    k = np.arange(8, dtype=np.float64).reshape(SHAPE) + rank
    if d is DType.BOOL:
        return (k % 2 == 0).astype(np.bool_)
    if d is DType.FP8E8M0:
        return np.exp2(k - 3).astype(d.np)  # powers of two: the scale format
    if d.is_int:
        return (k * (1 if d.value.startswith("u") else -1)).astype(d.np)
    return (k / 4).astype(d.np)


def changed(a: np.ndarray) -> np.ndarray:
    """``a`` with element [1, 2] changed (to a value of the same dtype)."""
    out = a.copy()
    if a.dtype == np.bool_:
        out[1, 2] = not out[1, 2]
    else:
        out[1, 2] = (a[1, 2].astype(np.float64) * 2 + 1).astype(a.dtype)
    assert out[1, 2] != a[1, 2]
    return out


def save_inputs(folder: Path, ranks: int) -> None:
    for r in range(ranks):
        for d, name in NAMES.items():
            save(folder, name, values(d, r), rank=r)


def test_np_save_of_every_dtype_is_read_as_the_declared_dtype(tmp_path: Path):
    save_inputs(tmp_path, 2)
    assert np.load(tmp_path / "rank0" / f"{NAMES[DType.BF16]}.npy").dtype.str == "|V2"  # what np.save writes
    files = scan(tmp_path, static_buffers(PROGRAM, 2), 2, what="--inputs")
    for r in range(2):
        loaded = files.load(r)
        for d, name in NAMES.items():
            assert loaded[name].dtype == d.np, d
            assert np.array_equal(loaded[name].view(np.uint8), values(d, r).view(np.uint8)), d


def test_bit_patterns_named_by_dtype_and_refusals(tmp_path: Path):
    bf16 = NAMES[DType.BF16]
    specs = static_buffers(PROGRAM, 1)
    np.save(tmp_path / f"{bf16}.bf16.npy", values(DType.BF16, 0).view(np.uint16))  # what older dumps wrote
    files = scan(tmp_path, specs, 1, what="--inputs")
    assert np.array_equal(files.load(0)[bf16], values(DType.BF16, 0))
    (tmp_path / f"{bf16}.bf16.npy").unlink()
    np.save(tmp_path / f"{bf16}.npy", values(DType.BF16, 0).view(np.uint16))  # bits, but not said so
    with pytest.raises(BufferFileError, match=rf"dtype uint16 but buffer {bf16} is bfloat16 \(bit patterns\? "
                                              rf"name the file NAME.bf16.npy"):
        scan(tmp_path, specs, 1, what="--inputs")
    np.save(tmp_path / f"{bf16}.npy", np.zeros(SHAPE, ml_dtypes.float8_e4m3fn))  # |V1 for a 2-byte buffer
    with pytest.raises(BufferFileError, match=f"dtype |V1 but buffer {bf16} is bfloat16"):
        scan(tmp_path, specs, 1, what="--inputs")
    np.save(tmp_path / f"{bf16}.bf16.npy", values(DType.BF16, 0).view(np.uint16))
    with pytest.raises(BufferFileError, match="holds buffer b_bf16 too"):
        scan(tmp_path, specs, 1, what="--inputs")


def test_byte_swapped_file_is_converted():
    a = values(DType.INT32, 1)
    assert np.array_equal(as_declared(a.astype(">i4"), np.dtype(np.int32)), a)


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pldemu", "run", *argv], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.launcher
def test_dump_round_trips_through_inputs_and_expect_for_every_dtype(tmp_path: Path):
    prog, given, dump = write_program(tmp_path, PLD, "every.pld"), tmp_path / "in", tmp_path / "dump"
    save_inputs(given, 2)
    out = run(str(prog), "-n", "2", "--inputs", str(given), "--expect", str(given), "--dump", str(dump))
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(p.name for p in (dump / "rank0").iterdir()) == sorted(f"{n}.npy" for n in NAMES.values())
    for d, name in NAMES.items():  # the README's two lines read a dump back as the declared dtype
        back = np.load(dump / "rank1" / f"{name}.npy").view(d.np)
        assert np.array_equal(back.view(np.uint8), values(d, 1).view(np.uint8)), d
    out = run(str(prog), "-n", "2", "--inputs", str(dump), "--expect", str(dump))  # the dump, unchanged, both ways
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"expected buffers: all {2 * len(NAMES)} match (exact)" in out.stdout
    for d, name in NAMES.items():  # one value changed in every dtype's expectation on rank 1
        path = dump / "rank1" / f"{name}.npy"
        np.save(path, changed(np.load(path).view(d.np)))
    out = run(str(prog), "-n", "2", "--inputs", str(given), "--expect", str(dump))
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"expected buffers: {len(NAMES)} of {2 * len(NAMES)} differ (exact)" in out.stdout
    for name in NAMES.values():
        assert f"rank 1 {name}: #wrong 1/8, first at [1, 2]" in out.stdout, (name, out.stdout)


@pytest.mark.launcher
def test_launch_takes_and_returns_ml_dtypes_arrays():
    result = pldemu.launch(PROGRAM, 2, inputs={name: lambda r, d=d: values(d, r) for d, name in NAMES.items()},
                           timeout=120)
    for r in range(2):
        for d, name in NAMES.items():
            got = result.buffers[r][name]
            assert got.dtype == d.np and np.array_equal(got.view(np.uint8), values(d, r).view(np.uint8)), d
    result.expect({NAMES[DType.BF16]: lambda r: values(DType.BF16, r)})
