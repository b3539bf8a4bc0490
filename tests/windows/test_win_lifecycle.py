"""Allocation and free: context managers, use after free, /dev/shm hygiene."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import agree
from mpi4py import MPI
from shm_probe import shm_mappings  # the probe program's own reader (same directory)

from pldemu.windows import NotifyOp, WindowFreedError, WindowSet, allocate_window

HERE = Path(__file__).resolve().parent


@pytest.mark.mpi
def test_use_after_free(comm: MPI.Intracomm, backend: str) -> None:
    r = comm.Get_rank()
    w = allocate_window(comm, "uaf", 8, np.int32, backend=backend, signal=True)
    assert not w.freed
    w.free()
    w.free()  # idempotent, and not collective the second time
    assert w.freed and "freed" in repr(w)
    uses = {
        "put": lambda: w.put(r, 8, 0, np.zeros(1, np.int32)),
        "get": lambda: w.get(r, 8, 0, 1),
        "remote_load": lambda: w.remote_load(r, 8, 0, 1),
        "notify": lambda: w.notify(r, 0, 1, NotifyOp.AtomicAdd),
        "wait": lambda: w.wait(0, 0, timeout=0.0),
        "read_cell": lambda: w.read_cell(0),
        "local": lambda: w.local,
        "local_view": lambda: w.local_view((2, 4)),
        "sync": lambda: w.sync(),
    }
    for op, use in uses.items():
        with pytest.raises(WindowFreedError, match=rf"^{op}: rank {r}: window 'uaf' has been freed"):
            use()
    # Introspection stays available after free.
    assert (w.name, w.shape, w.backend) == ("uaf", (8,), backend)


@pytest.mark.mpi
def test_context_managers_free(comm: MPI.Intracomm, backend: str) -> None:
    with allocate_window(comm, "ctx", 4, np.float64, backend=backend) as w:
        assert not w.freed
    assert w.freed
    with WindowSet(comm, backend=backend) as ws:
        a = ws.allocate("a", 3, np.float32)
        b = ws.allocate("b", 3, np.int32, signal=True)
        assert ws.backend == backend and len(ws) == 2 and "a" in ws and ws["b"] is b
        assert [x.name for x in ws] == ["a", "b"]
        with pytest.raises(ValueError, match="already exists"):
            ws.allocate("a", 3, np.float32)
        assert set(ws.stats()) == {"a", "b"}
    assert ws.freed and a.freed and b.freed
    ws.free()
    with pytest.raises(WindowFreedError):
        ws.allocate("c", 1, np.float32)
    with pytest.raises(WindowFreedError):
        ws["a"]


@pytest.mark.mpi
def test_free_on_exception_in_with_block(comm: MPI.Intracomm, backend: str) -> None:
    """An exception raised on all ranks inside ``with`` still frees collectively."""
    with pytest.raises(RuntimeError, match="boom"), WindowSet(comm, backend=backend) as ws:
        w = ws.allocate("exc", 2, np.float64)
        raise RuntimeError("boom")
    assert w.freed


@pytest.mark.mpi
def test_bad_allocation_arguments(comm: MPI.Intracomm, backend: str) -> None:
    """Invalid arguments raise on every rank before any window exists."""
    with pytest.raises(ValueError, match="signal windows are INT32"):
        allocate_window(comm, "bad", 4, np.float32, backend=backend, signal=True)
    with pytest.raises(ValueError, match="negative extent"):
        allocate_window(comm, "bad", (2, -1), np.float32, backend=backend)
    with pytest.raises(ValueError, match="cannot live"):
        allocate_window(comm, "bad", 2, object, backend=backend)
    with pytest.raises(ValueError, match="does not fit"):
        allocate_window(comm, "bad", 2, np.int8, backend=backend, fill=1000)
    with pytest.raises(ValueError, match="non-empty"):
        allocate_window(comm, "", 2, np.int8, backend=backend)


@pytest.mark.mpi
def test_dev_shm_released_after_free(comm: MPI.Intracomm, backend: str) -> None:
    """Segments mapped for windows are unmapped and gone from /dev/shm after free."""
    before = shm_mappings()
    with WindowSet(comm, backend=backend) as ws:
        for i in range(3):
            ws.allocate(f"shm{i}", (64, 64), np.float64)
        ws.allocate("shm-sig", 16, np.int32, signal=True)
        during = shm_mappings()
    comm.Barrier()
    after = shm_mappings()
    ours = during - before
    left_mapped = ours & after
    left_files = sorted(p for p in ours if os.path.exists(p))
    agree(comm, not left_mapped and not left_files, f"still mapped {left_mapped}, files {left_files}")


@pytest.mark.launcher
def test_no_dev_shm_leftovers_after_job() -> None:
    """Whole job: every /dev/shm file a rank had mapped is gone after exit."""
    from mpi_launch import run_mpi

    result = run_mpi(3, [sys.executable, str(HERE / "shm_probe.py")], timeout=300)
    assert result.returncode == 0 and not result.timed_out, result.report()
    mapped = {line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("SHM ")}
    assert any("/dev/shm/" in p for p in mapped), result.report()  # the probe did map something
    leftovers = sorted(p for p in mapped if os.path.exists(p))
    assert not leftovers, f"left behind in /dev/shm: {leftovers}\n{result.report()}"
