"""The race detector's fence and cache reports (``race_fenced``) and lost updates, on the litmus
programs of tests/races/fences/ (and its reports/ folder: programs without a ``seen`` buffer, or
that only the detector judges): each bug as written (reported, with its lines) and fixed (not
reported), under several seeds, jitter and a straggler on either side, so that the verdict is shown
not to depend on the timing. Notes (useless or insufficient markers) likewise, pre and post.

Runs at 2 ranks only (the programs involve two ranks; more ranks add nothing but CI time)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.ir import parse_program
from pldemu.runtime import ProgramInstance, RuntimeOptions
from pldemu.runtime.instrument.races import LOST_UPDATE, MISSING_FENCE, MISSING_INVALIDATE, READ_IN_FLIGHT

pytestmark = pytest.mark.mpi(min_size=2)

LITMUS = Path(__file__).resolve().parents[1] / "races" / "fences"
N = MPI.COMM_WORLD.Get_size()

SCHEDULES = (
    {"seed": 1},
    {"seed": 2, "jitter_us": 50.0},
    {"seed": 3, "straggler": (0, 2000.0)},
    {"seed": 4, "straggler": (1, 2000.0), "fence_policy": "random"},
)
"""No perturbation, jitter, a straggler writer, a straggler reader (with seeded random landing)."""


@dataclass(frozen=True)
class Verdict:
    """What one program must give: a report of ``reason`` whose text names ``sites`` in this order
    (None: no report at all), and a note containing ``note`` and ``note_site`` (None: no note with
    ``note`` in it)."""

    reason: str | None
    sites: tuple[str, ...] = ()
    note: str = ""
    note_site: str | None = None
    modes: tuple[str, ...] = ("fenced",)


CLEAN = Verdict(None)
WITH_PASS = "+InsertCommFence"
"""A fix that is the same program with the pass's markers."""

READ_FLIGHT = Verdict(READ_IN_FLIGHT, ("[read_flight.pld:23]", "[read_flight.pld:24]", "[read_flight.pld:17]"))

PAIRS: dict[str, tuple[str, Verdict, str, Verdict]] = {
    # missing fence: the write, the notify it was still pending at, the peer's read
    "mp": ("mp", Verdict(MISSING_FENCE, ("[mp.pld:14]", "[mp.pld:15]", "[mp.pld:19]")),
           "mp_fence", Verdict(None, note="ordered nothing")),
    "late_fence": ("mp_late_fence", Verdict(MISSING_FENCE, ("[mp_late_fence.pld:14]", "[mp_late_fence.pld:15]",
                                                            "[mp_late_fence.pld:20]")),
                   "mp_fence", CLEAN),
    "atomic": ("mp_atomic", Verdict(MISSING_FENCE, ("[mp_atomic.pld:21]", "[mp_atomic.pld:22]", "[mp_atomic.pld:26]")),
               "mp_atomic" + WITH_PASS, CLEAN),
    "get": ("mp_get", Verdict(MISSING_FENCE, ("[mp_get.pld:23]", "[mp_get.pld:24]", "[mp_get.pld:17]")),
            "mp_get" + WITH_PASS, CLEAN),
    "same_origin": ("same_origin", Verdict(MISSING_FENCE, ("[same_origin.pld:14]", "[same_origin.pld:15]")),
                    "same_origin_fence", CLEAN),
    # a scalar write beyond the region cacheinvalid's line: a missing fence (still cached) and a note
    "scalar_line1": ("mp_scalar_line1",
                     Verdict(MISSING_FENCE, ("[mp_scalar_line1.pld:15]", "[mp_scalar_line1.pld:18]",
                                             "[mp_scalar_line1.pld:24]"),
                             "covers only the line of the view's base", "[mp_scalar_line1.pld:16]"),
                     "mp_scalar_whole", Verdict(None, note="covers only the line")),
    # missing cacheinvalid: the read, the access that filled its line, the wait after the fill, the write
    "noinv": ("mp_noinv", Verdict(MISSING_INVALIDATE, ("[mp_noinv.pld:25]", "[mp_noinv.pld:22]",
                                                       "[mp_noinv.pld:24]", "[mp_noinv.pld:17]")),
              "mp_inv", Verdict(None, note="dropped no cached line")),
    "noinv_pass": ("mp_noinv", Verdict(MISSING_INVALIDATE, ("[mp_noinv.pld:25]",)), "mp_noinv" + WITH_PASS, CLEAN),
    # ... after the rank's own DMA write: the read, the access that filled its line, the write
    "own_stale": ("own_stale", Verdict(MISSING_INVALIDATE, ("[own_stale.pld:15]", "[own_stale.pld:12]",
                                                            "[own_stale.pld:13]")),
                  "own_stale_inv", CLEAN),
    "own_stale_pass": ("own_stale", Verdict(MISSING_INVALIDATE, ("[own_stale.pld:15]",)),
                       "own_stale" + WITH_PASS, CLEAN),
    # ... of a signal cell (a count) whose line a scalar read filled before the wait on another cell
    "counts": ("counts_noinv", Verdict(MISSING_INVALIDATE, ("[counts_noinv.pld:24]", "[counts_noinv.pld:20]",
                                                            "[counts_noinv.pld:22]", "[counts_noinv.pld:16]")),
               "counts_inv", Verdict(None, note="dropped no cached line")),
    "counts_pass": ("counts_noinv", Verdict(MISSING_INVALIDATE, ("[counts_noinv.pld:24]",)),
                    "counts_noinv" + WITH_PASS, CLEAN),
    # a read in flight (PTOAS#711, the tload variant): the read, the notify it was in flight at, the peer's
    # overwrite; fixed by a fence between read and notify, or by the default passes (the toolchain's drain)
    "read_flight": ("read_flight", READ_FLIGHT, "read_flight_fence", CLEAN),
    "read_flight_pass": ("read_flight", READ_FLIGHT, "read_flight" + WITH_PASS, CLEAN),
    "read_flight_fence_pass": ("read_flight", READ_FLIGHT, "read_flight_fence" + WITH_PASS, CLEAN),
    # ... a put's source read: the put, the notify, the peer's overwrite of the source window
    "put_src_flight": ("put_src_flight",
                       Verdict(READ_IN_FLIGHT, ("[put_src_flight.pld:14]", "[put_src_flight.pld:15]",
                                                "[put_src_flight.pld:21]")),
                       "put_src_fence", CLEAN),
    # lost update: the two Sets, in every visibility mode
    "set_clear": ("set_clear_late", Verdict(LOST_UPDATE, ("[set_clear_late.pld:14]", "[set_clear_late.pld:20]"),
                                            modes=("eager", "deferred", "fenced")),
                  "set_clear_early", Verdict(None, modes=("eager", "deferred", "fenced"))),
    # notes
    "double_fence": ("mp_double_fence", Verdict(None, note="ordered nothing", note_site="[mp_double_fence.pld:16]"),
                     "mp_fence", Verdict(None, note="ordered nothing")),
    "useless_inv": ("mp_dma_inv", Verdict(None, note="dropped no cached line", note_site="[mp_dma_inv.pld:21]"),
                    "mp_inv", Verdict(None, note="dropped no cached line")),
    "shared_line": ("store_shared_line", Verdict(None, note="pto-isa#322", note_site="[store_shared_line.pld:11]"),
                    "store_own_line", Verdict(None, note="pto-isa#322")),
}
"""Per case: the bug (reported, or noted), its fix (not), each as a litmus name (+ the pass)."""


