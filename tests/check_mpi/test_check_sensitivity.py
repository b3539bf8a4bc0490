"""The harness catches broken recipes: each test breaks the lowered program in one known way and
asserts that ``run_check`` reports it (wrong elements, non-zero signal cells, or a deadlock error)
instead of passing.  A checker that never fails proves nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from helpers import agree, call_of, lowered_then
from mpi4py import MPI

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.harness.blocks import QUIET, Hooks, silent
from pldemu.harness.check import CheckResult, run_check
from pldemu.ir import AllreduceMode, DType, Eval, Op, Program, ReduceOp, Stmt
from pldemu.ir.nodes import Assign, Const, static_int
from pldemu.ir.signatures import make_call
from pldemu.lowering import lower_composite_ops
from pldemu.runtime.errors import DeadlockError
from pldemu.runtime.options import RuntimeOptions

pytestmark = pytest.mark.mpi(min_size=1)

N = MPI.COMM_WORLD.Get_size()
needs_peers = pytest.mark.skipif(N < 2, reason="one rank has no peer to synchronise with")

def drop_epilogue(st: Stmt) -> Stmt | None:
    """Remove the self-clearing epilogue: notifies of a negative constant."""
    call = call_of(st, Op.NOTIFY)
    if call is not None:
        value = static_int(call.args[3])  # type: ignore[arg-type]
        if value is not None and value < 0:
            return None
    return st


def add_becomes_max(st: Stmt) -> Stmt | None:
    """Reduce with tile.maximum where the recipe says tile.add."""
    call = call_of(st, Op.TILE_ADD)
    if call is not None and isinstance(st, Assign):
        return Assign(st.var, make_call(Op.TILE_MAXIMUM, call.args, dict(call.attrs)))
    return st


def drop_puts(st: Stmt) -> Stmt | None:
    """Never move the payload."""
    return None if call_of(st, Op.PUT) is not None else st


def wait_one_more(st: Stmt) -> Stmt | None:
    """Wait for a credit that never comes."""
    call = call_of(st, Op.WAIT)
    if call is not None:
        args = (*call.args[:2], Const(10_000, DType.INT32))
        return Eval(make_call(Op.WAIT, args, dict(call.attrs)))
    return st


def _run(
    comm: MPI.Intracomm, spec: CollectiveSpec, lower: Callable[[Program], Program], timeout: float = 60.0
) -> CheckResult:
    return run_check(
        comm,
        collective_program(spec),
        20,
        RuntimeOptions(timeout=timeout),
        5,
        hooks=QUIET,
        lower=lower,
    )


@needs_peers
@pytest.mark.parametrize("name", ["barrier", "allgather", "all_to_all_v"])
def test_missing_epilogue_leaves_cells(comm: MPI.Intracomm, name: str) -> None:
    result = _run(comm, CollectiveSpec(name, size=32, max_recv=2), lowered_then(drop_epilogue))
    agree(comm, not result.ok and result.cells_nonzero > 0, result.summary())
    agree(comm, all(row.cells_nonzero > 0 for row in result.rows), result.summary())


@needs_peers
@pytest.mark.parametrize("mode", list(AllreduceMode))
def test_wrong_reduction_is_caught(comm: MPI.Intracomm, mode: AllreduceMode) -> None:
    spec = CollectiveSpec("allreduce", mode=mode, size=100, reduce=ReduceOp.Sum, dtype=DType.FP16)
    result = _run(comm, spec, lowered_then(add_becomes_max))
    agree(comm, result.wrong > 0 and not result.ok, result.summary())
    # The native comparison disagrees too (pldemu's result is wrong, MPI's is right).
    agree(comm, bool(result.native_wrong), result.summary())
    # Every rank names its first wrong element.
    agree(
        comm,
        result.first_error is not None and "wrong in target" in result.first_error,
        str(result.first_error),
    )


@pytest.mark.parametrize("name", ["allgather", "all_to_all", "all_to_all_v"])
def test_missing_payload_is_caught(comm: MPI.Intracomm, name: str) -> None:
    result = _run(comm, CollectiveSpec(name, size=32, max_recv=2), lowered_then(drop_puts))
    if name == "all_to_all_v":
        # Empty edges send nothing anyway, but over 20 iterations some edge carries rows.
        agree(comm, comm.allreduce(result.wrong, op=MPI.SUM) > 0 or N == 1, result.summary())
    else:
        agree(comm, result.wrong > 0, result.summary())


def drop_waits(st: Stmt) -> Stmt | None:
    """Never wait: the barrier lets this rank through at once."""
    return None if call_of(st, Op.WAIT) is not None else st


@needs_peers
def test_rank_passing_a_barrier_early_is_caught(comm: MPI.Intracomm) -> None:
    """Rank 0 skips its waits while the others are slow: its calls return before the peers even
    entered them, which the epoch (ordering) check reports.  Data and cells stay fine here."""
    me = comm.Get_rank()
    result = run_check(
        comm,
        collective_program(CollectiveSpec("barrier")),
        20,
        RuntimeOptions(timeout=60.0),
        5,
        hooks=QUIET if me == 0 else Hooks(emit=silent, report=None, before_run=lambda it: time.sleep(0.02)),
        lower=lowered_then(drop_waits) if me == 0 else lower_composite_ops,
    )
    agree(comm, result.wrong > 0 and not result.ok, result.summary())
    if me == 0:
        assert result.first_error is not None and "out of step" in result.first_error, result.first_error


@needs_peers
def test_deadlock_ends_in_an_error_not_a_hang(comm: MPI.Intracomm) -> None:
    with pytest.raises(DeadlockError):
        _run(comm, CollectiveSpec("barrier"), lowered_then(wait_one_more), timeout=3.0)
