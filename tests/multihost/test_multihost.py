"""pldemu across simulated hosts (``--sim-hosts``, ``scripts/hosts.sh``): every check still holds when
the ranks are on separate network namespaces joined by TCP only.

Two layouts: 2 hosts x 2 ranks (the hybrid windows: shared memory inside a host, MPI RMA between
hosts) and 3 hosts x 1 rank (pure RMA). Every run asserts that the hosts were really separate (the
``# N hosts:`` line the job prints: ``MPI.COMM_TYPE_SHARED`` groups equal the processor-name groups,
one distinct name per host) and leaves nothing behind (no namespace, bridge, process or /dev/shm
entry; failed and killed runs included). Payload runs also assert that the bytes crossed the veths.

Needs root and ``ip netns`` (CI has both); skipped with the reason otherwise. The namespace runs are
few and combined (about 1 s of set-up each; ``stress --all-mutants`` is one run per mutant).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from mpi_launch import REPO_ROOT, job_env

HERE = Path(__file__).resolve().parent
LAYOUTS = {"2x2": (2, 2), "3x1": (3, 1)}
MARK_VAR = "PLDEMU_MULTIHOST_TEST"
"""Set to a fresh token in every job these tests start: a process still carrying it afterwards is a
leftover (every rank inherits the launcher's environment through hydra)."""


def _why_not() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "simulated hosts need root (network namespaces and a bridge)"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "simulated hosts need iproute2 ('ip netns') and util-linux ('unshare')"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"'ip netns' does not work here: {probe.stderr.strip()}"
    return None


REASON = _why_not()
needs_hosts = pytest.mark.skipif(REASON is not None, reason=REASON or "")
pytestmark = pytest.mark.launcher


@dataclass
class HostRun:
    """One pldemu command on simulated hosts: exit code, output, the hosts.sh report, wall time."""

    rc: int
    out: str
    hosts: list[dict[str, str]]
    wall: float
    arrived: list[tuple[float, str]]
    """Every output line with the second (since the start) it arrived."""

    def first(self, text: str) -> float:
        """When the first line containing ``text`` arrived."""
        return next(t for t, line in self.arrived if text in line)

    def tx(self) -> int:
        return sum(int(h["tx_bytes"]) for h in self.hosts)

    def rx(self, host: int) -> int:
        return int(self.hosts[host - 1]["rx_bytes"])

    def text(self) -> str:
        return f"exit {self.rc} after {self.wall:.1f}s\n{self.out[-20000:]}"


def _carriers(token: str) -> list[int]:
    """Pids of processes whose environment holds ``MARK_VAR=token``."""
    found = []
    needle = f"{MARK_VAR}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if re.match(r"pld\d+h\d+", line)}


def _bridges() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True,
                         check=False).stdout
    return set(re.findall(r"pld\d+br", out))