def _verdict(comm: MPI.Intracomm, name: str, opts: RuntimeOptions) -> tuple[list[str], list[str], list[str]]:
    """(report reasons, report texts, notes) of one call of litmus ``name`` (``+InsertCommFence``: with the pass)."""
    name, passed = name.removesuffix(WITH_PASS), name.endswith(WITH_PASS)
    path = LITMUS / f"{name}.pld"
    if not path.exists():
        path = LITMUS / "reports" / path.name  # the programs that only the detector judges
    program = parse_program(path.read_text(), path.name)
    with ProgramInstance(program, comm, replace(opts, insert_fences=passed)) as inst:
        inst.run()
        assert inst.races is not None
        reports = inst.races.check()
        notes = inst.races.notes()
    return [r.reason for r in reports], [r.describe() for r in reports], notes


def _in_order(text: str, parts: tuple[str, ...]) -> bool:
    at = 0
    for part in parts:
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


def _judge(v: Verdict, reasons: list[str], texts: list[str], notes: list[str]) -> str:
    """Empty if the run gave what ``v`` says, else what was wrong."""
    if v.reason is None and reasons:
        return f"expected no report, got {texts}"
    if v.reason is not None and (reasons != [v.reason] or not _in_order(texts[0], v.sites)):
        return f"expected one {v.reason} report naming {v.sites} in order, got {texts}"
    noted = [n for n in notes if v.note and v.note in n]
    if v.note and v.note_site is None and noted:
        return f"expected no note with {v.note!r}, got {noted}"
    if v.note_site is not None and not any(v.note_site in n for n in noted):
        return f"expected a note with {v.note!r} at {v.note_site}, got {notes}"
    return ""


@pytest.mark.skipif(N != 2, reason="two-rank litmus programs: run at 2 ranks (more add only CI time)")
@pytest.mark.parametrize("case", sorted(PAIRS))
def test_fence_reports_do_not_depend_on_timing(comm: MPI.Intracomm, case: str) -> None:
    """The bug's verdict and its fix's, under every schedule of SCHEDULES."""
    bug, bug_verdict, fix, fix_verdict = PAIRS[case]
    bad = []
    for name, v in ((bug, bug_verdict), (fix, fix_verdict)):
        for mode in v.modes:
            for sched in SCHEDULES:
                opts = RuntimeOptions(race_detect=True, visibility=mode, insert_fences=False, timeout=20,
                                      **sched)
                problem = _judge(v, *_verdict(comm, name, opts))
                if problem:
                    bad.append(f"{name} {mode} {sched}: {problem}")
    agree(comm, not bad, "\n".join(bad))
