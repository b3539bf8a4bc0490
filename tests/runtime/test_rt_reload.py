"""A program loaded in place of another on the same instance (``ProgramInstance.load``: a prepared worker's
dispatch whose host scalars differ from the last one's) takes the call sites it had for the same calls at
the same places: a worker that alternates between two programs for hundreds of dispatches keeps the sites
of two, where it kept every loaded program's (each site holds its call's IR) and grew dispatch after
dispatch (one rank, COMM_SELF)."""

from __future__ import annotations

from helpers import instance

from pldemu.ir import NR, Program, ProgramBuilder


def _credits(k: int) -> Program:
    """Notify myself ``k``, wait for ``>= k``, retire it: only the constant ``k`` differs between two."""
    pb = ProgramBuilder("credits")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.system.notify(sig, me, [me, 0], k)
    pld.system.wait(sig, [me, 0], k, cmp="Ge")
    pld.system.notify(sig, me, [me, 0], -k)
    return pb.build()


def test_reloading_alternating_programs_keeps_their_sites() -> None:
    with instance(_credits(1)) as inst:
        inst.run()
        inst.load(_credits(2))
        inst.run()
        known = inst.sites
        assert len(known) == len({s.location.text for s in known}) == 5 + 3  # the comm ctx and rank: shared
        for k in [1, 2] * 50:
            inst.load(_credits(k))  # a new program object each time, as a dispatch unpickles it
            inst.run()
            assert inst.window("sig").read_cell(0) == 0
        assert inst.sites == known
