"""The race detector and its options on one rank (COMM_SELF): what gets recorded and how the clock
moves. (Monitors, instrumentation off and a closed instance, bodies that hold at any rank count, are in
tests/races_mpi/test_race_monitors.py and run here on COMM_SELF too.)"""

from __future__ import annotations

import pytest
from helpers import instance
from shared_programs import self_sync_program

from pldemu.runtime import RuntimeOptions
from pldemu.runtime.instrument.races import CHECKPOINT_ROUNDS


def test_detector_records_window_accesses_and_moves_its_clock() -> None:
    with instance(self_sync_program(), race_detect=True) as inst:
        det = inst.races
        assert det is not None
        assert det.vc == (1,)
        inst.run()
        # Two releases (notify +1, notify -1), each ticks my own entry after merging.
        assert det.vc == (3,)
        kinds = sorted({(key[4], key[5]) for key in det._log})
        assert len(kinds) == 4  # put (write), load (read), store (write), get source (read)
        inst.local("data")[...] = 0
        det.host_access("data", write=True, where="inputs")
        det.host_access("out", write=True)  # a rank-local buffer: ignored
        det.host_access("sig", write=False)  # a signal: ignored
        assert det.pending == 5
        assert det.check() == []  # one rank cannot race with itself
        assert det.pending == 0 and det.vc == (4,)  # the checkpoint joins (and ticks)
        with pytest.raises(KeyError):
            det.host_access("nope", write=True)


def test_a_wait_on_my_own_credits_resolves_exactly() -> None:
    with instance(self_sync_program(), race_detect=True) as inst:
        det = inst.races
        assert det is not None
        inst.run()
        # Only the self-notifies touched the cell: the replay knows them, nothing remote to acquire.
        assert det.check() == []
        assert det.exact_acquires == 1 and det.coarse_acquires == 0  # the wait needed only my own credit


def test_a_checkpoint_costs_its_fixed_number_of_rounds() -> None:
    # Each round needs every rank scheduled: on shared cores they, not the computation, are the
    # checkpoint's cost (docs/benchmarks.md, issue 23), so a change must not add one silently.
    with instance(self_sync_program(), race_detect=True) as inst:
        det = inst.races
        assert det is not None
        for records in (True, False):  # a checkpoint with nothing to check costs the same
            if records:
                inst.run()
            before = det._bounded.rounds
            assert det.check() == []
            assert det._bounded.rounds - before == CHECKPOINT_ROUNDS == 2


def test_options_are_validated() -> None:
    assert RuntimeOptions().race_detect is False and RuntimeOptions().trace is None
    with pytest.raises(ValueError, match="race_detect"):
        RuntimeOptions(race_detect=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trace"):
        RuntimeOptions(trace="")
    with pytest.raises(ValueError, match="trace"):
        RuntimeOptions(trace=3)  # type: ignore[arg-type]


