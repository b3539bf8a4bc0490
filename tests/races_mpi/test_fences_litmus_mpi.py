"""The fences litmus suite (tests/races/fences/*.pld) across ranks, each program under ``deferred``
and ``fenced`` visibility, in fenced mode both as written and after InsertCommFence.

Each program leaves what its observer rank saw in the local tensor ``seen``; the table says, per
mode, the value expected at one element (None: the old value, i.e. NaN poison). ``deferred`` treats
every notify as a release (and a fence as nothing); ``fenced`` lands a write only at a fence, so a
missing or late fence gives the old data on every call (the ``latest`` policy: deterministic)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.ir import parse_program
from pldemu.runtime import ProgramError, ProgramInstance, RuntimeOptions

pytestmark = pytest.mark.mpi(min_size=2)

LITMUS = Path(__file__).resolve().parents[1] / "races" / "fences"
N = MPI.COMM_WORLD.Get_size()
SPIN = "spin on a cached line"
ANY = "any"
"""Timing decides (a fence after the notify lands the write while the reader may be reading)."""


@dataclass(frozen=True)
class Expect:
    observers: tuple[int, ...]
    at: tuple[int, int]
    deferred: float | str | None
    fenced: float | str | None
    inserted: float | str | None
    """With InsertCommFence (``--visibility fenced`` as run, check and stress run it)."""
    ranks: int = 2
    runs: int = 1
    """Calls of the program, back to back with no host synchronisation between them."""


EXPECT: dict[str, Expect] = {
    "mp": Expect((1,), (0, 0), 1.0, None, 1.0),
    "mp_fence": Expect((1,), (0, 0), 1.0, 1.0, 1.0),
    "mp_late_fence": Expect((1,), (0, 0), 1.0, ANY, 1.0),  # lands when the fence runs: the race detector says
    "mp_double_fence": Expect((1,), (0, 0), 1.0, 1.0, 1.0),
    "mp_atomic": Expect((1,), (0, 0), 1.0, 0.0, 1.0),
    "mp_get": Expect((0,), (0, 0), 1.0, None, 1.0),
    "mp_get_fence": Expect((0,), (0, 0), 1.0, 1.0, 1.0),
    "mp_store": Expect((1,), (0, 0), 1.0, None, 1.0),
    "mp_scalar": Expect((1,), (0, 3), 5.0, 5.0, 5.0),
    "mp_scalar_fence_only": Expect((1,), (0, 3), 5.0, 0.0, 5.0),  # a fence does not clean the line
    "mp_scalar_line1": Expect((1,), (0, 4), 5.0, 0.0, 0.0),  # the region form cleans line 0 only
    "mp_scalar_whole": Expect((1,), (0, 4), 5.0, 5.0, 5.0),
    "mp_noinv": Expect((1,), (0, 0), 1.0, None, 1.0),
    "mp_inv": Expect((1,), (0, 0), 1.0, 1.0, 1.0),
    "wrc": Expect((2,), (0, 0), 1.0, 1.0, 1.0, ranks=3),
    "two_targets": Expect((1, 2), (0, 0), 1.0, 1.0, 1.0, ranks=3),
    "same_origin": Expect((0,), (0, 0), None, None, 1.0),
    "same_origin_fence": Expect((0,), (0, 0), None, 1.0, 1.0),  # deferred: a fence is nothing, no release
    "own_stale": Expect((0,), (0, 0), 1.0, None, 1.0),  # the line filled before the rank's own tile.store
    "own_stale_inv": Expect((0,), (0, 0), 1.0, 1.0, 1.0),
    "read_flight_late": Expect((1,), (0, 0), 1.0, 1.0, 1.0),  # the bytes under latest (see below)
    "get_flight_late": Expect((1,), (0, 0), 1.0, 1.0, 1.0),
    "tload_flight_late": Expect((1,), (0, 0), 1.0, 1.0, 1.0),
    "put_src_late": Expect((1,), (0, 0), 1.0, 1.0, 1.0),
    # The first call's unfenced put is complete at its end (the kernel's tail): the next call's notify
    # publishes it, in every mode.
    "cross_call": Expect((1,), (0, 0), 1.0, 1.0, 1.0, runs=2),
    "spin": Expect((1,), (0, 0), 1.0, SPIN, SPIN),
    # The neighbour's AtomicAdd survives the Set into its line: signal cells are atomic per cell in the
    # model (the device's whole-line write-back of a Set, pto-isa#322, is not emulated).
    "set_shared_line": Expect((2,), (0, 1), 1.0, 1.0, 1.0, ranks=3),
}


def _observe(comm: MPI.Intracomm, name: str, opts: RuntimeOptions) -> tuple[float | str | None, str]:
    program = parse_program((LITMUS / f"{name}.pld").read_text(), f"{name}.pld")
    failure: ProgramError | None = None
    with ProgramInstance(program, comm, opts) as inst:
        try:
            for _ in range(EXPECT[name].runs):
                inst.run()
        except ProgramError as err:
            failure = err
        comm.Barrier()  # every rank has run (or failed) before any rank frees the windows
        value = float(inst.local("seen")[EXPECT[name].at])
    if failure is not None:
        return (SPIN if SPIN in str(failure) else "error"), str(failure)
    return (None if np.isnan(value) else value), f"seen {value}"


@pytest.mark.parametrize("mode", ["deferred", "fenced", "inserted"])
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_litmus(comm: MPI.Intracomm, name: str, mode: str) -> None:
    e = EXPECT[name]
    if e.ranks > N:
        pytest.skip(f"{name} needs {e.ranks} ranks")
    opts = RuntimeOptions(visibility="deferred" if mode == "deferred" else "fenced",
                          insert_fences=mode == "inserted", timeout=20)
    got, detail = _observe(comm, name, opts)
    want = getattr(e, mode)
    ok = comm.Get_rank() not in e.observers or want == ANY or got == want
    agree(comm, ok, f"{name} {mode}: expected {want}, got {got} ({detail})")


def test_the_random_policy_is_seeded(comm: MPI.Intracomm) -> None:
    runs = [_observe(comm, "mp", RuntimeOptions(visibility="fenced", fence_policy="random", insert_fences=False,
                                                seed=s, timeout=20))[0] for s in (1, 1, 2, 2)]
    agree(comm, comm.Get_rank() != 1 or (runs[0] == runs[1] and runs[2] == runs[3]), str(runs))


LATE = ("read_flight_late", "get_flight_late", "tload_flight_late", "put_src_late")
"""A DMA read in flight at the notify after which its source is overwritten: a remote_load, a get's source,
a tile.load of the rank's own window, a put's source."""


@pytest.mark.parametrize("name", LATE)
def test_a_read_in_flight_may_take_the_overwrites_bytes_under_the_random_policy(comm: MPI.Intracomm,
                                                                               name: str) -> None:
    """As written (no drain before the notify): under ``--fence-policy random`` the read still in flight
    at the notify takes, on some seeds, the bytes written after it, the same ones for the same seed; with
    the default passes (the toolchain's drain, or the fence after a put, completes the read first) never."""
    seeds = (*range(1, 9), 1, 2)
    seen = {insert: [_observe(comm, name, RuntimeOptions(visibility="fenced", fence_policy="random",
                                                         insert_fences=insert, seed=s, timeout=20))[0]
                     for s in seeds] for insert in (False, True)}
    replayed = seen[False][-2:] == seen[False][:2]
    ok = comm.Get_rank() != 1 or (2.0 in seen[False] and set(seen[False]) <= {1.0, 2.0} and replayed
                                  and set(seen[True]) == {1.0})
    agree(comm, ok, str(seen))


def test_every_litmus_program_has_its_expectations() -> None:
    assert sorted(p.stem for p in LITMUS.glob("*.pld")) == sorted(EXPECT)
