"""Pure parts of the runtime: the wait-for analysis, stage pieces, the launch helpers, `pldemu run` input
errors (no MPI job is started by these tests)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pldemu.cli import main
from pldemu.job.launch import in_mpi_job, job_rank, mpiexec_command, pldemu_argv
from pldemu.runtime.status import (
    CMP_EQ,
    CMP_GE,
    UNKNOWN,
    RankState,
    RankStatus,
    WaitTarget,
    format_report,
    source_rank,
)
from pldemu.runtime.values import region, stage_pieces
from pldemu.windows import WindowAccessError


def _blocked(rank: int, src: int, nranks: int, state: RankState = RankState.WAITING, cmp: int = CMP_GE,
             observed: int = 0) -> tuple[RankStatus, WaitTarget]:
    status = RankStatus(rank, state, 1, 7, 0, src, 1, cmp, observed, int(time.time() * 1000))
    return status, WaitTarget("sig", (src, 0), (nranks, 1), observed)


def _idle(rank: int, state: RankState) -> RankStatus:
    return RankStatus(rank, state, 1, -1, 0, 0, 0, CMP_GE, UNKNOWN, 0)


def test_source_rank_follows_the_mesh_and_ring_cell_addressing() -> None:
    assert source_rank((4, 1), (2, 0), 4) == 2  # mesh [NR, 1]: cell [src, 0]
    assert source_rank((6, 4), (3, 1), 4) == 1  # ring [2*(NR-1), NR]: cell [round, src]
    assert source_rank((4,), (3,), 4) == 3
    assert source_rank((5, 3), (1, 1), 4) is None


def test_report_finds_a_cycle_and_who_is_blocked_behind_it() -> None:
    n = 4
    rows = [_blocked(0, 1, n), _blocked(1, 2, n, RankState.TIMED_OUT), _blocked(2, 1, n), _blocked(3, 0, n)]
    statuses = [s for s, _ in rows]
    targets = {s.rank: t for s, t in rows}
    text, primary = format_report(1, statuses, lambda site: f"main:{site} wait", targets, 5.0)
    assert primary
    assert "*rank 1: TIMED_OUT run 1 at main:7 wait" in text
    assert "waits for sig[2, 0] >= 1, observed 0" in text and "-> waits for rank 2" in text
    assert "cycle: rank 1 -> rank 2 -> rank 1 (each waits for a credit the next has not posted)" in text
    assert "ranks 0, 3 are blocked behind the cycle" in text and "every rank is blocked" in text
    # A higher rank that also timed out leaves the printing to the lowest one.
    assert format_report(3, statuses, str, targets, 5.0)[1] is False


def test_report_names_the_missing_credit_and_an_eq_wait_that_overshot() -> None:
    n = 3
    waiting, target = _blocked(0, 1, n, RankState.TIMED_OUT)
    eq, eq_target = _blocked(2, 0, n, cmp=CMP_EQ, observed=3)
    statuses = [waiting, _idle(1, RankState.DONE), eq]
    text, _ = format_report(0, statuses, str, {0: target, 2: eq_target}, 5.0)
    assert "rank 1: DONE      run 1" in text
    assert ("missing credit: rank 0 waits for rank 1 on sig[1, 0] >= 1, but rank 1 is DONE (run 1): "
            "it finished its run") in text
    assert "rank 2 is blocked behind that in turn" in text
    assert "rank 2: Eq wait for 1 but sig[0, 0] is already 3: it can never match" in text


def test_a_satisfied_wait_is_a_stalled_rank_not_a_wait_for_edge() -> None:
    # Issue 9: rank 2 was stopped (kill -STOP) after its credit arrived; rank 3 waits for rank 2.
    n = 4
    stalled, t2 = _blocked(2, 3, n, observed=3)
    waiting, t3 = _blocked(3, 2, n, RankState.TIMED_OUT)
    statuses = [_idle(0, RankState.DONE), _idle(1, RankState.DONE), stalled, waiting]
    text, _ = format_report(3, statuses, str, {2: t2, 3: t3}, 3.0)
    assert "waits for sig[3, 0] >= 1, observed 3" in text
    assert "satisfied: this rank is stalled or descheduled, not missing a credit" in text
    assert "cycle: " not in text
    assert "rank 2: its wait on sig[3, 0] is satisfied (observed 3): it is stalled or descheduled" in text
    assert "-> waits for rank 2" in text  # rank 3's own edge stays


def test_stage_pieces_tile_the_region_in_order() -> None:
    pieces = stage_pieces((3, 10), (2, 4))
    assert pieces[:3] == [((0, 0), (2, 4)), ((0, 4), (2, 4)), ((0, 8), (2, 2))]
    assert len(pieces) == 6 and sum(a * b for _, (a, b) in pieces) == 30
    assert stage_pieces((2, 3, 5), (1, 8)) == [((i, j, 0), (1, 1, 5)) for i in range(2) for j in range(3)]
    assert stage_pieces((9,), (1, 4)) == [((0,), (4,)), ((4,), (4,)), ((8,), (1,))]


@pytest.mark.parametrize("view", [(4, 6), (24,), (2, 3, 4)])
def test_region_accepts_exactly_the_boxes_inside_the_view(view: tuple[int, ...]) -> None:
    """``region`` (with its unrolled 2-D path) against the definition: every box of offsets and
    extents in [-1, dim + 1] is sliced iff it lies inside the view, and its slices select it."""
    import itertools

    import numpy as np

    arr = np.arange(24).reshape(view)
    ranges = [range(-1, d + 2) for d in view]
    for offsets in itertools.product(*ranges):
        for extent in itertools.product(*ranges):
            inside = all(o >= 0 and n >= 0 and o + n <= d for o, n, d in zip(offsets, extent, view, strict=True))
            if not inside:
                with pytest.raises(WindowAccessError, match="region offsets"):
                    region("tile.load", 0, 0, "tile 't'", view, offsets, extent)
                continue
            got = arr[region("tile.load", 0, 0, "tile 't'", view, offsets, extent)]
            want = arr[tuple(slice(o, o + n) for o, n in zip(offsets, extent, strict=True))]
            assert got.shape == extent and (got == want).all()


def test_launch_helpers() -> None:
    cmd = mpiexec_command(3, ["python", "x.py"])
    assert Path(cmd[0]).name.startswith("mpiexec")
    assert cmd[cmd.index("-n") + 1] == "3" and cmd[-2:] == ["python", "x.py"]
    assert pldemu_argv(["run", "p.pld"]) == [sys.executable, "-m", "mpi4py", "-m", "pldemu", "run", "p.pld"]
    assert not in_mpi_job({}) and in_mpi_job({"PMI_RANK": "0"}) and in_mpi_job({"OMPI_COMM_WORLD_SIZE": "2"})
    assert job_rank({"PMI_RANK": "2"}) == 2 and job_rank({}) is None
    with pytest.raises(ValueError):
        mpiexec_command(0, [])


def test_launcher_side_imports_do_not_initialise_mpi() -> None:
    code = ("import sys, pldemu.runtime, pldemu.job.launch, pldemu.runtime.options, pldemu.cli.commands.run; "
            "from pldemu.runtime import RuntimeOptions; RuntimeOptions(); "
            "sys.exit(1 if 'mpi4py.MPI' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=120).returncode == 0


def test_run_rejects_bad_input_with_exit_2_and_no_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    assert main(["run", str(tmp_path / "missing.pld"), "-n", "2"]) == 2
    assert "pldemu run: error:" in capsys.readouterr().err
    bad = tmp_path / "bad.pld"
    bad.write_text("program broken {\n  window w: fp32[4\n}\n")
    assert main(["run", str(bad), "-n", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and "Traceback" not in err
    unlowerable = tmp_path / "int_allreduce.pld"
    unlowerable.write_text("program p {\n  window t: int32[1, 8]\n  signal s: int32[NR, 1]\n"
                           "  func main() {\n    t = pld.tensor.allreduce(t, s, op=Sum, mode=mesh)\n  }\n}\n")
    assert main(["run", str(unlowerable), "-n", "2"]) == 2
    err = capsys.readouterr().err
    assert "cannot lower" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:  # argparse refuses the value itself
        main(["run", str(unlowerable), "-n", "2", "--timeout", "0"])
    assert exit_.value.code == 2 and "--timeout: expected a positive number, got '0'" in capsys.readouterr().err


def test_blocking_waits_option_picks_the_wait_back_off() -> None:
    """``RuntimeOptions.blocking_waits`` is the one switch of the kernel sleeps of ``pld.system.wait``."""
    from pldemu.mpi import DEFAULT_POLICY, TIMED_POLICY
    from pldemu.runtime.machine import Machine
    from pldemu.runtime.options import RuntimeOptions

    assert Machine(0, 1, RuntimeOptions(), []).wait_policy is DEFAULT_POLICY
    assert Machine(0, 1, RuntimeOptions(blocking_waits=False), []).wait_policy is TIMED_POLICY
    with pytest.raises(ValueError, match="blocking_waits"):
        RuntimeOptions(blocking_waits=1)  # type: ignore[arg-type]
