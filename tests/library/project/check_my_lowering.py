"""A compiler engineer's own test file: the public API and the pytest plugin only.

Every rank fills its rows with data of its own, the lowered mesh allreduce sums them, and the test
compares every rank's result with NumPy, at 2, 3 and 5 ranks, under jitter with race detection on.
The other tests are wrong on purpose (pldemu's suite checks that each fails, and how).
"""

from __future__ import annotations

import numpy as np
import pytest

import pldemu
from pldemu.ir import ProgramBuilder

SHAPE = (2, 64)


def allreduce_program(bug: str = "") -> pldemu.ir.Program:
    """x = allreduce(x); with ``bug``: a hand-written step that makes the result wrong or racy."""
    pb = ProgramBuilder(f"my_allreduce{'_' + bug if bug else ''}")
    x = pb.window("x", "fp32", list(SHAPE))
    sig = pb.signal("sig", [pldemu.ir.NR, 1])
    fb = pb.function("main")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(x, hint="ctx"), hint="me")
    if bug == "race":
        # Rank 0 pushes into rank 1's window while rank 1 reads it: no notify -> wait orders the two.
        with fb.if_(me.eq(0)):
            fill = pld.tile.full(list(SHAPE), 1.0, "fp32", hint="fill")
            stage = pld.tile.create(list(SHAPE), "fp32", hint="stage")
            pld.tile.put(x, 1, fill, stage)
        with fb.if_(me.eq(1)):
            pld.tile.load(x, [0, 0], list(SHAPE), hint="early")
    if bug == "deadlock":
        pld.system.wait(sig, [me, 0], 1)  # nobody ever posts this credit
    if bug == "crash":
        with fb.if_(me.eq(1)):
            oob = pld.tile.full([1, 64], 0.0, "fp32", hint="oob")
            pld.tile.store(oob, [me * 100, 0], x)  # row 100 of a 2-row window: refused at run time
    pld.tensor.allreduce(x, sig, op="sum", mode="mesh")
    if bug == "wrong":
        one = pld.tile.full([1, 1], 1.0, "fp32", hint="one")
        pld.tile.store(one, [1, 3], x)  # clobbers one element after the collective
    return pb.build()


def rank_data(rank: int) -> np.ndarray:
    return (np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE) % 7 + rank) * 0.5


def expected(ranks: int) -> np.ndarray:
    return sum((rank_data(r) for r in range(ranks)), np.zeros(SHAPE, np.float32))


@pytest.mark.pldemu(ranks=[2, 3, 5], timeout=60)
def test_allreduce_matches_numpy(pldemu_run, pldemu_ranks):
    options = pldemu.RuntimeOptions(jitter_us=20, race_detect=True, invariants=True, timeout=20)
    result = pldemu_run(allreduce_program(), inputs={"x": rank_data}, options=options,
                        expect={"x": expected(pldemu_ranks)})
    assert result.ops["pld.system.notify"] > 0


@pytest.mark.pldemu(ranks=[3], timeout=60)
def test_wrong_result(pldemu_run, pldemu_ranks):
    pldemu_run(allreduce_program("wrong"), inputs={"x": rank_data}, expect={"x": expected(pldemu_ranks)})


@pytest.mark.pldemu(ranks=[2], timeout=60)
def test_racy(pldemu_run):
    pldemu_run(allreduce_program("race"), inputs={"x": rank_data}, options=pldemu.RuntimeOptions(race_detect=True))


@pytest.mark.pldemu(ranks=[2], timeout=20)
def test_deadlock(pldemu_run):
    pldemu_run(allreduce_program("deadlock"))


@pytest.mark.pldemu(ranks=[2], timeout=60)
def test_crashing_rank(pldemu_run):
    pldemu_run(allreduce_program("crash"))


def test_session_survives():
    """Runs after the failures above: the session is still alive and a plain test still passes."""
    assert pldemu.RuntimeOptions().timeout > 0
