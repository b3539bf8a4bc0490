"""The task race check compares only the accesses whose spans meet (a sweep, not every pair): the pairs it
yields are exactly those of the all-pairs loop that could race (spans meet, not both reads), in its order."""

from __future__ import annotations

import numpy as np
import pytest

from pldemu.runtime.instrument.race_tasks import _Access, _meeting_pairs
from pldemu.runtime.instrument.races import ATOMIC, READ, WRITE


def _brute(accs: list[_Access]) -> list[tuple[int, int]]:
    def meets(a: _Access, b: _Access) -> bool:
        return any(lo < h and l2 < hi for lo, hi in a.ivs for l2, h in b.ivs)

    return [(i, j) for i in range(len(accs)) for j in range(i + 1, len(accs))
            if not (accs[i].kind == READ and accs[j].kind == READ) and meets(accs[i], accs[j])]


@pytest.mark.parametrize("seed", range(20))
def test_the_sweep_yields_every_pair_whose_cells_meet(seed: int) -> None:
    rng = np.random.default_rng(seed)
    accs = []
    for task in range(int(rng.integers(1, 40))):
        starts = sorted(int(s) for s in rng.choice(200, size=int(rng.integers(1, 4)), replace=False))
        ivs = [(s, s + int(rng.integers(1, 12))) for s in starts]
        accs.append(_Access(task, int(rng.choice([READ, READ, WRITE, ATOMIC])), ivs, site=task))
    got = _meeting_pairs(accs)
    # the sweep compares spans (first to last cell), so it may add pairs whose cells interleave without meeting;
    # the overlap test that follows drops those
    assert set(_brute(accs)) <= set(got) and got == sorted(set(got))


def test_disjoint_tiles_and_reads_of_one_weight_give_no_pair() -> None:
    stores = [_Access(t, WRITE, [(t * 8, t * 8 + 8)], site=0) for t in range(1000)]
    loads = [_Access(t, READ, [(0, 4096)], site=1) for t in range(1000)]
    assert _meeting_pairs(stores) == [] and _meeting_pairs(loads) == []
    assert _meeting_pairs([*loads[:3], stores[5]]) == [(0, 3), (1, 3), (2, 3)]
