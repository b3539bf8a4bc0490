"""Every mutant is caught on the simulator, within a bounded number of seeds and calls, by a failure kind
it declares; the correct recipes and the must-pass control are not, under the same conditions.

The runs use mutant_sim (the lowering simulator wrapped in the harness loop: restage, call, consume,
optional consume fence; seeded jitter; optional deferred put visibility). Limits of the simulator,
stated where they matter:

* ``race`` is never observed directly: there is no happens-before race detector, so a race is caught
  through the wrong data it produces.
* The base simulator (one program, the call looped inside it on unchanged data) cannot express the
  restaging races at all; ``test_base_simulator_cannot_see_restaging_races`` pins that down.
* Budgets here are simulator steps, not hardware time: on MPI the windows are narrower, which is
  why the catalogue's iteration budgets are larger than the ones below.
"""

from __future__ import annotations

import numpy as np
import pytest
from lowering_helpers import looped, make_inputs, reference
from lowering_sim import Deadlock, Machine
from mutant_sim import CONSUME_FENCE, HarnessMachine, first_catch, run_harness

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import Program
from pldemu.ir.nodes import BufferKind
from pldemu.lowering import lower_composite_ops
from pldemu.mutants import MUTANTS, Mutant

BROKEN = [name for name, m in MUTANTS.items() if not m.must_pass and m.drop is None]
"""The mutants the simulator can show: it has no fenced model, so the entries that drop a fence marker
(``Mutant.drop``) are caught on MPI only (tests/races_mpi/test_fences_collectives_mpi.py)."""
CONTROLS = [name for name, m in MUTANTS.items() if m.must_pass]


def _fence(m: Mutant) -> bool | None:
    """The mutant's fence policy: the harness default (None) or never."""
    return None if m.consume_fence else False


@pytest.mark.parametrize("defer_puts", [False, True], ids=["coherent", "deferred-puts"])
@pytest.mark.parametrize("name", BROKEN)
def test_mutant_is_caught_on_every_seed_with_jitter(name: str, defer_puts: bool) -> None:
    """Each of 5 seeds catches the mutant within 20 calls (jitter; measured worst case: call 13)."""
    m = MUTANTS[name]
    program = m.lower()
    for seed in range(5):
        out = run_harness(program, m.spec, m.ranks, min(m.iterations, 20), seed, fence=_fence(m),
                          defer_puts=defer_puts, stop_early=True)
        assert out.caught, f"{name} not caught with seed {seed}"
        assert out.kinds <= set(m.expected), f"{name}: {out.kinds} not in {m.expected}: {out.details}"


@pytest.mark.parametrize("name", BROKEN)
def test_mutant_is_caught_by_the_uniform_scheduler(name: str) -> None:
    """Without jitter (the base simulator's uniform choice) the first seed still catches it within 60
    calls, but later: the race windows need a slow rank (measured worst case: call 37)."""
    m = MUTANTS[name]
    found = first_catch(m.lower(), m.spec, m.ranks, min(m.iterations, 60), range(3), fence=_fence(m), jitter=False)
    assert found is not None, f"{name} not caught in 3 seeds x 60 calls"
    assert found[1].kinds <= set(m.expected)


@pytest.mark.parametrize("name", [n for n in BROKEN if "cell-check" in MUTANTS[n].conditions])
def test_cell_check_catches_the_accounting_mutants(name: str) -> None:
    """A full run (not stopped at the first wrong result) ends with a non-zero or negative cell."""
    m = MUTANTS[name]
    found = [run_harness(m.lower(), m.spec, m.ranks, 10, seed, fence=_fence(m)).kinds for seed in range(4)]
    assert any("invariant" in kinds for kinds in found), found


@pytest.mark.parametrize("name", [n for n in BROKEN if "deadlock" in MUTANTS[n].expected])
def test_deadlock_mutants_hang(name: str) -> None:
    """Full runs (set-credits shows a negative cell first, then hangs): every seed ends in a deadlock."""
    m = MUTANTS[name]
    for seed in range(4):
        assert "deadlock" in run_harness(m.lower(), m.spec, m.ranks, 20, seed, fence=_fence(m)).kinds


