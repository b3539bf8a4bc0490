"""The schedule knobs of ``RuntimeOptions``: defaults cost nothing, bad values are refused up front."""

from __future__ import annotations

import math

import pytest

from pldemu.runtime.instrument.schedule import schedule_active
from pldemu.runtime.options import RuntimeOptions


def test_defaults_install_nothing() -> None:
    opts = RuntimeOptions()
    assert (opts.jitter_us, opts.straggler, opts.skew_us, opts.visibility, opts.invariants) == (
        0.0, None, 0.0, "eager", False)
    assert not schedule_active(opts)


@pytest.mark.parametrize("kw", [
    {"jitter_us": 10}, {"jitter_us": 0.5}, {"skew_us": 100.0}, {"straggler": (0, 50.0)},
    {"straggler": (3, 1)}, {"visibility": "deferred"}, {"invariants": True},
])
def test_each_knob_activates_the_schedule(kw: dict[str, object]) -> None:
    assert schedule_active(RuntimeOptions(**kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("kw", [
    {"jitter_us": -1}, {"jitter_us": math.nan}, {"jitter_us": math.inf}, {"jitter_us": True}, {"jitter_us": "5"},
    {"skew_us": -0.1}, {"skew_us": None},
    {"straggler": (1,)}, {"straggler": (-1, 10.0)}, {"straggler": (1, 0)}, {"straggler": (1, -5.0)},
    {"straggler": [1, 10.0]}, {"straggler": (True, 10.0)}, {"straggler": (1, math.nan)},
    {"visibility": "lazy"}, {"visibility": None}, {"invariants": 1},
])
def test_bad_values_are_refused(kw: dict[str, object]) -> None:
    name = next(iter(kw))
    with pytest.raises(ValueError, match=f"RuntimeOptions.{name}"):
        RuntimeOptions(**kw)  # type: ignore[arg-type]


def test_options_stay_frozen() -> None:
    opts = RuntimeOptions(jitter_us=5)
    with pytest.raises(AttributeError):
        opts.jitter_us = 6  # type: ignore[misc]
