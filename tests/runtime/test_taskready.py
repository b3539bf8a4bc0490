"""The scheduler's ready set (``pldemu.runtime.taskready``): fifo keeps the ready order across shapes, random
draws index the fitting groups laid end to end and swap-remove keeps every index O(1)."""

from __future__ import annotations

import pytest

from pldemu.runtime.taskready import ReadySet

AIV, AIC = 0, 1


def test_fifo_first_is_the_earliest_ready_of_the_fitting_groups() -> None:
    ready: ReadySet[str] = ReadySet(fifo=True, groups=2)
    for name, group in [("a0", AIC), ("v0", AIV), ("v1", AIV), ("a1", AIC)]:
        ready.add(name, group)
    assert ready.first([AIV, AIC]) == "a0"
    assert ready.first([AIV]) == "v0"  # no free AIC: the first ready AIV block, past the AIC one
    ready.remove("v0", AIV)
    assert ready.first([AIV, AIC]) == "a0"
    ready.remove("a0", AIC)
    assert ready.first([AIC, AIV]) == "v1"
    assert ready.first([]) is None
    assert list(ready) == ["v1", "a1"] and len(ready) == 2


def test_fifo_removes_only_a_groups_first_task() -> None:
    ready: ReadySet[str] = ReadySet(fifo=True, groups=2)
    ready.add("x", AIV)
    ready.add("y", AIV)
    with pytest.raises(AssertionError):
        ready.remove("y", AIV)


def test_random_indexes_the_fitting_groups_end_to_end_and_swap_removes() -> None:
    ready: ReadySet[str] = ReadySet(fifo=False, groups=2)
    for name, group in [("v0", AIV), ("a0", AIC), ("v1", AIV), ("v2", AIV)]:
        ready.add(name, group)
    assert ready.count([AIV, AIC]) == 4 and ready.count([AIC]) == 1
    assert [ready.nth([AIV, AIC], i) for i in range(4)] == ["v0", "v1", "v2", "a0"]
    ready.remove("v0", AIV)  # the last AIV task takes its slot
    assert [ready.nth([AIV, AIC], i) for i in range(3)] == ["v2", "v1", "a0"]
    ready.remove("v1", AIV)
    ready.remove("v2", AIV)
    assert ready.count([AIV]) == 0 and ready.nth([AIV, AIC], 0) == "a0"
    with pytest.raises(IndexError):
        ready.nth([AIV], 0)
    assert list(ready) == ["a0"]
