"""Time one ``pldemu.launch`` call against the same run through the CLI (``pldemu run``), alternating.

    python scripts/api_overhead.py [--ranks N] [--repeats K]

Both spawn the same ``mpiexec`` job; the API also writes the program and inputs, dumps every rank's
buffers and reads them back, which is what its extra time pays for.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import pldemu

EXAMPLE = Path(__file__).resolve().parents[1] / "pldemu" / "examples" / "sum_inputs.pld"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ar.pld"
        path.write_text(EXAMPLE.read_text())
        cli, api = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pldemu", "run", str(path), "-n", str(args.ranks)],
                           capture_output=True, check=True)
            cli.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            pldemu.launch(path, args.ranks, inputs={"x": np.ones((2, 64), np.float32)})
            api.append(time.perf_counter() - t0)
    c, a = statistics.median(cli), statistics.median(api)
    print(f"{args.ranks} ranks, {args.repeats} alternating runs, median: CLI {c * 1e3:.0f} ms, "
          f"API {a * 1e3:.0f} ms, overhead {(a - c) * 1e3:+.0f} ms ({a / c:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
