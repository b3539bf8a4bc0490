"""Small hand-written programs behind the report tests (``test_reports_cli.py``): each a known bug
class whose report must name its root cause, say what is true, and point at the user's file."""

from __future__ import annotations

from mpi_launch import REPO_ROOT

EXAMPLES = REPO_ROOT / "pldemu" / "examples"


def one_short_epilogue() -> str:
    """The hand-written credit barrier of ``custom_barrier.pld`` whose retire loop stops one peer
    early: every call leaves one credit in every rank's cells, yet nothing hangs or goes negative."""
    text = (EXAMPLES / "custom_barrier.pld").read_text()
    retire = text.index("# 3. retire")
    loop = text.index("while k < nr {", retire)
    return text[:loop] + "while k < nr - 1:int32 {" + text[loop + len("while k < nr {"):]


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
