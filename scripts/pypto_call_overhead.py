"""One compiled pypto call against ``pldemu.launch`` of the same translated program, alternating.

    python scripts/pypto_call_overhead.py [--ranks N] [--repeats K]

The program is tests/pypto_frontend/programs/prog_ring_shift.py. The compiled call captures nothing
again (compiled once), but each call binds the host tensors, projects the host orchestrator per rank,
translates, writes the artifacts (lowering every host collective once more) and writes the results
back; ``pldemu.launch`` runs the ``translated.pld`` the call left in ``output_dir``, with the same
inputs and runtime options. Both spawn the same ``mpiexec`` job. Last, the same call under
``--codegen-only`` times the front end alone (no job).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import statistics
import time
from pathlib import Path

import pldemu
from pldemu.pypto import active
from pldemu.pypto.session import FrontendOptions, use_options

PROGRAM = Path(__file__).resolve().parents[1] / "tests" / "pypto_frontend" / "programs" / "prog_ring_shift.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    n = args.ranks
    with active():
        spec = importlib.util.spec_from_file_location("prog_ring_shift", PROGRAM)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        import torch
        from pypto import ir
        from pypto.ir.distributed_compiled_program import DistributedConfig

        compiled = ir.compile(module.ring_shift_program(n), distributed_config=DistributedConfig(device_ids=list(range(n))))
        rows = torch.arange(n * module.WIDTH, dtype=torch.float32).reshape(n, 1, module.WIDTH)
        gots = torch.zeros((n, 1, module.WIDTH), dtype=torch.float32)
        opts = FrontendOptions()
        with use_options(opts):
            compiled(rows, gots)  # warm-up: imports, first translation
            program = compiled.output_dir / "translated.pld"
            inputs = list(compiled.last.built.inputs)
            calls, launches = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                compiled(rows, gots)
                calls.append(time.perf_counter() - start)
                start = time.perf_counter()
                pldemu.launch(program, n, inputs=inputs, options=opts.runtime, timeout=opts.timeout)
                launches.append(time.perf_counter() - start)
        with use_options(dataclasses.replace(opts, codegen_only=True)):
            fronts = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                compiled(rows, gots)  # bind, project, translate, write the artifacts; no job
                fronts.append(time.perf_counter() - start)
    call, launch = statistics.median(calls), statistics.median(launches)
    print(f"{n} ranks, {args.repeats} alternating repeats, medians: compiled call {call:.3f} s, pldemu.launch of "
          f"translated.pld {launch:.3f} s, overhead {call - launch:+.3f} s ({call / launch:.2f}x)")
    print(f"the front end alone (--codegen-only call: bind, project, translate, lower, write artifacts): "
          f"median {statistics.median(fronts) * 1000:.1f} ms")
    print("calls:    " + " ".join(f"{t:.3f}" for t in calls))
    print("launches: " + " ".join(f"{t:.3f}" for t in launches))


if __name__ == "__main__":
    main()