def _spec_id(spec: CollectiveSpec) -> str:
    return f"{spec.name}-{spec.mode.name}-{spec.size}"


def _specs_of_the_catalogue() -> list[CollectiveSpec]:
    seen: list[CollectiveSpec] = []
    for m in MUTANTS.values():
        if m.spec not in seen:
            seen.append(m.spec)
    return seen


@pytest.mark.parametrize("defer_puts", [False, True], ids=["coherent", "deferred-puts"])
@pytest.mark.parametrize("spec", _specs_of_the_catalogue(), ids=_spec_id)
def test_correct_recipes_pass_under_the_same_conditions(spec: CollectiveSpec, defer_puts: bool) -> None:
    """The specified recipe of every mutant's call, with the harness's fence policy, never fails."""
    program = lower_composite_ops(collective_program(spec).program)
    for seed in range(3):
        for jitter in (False, True):
            out = run_harness(program, spec, 4, 25, seed, jitter=jitter, defer_puts=defer_puts)
            assert not out.caught, f"{spec} seed {seed} jitter={jitter}: {out.details}"


@pytest.mark.parametrize("name", CONTROLS)
def test_must_pass_controls_survive_without_a_fence(name: str) -> None:
    m = MUTANTS[name]
    assert m.consume_fence is False and m.spec.name in CONSUME_FENCE  # the fence it normally relies on is off
    program = m.lower()
    for seed in range(6):
        for defer_puts in (False, True):
            out = run_harness(program, m.spec, m.ranks, 40, seed, fence=False, defer_puts=defer_puts)
            assert not out.caught, f"{name} seed {seed}: {out.details}"


def test_the_rewrite_race_needs_the_missing_fence() -> None:
    """The same broadcast with the harness's consume fence passes: the fence is what hides #2175."""
    m = MUTANTS["broadcast-rewrite-race"]
    for seed in range(5):
        assert not run_harness(m.lower(), m.spec, m.ranks, 30, seed, fence=True).caught


def test_deferred_visibility_is_exercised() -> None:
    """Ring pushes really are deferred in that mode (and the recipes above still pass with it)."""
    m = MUTANTS["ring-no-push-done"]
    machine = HarnessMachine(m.lower_correct(), m.spec, 4, 3, 0, fence=False, defer_puts=True).run()
    assert machine.deferred_puts > 0 and not machine.outcome.caught


def _base_simulator_catches(program: Program, spec: CollectiveSpec, nranks: int, calls: int, seed: int) -> bool:
    """Run ``calls`` looped calls on the base simulator (no restaging, no consuming in between)."""
    inputs = make_inputs(spec, nranks, seed)
    inputs.pop("recv_counts", None)
    machine = Machine(program, nranks, init=lambda r, n, s, d: inputs[n][r] if n in inputs else None, seed=seed)
    try:
        machine.run()
    except Deadlock:
        return True
    for name, items in reference(spec, nranks, inputs, calls).items():
        per_rank = len(items) // nranks
        for p in range(nranks):
            for region, want in items[p * per_rank:(p + 1) * per_rank]:
                if not np.array_equal(machine.array(p, name)[region].astype(np.float64), np.asarray(want, np.float64)):
                    return True
    return any(np.any(machine.mem[r][b.var.name] != 0) for r in range(nranks) for b in program.buffers
               if b.kind is BufferKind.SIGNAL)


@pytest.mark.parametrize("name", ["broadcast-rewrite-race", "reduce-scatter-no-post-reduce-barrier"])
def test_base_simulator_cannot_see_restaging_races(name: str) -> None:
    """Looping the call inside one program never rewrites the inputs between calls, so these two
    races cannot happen there: they need the harness loop (mutant_sim), as on hardware."""
    m = MUTANTS[name]
    program = lower_composite_ops(looped(m.program, 4), variant=m.variant)
    assert not any(_base_simulator_catches(program, m.spec, m.ranks, 4, seed) for seed in range(8))
    assert first_catch(m.lower(), m.spec, m.ranks, 20, range(3), fence=_fence(m)) is not None
