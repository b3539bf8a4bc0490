"""The task checks' cost in the shape of the task graph: N dependent, independent or mixed one-tile tasks
(docs/benchmarks.md, "task checks, per graph shape").

    python scripts/task_chain_cost.py [--shapes chain,fan,mixed,dense] [--tasks 150,300,600,1200]
                                      [--ranks 2] [--modes races,plain] [--out DIR]

Writes ``<shape>_<N>.pld`` (``program_text``) and runs ``pldemu run <it> -n RANKS [--races]`` under
``/usr/bin/time -f %M``, printing the wall time and the peak resident set of the largest process (kB).
Shapes, every task one row of ``x: fp32[N + 1, 8]``:

* ``chain``: task i reads row i, which task i - 1 wrote, and writes row i + 1 (``deps [prev]`` in a
  manual scope: one edge per task);
* ``fan``: N independent tasks each read row 0 and write their own row (no edge);
* ``mixed``: a chain whose every link also has an independent reader of its output (``deps [link]``);
* ``dense``: the chain in an automatic scope, so every task takes a TensorMap edge to every earlier
  writer of ``x`` (N (N - 1) / 2 edges: pldemu keys the TensorMap by buffer).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

LINK = """        task t = core_group "link" {deps} {{
          v = tile.load(x, [i, 0], [1, 8])
          tile.store(v, [i + 1, 0], x)
        }}
"""


def _chain(n: int) -> str:
    return ("    scope manual {\n      task p = dummy\n"
            f"      for i in range(0, {n}, 1) {{\n" + LINK.format(deps="deps [p]") + "        p = t\n      }\n    }\n")


def _fan(n: int) -> str:
    return (f"    for i in range(0, {n}, 1) {{\n      task t = core_group \"reader\" nodep [x] {{\n"
            "        v = tile.load(x, [0, 0], [1, 8])\n        tile.store(v, [i + 1, 0], x)\n      }\n    }\n")


def _mixed(n: int) -> str:
    side = ("        task s = core_group \"side\" deps [t] {\n          w = tile.load(x, [i + 1, 0], [1, 8])\n"
            "          tile.store(w, [i + 1, 0], y)\n        }\n")
    return ("    scope manual {\n      task p = dummy\n"
            f"      for i in range(0, {n // 2}, 1) {{\n" + LINK.format(deps="deps [p]") + side
            + "        p = t\n      }\n    }\n")


def _dense(n: int) -> str:
    return f"    for i in range(0, {n}, 1) {{\n" + LINK.format(deps="") + "    }\n"


SHAPES: dict[str, Callable[[int], str]] = {"chain": _chain, "fan": _fan, "mixed": _mixed, "dense": _dense}
"""Each shape's Orchestration body for N tasks (``mixed``: N / 2 links and N / 2 side readers)."""


def program_text(shape: str, n: int) -> str:
    """The ``.pld`` program of ``n`` one-tile tasks in ``shape`` (``SHAPES``)."""
    return (f"# {n} one-tile tasks, shape {shape} (scripts/task_chain_cost.py)\nprogram {shape} {{\n"
            f"  window x: fp32[{n + 1}, 8]\n  window y: fp32[{n + 1}, 8]\n\n  func main() {{\n"
            f"{SHAPES[shape](n)}  }}\n}}\n")


def measure(path: Path, ranks: int, races: bool) -> tuple[float, int, str]:
    """(wall seconds, peak kB of the largest process, the races line) of one ``pldemu run``."""
    cmd = ["/usr/bin/time", "-f", "PEAK %M", sys.executable, "-m", "pldemu", "run", str(path), "-n", str(ranks),
           "--timeout", "600"] + (["--races"] if races else [])
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy(), check=False)
    wall = time.perf_counter() - t0
    out = res.stdout + res.stderr
    peak = re.search(r"PEAK (\d+)", out)
    verdict = next((ln.strip()[:60] for ln in out.splitlines() if ln.strip().startswith("races:")),
                   f"rc={res.returncode}")
    return wall, int(peak.group(1)) if peak else -1, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="chain,fan,mixed")
    parser.add_argument("--tasks", default="150,300,600,1200")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--modes", default="races,plain")
    parser.add_argument("--out", type=Path, default=Path("/tmp/task_chain_cost"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for shape in args.shapes.split(","):
        for n in (int(x) for x in args.tasks.split(",")):
            path = args.out / f"{shape}_{n}.pld"
            path.write_text(program_text(shape, n))
            for mode in args.modes.split(","):
                wall, peak, verdict = measure(path, args.ranks, mode == "races")
                print(f"{shape:6} N={n:5} {mode:6} wall {wall:7.2f} s  peak {peak / 1024:7.1f} MiB  {verdict}",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