def assert_nothing_left(token: str, shm: Path, hosts: Sequence[dict[str, str]]) -> None:
    """No process of the run, none of its namespaces or its bridge, nothing in its /dev/shm. The run's
    namespaces are the ones its hosts report names (``pld<pid>h<i>``, the hosts script's pid), its bridge
    ``pld<pid>br``: another run's, on the same machine, is not looked at."""
    deadline = time.monotonic() + 5.0
    while _carriers(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _carriers(token), f"processes of the run are still alive: {_carriers(token)}"
    assert hosts, "the run's hosts report is missing: its namespaces cannot be told from other runs'"
    namespaces = {host["ns"] for host in hosts}
    assert not _namespaces() & namespaces, f"namespaces left: {sorted(_namespaces() & namespaces)}"
    bridges = {re.sub(r"h\d+$", "br", ns) for ns in namespaces}
    assert not _bridges() & bridges, f"bridges left: {sorted(_bridges() & bridges)}"
    assert not list(shm.iterdir()), f"/dev/shm entries left: {sorted(p.name for p in shm.iterdir())}"


def pldemu_hosts(argv: Sequence[str], layout: str, *, timeout: float = 600.0,
                 stop_after: str | None = None) -> HostRun:
    """Run ``pldemu ARGV --sim-hosts LAYOUT`` and check it left nothing behind. ``stop_after``: send
    the launcher SIGTERM once this text appears in the output (a killed run must clean up too)."""
    token = uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="pldemu-mh-") as tmp:
        report, shm = Path(tmp) / "hosts.txt", Path(tmp) / "shm"
        shm.mkdir()
        env = job_env({MARK_VAR: token, "PLDEMU_HOSTS_REPORT": str(report)})
        # The launcher gets a /dev/shm of its own (a bind of an empty folder, in a mount namespace of
        # its own; /dev/shm is a private mount, /run/netns stays shared): whatever this run leaves
        # there is this run's, whatever other jobs on the machine do. Each simulated host mounts a
        # fresh tmpfs of its own on top.
        cmd = ["unshare", "--mount", "--propagation", "unchanged", "sh", "-c", 'mount --bind "$0" /dev/shm && exec "$@"',
               str(shm), sys.executable, "-m", "pldemu", *argv, "--sim-hosts", layout]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None
        lines: list[tuple[float, str]] = []
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line))
            if stop_after is not None and stop_after in line:
                proc.send_signal(signal.SIGTERM)
                stop_after = None
            if time.monotonic() - start > timeout:
                proc.kill()
        rc = proc.wait()
        wall = time.monotonic() - start
        hosts = [dict(zip(row.split()[0::2], row.split()[1::2], strict=True))
                 for row in report.read_text().splitlines()] if report.is_file() else []
        assert_nothing_left(token, shm, hosts)
    return HostRun(rc, "".join(line for _, line in lines), hosts, wall, lines)


def assert_separate_hosts(run: HostRun, layout: str) -> None:
    """The job's ``# N hosts: NAME [ranks], ...`` line: one distinct name per simulated host, and the
    shared-memory groups are the hosts (the line says so unless they differ)."""
    nhosts, per_host = LAYOUTS[layout]
    found = re.search(r"^# (\d+) hosts: (.*)$", run.out, re.M)
    assert found, run.text()
    assert int(found.group(1)) == nhosts and "differ" not in found.group(2), found.group(0)
    groups = re.findall(r"(\S+) \[([\d, ]+)\]", found.group(2))
    assert [name for name, _ in groups] == [f"pldemu-h{i}" for i in range(1, nhosts + 1)], found.group(0)
    expect = [list(range(h * per_host, (h + 1) * per_host)) for h in range(nhosts)]
    assert [[int(r) for r in ranks.split(",")] for _, ranks in groups] == expect, found.group(0)
    assert len(run.hosts) == nhosts, run.text()


@needs_hosts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_check_all_across_hosts(layout: str) -> None:
    """Every collective, back to back and verified, with the windows auto picks for the layout; the
    allgather's payload alone (every rank's block to every rank of another host) crossed the veths."""
    iters, size = 4, 1024
    run = pldemu_hosts(["check", "all", "--iters", str(iters), "--size", str(size)], layout)
    assert run.rc == 0, run.text()
    assert_separate_hosts(run, layout)
    windows = "hybrid" if LAYOUTS[layout][1] > 1 else "rma"
    headers = re.findall(r"^# pldemu check: .*windows=(\w+)", run.out, re.M)
    assert len(headers) >= 8 and set(headers) == {windows}, run.text()
    assert "FAIL" not in run.out, run.text()
    nhosts, per_host = LAYOUTS[layout]
    n = nhosts * per_host
    allgather = iters * n * (n - per_host) * size * 4
    assert run.tx() >= allgather, f"{run.tx()} bytes on the veths, the allgather alone moved {allgather}"


