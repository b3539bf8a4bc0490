"""pypto's ``pl.jit`` front end on pldemu (a room of its own, over the ``@pl.program`` capture).

:mod:`~pldemu.pypto.jit.decorator` (the decorator family and :class:`JITFunction`),
:mod:`~pldemu.pypto.jit.deps` (dependency discovery, each function's source and closure),
:mod:`~pldemu.pypto.jit.specialize` (binding, the cache key, the captured program ``_jit_<entry>``).
"""

from __future__ import annotations

from pldemu.pypto.jit.decorator import JitDecorator, JITFunction, JitKind

jit = JitDecorator()
"""``pl.jit``: the one decorator object (it holds no state of its own)."""

__all__ = ["JITFunction", "JitDecorator", "JitKind", "jit"]
