"""pldemu check tquant_mx and the mx_allgather example from the command line (multi-rank jobs, one at a
time): rows, exit codes; the example's own per-rank check (every rank dequantises every gathered block with
tile.dequant_mx and the run compares it with the gathered sources, --expect-buffer), a corrupted scale or
data byte failing it on every rank (exit 1), and every rank's dump checked again against the independent
reference."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from helpers import pldemu
from mx_reference import dequantised, reference, scale_bytes

pytestmark = pytest.mark.launcher

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "pldemu" / "examples" / "mx_allgather.pld"


@pytest.mark.parametrize(("axis", "dtype"), [(1, "fp16"), (0, "bf16")])
def test_check_tquant_mx_is_bit_exact_on_every_rank(axis: int, dtype: str) -> None:
    res = pldemu("check", "tquant_mx", "--group-axis", str(axis), "--dtype", dtype, "-n", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [line for line in res.stdout.splitlines() if not line.startswith("#")]
    assert len(rows) == (7 if axis == 1 else 6) and all(r.endswith(" ok") for r in rows)
    assert all(int(r.split()[-5]) == 0 and int(r.split()[-4]) == 0 for r in rows)
    assert f"# tquant_mx axis {axis}: " in res.stdout and "PASS" in res.stdout


def test_check_tquant_mx_refuses_bad_shapes_before_mpi() -> None:
    for args, message in ((["--shape", "16x32"], "requires K divisible by 64"),
                          (["--shape", "8x64", "--group-axis", "1"], "requires M divisible by 16"),
                          (["--shape", "16x64", "--group-axis", "0"], "requires N divisible by 32")):
        res = pldemu("check", "tquant_mx", *args, "-n", "2")
        assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stderr
    for argv in (["allgather", "--dtype", "bf16"], ["--dtype", "bf16", "allgather"]):
        res = pldemu("check", *argv, "-n", "2")
        assert res.returncode == 2 and "bf16 is for the tquant_mx check only" in res.stderr


def _dequantise_zz(q_row: np.ndarray, s_row: np.ndarray) -> np.ndarray:
    data = q_row.view(np.uint8).reshape(16, 64).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    e = np.array([[s_row[((m // 16) + g // 2) * 32 + (m % 16) * 2 + g % 2] for g in range(2)] for m in range(16)])
    return data * np.exp2(np.repeat(e.astype(np.float64) - 127, 32, axis=1))


CHECK = ("--expect-buffer", "deq_all=x_all", "--rtol", "0.125")
"""The example's own check (its header comment): every rank's dequantised blocks against the sources."""


def test_example_allgathers_and_every_rank_dequantises_every_block(tmp_path: Path) -> None:
    n = 3
    res = pldemu("run", str(EXAMPLE), "-n", str(n), "--races", "--invariants", "--dump", str(tmp_path / "out"),
                  "--timeout", "60", *CHECK)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "races: none" in res.stdout and "invariants: none broken" in res.stdout
    assert f"expected buffers: all {n} match (rtol=0.125 atol=0)" in res.stdout
    sources = [np.load(tmp_path / "out" / f"rank{r}" / "x.npy") for r in range(n)]
    for me in range(n):
        q_all = np.load(tmp_path / "out" / f"rank{me}" / "q_all.npy")
        s_all = np.load(tmp_path / "out" / f"rank{me}" / "s_all.npy")
        deq_all = np.load(tmp_path / "out" / f"rank{me}" / "deq_all.npy")
        for r, x in enumerate(sources):
            assert np.array_equal(q_all[r].view(np.uint8), reference(x, 1)[0].reshape(-1)), (me, r)
            assert np.array_equal(s_all[r], scale_bytes(x, 1).reshape(-1)), (me, r)
            # What every rank's tile.dequant_mx computed, bit for bit the test's own decode.
            assert np.array_equal(deq_all[r].view(np.uint32), dequantised(x, 1).reshape(-1).view(np.uint32)), (me, r)
            deq = _dequantise_zz(q_all[r], s_all[r])
            err = deq - x
            assert 10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum(err ** 2)) > 25
            big = np.abs(x) >= np.abs(x).max() / 8
            # RNE to 3 mantissa bits gives <= 2^-4; a group max scaled into (448, 512) is clipped: <= 1/8.
            assert np.max(np.abs(err[big]) / np.abs(x[big])) <= 0.125


CORRUPTIONS = {
    # rank 1 overwrites scale byte 3 (ZZ offset 3: row 1, group 1) of its block before the allgather
    "scale": ("tensor.write(s_mine, [0, 3], 140)", "#wrong 32/3072, first at [1, 96]"),
    # rank 1 turns data byte 70 (row 1, column 6) into E4M3 NaN (0x7F)
    "data": ("tensor.write(q_mine, [0, 70], 127)", "#wrong 1/3072, first at [1, 70]: got nan"),
}


@pytest.mark.parametrize("what", sorted(CORRUPTIONS))
def test_example_check_fails_on_every_rank_when_a_block_is_corrupted(tmp_path: Path, what: str) -> None:
    write, row = CORRUPTIONS[what]
    text = EXAMPLE.read_text()
    anchor = "    x_all = pld.tensor.allgather"
    assert anchor in text
    bad = tmp_path / "mx_corrupt.pld"
    bad.write_text(text.replace(anchor, f"    if me == 1 {{\n      {write}\n    }}\n{anchor}"))
    n = 3
    res = pldemu("run", str(bad), "-n", str(n), "--races", "--invariants", "--timeout", "60", *CHECK)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"expected buffers: {n} of {n} differ (rtol=0.125 atol=0):" in res.stdout
    for me in range(n):  # rank 1's corruption is seen in its block (row 1) by every rank
        assert f"rank {me} deq_all (vs x_all): {row}" in res.stdout, res.stdout


@pytest.mark.parametrize(("old", "new", "message"), [
    ("tile.load(x, [0, 0], [16, 64])", "tile.load(x, [0, 0], [8, 64])",
     "tile.tquant_mx with group_axis=1 requires M divisible by 16 (the ZZ box rows), but got M = 8"),
    (", scale_layout=ZZ)", ")", "tile.dequant_mx with group_axis=1 reads the scale in its public layout ZZ, but got "
                                "a ND scale tile with scale_layout=ND (an ND tile of the stored bytes: pass "
                                "scale_layout=ZZ)"),
    ("scale_layout=ZZ)", "scale_layout=NN)", "but got a ND scale tile with scale_layout=NN"),
], ids=["tquant-shape", "dequant-no-layout", "dequant-wrong-layout"])
def test_bad_mx_programs_exit_2_before_the_job(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = EXAMPLE.read_text()
    assert old in text
    bad = tmp_path / "bad.pld"
    bad.write_text(text.replace(old, new).replace("local x: fp32[16, 64]", "local x: fp32[8, 64]")
                   if "8, 64" in new else text.replace(old, new))
    res = pldemu("run", str(bad), "-n", "2", *CHECK)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"pldemu run: error: {bad}:") and res.stdout == ""
