"""The memory estimate refuses a job that cannot fit; a failed allocation is one message, exit 3,
and leaves nothing in /dev/shm (issue 9 item 2)."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pldemu.ir import DType
from pldemu.job.precheck import StaticBuffer
from pldemu.job.resources import GIB, MIB, RANK_OVERHEAD, ResourceError, check_fits, job_memory


def buffers(elements: int) -> list[StaticBuffer]:
    return [StaticBuffer("x", DType.FP32, (1, elements)), StaticBuffer("s", DType.INT32, (4, 1), True)]


def test_estimate_counts_buffers_ranks_and_race_shadow():
    plain = job_memory(buffers(1024), 4, races=False)
    assert plain.buffers == 4096 + 16 and plain.shadow == 0
    assert plain.total == 4 * (RANK_OVERHEAD + 2 * plain.buffers)
    raced = job_memory(buffers(1024), 4, races=True)
    assert raced.shadow == 4 * (8 + 8) and raced.total > plain.total  # the snapshots of 4 cells, nothing more
    checked = job_memory(buffers(1024), 4, races=True, invariants=True)
    assert checked.shadow == 4 * (8 + 8) + 4 * (4 + 4)  # + the writers and posters shadows


def test_race_estimate_does_not_grow_with_the_square_of_the_ranks():
    """The removed shadow-clock window held NR histories of 8 releases per cell on every rank: 74 KiB per
    rank for an [NR, 1] signal at 8 ranks, growing as NR^2 per cell. The detector now keeps one INT64
    snapshot per cell (and rank 0's copy of every rank's): a constant per cell."""
    signal = [StaticBuffer("s", DType.INT32, (512, 1), True)]
    small, large = job_memory(signal, 2, races=True), job_memory(signal, 64, races=True)
    assert small.shadow == large.shadow == 512 * 16
    assert "8 KiB checker shadows" in large.describe()


def test_refused_with_the_estimate_unless_forced():
    est = job_memory(buffers(4_000_000_000), 2, races=False)
    with pytest.raises(ResourceError) as err:
        check_fits(est, available=24 * GIB)
    text = str(err.value)
    assert "about 59.8 GiB (2 ranks x (14.9 GiB of buffers x 2 + 120 MiB per process))" in text
    assert "24.0 GiB available" in text and "--force" in text
    check_fits(est, force=True, available=24 * GIB)
    check_fits(job_memory(buffers(1024), 8, races=True), available=24 * GIB)
    with pytest.raises(ResourceError, match="1000 ranks"):
        check_fits(job_memory(buffers(16), 1000, races=False), available=24 * GIB)
    check_fits(job_memory(buffers(16), 8, races=False), available=2 * GIB)
    with pytest.raises(ResourceError):
        check_fits(job_memory(buffers(16), 8, races=False), available=512 * MIB)


def test_a_refusal_says_whether_the_job_could_ever_fit_this_machine() -> None:
    """A job larger than the whole machine needs fewer ranks or smaller buffers; one that fits the machine
    but not what other processes leave now would run alone: the refusal says which, with both sizes."""
    est = job_memory(buffers(GIB // 2), 2, races=False)
    with pytest.raises(ResourceError) as never:
        check_fits(est, available=6 * GIB, total=8 * GIB)
    assert "6.0 GiB available (8.0 GiB in all)" in str(never.value) and "fewer ranks" in str(never.value)
    with pytest.raises(ResourceError) as busy:
        check_fits(est, available=6 * GIB, total=64 * GIB)
    text = str(busy.value)
    assert "6.0 GiB available now: other processes hold the rest of its 64.0 GiB" in text
    assert "would fit alone" in text and "--force" in text and "fewer ranks" not in text


def run(tmp_path: Path, text: str, *argv: str, address_space: int | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "p.pld"
    path.write_text(text)

    def limit() -> None:
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return subprocess.run([sys.executable, "-m", "pldemu", "run", str(path), *argv], capture_output=True, text=True,
                          timeout=300, check=False, preexec_fn=limit)


def big(elements: int) -> str:
    return f"program big {{\n  window data: fp32[1, {elements}]\n  func main() {{\n    k = 1\n  }}\n}}\n"


@pytest.mark.launcher
def test_cli_refuses_a_job_larger_than_the_machine(tmp_path: Path):
    out = run(tmp_path, big(4_000_000_000), "-n", "2")
    assert out.returncode == 2 and out.stdout == ""
    assert "the job needs about 59.8 GiB" in out.stderr and len(out.stderr.strip().splitlines()) == 1


PRIVATE_SHM = ("unshare", "--mount", "sh", "-c", 'mount -t tmpfs tmpfs /dev/shm && "$@"; rc=$?; '
               'ls /dev/shm >&2; exit $rc', "sh")
"""Run a command with a /dev/shm of its own (root): what it leaves there is its own, whatever else
the machine is running; the listing ends stderr."""


@pytest.mark.launcher
@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() != 0
                    or shutil.which("unshare") is None, reason="a private /dev/shm needs root and unshare")
def test_failed_allocation_is_one_message_per_rank_exit_3_nothing_left(tmp_path: Path):
    path = tmp_path / "p.pld"
    path.write_text(big(450_000_000))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * GIB, 3 * GIB))

    out = subprocess.run([*PRIVATE_SHM, sys.executable, "-m", "pldemu", "run", str(path), "-n", "2"],
                         capture_output=True, text=True, timeout=300, check=False, preexec_fn=limit)
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stderr.count("cannot allocate the buffers of program big (1717 MiB per rank): out of memory") >= 1
    assert "Traceback" not in out.stderr and "error stack" not in out.stderr
    assert "mpich_shm" not in out.stderr, out.stderr


def test_the_estimate_counts_tiles_and_names_the_biggest_buffers() -> None:
    """A kernel's tile variables count once each (their latest tile), LOCAL tensors as buffers; a refusal says the
    estimate and the three biggest buffers."""
    from pldemu.ir import ProgramBuilder
    from pldemu.job.precheck import static_buffers
    from pldemu.job.resources import ResourceError, check_fits, job_memory, tile_bytes

    pb = ProgramBuilder("m")
    big = pb.local("recv_x", "bf16", [3072, 4096])
    pb.local("scratch", "fp32", [256, 256])
    pb.local("counts", "int32", [32])
    fb = pb.function()
    fb.pld.tile.load(big, [0, 0], [1, 4096], hint="row")
    fb.pld.tile.create([64, 64], "fp32", hint="acc")
    program = pb.build()
    assert tile_bytes(program) == 4096 * 2 + 64 * 64 * 4
    est = job_memory(static_buffers(program, 2).values(), 2, races=False, tiles=tile_bytes(program))
    assert [n for n, _ in est.biggest] == ["recv_x", "scratch", "counts"]
    assert est.per_rank == RANK_OVERHEAD + 2 * (3072 * 4096 * 2 + 256 * 256 * 4 + 32 * 4) + est.tiles
    with pytest.raises(ResourceError, match=r"of tiles .*biggest buffers: recv_x 24 MiB, scratch 256 KiB, counts"):
        check_fits(est, available=est.total)
    check_fits(est, force=True, available=1)
