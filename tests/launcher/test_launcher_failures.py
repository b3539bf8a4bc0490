"""One message per failure (issue 22): a failure several ranks hit is printed once, naming the ranks
that hit it (with the first rank's full message when theirs differ); no MPI library abort chatter
reaches the user; the exit codes stay the documented ones."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import report

from pldemu.job.launch import MPI_ABORT_CHATTER, RankFailure, _forward, failure_report, rank_set_text
from pldemu.runtime.errors import failure_key

HINT = "(locations are FUNC:LINE in the executed program as printed"
CHATTER = "Abort(3) on node 1 (rank 1 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 3) - process 1\n"


def _oob(rank: int) -> RankFailure:
    return RankFailure(rank, f"WindowAccessError: main:7 tile.store(t, [5, 0], x): rank {rank} -> peer {rank}",
                       "pldemu run: ", "WindowAccessError at main:7 tile.store(t, [5, 0], x)", "(hint)")


def test_rank_sets_are_written_as_runs() -> None:
    assert rank_set_text([2]) == "rank 2"
    assert rank_set_text([3, 0, 1, 2]) == "ranks 0-3"
    assert rank_set_text([0, 1, 5, 6, 7, 9]) == "ranks 0, 1, 5-7, 9"


def test_one_failure_hit_by_every_rank_is_printed_once_with_the_first_message() -> None:
    text = failure_report([_oob(r) for r in (3, 1, 0, 2)])
    assert text.splitlines() == [
        "pldemu run: ranks 0-3: WindowAccessError at main:7 tile.store(t, [5, 0], x); rank 0's message:",
        "pldemu run: rank 0: WindowAccessError: main:7 tile.store(t, [5, 0], x): rank 0 -> peer 0",
        "(hint)",
    ]


def test_identical_messages_are_one_line_and_distinct_failures_stay_apart() -> None:
    same = [RankFailure(r, "ProgramError: main:6 k = 4 // 0: ZeroDivisionError", "# ") for r in (0, 1)]
    deadlock = [RankFailure(3, "deadlock: ... (the wait-for report comes from a lower rank)", "# ", "D", full=False),
                RankFailure(2, "deadlock: rank 2 waited\nwait-for graph ...", "# ", "D")]
    lines = failure_report([*same, *deadlock]).splitlines()
    assert lines[0] == "# ranks 0, 1: ProgramError: main:6 k = 4 // 0: ZeroDivisionError"
    # The rank with the full report is the one shown, even though a higher rank had the first line.
    assert lines[1:] == ["# ranks 2, 3: D; rank 2's message:", "# rank 2: deadlock: rank 2 waited",
                         "wait-for graph ..."]
    assert failure_report([_oob(2)]).splitlines()[0].startswith("pldemu run: rank 2: WindowAccessError")


def test_messages_without_a_location_that_differ_only_by_rank_are_one_failure() -> None:
    errs = [RuntimeError(f"rank {r}: the window could not be mapped (rank {r} of 4)") for r in range(4)]
    keys = {failure_key(e) for e in errs}
    assert keys == {"RuntimeError: rank #: the window could not be mapped (rank # of 4)"}
    text = failure_report([RankFailure(r, f"RuntimeError: {e}", "# ", failure_key(e)) for r, e in enumerate(errs)])
    assert text.startswith("# ranks 0-3: ") and text.count("\n") == 1, text  # one group: its header, rank 0's line
    assert "rank 0: the window" in text and not any(f"rank {r}: the window" in text for r in (1, 2, 3))
    assert failure_key(RuntimeError("disk full")) != failure_key(RuntimeError("disk quota"))


def test_the_launcher_drops_the_mpi_abort_line_and_keeps_the_rest() -> None:
    assert MPI_ABORT_CHATTER.match(CHATTER)
    sink = io.StringIO()
    _forward(io.BytesIO(f"before\n{CHATTER}Abort(3) is not MPICH's line\n".encode()), sink)
    assert sink.getvalue() == "before\nAbort(3) is not MPICH's line\n"


OOB = """\
program oob {
  window x: fp32[2, 8]
  func main() {
    me = pld.system.rank(pld.system.get_comm_ctx(x))
    t = tile.full([1, 8], 1.0, dtype=fp32)
    if me RANKS {
      tile.store(t, [me * 0 + 5, 0], x)
    }
  }
}
"""


def _run(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "p.pld"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "pldemu", "run", str(path), *args], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.launcher
def test_an_out_of_bounds_store_every_rank_hits_is_printed_once(tmp_path: Path) -> None:
    res = _run(tmp_path, OOB.replace("RANKS", ">= 0"), "-n", "4")
    assert res.returncode == 3, report(res)
    assert "pldemu run: ranks 0-3: WindowAccessError at main:8 tile.store(t, [(me * 0) + 5, 0], x)" in res.stderr
    assert res.stderr.count("dim 0 covers [5, 6) outside [0, 2)") == 1, report(res)
    assert "rank 0 -> peer 0 on window 'x'" in res.stderr and res.stderr.count(HINT) == 1, report(res)
    assert "MPI_Abort" not in res.stderr + res.stdout, report(res)


@pytest.mark.launcher
def test_a_failure_on_one_rank_names_that_rank_only(tmp_path: Path) -> None:
    res = _run(tmp_path, OOB.replace("RANKS", "== 2"), "-n", "4")
    assert res.returncode == 3, report(res)
    assert res.stderr.startswith("pldemu run: rank 2: WindowAccessError: main:8"), report(res)
    assert "ranks " not in res.stderr and res.stderr.count("dim 0 covers") == 1, report(res)
    assert "MPI_Abort" not in res.stderr + res.stdout, report(res)


RING = """\
program stuck {
  signal sig: int32[NR, 1]
  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    pld.system.wait(sig, [(me + 1) % nr, 0], 1:int32, cmp=Ge)
  }
}
"""


@pytest.mark.launcher
def test_a_deadlock_of_every_rank_is_one_report_naming_them(tmp_path: Path) -> None:
    res = _run(tmp_path, RING, "-n", "3", "--timeout", "2")
    assert res.returncode == 3, report(res)
    # Which ranks had timed out when the first report ended the job depends on timing (usually all).
    assert re.search(r"^pldemu run: (ranks [0-2, -]+: DeadlockError: a wait timed out; rank \d's message:$|rank \d: "
                     r"deadlock: )", res.stderr, re.M), report(res)
    assert res.stderr.count("wait-for graph") == 1 and "comes from a lower rank" not in res.stderr, report(res)
    assert "MPI_Abort" not in res.stderr + res.stdout, report(res)
