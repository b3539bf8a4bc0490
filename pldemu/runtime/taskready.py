"""The ready tasks of one rank's scheduler, indexed so that a choice costs the same however many are ready.

A task is *ready* once its producers have completed and until its last block has started; the scheduler
(:mod:`pldemu.runtime.tasksched`) starts a ready block only on a free core of the task's shape, so the
set is grouped by shape: whether a group fits is one test, not one per task.

* ``fifo`` keeps each group in the order its tasks became ready (a deque: the scheduler only ever
  starts a group's first task), and the first fitting task is the earliest of the fitting groups' heads:
  exactly the ready order the scheduler scanned before this index.
* ``random`` keeps each group in a list with swap-remove (the last task moves into the leaving one's
  slot), so ``nth`` is O(1): a uniform draw over the fitting tasks is one index into the groups laid end
  to end. The draw is as uniform and as seeded as before, but the candidate at a drawn index is not the
  one the former ready-ordered list had there: a seed replays the schedule of this version.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class ReadySet(Generic[T]):
    """Ready tasks in ``groups`` groups, numbered from 0 (the scheduler's: one per core shape); see the
    module docstring."""

    def __init__(self, fifo: bool, groups: int) -> None:
        self._fifo = fifo
        self._queues: list[deque[T]] = [deque() for _ in range(groups)]
        self._lists: list[list[T]] = [[] for _ in range(groups)]
        self._slot: dict[T, int] = {}
        """``random``: each task's index in its group's list."""
        self._order: dict[T, int] = {}
        """Each task's ready number (reports, and ``fifo``'s choice between groups)."""
        self._count = 0

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[T]:
        """The ready tasks in the order they became ready (for reports: it sorts)."""
        return iter(sorted(self._order, key=self._order.__getitem__))

    def add(self, item: T, group: int) -> None:
        """``item`` became ready; it needs a free core of ``group``."""
        self._order[item] = self._count
        self._count += 1
        if self._fifo:
            self._queues[group].append(item)
            return
        items = self._lists[group]
        self._slot[item] = len(items)
        items.append(item)

    def remove(self, item: T, group: int) -> None:
        """``item``'s last block started. ``fifo`` removes only a group's first task (the one it chose)."""
        del self._order[item]
        if self._fifo:
            head = self._queues[group].popleft()
            assert head is item, "fifo starts a group's first ready task"
            return
        items = self._lists[group]
        slot = self._slot.pop(item)
        last = items.pop()
        if last is not item:
            items[slot] = last
            self._slot[last] = slot

    def first(self, groups: Sequence[int]) -> T | None:
        """``fifo``: the task that became ready first among ``groups`` (the ones with a free core)."""
        heads = [q[0] for g in groups if (q := self._queues[g])]
        return heads[0] if len(heads) == 1 else min(heads, key=self._order.__getitem__) if heads else None

    def count(self, groups: Sequence[int]) -> int:
        """``random``: how many ready tasks ``groups`` hold."""
        total = 0
        for g in groups:
            total += len(self._lists[g])
        return total

    def nth(self, groups: Sequence[int], index: int) -> T:
        """``random``: the task at ``index`` of ``groups``' lists laid end to end (``index < count(groups)``)."""
        for g in groups:
            items = self._lists[g]
            if index < len(items):
                return items[index]
            index -= len(items)
        raise IndexError(index)


__all__ = ["ReadySet"]
