"""tile.tquant_mx executed bit-exactly: 0 wrong bytes against the test's own reference (mx_reference.py)
over >= 1,000 random groups per (axis, source dtype) plus the boundary cases; the documented choices;
the workspaces; pypto's golden cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mpi4py import MPI
from mx_reference import reference, scale_bytes

from pldemu.harness.mxcheck import boundary_source, matmul_pattern, random_groups_source, tquant_program
from pldemu.ir import DType
from pldemu.runtime import ProgramInstance, RuntimeOptions

SHAPE = (128, 256)  # 1,024 groups per run


def quantise(x: np.ndarray, axis: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    program = tquant_program(axis, dtype, (x.shape[0], x.shape[1]))
    with ProgramInstance(program, MPI.COMM_SELF, RuntimeOptions()) as inst:
        inst.local("x")[...] = x
        inst.run()
        return inst.local("q").view(np.uint8).copy(), inst.local("s").copy()


def _source(x: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(DType.parse(dtype).np)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("case", ["random", "boundary", "uniform", "zeros"])
def test_bytes_match_the_reference(case: str, axis: int, dtype: str) -> None:
    raw = {"random": lambda: random_groups_source(axis, SHAPE, dtype, 5),
           "boundary": lambda: boundary_source(axis, SHAPE),
           "uniform": lambda: np.random.default_rng(3).uniform(-2, 2, SHAPE),
           "zeros": lambda: np.zeros(SHAPE)}[case]()
    x = _source(raw, dtype)
    q, s = quantise(x, axis, dtype)
    want_q, _, _ = reference(x, axis)
    assert q.size // 32 >= 1000
    assert int(np.count_nonzero(q != want_q)) == 0
    assert int(np.count_nonzero(s != scale_bytes(x, axis))) == 0
    if case == "zeros":
        assert not q.any() and not s.any()


def _one_group(values: list[float], axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros((16, 64), np.float32)
    x[0, : len(values)] = values
    return quantise(x, axis, "fp32")


def test_documented_choices_signs_nan_inf() -> None:
    q, s = _one_group([1.0, -0.0, -2.0 ** -149])
    assert q[0, 1] == 0x80 and q[0, 2] == 0x80  # -0 and negative underflow keep the sign (ml_dtypes golden)
    q, s = _one_group([1.0, math.nan, -3.0])
    assert s.reshape(-1)[0] == 0xFF and set(q[0, :32]) == {0x7F}  # a NaN poisons its whole group
    q, s = _one_group([math.inf, -math.inf, 1.0])
    assert s.reshape(-1)[0] == 247 and (q[0, 0], q[0, 1]) == (0x7E, 0xFE) and q[0, 2] == 0  # Inf -> +-448
    q, s = _one_group([448.0, 464.0, 480.0])
    assert s.reshape(-1)[0] == 0x7F  # E(480) = 135 -> 127 (scale 1): clip at 448 before RNE
    assert list(q[0, :3]) == [0x7E, 0x7E, 0x7E]


def test_pypto_matmul_pattern_is_exact() -> None:
    a = matmul_pattern().astype(np.float32)
    q, s = quantise(a, 1, "fp32")
    assert set(q.reshape(-1)) == {0x78}  # every element is exactly 256.0
    codes = np.array([[100 + ((r // 16) * 13 + (r % 16) * 7 + g * 3) % 64 for g in range(8)] for r in range(64)])
    assert np.array_equal(s, scale_bytes(a, 1))
    flat = s.reshape(-1)
    assert all(flat[((r // 16) * 4 + g // 2) * 32 + (r % 16) * 2 + g % 2] == codes[r, g] - 8
               for r in range(64) for g in range(8))


@pytest.mark.parametrize("seed", [19, 42])
@pytest.mark.parametrize("axis", [0, 1])
def test_pypto_uniform_goldens(seed: int, axis: int) -> None:
    x = np.random.default_rng(seed).uniform(-2, 2, (128, 64)).astype(np.float32)
    q, s = quantise(x, axis, "fp32")
    assert np.array_equal(q, reference(x, axis)[0]) and np.array_equal(s, scale_bytes(x, axis))


def test_the_check_counts_a_flipped_byte_and_reports_sqnr() -> None:
    from pldemu.harness.mxcheck import compare, mx_row

    x = np.random.default_rng(19).uniform(-2, 2, (128, 64)).astype(np.float32)
    q, s = quantise(x, 1, "fp32")
    good = compare("u", x.astype(np.float64), 1, q.view(np.int8), s)
    assert good.ok and 20 < good.sqnr_db < 40 and good.max_rel <= 0.125
    q[3, 5] ^= 1
    s.reshape(-1)[7] ^= 1
    bad = compare("u", x.astype(np.float64), 1, q.view(np.int8), s)
    assert (bad.wrong_data, bad.wrong_scale, bad.ok) == (1, 1, False)
    assert mx_row(bad, 1, "fp32").endswith("MISMATCH")
