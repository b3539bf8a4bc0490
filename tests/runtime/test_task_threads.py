"""A program instance's task scheduler ends its worker threads when the instance ends (closed, or abandoned
after a failure): a prepared worker whose host scalar changes the program's buffers runs every such dispatch
on a new instance, and each closed one used to leave a worker thread that kept its machine, its last call's
tasks and the task-race records alive (docs/prepared-workers.md#memory; one rank, COMM_SELF)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers import instance

from pldemu.job.load import load_program
from pldemu.runtime.errors import DeadlockError, ProgramError

PROGRAMS = Path(__file__).parent / "task_programs"
WORKER_NAME = "pldemu-task"
"""How ``threading.enumerate()`` names a task scheduler's worker thread (``tasksched.WORKER_NAME``)."""


def _workers() -> int:
    return sum(t.name == WORKER_NAME for t in threading.enumerate())


def test_closed_instances_leave_no_task_threads() -> None:
    program = load_program(str(PROGRAMS / "war_with_deps.pld"))
    before = _workers()
    for _ in range(6):
        with instance(program, task_order="random", race_detect=True) as inst:
            inst.run()
            inst.run()  # the same instance's runs share its workers
            assert _workers() > before
    assert _workers() == before


def test_a_failed_run_leaves_no_task_threads() -> None:
    """Two waiters park on the only AIV cores (the deadlock the scheduler reports): closing ends their threads."""
    program = load_program(str(PROGRAMS / "waits_take_every_core.pld"))
    before = _workers()
    for _ in range(2):
        with instance(program, task_order="fifo", cores=1, timeout=0.3) as inst, pytest.raises(DeadlockError):
            inst.run()
    assert _workers() == before


PARKED_THEN_ERROR = """\
program parked_then_error {
  signal sig: int32[1, 1]
  window x: fp32[1, 8]

  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    task w = core_group "waiter" {
      pld.system.wait(sig, [0, 0], 1, cmp=Ge)
    }
    task p = core_group "producer" {
      u = tile.load(x, [0, 0], [1, 8])
      tile.store(u, [0, 0], x)
    }
    v = tensor.read(x, [0, 0])
    zero = me - me
    q = 4 // zero
    pld.system.notify(sig, me, [0, 0], q, op=Set)
  }
}
"""
"""The Orchestration waits for x's writer only (the waiter starts and parks on its core meanwhile), then fails
on its own: the run ends with the waiter's block still parked."""


def test_a_block_left_parked_by_a_failed_run_ends_with_its_instance(tmp_path: Path) -> None:
    source = tmp_path / "parked_then_error.pld"
    source.write_text(PARKED_THEN_ERROR)
    program = load_program(str(source))
    before = _workers()
    with instance(program, task_order="fifo", timeout=2) as inst:
        with pytest.raises(ProgramError, match="ZeroDivisionError"):
            inst.run()
        assert _workers() == before + 2  # the parked waiter's thread and the producer's, idle
    assert _workers() == before
