"""What the reports of ``pldemu run`` / ``pldemu stress`` say (issue 13): the root cause kept, wait-for
edges for hand-written layouts, the at-rest check of a single run, locations in the user's file, and
headlines that say what is true. End to end: the commands launch their own mpiexec job."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from helpers import pldemu as run_pldemu
from helpers import report as _report
from report_programs import NO_SIGNALS, RING_COLUMNS, one_short_epilogue, retired_twice, set_reset

from pldemu.job.outcome import StressOutcome

pldemu = partial(run_pldemu, timeout=300.0)


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_stress_headline_gives_the_first_failure_of_any_kind() -> None:
    out = StressOutcome("invariant", 9, 10, 0, "# rank 0 after iteration 9: nonzero", 0.1, first_iteration=1,
                        seen=("race@1", "invariant@9"))
    head = out.describe().splitlines()[0]
    assert head.startswith("# FAILED: invariant at iteration 9 (rank 0), first failure at iteration 1 (race),")
    assert head.endswith("(kinds seen: race@1, invariant@9)"), head
    same = StressOutcome("deadlock", 0, 1, 0, "x", 2.0, first_iteration=0, seen=("deadlock@0",))
    assert same.describe().splitlines()[0] == "# FAILED: deadlock at iteration 0 (rank 0), after 2.0 s"


def test_an_outcome_keeps_the_indentation_of_a_wait_for_graph() -> None:
    out = StressOutcome("deadlock", 0, 1, 0, "deadlock: x\nsummary:\n  cycle: rank 0 -> rank 0", 2.0)
    assert out.describe().splitlines()[-1] == "#     cycle: rank 0 -> rank 0"


@pytest.mark.launcher
def test_a_single_checked_run_fails_an_epilogue_one_credit_short(tmp_path: Path) -> None:
    program = _write(tmp_path, "one_short.pld", one_short_epilogue())
    res = pldemu("run", program, "-n", "3", "--invariants")
    assert res.returncode == 1, _report(res)
    assert "invariants: 3 violation(s)" in res.stdout, _report(res)
    for r in range(3):
        assert f"invariant nonzero-at-rest: signal cell credits[{(r + 2) % 3}, 0] of rank {r} is 3, not 0" in res.stdout
    assert "--no-cell-check" in res.stdout, _report(res)
    opted_out = pldemu("run", program, "-n", "3", "--invariants", "--no-cell-check")
    assert opted_out.returncode == 0, _report(opted_out)
    assert "invariants: none broken" in opted_out.stdout and "not checked" in opted_out.stdout, _report(opted_out)
    # Without --invariants a single run has no checker to fail it (and --no-cell-check means nothing).
    assert pldemu("run", program, "-n", "3", "--no-cell-check").returncode == 2


@pytest.mark.launcher
def test_a_correct_single_run_passes_the_at_rest_check() -> None:
    from report_programs import EXAMPLES

    res = pldemu("run", str(EXAMPLES / "custom_barrier.pld"), "-n", "3", "--invariants")
    assert res.returncode == 0, _report(res)
    assert "invariants: none broken" in res.stdout and "every signal cell 0 at rest" in res.stdout, _report(res)


@pytest.mark.launcher
def test_a_program_without_signals_is_not_told_a_notify_ordered_its_accesses(tmp_path: Path) -> None:
    res = pldemu("run", _write(tmp_path, "nosig.pld", NO_SIGNALS), "-n", "2", "--races")
    assert res.returncode == 0, _report(res)
    assert "races: none" in res.stdout and "notify -> wait ordered any" in res.stdout, _report(res)
    assert "was ordered by a notify -> wait" not in res.stdout, _report(res)


@pytest.mark.launcher
def test_a_stress_deadlock_prints_its_graph_once(tmp_path: Path) -> None:
    res = pldemu("stress", _write(tmp_path, "ring.pld", RING_COLUMNS), "--timeout", "2", "-n", "3")
    assert res.returncode == 3, _report(res)
    assert (res.stdout + res.stderr).count("wait-for graph") == 1, _report(res)
    assert "#         waits for sig[2, 0] >= 1" in res.stdout, _report(res)


@pytest.mark.launcher
def test_run_invariants_reports_the_credit_retired_twice_before_the_hang(tmp_path: Path) -> None:
    res = pldemu("run", _write(tmp_path, "twice.pld", retired_twice()), "-n", "3", "--invariants", "--timeout", "2")
    assert res.returncode == 3, _report(res)
    head = next(line for line in res.stderr.splitlines()
                if line.startswith("pldemu run: rank ") and "comes from a lower rank" not in line)
    assert "invariant negative-cell: signal cell credits[" in head and "went negative (-1)" in head, _report(res)
    assert "op=AtomicAdd) [twice.pld:43] (call 1)" in head, _report(res)
    assert "\nthen deadlock: rank " in res.stderr and "wait-for graph" in res.stderr, _report(res)


@pytest.mark.launcher
def test_run_invariants_reports_a_set_reset_that_wiped_a_fast_peer(tmp_path: Path) -> None:
    # The straggler resets its cells late, after its fast peers posted their next credits.
    res = pldemu("run", _write(tmp_path, "reset.pld", set_reset()), "-n", "3", "--invariants", "--timeout", "2",
                 "--straggler", "1:3000")
    assert res.returncode in (1, 3), _report(res)
    out = res.stdout + res.stderr
    assert "invariant set-and-add: signal cell credits[" in out, _report(res)
    if res.returncode == 3:  # it hung: the mixing comes first, then the deadlock
        assert out.index("invariant set-and-add") < out.index("then deadlock: rank "), _report(res)


@pytest.mark.launcher
def test_stress_classifies_the_hang_by_its_root_cause(tmp_path: Path) -> None:
    res = pldemu("stress", _write(tmp_path, "twice.pld", retired_twice()), "-n", "3", "--timeout", "2")
    assert res.returncode == 1, _report(res)  # a failure found, classified by its root cause
    assert "# FAILED: invariant at iteration 0" in res.stdout and "deadlock@0" in res.stdout, _report(res)
    assert "#   then deadlock: rank " in res.stdout, _report(res)


@pytest.mark.launcher
def test_a_ring_on_an_nr_by_2_layout_deadlocks_with_a_cycle(tmp_path: Path) -> None:
    ring = _write(tmp_path, "ring.pld", RING_COLUMNS)
    res = pldemu("run", ring, "-n", "3", "--timeout", "2")
    assert res.returncode == 3, _report(res)
    assert "cycle: rank 0 -> rank 2 -> rank 1 -> rank 0" in res.stderr, _report(res)
    assert "names no source rank" not in res.stderr, _report(res)
    checked = pldemu("run", ring, "-n", "3", "--timeout", "2", "--invariants")
    assert checked.returncode == 3, _report(checked)
    assert "cycle: rank 0 -> rank 2 -> rank 1 -> rank 0" in checked.stderr, _report(checked)
    assert "rank 0 waits on sig[2, 0]: no rank has posted to sig[2, 0]" in checked.stderr, _report(checked)


@pytest.mark.launcher
def test_reports_point_at_the_line_of_the_users_file(tmp_path: Path) -> None:
    from report_programs import EXAMPLES, RING_BUILDER
    from shared_programs import LONE_BARRIER

    race = pldemu("run", str(EXAMPLES / "early_reader.pld"), "-n", "2", "--races")
    assert race.returncode == 4, _report(race)
    assert "rank 0 write at main:12 pld.tile.put(data, 1, fill, stage, atomic=None) [early_reader.pld:19]" in race.stdout
    lowered = pldemu("run", _write(tmp_path, "lone.pld", LONE_BARRIER), "-n", "2", "--timeout", "2")
    assert lowered.returncode == 3, _report(lowered)
    assert "[lone.pld:7, lowered from pld.tensor.barrier]" in lowered.stderr, _report(lowered)
    built = pldemu("run", _write(tmp_path, "ring_stuck.py", RING_BUILDER), "-n", "2", "--timeout", "2")
    assert built.returncode == 3, _report(built)
    assert "pld.system.wait(sig, [left, 0], 1, cmp=Ge) [ring_stuck.py:11]" in built.stderr, _report(built)
    assert "[FILE:LINE] is the line of your file" in built.stderr, _report(built)


def test_the_api_forwards_no_cell_check_from_the_one_flag_definition() -> None:
    from pldemu.job.flags import RUNTIME_FLAGS, options_argv
    from pldemu.runtime.options import RuntimeOptions

    assert RUNTIME_FLAGS["--no-cell-check"].field == "cell_check"
    assert "--no-cell-check" in options_argv(RuntimeOptions(cell_check=False, invariants=True), "run")
    assert "--no-cell-check" not in options_argv(RuntimeOptions(invariants=True), "run")
    assert "--no-cell-check" in options_argv(RuntimeOptions(cell_check=False), "stress")


@pytest.mark.launcher
def test_pldemu_run_prints_fence_reports_and_notes_and_writes_them_to_the_report(tmp_path: Path) -> None:
    """End to end under --visibility fenced: a missing fence fails the run (exit 4) with its three
    lines; a useless fence is a note, printed and in --report's ``notes``, and the run passes."""
    import json

    fences = Path(__file__).resolve().parent / "fences"
    flags = ("-n", "2", "--visibility", "fenced", "--no-insert-fences", "--races")
    bug = pldemu("run", str(fences / "mp.pld"), *flags)
    assert bug.returncode == 4, _report(bug)
    line = next(x for x in bug.stdout.splitlines() if "missing fence" in x)
    assert line.index("[mp.pld:14]") < line.index("[mp.pld:15]") < line.index("[mp.pld:19]"), line
    out = tmp_path / "report.json"
    noted = pldemu("run", str(fences / "mp_double_fence.pld"), *flags, "--report", str(out))
    assert noted.returncode == 0, _report(noted)
    assert "note: system.fence at" in noted.stdout and "[mp_double_fence.pld:16] ordered nothing" in noted.stdout
    assert [n for n in json.loads(out.read_text())["notes"] if "[mp_double_fence.pld:16]" in n], out.read_text()
