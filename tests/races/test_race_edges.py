"""Edges of the race detector (issue 22, point 7): a read repeated at one site that straddles a put
of the same rank, and a race in the very call that then hangs."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from helpers import pldemu as run_pldemu
from helpers import report as _report

from pldemu.cli.commands import run as run_cli

pldemu = partial(run_pldemu, timeout=300.0)

STRADDLE = """\
program straddle {
  signal sig: int32[NR, 1]
  window data: fp32[1, 4]
  local out: fp32[1, 4]

  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    if me == 0 {
      stage = tile.create([1, 4], dtype=fp32, mem=Vec)
      fill = tile.full([1, 4], 1.0, dtype=fp32)
      for i in range(0, 2, 1) {
        got = pld.tile.remote_load(data, 1, [0, 0], [1, 4])
        tile.store(got, [0, 0], out)
        if i == 0 {
          pld.tile.put(data, 1, fill, stage, [0, 0], [0, 0], [1, 4], atomic=None)
          RELEASE
        }
      }
      pld.system.notify(sig, 1, [0, 0], 1, op=AtomicAdd)
    }
    if me == 1 {
      pld.system.wait(sig, [0, 0], 1, cmp=Ge)
      pld.system.notify(sig, 1, [0, 0], -1, op=AtomicAdd)
    }
  }
}
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.launcher
def test_a_read_at_one_site_after_its_own_put_is_a_same_origin_race(tmp_path: Path) -> None:
    # The loop's remote_load runs once before the put (fine) and once after it (nothing completes the
    # put first): one site, two reads, only the second races.
    res = pldemu("run", _write(tmp_path, "bug.pld", STRADDLE.replace("RELEASE", "")), "-n", "2", "--races")
    assert res.returncode == run_cli.EXIT_RACES, _report(res)
    assert "races: 1 report(s)" in res.stdout, _report(res)
    assert "rank 0 write at main:16 pld.tile.put" in res.stdout and "|| rank 0 read at main:13" in res.stdout
    assert "no notify by rank 0 and no barrier between them" in res.stdout, _report(res)


@pytest.mark.launcher
def test_a_release_between_the_put_and_the_repeated_read_orders_them(tmp_path: Path) -> None:
    ok = STRADDLE.replace("RELEASE", "pld.system.notify(sig, 0, [0, 0], 1, op=AtomicAdd)")
    res = pldemu("run", _write(tmp_path, "ok.pld", ok), "-n", "2", "--races")
    assert res.returncode == 0, _report(res)
    assert "races: none" in res.stdout, _report(res)


HANG = """\
program hang {
  signal sig: int32[NR, 1]
  window data: fp32[1, 4]
  local out: fp32[1, 4]

  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    if me == 0 {
      fill = tile.full([1, 4], 7.0, dtype=fp32)
      stage = tile.create([1, 4], dtype=fp32, mem=Vec)
      pld.tile.put(data, 1, fill, stage, atomic=None)
      pld.system.wait(sig, [1, 0], 1, cmp=Ge)
    }
    if me == 1 {
      early = tile.load(data, [0, 0], [1, 4])
      pld.system.wait(sig, [0, 0], 1, cmp=Ge)
      tile.store(early, [0, 0], out)
    }
  }
}
"""


@pytest.mark.launcher
def test_a_race_in_the_call_that_hangs_is_in_the_deadlock_report(tmp_path: Path) -> None:
    # Rank 1 loads what rank 0 puts with nothing between (the race), then both wait for a notify
    # that never comes: no checkpoint is ever reached, the wait's report must name the race.
    res = pldemu("run", _write(tmp_path, "hang.pld", HANG), "-n", "2", "--races", "--timeout", "2")
    assert res.returncode == 3, _report(res)
    assert "race on data[0, 0:4] of rank 1 (4 elements): rank " in res.stderr, _report(res)
    assert "rank 0 write at main:12 pld.tile.put" in res.stderr, _report(res)
    assert "rank 1 read at main:16 early = tile.load(data, [0, 0], [1, 4])" in res.stderr, _report(res)
    assert "\nthen deadlock: rank " in res.stderr and res.stderr.count("wait-for graph") == 1, _report(res)


@pytest.mark.launcher
def test_a_hang_without_a_race_names_none(tmp_path: Path) -> None:
    text = HANG.replace("early = tile.load(data, [0, 0], [1, 4])", "early = tile.full([1, 4], 1.0, dtype=fp32)")
    res = pldemu("run", _write(tmp_path, "hang.pld", text), "-n", "2", "--races", "--timeout", "2")
    assert res.returncode == 3, _report(res)
    assert "race on" not in res.stderr and "wait-for graph" in res.stderr, _report(res)
