"""Helpers of the ``pldemu stress`` / ``pldemu run --iters`` launcher tests: small user programs as
``.pld`` text (the command itself runs through ``helpers.pldemu``).

``correct_text`` is a lowered mesh allreduce (what ``pldemu lower --collective allreduce --after-only``
prints); ``broken_text`` is the same with the epilogue (the retiring self-notify) dropped, so its
signal cells keep 2 credits per peer after every call; ``stuck_text`` deadlocks (rank 0 waits for a
credit nobody posts)."""

from __future__ import annotations

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import format_program
from pldemu.lowering import lower_composite_ops


def correct_text(size: int = 16) -> str:
    """A lowered allreduce: self-clearing, every cell 0 after each call."""
    return format_program(lower_composite_ops(collective_program(CollectiveSpec("allreduce", size=size)).program))


def broken_text(size: int = 16) -> str:
    """``correct_text`` without the epilogue's retiring notify (the ``no-epilogue`` mutant, by hand)."""
    lines = correct_text(size).splitlines()
    epilogue = [line for line in lines if "pld.system.notify(" in line and ", -" in line]
    assert len(epilogue) == 1, epilogue  # the lowering changed shape: update this helper
    return "\n".join(line for line in lines if line not in epilogue) + "\n"


STUCK = """\
program stuck {
  signal sig: int32[NR, 1]
  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    if me == 0:int32 {
      pld.system.wait(sig, [1, 0], 1:int32, cmp=Ge)
    }
  }
}
"""
"""Rank 0 waits for a credit rank 1 never posts: a deadlock in the first call."""
