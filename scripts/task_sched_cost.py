"""The task scheduler's cost per task: N one-tile independent tasks on one rank (docs/benchmarks.md).

    python scripts/task_sched_cost.py [--program many_small_tasks] [--tasks 1000,10000]
                                      [--orders program,random,fifo] [--repeats 5]

Runs ``tests/runtime/task_programs/<program>.pld`` (its loop bound replaced by N) on ``MPI.COMM_SELF``
with each ``--task-order`` and prints the best of ``--repeats`` runs divided by N. ``many_small_tasks``:
independent tasks, each ready at its submission; ``many_ready_tasks``: N tasks that become ready at once
(``program`` order deadlocks it: its first task waits for its last).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from mpi4py import MPI

from pldemu.ir.parser import parse_program
from pldemu.lowering import lower_composite_ops
from pldemu.runtime import RuntimeOptions
from pldemu.runtime.interpreter import ProgramInstance

PROGRAMS = Path(__file__).resolve().parents[1] / "tests" / "runtime" / "task_programs"


def per_task(name: str, tasks: int, order: str, repeats: int) -> float:
    """Best seconds per task of ``repeats`` runs of program ``name`` with ``tasks`` tasks in ``order``."""
    path = PROGRAMS / f"{name}.pld"
    text = path.read_text().replace("range(0, 1000, 1)", f"range(0, {tasks}, 1)")
    program = lower_composite_ops(parse_program(text, str(path)))
    best = float("inf")
    with ProgramInstance(program, MPI.COMM_SELF, RuntimeOptions(task_order=order)) as inst:
        for _ in range(repeats):
            t0 = time.perf_counter()
            inst.run()
            best = min(best, time.perf_counter() - t0)
    return best / tasks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default="many_small_tasks")
    parser.add_argument("--tasks", default="1000,10000")
    parser.add_argument("--orders", default="program,random,fifo")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for tasks in (int(n) for n in args.tasks.split(",")):
        for order in args.orders.split(","):
            print(f"{tasks} tasks, {order}: {per_task(args.program, tasks, order, args.repeats) * 1e6:.1f} us/task", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
