"""The catalogue itself: immutable, complete, every entry well-formed and consistent with its variant."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from pldemu.collectives import CollectiveSpec
from pldemu.lowering import CORRECT, DropMarker, Marker, RecipeVariant
from pldemu.mutants import CONDITIONS, FAILURE_KINDS, MUTANTS, Mutant

REQUIRED = {
    "barrier-fixed-threshold": "allreduce/mesh", "wait-eq": None, "set-credits": None,
    "allreduce-no-post-reduce-barrier": "allreduce/mesh", "reduce-scatter-no-post-reduce-barrier": "reduce_scatter",
    "no-epilogue": None, "epilogue-one-short": None, "ring-no-push-done": "allreduce/ring",
    "a2av-no-readiness": "all_to_all_v", "wait-before-notify": None, "broadcast-rewrite-race": "broadcast",
    "broadcast-read-complete": "broadcast",
}


def test_catalogue_is_immutable_and_complete() -> None:
    assert isinstance(MUTANTS, MappingProxyType)
    assert set(REQUIRED) <= set(MUTANTS)
    assert all(name == m.name for name, m in MUTANTS.items())
    with pytest.raises(TypeError):
        MUTANTS["x"] = MUTANTS["wait-eq"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        MUTANTS["wait-eq"].iterations = 1  # type: ignore[misc]


@pytest.mark.parametrize("name", list(MUTANTS))
def test_entry_is_well_formed(name: str) -> None:
    m = MUTANTS[name]
    if REQUIRED.get(name):
        assert m.collective == REQUIRED[name]
    assert set(m.expected) <= set(FAILURE_KINDS) and set(m.conditions) <= set(CONDITIONS)
    assert m.must_pass == (not m.expected)
    assert "\n" not in m.description and "\n" not in m.models
    assert m.ranks == 4 and m.spec.nranks is None and m.spec.dtype.value == "fp32"
    assert m.spec.name == "barrier" or m.spec.size <= 64  # barrier has no data
    # A mutant changes the recipe, its fences, or (broadcast-rewrite-race) only how it is used.
    assert (m.variant != CORRECT) or m.drop is not None or not m.consume_fence
    assert (m.drop is not None) == ("fenced" in m.conditions)
    if "deadlock" in m.expected:
        assert "timeout" in m.conditions
    if "invariant" in m.expected:
        assert "cell-check" in m.conditions


def test_only_the_read_complete_broadcast_must_pass() -> None:
    assert [m.name for m in MUTANTS.values() if m.must_pass] == ["broadcast-read-complete"]
    fixed = MUTANTS["broadcast-read-complete"]
    race = MUTANTS["broadcast-rewrite-race"]
    assert fixed.spec == race.spec and fixed.consume_fence is race.consume_fence is False
    assert fixed.variant.deviations() == ("broadcast_read_complete=True",)


def test_barrier_fixed_threshold_combines_three_deviations() -> None:
    assert MUTANTS["barrier-fixed-threshold"].variant.deviations() == (
        "credit_op=Set", "generation_threshold=False", "epilogue=False")


@pytest.mark.parametrize("kwargs,fragment", [
    ({"expected": ("flaky",)}, "unknown failure kinds"),
    ({"expected": ()}, "must_pass control expects none"),
    ({"must_pass": True}, "must_pass control expects none"),
    ({"description": "two\nlines"}, "one non-empty line"),
    ({"conditions": ("luck",)}, "unknown conditions"),
    ({"name": "two words"}, "non-empty word"),
    ({"ranks": 1}, "ranks >= 2"),
    ({"straggler": (1, 500.0)}, "go together"),
    ({"conditions": ("straggler",)}, "go together"),
    ({"straggler": (4, 500.0), "conditions": ("straggler",)}, "rank < ranks"),
    ({"straggler": (1, 0.0), "conditions": ("straggler",)}, "microseconds > 0"),
    ({"drop": DropMarker(Marker.PUT_FENCE)}, "go together"),
    ({"conditions": ("fenced",)}, "go together"),
])
def test_mutant_validation(kwargs: dict[str, object], fragment: str) -> None:
    base: dict[str, object] = {"name": "m", "spec": CollectiveSpec("barrier"), "variant": RecipeVariant(epilogue=False),
                               "description": "d", "models": "m", "expected": ("invariant",)}
    base.update(kwargs)
    with pytest.raises(ValueError, match=fragment):
        Mutant(**base)  # type: ignore[arg-type]


def test_lowering_hook_applies_the_variant() -> None:
    from pldemu.ir import format_program

    m = MUTANTS["wait-eq"]
    assert format_program(m.lowering()(m.program)) == format_program(m.lower())


def test_wait_eq_carries_the_straggler_that_opens_its_window() -> None:
    """Eq-instead-of-Ge bites only when a peer laps the waiter between its notify and its first poll;
    random jitter opens that window by luck (it survived 200 calls on a quiet CI machine), a straggler
    on every call."""
    m = MUTANTS["wait-eq"]
    assert m.straggler is not None and "straggler" in m.conditions
    assert 0 <= m.straggler[0] < m.ranks and m.straggler[1] >= 500

