"""pypto-style compute programs written as an outside checker would write them (tests/pypto_frontend/
hunt_programs, ``pl.jit``, numpy goldens, not collected by pldemu's own suite): model layers mixing the cube
(BF16 / INT8 with FP32 / INT32 accumulation, split-K carries), reductions and expands, softmax / rmsnorm /
layernorm / rope, INT8 quantisation, sort / top-k / gather, ragged tails (valid_shape, fillpad,
set_validshape), loop carries, run-time branches, pl.array, task fans (pl.at, pl.spmd, deps=, drains,
defer_wait) and 2- and 3-rank exchanges (remote_store, put / get with atomics and chunks, kernel and host
collectives). The second round (``hunt2_*.py``) adds pypto-lib's DeepSeek-V4 forms: layer loops handing views
of stacked weights to inline helpers, W8A8 projections with per-row / per-column dequantisation, INT32 atomic
split-K, manual scopes with TaskId arrays, top-k by sort32 / mrgsort, gathers into L1 columns, cast modes on the
device's chains, fixed-width scalars (integers wrap, floats round every step), an ``if``'s yields, dynamic
shapes, and an INT8 expert-parallel exchange and a tensor-parallel MLP. The third round (``hunt3_*.py``) goes
after spellings and dtypes: pypto's tile-module names and keyword arguments, FP16 / BF16 / INT16 / INT32 / UINT8
tensor-level math, matmul variants (both transposes, out_dtype, batched, gemv-shaped), padded reductions and
arg-reductions, cmp / sel / sels, views in loops, break / continue (decode attention leaving at a run-time
block count), a @pl.program class, nested loops whose carries are re-bound names, and orchestration slices
carrying a valid_shape= handed to inline helpers. Its distributed programs
(``hunt3c_*.py``) mix compute with communication at 2, 3 and 4 ranks: tensor-parallel attention layers over a
HOST allreduce, a hand-written reduce-scatter / allgather MLP, an expert-parallel round trip through two HOST
all_to_all_v, a data x tensor-parallel grid of strided comm groups, a context-parallel merge by kernel
collectives, sequence-parallel decode on a prepared worker's persistent KV-cache windows, Megatron sequence
parallelism (allgather, matmul, reduce_scatter) and a credit-based ring reusing one signal. The fifth round
(``hunt5_*.py``) writes single-chip programs in pypto's class form with Opaque functions: helpers calling helpers
spliced into pl.at scopes, a state tile re-bound by a pl.at in each step of a pl.range, decode_4d's 4-D block
tensors through pl.pipeline(stage=) loops, and an InCore kernel on an InOut accumulator called from an Opaque
entry with pl.dynamic rows (run by ir.compile and runtime.execute_compiled). Each program's goldens pass in one
``pldemu pytest`` session per schedule: plain, and with jitter, deferred visibility and FIFO task order."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prefetch import prefetched

PROGRAMS = Path(__file__).resolve().parent / "hunt_programs"
FILES = sorted(p.name for p in PROGRAMS.glob("hunt*.py"))
SCHEDULES = {
    "plain": (),
    "shaken": ("--pldemu-jitter", "50", "--pldemu-visibility", "deferred", "--pldemu-task-order", "fifo",
               "--pldemu-seed", "3"),
}


def _argv(flags: tuple[str, ...]) -> tuple[str, ...]:
    return ("pytest", "-p", "no:cacheprovider", "--device", "0-3", "--pldemu-timeout", "20",
            "--junitxml={tmp}/report.xml", *flags, *(str(PROGRAMS / name) for name in FILES))


def _passed(report: Path) -> dict[str, str]:
    """test name -> "passed" or the failure text, from a session's junit report."""
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = next((case.find(k) for k in ("failure", "error", "skipped") if case.find(k) is not None), None)
        out[case.get("name", "")] = "passed" if bad is None else (bad.text or "") + bad.get("message", "")
    return out


@pytest.mark.launcher
@pytest.mark.parametrize("schedule", [pytest.param(name, marks=pytest.mark.prefetch(f"hunt-programs-{name}",
                                                                                     *_argv(flags)))
                                      for name, flags in SCHEDULES.items()])
def test_every_program_passes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                              schedule: str) -> None:
    done = prefetched(request, tmp_path_factory)
    assert done.result.returncode == 0, f"{schedule}: exit {done.result.returncode}\n{done.result.stdout[-4000:]}"
    runs = _passed(done.tmp / "report.xml")
    assert len(runs) == len(FILES) + 1, sorted(runs)  # hunt_dp_sgd runs at 2 and 3 ranks
    assert all(v == "passed" for v in runs.values()), runs
