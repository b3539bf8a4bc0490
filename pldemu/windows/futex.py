"""Kernel sleeps on a 32-bit word of process-shared memory: Linux ``futex(2)`` through ctypes.

A waiter whose cell is not yet satisfied calls :meth:`Futex.wait` with the value it observed: the
kernel checks, atomically with queueing the caller, that the word still holds that value, and puts
the caller to sleep until :meth:`Futex.wake` is called on the same address or the timeout passes.
The words live in ``MPI_Win_allocate_shared`` segments mapped by several processes, so the
operations are the shared (not ``FUTEX_PRIVATE_FLAG``) ones: the kernel keys them by the page
behind the address, not by the process.

Lost wake-ups are prevented by the caller's protocol (``shared.py``): the waiter publishes that it
may sleep (a waiter count in the segment, a sequentially consistent atomic) *before* the kernel's
compare, and a notifier changes the cell *before* it reads that count, so either the notifier sees
the waiter and wakes it, or the kernel's compare sees the new value and the wait returns at once.

:func:`load_futex` returns None where futexes are unavailable (not Linux, an architecture whose
syscall number is unknown here, no libc, or the probe call fails): waits then keep their timed
back-off.  A syscall failing later (other than a timeout, a changed value or a signal) makes
:meth:`Futex.wait` return False, and the caller stops using it.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import sys
from collections.abc import Callable

FUTEX_WAIT = 0
FUTEX_WAKE = 1

WAKE_ALL = 0x7FFF_FFFF
"""``FUTEX_WAKE`` count waking every waiter."""

_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98, "ppc64le": 221,
              "ppc64": 221, "s390x": 238, "i386": 240, "i686": 240, "armv7l": 240}
"""``SYS_futex`` per ``platform.machine()`` (Linux ABI)."""

_BENIGN = frozenset({errno.EAGAIN, errno.ETIMEDOUT, errno.EINTR})
"""Errors of ``FUTEX_WAIT`` that are outcomes, not failures: the value had changed, the timeout
passed, a signal arrived.  The caller polls again in every case."""


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class Futex:
    """``FUTEX_WAIT`` / ``FUTEX_WAKE`` on raw addresses of shared memory (see the module docstring)."""

    __slots__ = ("_nr", "_syscall")

    def __init__(self, syscall: Callable[..., int], number: int) -> None:
        self._syscall = syscall
        self._nr = ctypes.c_long(number)

    def wait(self, addr: int, observed: int, timeout: float) -> bool:
        """Sleep while the 32-bit word at ``addr`` holds ``observed``, at most ``timeout`` seconds.

        Returns True when the call did its job (woken, the value differed, timed out, interrupted:
        the caller polls again either way), False when the syscall failed and must not be used again.
        """
        ts = _Timespec(int(timeout), int((timeout % 1.0) * 1e9))
        rc = self._syscall(self._nr, ctypes.c_void_p(addr), ctypes.c_int(FUTEX_WAIT),
                           ctypes.c_uint32(observed & 0xFFFF_FFFF), ctypes.byref(ts), None, ctypes.c_int(0))
        return rc == 0 or ctypes.get_errno() in _BENIGN

    def wake(self, addr: int, count: int = WAKE_ALL) -> int:
        """Wake up to ``count`` waiters sleeping on ``addr``; returns how many woke (-1: failed)."""
        return int(self._syscall(self._nr, ctypes.c_void_p(addr), ctypes.c_int(FUTEX_WAKE),
                                 ctypes.c_int(count), None, None, ctypes.c_int(0)))


def load_futex() -> Futex | None:
    """The futex operations of this machine, or None where they are unavailable (see the module
    docstring); probed once with a wake on a private word (no waiter, so it must return 0)."""
    number = _SYS_FUTEX.get(platform.machine().lower())
    if not sys.platform.startswith("linux") or number is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    futex = Futex(syscall, number)
    probe = ctypes.c_int32(0)
    if futex.wake(ctypes.addressof(probe), 1) != 0:
        return None
    return futex


__all__ = ["FUTEX_WAIT", "FUTEX_WAKE", "WAKE_ALL", "Futex", "load_futex"]
