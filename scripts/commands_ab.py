"""Shell commands against each other, alternating in one run: median wall and CPU time of each.

    python scripts/commands_ab.py ITERS CMD [CMD ...]

Every iteration runs every command once (in order, then reversed on the next iteration), after one
untimed warm-up round; each command's CPU time is the user + system time of the processes it ran
(``getrusage`` of the waited-for children), which other jobs on the cores inflate far less than the
wall time. Ratios are to the first command. Used for the before/after figures of two checkouts
(docs/benchmarks.md, start-up); ``pldemu bench startup`` measures one checkout with a breakdown.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print(__doc__, file=sys.stderr)
        return 2
    iters, commands = int(argv[0]), argv[1:]
    wall: list[list[float]] = [[] for _ in commands]
    cpu: list[list[float]] = [[] for _ in commands]
    for it in range(iters + 1):
        order = list(range(len(commands)))
        if it % 2:
            order.reverse()
        for k in order:
            c0, t0 = _children_cpu(), time.perf_counter()
            done = subprocess.run(commands[k], shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  check=False)
            t1, c1 = time.perf_counter(), _children_cpu()
            if done.returncode:
                print(f"exit {done.returncode}: {commands[k]}", file=sys.stderr)
                return 1
            if it:
                wall[k].append(t1 - t0)
                cpu[k].append(c1 - c0)
    med_wall = [statistics.median(w) for w in wall]
    med_cpu = [statistics.median(c) for c in cpu]
    print(f"{'wall(ms)':>9} {'ratio':>6} {'cpu(ms)':>8} {'ratio':>6}  command ({iters} alternating iterations, medians)")
    for command, w, c in zip(commands, med_wall, med_cpu, strict=True):
        print(f"{w * 1e3:9.1f} {w / med_wall[0]:6.2f} {c * 1e3:8.1f} {c / med_cpu[0]:6.2f}  {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
