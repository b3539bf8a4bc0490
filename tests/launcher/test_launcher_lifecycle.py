"""The launcher never leaves a job behind: SIGTERM / SIGHUP / SIGINT to ``pldemu``, a rank killed,
``mpiexec`` killed; every way the job ends maps to a documented exit code with a message."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import SPIN, processes_with

from pldemu.job.launch import DOCUMENTED_EXITS, JOB_FAILED, PID_DIR_VAR, job_exit_code, kill_group, wait_exit

pytestmark = pytest.mark.launcher

STARTUP = 60.0
"""Seconds the ranks of a 2-rank job may take to start on a loaded 2-core machine."""


PRIVATE_SHM = os.geteuid() == 0 and shutil.which("unshare") is not None
"""As root, each job gets a /dev/shm of its own (a directory bind-mounted in a private mount
namespace; ``exec`` keeps the launcher's pid), so what it leaves there can be listed afterwards."""


@pytest.fixture(autouse=True)
def _reap(tmp_path: Path) -> Iterator[None]:
    """Whatever a failed test left (a launcher that did not die, its spinning ranks: the program never
    ends and its job may run an hour) is killed, so one failure does not slow the rest of the suite."""
    yield
    for pid in processes_with(str(tmp_path)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start(tmp_path: Path) -> subprocess.Popen[str]:
    prog = tmp_path / "spin.pld"
    prog.write_text(SPIN)
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the launcher's pid directory lands here
    cmd = [sys.executable, "-m", "pldemu", "run", str(prog), "-n", "2"]
    if PRIVATE_SHM:
        (tmp_path / "shm").mkdir()
        cmd = ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /dev/shm && exec "$@"', str(tmp_path / "shm"),
               *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_default_signals)


def _default_signals() -> None:
    """The launcher under test gets the signals it is sent: a pytest started in the background of a
    non-interactive shell (``cmd &``) ignores SIGINT, and an ignored signal stays ignored in its children."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


def rank_pids(tmp_path: Path, n: int = 2) -> dict[int, int]:
    """Wait until every rank has announced its pid (it is running the program then)."""
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        files = list(tmp_path.glob("pldemu-pids-*/rank*.pid"))
        pids = {int(f.stem[4:]): int(f.read_text() or 0) for f in files}
        if len(pids) == n and all(pids.values()):
            return pids
        time.sleep(0.1)
    raise AssertionError("the ranks did not start")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def assert_gone(pids: dict[int, int], tmp_path: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in pids.values()):
        time.sleep(0.1)
    assert not [p for p in pids.values() if alive(p)], "a rank outlived the launcher"
    assert not list(tmp_path.glob("pldemu-pids-*")), "the launcher left its pid directory"
    if PRIVATE_SHM:
        assert not list((tmp_path / "shm").glob("mpich_*")), "the job left a segment in /dev/shm"


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_signal_to_the_launcher_kills_the_job(tmp_path: Path, sig: signal.Signals, code: int):
    proc = start(tmp_path)
    pids = rank_pids(tmp_path)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert f"pldemu: interrupted by {sig.name}: the job and its processes were killed" in err
    assert "Traceback" not in err
    assert_gone(pids, tmp_path)


def test_signal_before_the_job_starts_leaves_nothing(tmp_path: Path):
    proc = start(tmp_path)
    time.sleep(0.3)  # still importing or starting mpiexec
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode in (143, -signal.SIGTERM), err
    assert "Traceback" not in err
    time.sleep(1)
    assert not list(tmp_path.glob("pldemu-pids-*/rank*.pid")) or not any(
        alive(int(f.read_text() or 0)) for f in tmp_path.glob("pldemu-pids-*/rank*.pid"))
    if PRIVATE_SHM:
        assert not list((tmp_path / "shm").glob("mpich_*")), "the job left a segment in /dev/shm"


def test_signal_while_the_ranks_start_leaves_no_segment(tmp_path: Path):
    # The ranks announce themselves right after MPI_Init, before they unlink MPICH's segment names
    # themselves: killed now, only the launcher can remove them.
    proc = start(tmp_path)
    pids = rank_pids(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert_gone(pids, tmp_path)


def test_a_rank_killed_by_sigkill_is_job_failed_with_its_pid(tmp_path: Path):
    proc = start(tmp_path)
    pids = rank_pids(tmp_path)
    os.kill(pids[1], signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == JOB_FAILED, err
    assert "pldemu: the job failed: a process of the job died of signal 9 (SIGKILL)" in err
    assert f"rank 1 pid {pids[1]}" in err
    assert_gone(pids, tmp_path)


@pytest.mark.parametrize(
    ("rc", "text"),
    [(-9, "mpiexec itself was killed by signal 9 (SIGKILL)"), (255, "lost a process of the job"),
     (11, "died of signal 11 (SIGSEGV)"), (77, "mpiexec exited 77")],
)
def test_every_abnormal_end_maps_to_job_failed(rc: int, text: str, tmp_path: Path):
    log = tmp_path / "err.txt"
    with log.open("w") as err:
        assert job_exit_code(rc, {0: 100}, err) == JOB_FAILED
    assert text in log.read_text() and "rank 0 pid 100" in log.read_text()


def test_documented_codes_pass_through(tmp_path: Path):
    with (tmp_path / "err.txt").open("w") as err:
        assert [job_exit_code(rc, {}, err) for rc in DOCUMENTED_EXITS] == list(DOCUMENTED_EXITS)
    assert (tmp_path / "err.txt").read_text() == ""


@pytest.mark.parametrize("timeout", [None, 60.0])
def test_wait_exit_returns_the_exit_code(timeout: float | None):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert wait_exit(proc, timeout) == 7 and proc.returncode == 7
    assert wait_exit(proc, timeout) == 7  # already reaped: Popen's own answer


def test_wait_exit_times_out_and_leaves_the_process_running():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(proc, 0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


STRAYS = """\
import os, subprocess, sys, time
# A stand-in for hydra's proxy: a session of its own (outside mpiexec's group), a "rank" below it
# that writes a file once mpiexec is gone, and mpiexec (this process) exiting first, as it does
# when a rank calls MPI_Abort.
if os.fork() == 0:
    os.setsid()
    subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(1.0); open(sys.argv[1], 'w').close()",
                      sys.argv[1]])
    time.sleep(30)
    os._exit(0)
time.sleep(0.3)
"""


@pytest.mark.parametrize("timed_out", [False, True], ids=["ended", "killed"])
def test_kill_group_ends_what_outlived_mpiexec(tmp_path: Path, timed_out: bool):
    """Every process that carries the job's marker is gone when kill_group returns, also those no
    longer below mpiexec nor in its group: the late "rank" never writes."""
    marker, late = str(tmp_path / "pids"), tmp_path / "late"
    proc = subprocess.Popen([sys.executable, "-c", STRAYS, str(late)], start_new_session=True,
                            env={**os.environ, PID_DIR_VAR: marker})
    if not timed_out:
        proc.wait()  # mpiexec ended by itself; its proxy and rank run on
    else:
        time.sleep(0.2)
    strays = [p for p in processes_with(str(late)) if p != proc.pid]
    assert strays, "the stand-in job did not start"
    kill_group(proc, grace=5.0, marker=marker)
    assert not [p for p in strays if alive(p)]
    time.sleep(1.2)
    assert not late.exists(), "a process of the job ran on after kill_group returned"
