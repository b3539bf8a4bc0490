"""``pldemu run --inputs DIR --expect DIR`` end to end (each test spawns a small job)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import pldemu
from library_helpers import rank_data, save, summed, write_program

pytestmark = pytest.mark.launcher


def inputs_dir(root: Path, ranks: int) -> Path:
    folder = root / "in"
    for r in range(ranks):
        save(folder, "x", rank_data(r), rank=r)
    return folder


def test_inputs_and_expect_pass_with_schedules_and_checks(tmp_path: Path):
    prog = write_program(tmp_path)
    save(tmp_path / "want", "x", summed(3))
    out = pldemu("run", str(prog), "-n", "3", "--inputs", str(inputs_dir(tmp_path, 3)), "--expect",
                 str(tmp_path / "want"), "--jitter", "20", "--races", "--invariants", "--report",
                 str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "expected buffers: all 3 match (exact)" in out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit_code"] == 0 and report["ranks"] == 3 and report["mismatches"] == []
    assert report["ops"]["pld.system.notify"] > 0


def test_mismatch_exits_1_with_wrong_rows(tmp_path: Path):
    prog = write_program(tmp_path)
    want = summed(2)
    want[1, 7] += 1
    save(tmp_path / "want", "x", want, rank=1)
    save(tmp_path / "want", "x", summed(2), rank=0)
    out = pldemu("run", str(prog), "-n", "2", "--inputs", str(inputs_dir(tmp_path, 2)), "--expect",
                 str(tmp_path / "want"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "expected buffers: 1 of 2 differ (exact)" in out.stdout
    assert "rank 1 x: #wrong 1/128, first at [1, 7]" in out.stdout


def test_tolerance_accepts_a_close_result(tmp_path: Path):
    prog = write_program(tmp_path)
    save(tmp_path / "want", "x", summed(2) * np.float32(1 + 1e-6))
    args = ["run", str(prog), "-n", "2", "--inputs", str(inputs_dir(tmp_path, 2)), "--expect", str(tmp_path / "want")]
    assert pldemu(*args).returncode == 1
    assert pldemu(*args, "--rtol", "1e-5").returncode == 0


@pytest.mark.parametrize("reload", [False, True], ids=["once", "reload"])
def test_iters_load_once_or_reload_every_call(tmp_path: Path, reload: bool):
    # x = allreduce(x) in place: loaded once, 3 calls give summed * NR^2; reloaded, every call gives summed.
    prog = write_program(tmp_path)
    want = summed(2) if reload else summed(2) * np.float32(4)
    save(tmp_path / "want", "x", want)
    out = pldemu("run", str(prog), "-n", "2", "--iters", "3", "--block", "1", "--inputs",
                 str(inputs_dir(tmp_path, 2)), "--expect", str(tmp_path / "want"),
                 *(["--reload-inputs"] if reload else []))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: save(d, "x", np.zeros((2, 64), np.float64), rank=None), "dtype float64 but buffer x is float32"),
        (lambda d: save(d, "x", np.zeros((3, 64), np.float32), rank=None), "shape [3, 64] but buffer x is [2, 64]"),
        (lambda d: save(d, "x", np.zeros((2, 64), np.float32), rank=0), "rank1/x.npy: missing"),
        (lambda d: save(d, "w", np.zeros((2, 64), np.float32), rank=None), "the program has no buffer 'w'"),
    ],
    ids=["dtype", "shape", "missing-file", "unknown-name"],
)
@pytest.mark.parametrize("flag", ["--inputs", "--expect"])
def test_bad_files_exit_2_before_the_job(tmp_path: Path, setup, message: str, flag: str):
    prog = write_program(tmp_path)
    setup(tmp_path / "d")
    out = pldemu("run", str(prog), "-n", "2", flag, str(tmp_path / "d"))
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith(f"pldemu run: error: {flag}")
    assert out.stdout == ""  # no job ran: no report


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--reload-inputs"], "--reload-inputs needs --inputs DIR and --iters K"),
        (["--rtol", "0.1"], "--rtol/--atol apply to --expect DIR"),
        (["--inputs", "/nonexistent-dir"], "no such directory"),
        (["--report", "/nonexistent-dir/r.json"], "no directory /nonexistent-dir"),
    ],
    ids=["reload-without-iters", "rtol-without-expect", "no-inputs-dir", "report-dir"],
)
def test_bad_flags_exit_2(tmp_path: Path, argv: list[str], message: str):
    out = pldemu("run", str(write_program(tmp_path)), "-n", "2", *argv)
    assert out.returncode == 2 and message in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("x=nope", "--expect-buffer x=nope: the program has no buffer 'nope' (buffers: "),
        ("x=sig", "--expect-buffer x=sig: x is float32[2, 64] but sig is int32[2, 1] (the same dtype and shape"),
        ("x=x", "--expect-buffer x=x: a buffer compared with itself always matches"),
        ("x", "argument --expect-buffer: expected ACTUAL=EXPECTED (two buffer names), got 'x'"),
    ],
    ids=["unknown-name", "dtype-shape", "itself", "malformed"],
)
def test_expect_buffer_bad_pairs_exit_2_before_the_job(tmp_path: Path, pair: str, message: str):
    out = pldemu("run", str(write_program(tmp_path)), "-n", "2", "--expect-buffer", pair)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert out.stdout == ""  # no job ran: no report
