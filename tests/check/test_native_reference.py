"""The one native MPI reference table (``pldemu.harness.native.NATIVE``) serves both its callers: the
check harness (non-blocking, bounded) and the benchmark (blocking, timed). On one rank
(``COMM_SELF``) every collective's native result must match the NumPy oracle through either path."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from pldemu.bench.collectives import CollectiveCase, _expected, _native_contender
from pldemu.harness.check import native_mismatch
from pldemu.harness.data import COLLECTIVES, CheckCase, rank_inputs
from pldemu.harness.native import NATIVE, native_call
from pldemu.harness.oracle import expected
from pldemu.ir import DType

WITH_DATA = [name for name in COLLECTIVES if name != "barrier"]


def test_every_collective_with_data_has_one_native_entry() -> None:
    assert sorted(NATIVE) == sorted(WITH_DATA)


def _case(name: str) -> CheckCase:
    return CheckCase(name=name, nranks=1, dtype=np.dtype(np.float32), size=8, shape=(1, 8), max_recv=2, seed=3)


@pytest.mark.parametrize("name", WITH_DATA)
def test_the_check_path_agrees_with_the_oracle(name: str) -> None:
    case = _case(name)
    exp = expected(case, 0, 1)
    assert native_mismatch(MPI.COMM_SELF, case, 1, exp.target, exp.recv_counts, 5.0) == 0


@pytest.mark.parametrize("name", WITH_DATA)
def test_the_check_path_counts_a_wrong_element(name: str) -> None:
    case = _case(name)
    exp = expected(case, 0, 1)
    assert exp.target is not None
    wrong, counts = exp.target.copy(), exp.recv_counts
    if counts is not None:  # all_to_all_v: the receive count is compared too (its rows may be none)
        counts = counts + 1
    else:
        wrong.reshape(-1)[0] += 1
    assert native_mismatch(MPI.COMM_SELF, case, 1, wrong, counts, 5.0) == 1


@pytest.mark.parametrize("name", WITH_DATA)
def test_both_calling_disciplines_fill_the_same_result(name: str) -> None:
    case = _case(name)
    own = rank_inputs(case, 0, 0)
    call = native_call(MPI.COMM_SELF, case, own)
    call.blocking()
    blocking = call.out.copy()
    if call.out is not call.send:  # broadcast is in place: the root's buffer is its input
        call.out[...] = np.nan
    call.start().Wait()
    np.testing.assert_array_equal(call.out, blocking)


@pytest.mark.parametrize("name", WITH_DATA)
def test_the_bench_path_agrees_with_the_oracle(name: str) -> None:
    case = CollectiveCase(name, 64, DType.FP32, 1)
    cc = case.check_case()
    nat = _native_contender(case, MPI.COMM_SELF, rank_inputs(cc, 0, 0), _expected(cc, 0))
    assert nat.check is not None
    if nat.prepare is not None:
        nat.prepare()
        assert nat.check() > 0  # the poisoned buffer counts
    nat.run()
    assert nat.check() == 0
