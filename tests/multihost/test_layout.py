"""Host layouts without hosts: what the ``# N hosts:`` line says, and the bench's peer choice."""

from __future__ import annotations

from typing import Any

import pytest

from pldemu.bench.bulk import host_peers
from pldemu.job.launch import Placement
from pldemu.windows import HostLayout

TWO_BY_TWO = HostLayout(("h1", "h1", "h2", "h2"), ((0, 1), (2, 3)))


def test_layout_describes_hosts_and_their_consistency() -> None:
    assert TWO_BY_TWO.spans_hosts and TWO_BY_TWO.consistent
    assert TWO_BY_TWO.describe() == "2 hosts: h1 [0, 1], h2 [2, 3]"
    # Two shared-memory groups under one name: not separate hosts, and the line says so.
    blurred = HostLayout(("h", "h", "h", "h"), ((0, 1), (2, 3)))
    assert not blurred.consistent and "differ" in blurred.describe()
    assert not HostLayout(("h", "h"), ((0, 1),)).spans_hosts


def test_bench_host_peers() -> None:
    assert [host_peers(TWO_BY_TWO, r) for r in range(4)] == [(1, 2), (0, 3), (3, 0), (2, 1)]
    assert host_peers(HostLayout(("a", "b", "c"), ((0,), (1,), (2,))), 0) is None  # no host peer
    assert host_peers(HostLayout(("a", "a"), ((0, 1),)), 0) is None  # one host


def test_simulated_hosts_get_time_to_tear_their_hosts_down() -> None:
    """A stopped simulated-hosts job is SIGKILLed only after the hosts script had time to delete its
    namespaces and bridge (CI once found them left when the kill came after 1 s, mid-teardown)."""
    assert Placement(sim_hosts=(2, 2)).teardown_grace >= 10.0
    assert Placement().teardown_grace == Placement(hosts=(("a", 2),)).teardown_grace == 1.0


def test_placement_rank_counts_and_conflicts() -> None:
    assert Placement(sim_hosts=(3, 2)).ranks == 6
    assert Placement(hosts=(("a", 2), ("b", 3))).ranks == 5
    assert Placement(hostfile="f").ranks is None
    with pytest.raises(ValueError, match="one of"):
        Placement(sim_hosts=(2, 2), hostfile="f")


class _Rank:
    """What choose_backend asks of a communicator when it has the layout: this rank and the size
    (no MPI call)."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size


@pytest.mark.parametrize(("layout", "auto"), [
    (HostLayout(("h", "h", "h"), ((0, 1, 2),)), "shared"),
    (TWO_BY_TWO, "hybrid"),
    (HostLayout(("a", "b"), ((0,), (1,))), "rma"),
])
def test_the_layout_answers_choose_backend_as_mpi_would(layout: HostLayout, auto: str) -> None:
    from pldemu.windows import choose_backend

    for rank in range(len(layout.names)):
        comm: Any = _Rank(rank, len(layout.names))
        assert choose_backend(comm, "auto", layout) == auto
        assert choose_backend(comm, "rma", layout) == "rma"
        if auto == "shared":
            assert choose_backend(comm, "shared", layout) == "shared"
        else:
            with pytest.raises(ValueError, match="needs all"):
                choose_backend(comm, "shared", layout)
