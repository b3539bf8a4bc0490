"""The meta-path finder that makes ``pypto`` (and, without a real torch, ``torch``) resolve to pldemu.

Only while active: :func:`activate` puts one finder first on ``sys.meta_path``; :func:`deactivate`
removes it and forgets every module it served, so a real pypto install is importable again (the PyPI
name ``pypto`` belongs to an unrelated project: pldemu never publishes a top-level ``pypto``). A name
the finder does not serve falls through to the ordinary finders.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

_ALIASES = {"pypto": "pldemu.pypto.surface", "torch": "pldemu.torchlite"}
"""Top-level name served -> the pldemu package that stands in for it (submodules map alike)."""


class _AliasLoader(importlib.abc.Loader):
    """Hands out the already-imported pldemu module, so ``pypto.x`` and its stand-in are one object."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The stand-in ran when it was imported under its own name."""


KEPT_BUILDS = 32
"""How many of the latest builds :func:`compiled_at` finds."""


class PyptoFinder(importlib.abc.MetaPathFinder):
    """Serves ``pypto.*`` always and ``torch.*`` only when no other finder can find a real torch."""

    def __init__(self) -> None:
        self.served: set[str] = set()
        self.set_aside: dict[str, ModuleType] = {}
        self.compiled: OrderedDict[Path, Any] = OrderedDict()
        """The latest ``KEPT_BUILDS`` programs ``pypto.ir.compile`` built while the layer is on, by output
        folder: pypto's ``runtime.execute_compiled(work_dir, args)`` names a build by its folder, run soon after
        its compile (a session of pypto's suite compiles hundreds: the older ones are let go)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        top, _, rest = fullname.partition(".")
        base = _ALIASES.get(top)
        if base is None or (top == "torch" and _real_module_exists("torch", self)):
            return None
        stand_in = f"{base}.{rest}" if rest else base
        if importlib.util.find_spec(stand_in) is None:
            return None
        self.served.add(fullname)
        is_pkg = hasattr(importlib.import_module(stand_in), "__path__")
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(stand_in), is_package=is_pkg)


def _real_module_exists(name: str, me: PyptoFinder) -> bool:
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        if finder.find_spec(name, None) is not None:
            return True
    return False


class _State:
    """The one finder instance (created once; activation is a membership test on sys.meta_path)."""

    lock = threading.Lock()
    finder = PyptoFinder()


def is_active() -> bool:
    """True while the layer is on ``sys.meta_path``."""
    return _State.finder in sys.meta_path


def activate() -> None:
    """Make ``pypto`` (and ``torch`` without a real one) resolve to pldemu; idempotent.

    A ``pypto`` module imported before activation (a real install) is set aside for the duration, so
    the layer wins, and is restored by :func:`deactivate`.
    """
    with _State.lock:
        if is_active():
            return
        for name in [n for n in sys.modules if n == "pypto" or n.startswith("pypto.")]:
            _State.finder.set_aside[name] = sys.modules.pop(name)
        sys.meta_path.insert(0, _State.finder)


def deactivate() -> None:
    """Remove the finder and forget every module it served; idempotent."""
    with _State.lock:
        if not is_active():
            return
        sys.meta_path.remove(_State.finder)
        for name in _State.finder.served:
            sys.modules.pop(name, None)
        _State.finder.served.clear()
        _State.finder.compiled.clear()
        sys.modules.update(_State.finder.set_aside)
        _State.finder.set_aside.clear()
        importlib.invalidate_caches()


def remember_compiled(output_dir: Path, compiled: Any) -> None:
    """Keep ``compiled`` for :func:`compiled_at` while the layer is on (nothing when it is off)."""
    if is_active():
        kept = _State.finder.compiled
        kept[output_dir.resolve()] = compiled
        kept.move_to_end(output_dir.resolve())
        while len(kept) > KEPT_BUILDS:
            kept.popitem(last=False)


def compiled_at(work_dir: Path) -> Any:
    """The program ``pypto.ir.compile`` built into ``work_dir`` while the layer is on (one of the latest
    ``KEPT_BUILDS``), or None."""
    return _State.finder.compiled.get(work_dir.resolve())


@contextmanager
def active() -> Iterator[None]:
    """``with active(): import pypto.language as pl``: the layer is on inside the block only."""
    was_active = is_active()
    activate()
    try:
        yield
    finally:
        if not was_active:
            deactivate()


__all__ = ["PyptoFinder", "activate", "active", "compiled_at", "deactivate", "is_active", "remember_compiled"]
