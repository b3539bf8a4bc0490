"""A pypto-compatible front end: pypto's distributed DSL programs, unchanged, on pldemu.

While the layer is active (:func:`activate`, or the :func:`active` context manager), ``import pypto``,
``pypto.language``, ``pypto.language.distributed``, ``pypto.ir`` and ``pypto.runtime`` resolve to
pldemu's own modules (``pldemu.pypto.surface``), and ``torch`` to ``pldemu.torchlite`` when no
real torch is installed. Inactive, nothing is shadowed. ``@pl.program`` captures a class from its
source (``pldemu.pypto.capture``); ``pypto.ir.compile`` translates it to pldemu IR at call time, once
the rank count is known (``pldemu.pypto.translate``), and every call runs one isolated ``mpiexec`` job
through :func:`pldemu.launch` (``pldemu.pypto.execute``). Importing this package never imports mpi4py.
"""

from __future__ import annotations

from pldemu.pypto.finder import activate, active, deactivate

pytest_plugins = ("pldemu.pypto.plugin",)
"""``pytest -p pldemu.pypto`` loads the plugin module from here (pytest imports it; this package does not)."""

__all__ = ["activate", "active", "deactivate"]