@needs_hosts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_stress_catches_every_mutant_across_hosts(layout: str) -> None:
    # --iters 40 bounds the control (broadcast-read-complete runs its whole budget); every mutant is
    # caught within a few iterations (its median is 1-5 on this machine).
    run = pldemu_hosts(["stress", "--all-mutants", "--iters", "40"], layout, timeout=900)
    assert run.rc == 0, run.text()
    rows = re.findall(r"^(\S+)\s+(yes \d+/\d+|passed)\s+(\S+)\s.*\s(ok|\S+)$", run.out, re.M)
    assert len(rows) >= 12, run.text()
    for name, caught, kind, result in rows:
        assert result == "ok", f"{name}: {caught} {kind} {result}\n{run.text()}"
    assert re.search(r"# (\d+) of \1 entries as expected", run.out), run.text()
    assert any(kind == "race" for _, _, kind, _ in rows) and any(kind == "deadlock" for _, _, kind, _ in rows)


@needs_hosts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_race_between_hosts_and_payload_on_the_wire(layout: str) -> None:
    """Rank 0 (first host) puts 256 KiB per call into the last rank (last host), which reads early:
    the race is reported between ranks of different hosts, and the last host's veth received at
    least the payload."""
    iters = 3
    run = pldemu_hosts(["run", str(HERE / "cross_host_race.pld"), "--races", "--iters", str(iters)], layout)
    assert run.rc == 4, run.text()
    assert_separate_hosts(run, layout)
    last = LAYOUTS[layout][0] * LAYOUTS[layout][1] - 1
    races = [line for line in run.out.splitlines() if f"race on data[0, 2:4] of rank {last} " in line]
    assert races and all("rank 0 write" in r and f"rank {last} read" in r for r in races), run.text()
    payload = iters * 64 * 1024 * 4
    assert run.rx(LAYOUTS[layout][0]) >= payload, f"last host received {run.rx(LAYOUTS[layout][0])} B < {payload}"


@needs_hosts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_deadlock_graph_names_both_hosts(layout: str) -> None:
    run = pldemu_hosts(["run", str(HERE / "cross_host_cycle.pld"), "--iters", "2", "--timeout", "3"], layout)
    assert run.rc == 3, run.text()
    assert_separate_hosts(run, layout)
    assert "wait-for graph" in run.out and "cycle: rank 0 -> rank 1" in run.out, run.text()
    nhosts, per_host = LAYOUTS[layout]
    for r in range(nhosts * per_host):
        assert re.search(rf"^[ *]rank {r} @pldemu-h{r // per_host + 1}: TIMED_OUT", run.out, re.M), run.text()


@needs_hosts
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rank_raising_on_one_host_ends_the_job(layout: str) -> None:
    """The last rank raises while every other rank waits (with a 60 s wait timeout): MPI_Abort ends
    the whole job across hosts within 10 s of the error."""
    run = pldemu_hosts(["run", str(HERE / "last_rank_raises.pld"), "--iters", "2", "--timeout", "60"], layout)
    assert run.rc == 3, run.text()
    assert "WindowAccessError" in run.out and "out of range" in run.out, run.text()
    assert run.wall - run.first("WindowAccessError") < 10, run.text()


@needs_hosts
def test_killed_run_leaves_nothing() -> None:
    """SIGTERM to the launcher mid-run: exit 143, and (checked by pldemu_hosts) nothing left."""
    run = pldemu_hosts(["check", "allreduce", "--iters", "100000", "--block", "10"], "2x2",
                       stop_after="# pldemu check:")
    assert run.rc == 128 + signal.SIGTERM, run.text()


def test_hosts_usage_errors() -> None:
    """A -n the hosts contradict is refused before anything starts (no root needed for that part)."""
    bad = subprocess.run([sys.executable, "-m", "pldemu", "check", "barrier", "--sim-hosts", "2x2", "-n", "3"],
                         capture_output=True, text=True, cwd=REPO_ROOT, env=job_env(), check=False)
    assert bad.returncode == 2 and "-n 3 but 2x2 simulated hosts run 4 ranks" in bad.stderr, bad.stderr
