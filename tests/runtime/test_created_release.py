"""A ``tensor.create`` executed in a loop makes a fresh buffer each time it runs (as pypto's orchestration
allocates it), and its storage is released once nothing can use it any more (no variable, view, carried
value, or task not yet complete reaches it), as simpler's runtime frees a ring-heap buffer: a loop's memory is
its live buffers', not one buffer per iteration. The task graph and the task race check keep indices, which
then read as tombstones naming the buffer: a race on a released buffer is still reported by name. One rank,
COMM_SELF."""

from __future__ import annotations

import pytest
from helpers import instance

from pldemu.ir.parser import parse_program
from pldemu.job.precheck import static_buffers
from pldemu.job.resources import job_memory
from pldemu.lowering import lower_composite_ops
from pldemu.runtime.values import Buffer, BufferTable, TensorRef

STEPS = 2000
SCRATCH_BYTES = 64 * 64 * 4

LOOP = f"""\
program per_iteration {{
  window x: fp32[1, 64]
  window y: fp32[{STEPS}, 64]

  func main() {{
    for i in parallel(0, {STEPS}, 1) {{
      scratch = tensor.create([64, 64], dtype=fp32, name="scratch")
      task core_group "stage" {{
        u = tile.load(x, [0, 0], [1, 64])
        v = tile.adds(u, 1.0)
        tile.store(v, [0, 0], scratch)
      }}
      task core_group "use" {{
        w = tile.load(scratch, [0, 0], [1, 64])
        tile.store(w, [i, 0], y)
      }}
    }}
  }}
}}
"""
"""Per iteration a [64, 64] scratch, staged by one task and read by the next (which writes its own row of y)."""

RACY = """\
program racy_scratch {
  window x: fp32[1, 8]
  window y: fp32[4, 8]

  func main() {
    for i in range(0, 4, 1) {
      scratch = tensor.create([1, 8], dtype=fp32, name="scratch")
      task core_group "stage" nodep [scratch] {
        u = tile.load(x, [0, 0], [1, 8])
        tile.store(u, [0, 0], scratch)
      }
      task core_group "use" nodep [scratch] {
        w = tile.load(scratch, [0, 0], [1, 8])
        tile.store(w, [i, 0], y)
      }
    }
  }
}
"""
"""The same with the edge between stage and use opted out (nodep): each iteration's use races its stage."""


@pytest.mark.parametrize("order", ["random", "program"])
def test_a_loop_holds_its_live_buffers_not_one_per_iteration(order: str) -> None:
    program = lower_composite_ops(parse_program(LOOP, "loop.pld"))
    with instance(program, task_order=order, race_detect=True) as inst:
        inst.local("x")[...] = 1.0
        inst.run()
        assert (inst.local("y") == 2.0).all()
        # every iteration allocated its own: without the release, STEPS of them stay until the run ends
        assert inst.created_peak <= 64 * SCRATCH_BYTES, inst.created_peak // SCRATCH_BYTES


def test_a_race_on_a_released_buffer_is_reported_by_name() -> None:
    program = lower_composite_ops(parse_program(RACY, "racy.pld"))
    with instance(program, task_order="program", race_detect=True) as inst:
        inst.run()
        reports = inst.races.check()
    assert reports and {r.buffer for r in reports} == {"scratch"}, reports


def test_a_released_index_reads_as_a_tombstone() -> None:
    import numpy as np

    from pldemu.ir import DType

    table = BufferTable([])
    buf = table.create("acc", DType.FP32, (4, 8), np.zeros((4, 8), np.float32))
    view = TensorRef(buf, (32,), None, buf.array.reshape(32))
    del buf
    assert table[0].array.nbytes == 128 and table.live_bytes == 128  # the view keeps it
    del view
    tomb: Buffer = table[0]
    assert (tomb.index, tomb.name, tomb.shape, tomb.dtype) == (0, "acc", (4, 8), DType.FP32)
    assert tomb.array.nbytes == 0 and table.live_bytes == 0 and table.peak_bytes == 128


def test_the_estimate_counts_a_loops_create_once_and_says_so() -> None:
    program = lower_composite_ops(parse_program(LOOP, "loop.pld"))
    estimate = job_memory(static_buffers(program, 1).values(), 1, False, program=program)
    declared = (64 + STEPS * 64) * 4  # x, y
    assert estimate.buffers == declared + SCRATCH_BYTES  # one live scratch, not STEPS of them
    assert estimate.repeated == ("scratch",)
    assert "made per iteration or block, counted once" in estimate.describe()
