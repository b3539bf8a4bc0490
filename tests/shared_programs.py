"""Small hand-written programs shared by the single-process suites and the multi-rank ones (one
definition for ``tests/races`` and ``tests/races_mpi``; ``tests/`` is on sys.path)."""

from __future__ import annotations

from pldemu.ir import NR, Program, ProgramBuilder


def self_sync_program() -> Program:
    """Every rank alone, at any rank count: a put into my own window, a notify/wait on my own cell, a
    load/store, a get back, then the retiring notify (the cell is back at 0 after each call)."""
    pb = ProgramBuilder("single")
    sig = pb.signal("sig", [NR, 1])
    data = pb.window("data", "fp32", [2, 8])
    out = pb.local("out", "fp32", [1, 8])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    stage = pld.tile.create([1, 8], "fp32")
    pld.tile.put(data, me, pld.tile.full([1, 8], 2.0, "fp32"), stage, [0, 0], [0, 0], [1, 8])
    pld.system.notify(sig, me, [0, 0], 1)
    pld.system.wait(sig, [0, 0], 1)
    pld.tile.store(pld.tile.load(data, [0, 0], [1, 8]), [1, 0], data)
    pld.tile.get(out, me, data, stage, [0, 0], [1, 0], [1, 8])
    pld.system.notify(sig, me, [0, 0], -1)
    return pb.build()


LONE_BARRIER = """\
program lone_barrier {
  signal sig: int32[NR, 1]
  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    if me == 0:int32 {
      pld.tensor.barrier(sig)
    }
  }
}
"""
"""Only rank 0 enters the barrier (line 7): it hangs inside the lowered recipe (the report tests of
``tests/races`` and the source-origin tests of ``tests/ir``)."""
