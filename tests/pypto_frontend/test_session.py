"""FrontendOptions reach compiled calls through one context variable."""

from __future__ import annotations

import dataclasses

import pytest

from pldemu.pypto.session import FrontendOptions, current_options, use_options


def test_defaults_follow_pypto_contract() -> None:
    opts = current_options()
    assert opts.runtime.race_detect
    assert not opts.codegen_only


def test_use_options_is_scoped_and_nests() -> None:
    a = FrontendOptions(timeout=5.0)
    b = dataclasses.replace(a, codegen_only=True)
    with use_options(a):
        assert current_options() is a
        with use_options(b):
            assert current_options() is b
        assert current_options() is a
    assert current_options() == FrontendOptions()


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        FrontendOptions().timeout = 1.0  # type: ignore[misc]
