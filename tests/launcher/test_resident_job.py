"""Resident jobs (``pldemu.pool.resident``): ranks that keep windows, signals, checkers and resident
tensors between dispatches. Each program here counts: every call adds one credit to the next rank's
signal cell and copies its own cell into a local ``seen``, so what a call sees says what the windows held
before it (kept, reset or fresh)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pldemu.ir import Program, ProgramBuilder
from pldemu.pool.resident import Dispatch, Progress, ResidentJob, ResidentJobEnded
from pldemu.runtime.options import RuntimeOptions

pytestmark = pytest.mark.launcher

OPTIONS = RuntimeOptions(timeout=10.0, race_detect=True)


def counting(wait_for: int = 1, retire: bool = False) -> Program:
    """Add 1 to the next rank's cell, wait until mine holds ``wait_for``, record it in ``seen``; with
    ``retire``, take the credit back (AtomicAdd of its negative) after reading ``data``."""
    pb = ProgramBuilder("counting")
    sig = pb.signal("sig", [1, 1])
    data = pb.window("data", "int32", [1, 8])
    seen = pb.local("seen", "int32", [1, 8])
    x = pb.local("x", "int32", [1, 8])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me, nr = pld.system.rank(ctx), pld.system.nranks(ctx)
    peer = fb.let("peer", (me + 1) % nr)
    pld.tile.put(data, peer, x, pld.tile.create([1, 8], "int32"))
    pld.system.notify(sig, peer, [0, 0], 1, op="AtomicAdd")
    pld.system.wait(sig, [0, 0], wait_for, cmp="Ge")
    got = pld.tile.load(data, [0, 0], [1, 8])
    pld.tile.store(got, [0, 0], seen)
    pld.tensor.write(seen, [0, 7], pld.tensor.read(sig, [0, 0]))
    if retire:
        pld.system.notify(sig, me, [0, 0], -1, op="AtomicAdd")
    return pb.build()


def _inputs(n: int, k: int) -> list[dict[str, np.ndarray]]:
    return [{"x": np.full((1, 8), 100 * k + r, np.int32)} for r in range(n)]


def _call(job: ResidentJob, program: Program, k: int, windows: str, blocking: bool = True) -> int:
    return job.dispatch(Dispatch("p", program, _inputs(job.ranks, k), [["seen"]] * job.ranks, windows=windows,
                                 blocking=blocking))


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_kept_windows_accumulate_and_reset_or_fresh_ones_do_not(ranks: int) -> None:
    """On kept windows the counter goes on (call k waits for k + 1: another program of the same buffers,
    run on the same windows); on reset or fresh ones every call starts from 0."""
    for windows in ("keep", "reset", "fresh"):
        job = ResidentJob(ranks, OPTIONS, timeout=60)
        try:
            for k in range(3):
                want = k + 1 if windows == "keep" else 1
                result = job.result(_call(job, counting(wait_for=want), k, windows))
                assert result.ok, result.describe_failure()
                for r in range(ranks):
                    seen = result.buffers[r]["seen"]
                    assert seen[0, 7] == want and seen[0, 0] == 100 * k + (r - 1) % ranks, (windows, k, r, seen)
        finally:
            job.close()


def test_a_counter_restarting_every_call_on_kept_windows_is_reported_on_the_second_call() -> None:
    job = ResidentJob(2, OPTIONS, timeout=60)
    try:
        first = job.result(_call(job, counting(), 0, "keep"))
        assert first.ok, first.describe_failure()
        second = job.result(_call(job, counting(), 1, "keep"))
        assert second.exit_code in (1, 4), second.describe_failure()
        assert second.races, second.describe_failure()
        assert all("(call 2)" in line for line in second.races)
    finally:
        job.close()


def test_retiring_each_credit_is_clean_over_many_calls_under_jitter_and_deferred_visibility() -> None:
    for options in (RuntimeOptions(timeout=10.0, race_detect=True, jitter_us=50, seed=3),
                    RuntimeOptions(timeout=10.0, race_detect=True, visibility="deferred", seed=5)):
        job = ResidentJob(3, options, timeout=60)
        try:
            for k in range(12):
                result = job.result(_call(job, counting(retire=True), k, "keep"))
                assert result.ok, result.describe_failure()
                assert [int(b["seen"][0, 0]) for b in result.buffers] == [100 * k + (r - 1) % 3 for r in range(3)]
        finally:
            job.close()


def test_submitted_calls_overlap_and_their_races_come_at_the_check() -> None:
    """Without a fence between them, call 2's put into a peer's data can meet call 1's read of it."""
    job = ResidentJob(2, OPTIONS, timeout=60)
    try:
        program = counting(retire=True)
        first, second = (_call(job, program, k, "keep", blocking=False) for k in range(2))
        assert job.result(first).ok and job.result(second).ok
        verdict = job.check()
        assert verdict.exit_code == 4 and verdict.races, verdict.describe_failure()
    finally:
        job.close()


