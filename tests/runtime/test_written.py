"""Written-ness is tracked, not inferred from the poison fill (issue 22, point 6): a window that holds
NaN because the program wrote NaN is not "never written"; an FP8-E8M0 / UINT8 window nobody wrote
(its 0xFF fill is the NaN scale byte, or 255) is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import instance, report
from helpers import pldemu as run_pldemu

from pldemu.harness.run import buffer_summary as _summary
from pldemu.ir import parse_program
from pldemu.runtime.instrument.written import WriteTracker, unwritten_elements

PROGRAM = """\
program written {
  window nan_copy: fp32[1, 4]
  window untouched: fp32[1, 4]
  window scales: fp8e8m0[1, 4]
  window bytes: uint8[1, 4]
  window half: fp32[2, 4]
  window pushed: fp32[1, 4]
  local src: fp32[1, 4]

  func main() {
    me = pld.system.rank(pld.system.get_comm_ctx(half))
    nr = pld.system.nranks(pld.system.get_comm_ctx(half))
    t = tile.load(src, [0, 0], [1, 4])
    tile.store(t, [0, 0], nan_copy)
    tile.store(tile.full([1, 4], 2.0, dtype=fp32), [1, 0], half)
    st = tile.create([1, 4], dtype=fp32, mem=Vec)
    pld.tile.put(pushed, (me + 1) % nr, t, st, atomic=None)
  }
}
"""


def test_unwritten_elements_merge_what_every_rank_wrote() -> None:
    parts = [{"x": [(0, 2)]}, {"x": [(1, 5)], "y": [(0, 3)]}, {}]
    assert unwritten_elements(parts, {"x": 8, "y": 3, "z": 4}) == {"x": 3, "y": 0, "z": 4}


def test_the_tracker_records_stores_and_puts_by_target() -> None:
    with instance(parse_program(PROGRAM)) as inst:
        tracker = WriteTracker(0, 1)
        inst.add_monitor(tracker)
        inst.run()
        (mine,) = tracker.by_target()
    assert mine == {"nan_copy": [(0, 4)], "half": [(4, 8)], "pushed": [(0, 4)]}
    sizes = {"nan_copy": 4, "untouched": 4, "half": 8}
    assert unwritten_elements([mine], sizes) == {"nan_copy": 0, "untouched": 4, "half": 4}


def test_the_summary_says_never_written_only_when_nothing_was() -> None:
    nan = np.full((1, 4), np.nan, np.float32)
    assert _summary(nan, 0).startswith("all 4 NaN crc32=")
    assert _summary(nan, 4).startswith("never written (all 4 elements hold the initial fill)")
    assert " nan=2 unwritten=2 " in _summary(np.array([1.0, 2.0, np.nan, np.nan], np.float32), 2)
    assert _summary(np.full(4, 255, np.uint8), 4).startswith("never written")
    assert _summary(np.full(4, 255, np.uint8), 0).startswith("sum=1020 min=255 max=255 crc32=")


@pytest.mark.launcher
def test_the_run_report_tells_written_nan_from_never_written(tmp_path: Path) -> None:
    path = tmp_path / "written.pld"
    path.write_text(PROGRAM)
    res = run_pldemu("run", str(path), "-n", "2", timeout=300.0)
    assert res.returncode == 0, report(res)
    lines = res.stdout.splitlines()

    def rows(buffer: str) -> list[str]:
        at = next(i for i, line in enumerate(lines) if line.strip().endswith(f" {buffer}"))
        return [lines[at + 1].strip(), lines[at + 2].strip()]

    for r, row in enumerate(rows("nan_copy")):  # the program copied NaN in: written
        assert row.startswith(f"rank {r}: all 4 NaN crc32="), report(res)
    for name in ("untouched", "scales", "bytes", "src"):  # nobody wrote them, whatever their fill
        assert all("never written" in row for row in rows(name)), (name, report(res))
    assert all("unwritten=4 " in row and "nan=4" in row for row in rows("half")), report(res)
    assert all(row.split(": ", 1)[1].startswith("all 4 NaN crc32=") for row in rows("pushed")), report(res)
    assert "never written?" not in res.stdout, report(res)
