"""Host layouts without hosts: what the ``# N hosts:`` line says, and the bench's peer choice."""

from __future__ import annotations

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


def test_placement_rank_counts_and_conflicts() -> None:
    assert Placement(sim_hosts=(3, 2)).ranks == 6
    assert Placement(hosts=(("a", 2), ("b", 3))).ranks == 5
    assert Placement(hostfile="f").ranks is None
    with pytest.raises(ValueError, match="one of"):
        Placement(sim_hosts=(2, 2), hostfile="f")