def test_resident_tensors_stay_in_the_job_and_go_in_and_out_of_buffers() -> None:
    job = ResidentJob(2, OPTIONS, timeout=60)
    try:
        job.alloc("w", 1, (1, 8), np.dtype(np.int32), np.arange(8, dtype=np.int32).reshape(1, 8))
        d = Dispatch("p", counting(retire=True), _inputs(2, 0), [["seen"], []], resident_in={1: {"x": "w"}},
                     resident_out={1: {"seen": "w"}})
        result = job.result(job.dispatch(d))
        assert result.ok, result.describe_failure()
        assert list(result.buffers[0]["seen"][0, :7]) == list(range(7))  # rank 1 sent the resident tensor
        assert job.read("w", 1, np.dtype(np.int32))[0, 7] == 1  # and its seen went back into it
        job.free("w")
    finally:
        job.close()


def test_a_deadlock_ends_the_job_with_its_report_and_later_requests_are_refused() -> None:
    job = ResidentJob(2, RuntimeOptions(timeout=2.0), timeout=60)
    try:
        result = job.result(_call(job, counting(wait_for=2), 0, "keep"))
        assert result.exit_code == 3 and result.deadlock is not None, result.describe_failure()
        with pytest.raises(ResidentJobEnded):
            _call(job, counting(), 1, "keep")
    finally:
        assert job.close() is None


def test_each_queued_request_gets_the_whole_timeout_from_when_the_job_serves_it() -> None:
    """A prepared worker pipelines its dispatches: the wait for the last one starts while earlier ones are
    served, so its deadline restarts each time the job finishes a request (a 39-dispatch MoE layer was
    killed for the sum of its dispatches)."""
    progress = Progress(timeout=10.0, head=0, deadline=10.0)
    assert not progress.expired(0, 9.0)
    assert not progress.expired(1, 10.5)  # request 0 answered at 10.5: request 1 has until 20.5
    assert not progress.expired(2, 20.0)  # and request 2 until 30.0
    assert not progress.expired(2, 29.9)
    assert progress.expired(2, 30.1)
    assert Progress(timeout=10.0, head=3, deadline=10.0).expired(3, 10.1)  # one stuck request: killed


def test_a_dispatch_s_files_go_once_its_result_is_taken() -> None:
    """Each dispatch's inputs, program and outputs live in a folder of their own until its result is made:
    a worker dispatching for hours keeps none of them (they held every dispatch's inputs on disk)."""
    job = ResidentJob(2, OPTIONS, timeout=60)
    try:
        for k in range(3):
            result = job.result(_call(job, counting(retire=True), k, "keep"))
            assert result.ok and result.buffers[1]["seen"][0, 0] == 100 * k, result.describe_failure()
        pending = [_call(job, counting(retire=True), k, "keep", blocking=False) for k in range(3, 5)]
        assert sum(p.is_dir() for p in (job.folder / "data").iterdir()) == 2
        for index in pending:
            job.result(index)
        assert job.check().races  # the overlapping submits race; a check's result leaves the job's own files
        assert [p.name for p in (job.folder / "data").iterdir()] == []
    finally:
        job.close()


LAUNCHER = """
import sys, time
from pldemu.pool.resident import ResidentJob
from pldemu.runtime.options import RuntimeOptions
job = ResidentJob(2, RuntimeOptions(timeout=10.0), timeout=60)
print(job.folder, flush=True)
time.sleep(600)
"""


def _servers(folder: str) -> list[int]:
    """The live processes whose command line names ``folder`` (the job's ranks and its mpiexec)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and folder.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_killed_launcher_ends_its_idle_resident_job() -> None:
    """SIGKILL (the out-of-memory killer's) leaves the launcher no chance to close its job: rank 0 sees its
    stdin end and the job aborts, instead of holding its ranks' memory while waiting for requests for ever."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
    try:
        assert launcher.stdout is not None
        folder = launcher.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while len(_servers(folder)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_servers(folder)) >= 3, "the job never started"
        time.sleep(1.0)  # past the warm back-off: the ranks wait in the idle one
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 30
        while _servers(folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _servers(folder)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"the job outlived its launcher: {left}"
