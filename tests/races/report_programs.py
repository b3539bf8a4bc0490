"""Small hand-written programs behind the report tests (``test_reports_cli.py``): each a known bug
class whose report must name its root cause, say what is true, and point at the user's file."""

from __future__ import annotations

from mpi_launch import REPO_ROOT

EXAMPLES = REPO_ROOT / "pldemu" / "examples"


def _barrier_with_retire(old: str, new: str) -> str:
    """``custom_barrier.pld`` (three credit barriers in a row) with ``old`` replaced by ``new`` once,
    in its retire phase."""
    text = (EXAMPLES / "custom_barrier.pld").read_text()
    at = text.index(old, text.index("# 3. retire"))
    return text[:at] + new + text[at + len(old):]


def one_short_epilogue() -> str:
    """The barrier whose retire loop stops one peer early: every call leaves one credit in every
    rank's cells, yet nothing hangs or goes negative."""
    return _barrier_with_retire("while k < nr {", "while k < nr - 1:int32 {")


def retired_twice() -> str:
    """The barrier that retires every consumed credit twice: the cells go negative in the first barrier,
    and the second one hangs (a peer's credit only brings the cell back to 0)."""
    return _barrier_with_retire("-1:int32, op=AtomicAdd", "-2:int32, op=AtomicAdd")


def set_reset() -> str:
    """The barrier that resets a consumed credit with ``Set 0`` instead of retiring it: a fast peer's
    credit for the next barrier, arrived before the reset, is wiped and its waiter hangs."""
    return _barrier_with_retire("-1:int32, op=AtomicAdd", "0:int32, op=Set")


NO_SIGNALS = """\
program nosig {
  window data: fp32[1, 4]
  local out: fp32[1, 4]
  func main() {
    t = tile.load(data, [0, 0], [1, 4])
    tile.store(t, [0, 0], out)
  }
}
"""
"""Every rank reads its own window: no signal, no conflict."""

RING_COLUMNS = """\
program ring_columns {
  # Cell [src, 0] counts "ready" credits from rank src, [src, 1] its "done" credits.
  signal sig: int32[NR, 2]
  window data: fp32[1, 4]
  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    left = (me + nr - 1:int32) % nr
    right = (me + 1:int32) % nr
    pld.system.wait(sig, [left, 0], 1:int32, cmp=Ge)
    pld.system.notify(sig, right, [me, 0], 1:int32, op=AtomicAdd)
    pld.system.notify(sig, me, [left, 0], -1:int32, op=AtomicAdd)
  }
}
"""
"""A ring on a hand-written ``[NR, 2]`` layout that waits before it notifies: every rank waits for a
"ready" credit its left neighbour never posts, a cycle through every rank."""

RING_BUILDER = """\
from pldemu.ir import NR, ProgramBuilder

pb = ProgramBuilder("ring_stuck")
sig = pb.signal("sig", [NR, 2])
fb = pb.function("main")
pld = fb.pld
ctx = pld.system.get_comm_ctx(sig, hint="ctx")
me = pld.system.rank(ctx, hint="me")
nr = pld.system.nranks(ctx, hint="nr")
left = fb.let("left", (me + nr - 1) % nr)
pld.system.wait(sig, [left, 0], 1)
pld.system.notify(sig, (me + 1) % nr, [me, 0], 1)
program = pb.build()
"""
"""``RING_COLUMNS`` written with the Python builder: its wait is line 11 of the file."""
