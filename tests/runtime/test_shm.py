"""MPI's named /dev/shm segments: a process unlinks the names it maps, and only those."""

from __future__ import annotations

import mmap
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pldemu.runtime.shm import mapped_segments, unlink_named_segments

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.isdir("/dev/shm"),
                                reason="named segments are a Linux /dev/shm matter")


@pytest.fixture
def segment() -> Iterator[Path]:
    """A segment named like MPICH's, not mapped by anyone; removed after the test if still there."""
    path = Path(f"/dev/shm/mpich_pldemu_test_{os.getpid()}")
    path.write_bytes(b"\0" * mmap.PAGESIZE)
    yield path
    path.unlink(missing_ok=True)


def test_a_mapped_segment_of_ours_is_unlinked_and_stays_mapped(segment: Path) -> None:
    with segment.open("r+b") as f, mmap.mmap(f.fileno(), mmap.PAGESIZE) as mem:
        assert str(segment) in mapped_segments()
        assert str(segment) in unlink_named_segments()
        assert not segment.exists()
        mem[0] = 7  # the memory outlives its name
        assert mem[0] == 7
        assert unlink_named_segments() == []  # nothing of ours is left to find


def test_a_segment_this_process_does_not_map_is_left_alone(segment: Path) -> None:
    assert str(segment) not in unlink_named_segments()
    assert segment.exists()
