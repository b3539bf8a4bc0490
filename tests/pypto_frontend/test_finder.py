"""The meta-path finder: pypto resolves to pldemu only while the layer is active."""

from __future__ import annotations

import importlib
import sys

import pytest

from pldemu.pypto import activate, active, deactivate
from pldemu.pypto.finder import is_active


def test_inactive_by_default_and_nothing_shadowed() -> None:
    assert not is_active()
    assert "pypto" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pypto")


def test_active_block_serves_pypto_and_forgets_it_after() -> None:
    with active():
        pypto = importlib.import_module("pypto")
        assert pypto is importlib.import_module("pldemu.pypto.surface")
        assert sys.modules["pypto"] is pypto
    assert not is_active()
    assert "pypto" not in sys.modules


def test_activate_is_idempotent_and_deactivate_restores() -> None:
    activate()
    activate()
    try:
        assert sys.meta_path.count(sys.meta_path[0]) == 1 and is_active()
    finally:
        deactivate()
        deactivate()
    assert not is_active()


def test_a_pypto_imported_before_is_set_aside_and_restored() -> None:
    fake = type(sys)("pypto")
    sys.modules["pypto"] = fake
    try:
        with active():
            assert importlib.import_module("pypto") is not fake
        assert sys.modules["pypto"] is fake
    finally:
        sys.modules.pop("pypto", None)


def test_unknown_pypto_submodule_is_not_found() -> None:
    with active(), pytest.raises(ModuleNotFoundError):
        importlib.import_module("pypto.no_such_module")


def test_torch_falls_through_to_a_real_install() -> None:
    real = importlib.util.find_spec("torch") is not None
    with active():
        spec = importlib.util.find_spec("torch")
        if real:
            assert spec is not None and spec.origin is not None and "pldemu" not in spec.origin
