"""The scheduler's ready set (``pldemu.runtime.taskready``): fifo keeps the ready order across shapes, random
draws index the fitting groups laid end to end and swap-remove keeps every index O(1)."""

from __future__ import annotations

import pytest

from pldemu.runtime.taskready import ReadySet


def test_fifo_first_is_the_earliest_ready_of_the_fitting_groups() -> None:
    ready: ReadySet[str] = ReadySet(fifo=True)
    for name, group in [("a0", "aic"), ("v0", "aiv"), ("v1", "aiv"), ("a1", "aic")]:
        ready.add(name, group)
    assert ready.first(["aiv", "aic"]) == "a0"
    assert ready.first(["aiv"]) == "v0"  # no free AIC: the first ready AIV block, past the AIC one
    ready.remove("v0", "aiv")
    assert ready.first(["aiv", "aic"]) == "a0"
    ready.remove("a0", "aic")
    assert ready.first(["aic", "aiv"]) == "v1"
    assert ready.first([]) is None
    assert list(ready) == ["v1", "a1"] and len(ready) == 2


def test_fifo_removes_only_a_groups_first_task() -> None:
    ready: ReadySet[str] = ReadySet(fifo=True)
    ready.add("x", "aiv")
    ready.add("y", "aiv")
    with pytest.raises(AssertionError):
        ready.remove("y", "aiv")


def test_random_indexes_the_fitting_groups_end_to_end_and_swap_removes() -> None:
    ready: ReadySet[str] = ReadySet(fifo=False)
    for name, group in [("v0", "aiv"), ("a0", "aic"), ("v1", "aiv"), ("v2", "aiv")]:
        ready.add(name, group)
    assert ready.count(["aiv", "aic"]) == 4 and ready.count(["aic"]) == 1
    assert [ready.nth(["aiv", "aic"], i) for i in range(4)] == ["v0", "v1", "v2", "a0"]
    ready.remove("v0", "aiv")  # the last AIV task takes its slot
    assert [ready.nth(["aiv", "aic"], i) for i in range(3)] == ["v2", "v1", "a0"]
    ready.remove("v1", "aiv")
    ready.remove("v2", "aiv")
    assert ready.count(["aiv"]) == 0 and ready.nth(["aiv", "aic"], 0) == "a0"
    with pytest.raises(IndexError):
        ready.nth(["aiv"], 0)
    assert list(ready) == ["a0"]
