"""A harness-shaped, adversarial extension of the lowering simulator (tests/lowering/lowering_sim.py).

The base simulator runs one program on uniformly interleaved ranks. Mutants need what ``pldemu check``
does around the program, and a nastier scheduler:

* **The harness loop.** The lowered program of ONE call runs ``iterations`` times per rank. Before
  every call the rank writes fresh inputs (restaging), after it the rank copies its result out
  (consuming) and, when the fence policy says so, waits until every rank has consumed (the consume
  fence). The base simulator can only loop the call inside the program on unchanged data, where the
  broadcast rewrite race and the reduce_scatter restaging race cannot happen.
* **Jitter.** A seeded scheduler gives every rank a speed (log-uniform in [1/32, 1]) and re-draws
  the speeds now and then, so some rank is often much slower than the rest: that is where races live.
* **Deferred put visibility** (optional). A put to a peer lands at a random later step unless the
  issuing rank notifies first (the fence InsertCommFence places between a put and the next notify)
  or its call ends (kernel completion). Memory is otherwise sequentially consistent.

Failures are sorted into the catalogue's kinds: ``deadlock`` (every live rank waits), ``wrong-data``
(a consumed result differs from the definition in lowering_helpers.reference), ``invariant`` (a
barrier cell negative at any time, or non-zero once every rank has finished). There is no race
detector, so a ``race`` is only seen when it corrupts data.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lowering_helpers import make_inputs, reference
from lowering_sim import BLOCKED, STEP, Deadlock, Gen, Machine, SimError, Tile, TRef, _Return

from pldemu.collectives import CollectiveSpec
from pldemu.ir.nodes import NR, BufferKind, Call, Program
from pldemu.ir.ops import Op

CONSUME_FENCE = frozenset({"allgather", "all_to_all", "broadcast"})
"""The harness's fence policy (mirrors pldemu.harness.check.CONSUME_FENCE; not imported, because the
runtime package needs MPI): these collectives let a fast peer write this rank's result window for
the next call before this rank has consumed the current one, so the harness fences after consuming."""

_SPEED_FLOOR = math.log(1 / 32)
_REDRAW = 1 / 256
"""Per-step probability of re-drawing the rank speeds (so the slow rank changes during a run)."""
_DELIVER = 1 / 4
"""Per-step probability that one in-flight put lands."""


@dataclass
class Outcome:
    """What one harness run saw."""

    kinds: set[str] = field(default_factory=set)
    details: list[str] = field(default_factory=list)
    first_iteration: int | None = None
    """The earliest call in which a failure showed (a deadlock: the call the slowest rank hung in)."""

    @property
    def caught(self) -> bool:
        return bool(self.kinds)

    def add(self, kind: str, iteration: int, detail: str) -> None:
        self.kinds.add(kind)
        if len(self.details) < 5:
            self.details.append(f"[{kind} @ call {iteration}] {detail}")
        if self.first_iteration is None or iteration < self.first_iteration:
            self.first_iteration = iteration


class HarnessMachine(Machine):
    """``nranks`` ranks each running the one-call ``program`` ``iterations`` times, harness style."""

    def __init__(self, program: Program, spec: CollectiveSpec, nranks: int, iterations: int, seed: int,
                 fence: bool, jitter: bool = True, defer_puts: bool = False, max_steps: int = 2_000_000) -> None:
        super().__init__(program, nranks, seed=seed, max_steps=max_steps)
        self.spec, self.iterations, self.fence = spec, iterations, fence
        self.jitter, self.defer_puts = jitter, defer_puts
        # Inputs differ per call (the seed mixes in the iteration), so a stale read shows.
        self.inputs = [make_inputs(spec, nranks, seed * 100_003 + it) for it in range(iterations)]
        for per_call in self.inputs:
            per_call.pop("recv_counts", None)  # protocol-owned: the harness never writes it
        self.result_names = [n for n in ("target", "recv_counts") if n in self.kinds]
        self.consumed: list[list[dict[str, np.ndarray] | None]] = [[None] * nranks for _ in range(iterations)]
        self.current = [0] * nranks
        self.arrived = [0] * iterations
        self.inflight: list[list[tuple[int, TRef, tuple[slice, ...], np.ndarray]]] = [[] for _ in range(nranks)]
        self.credit_signals = {n for n, k in self.kinds.items() if k is BufferKind.SIGNAL and n != "recv_counts"}
        self.outcome = Outcome()
        self.deferred_puts = 0
        """Puts that did not land at once (the deferred-visibility mode was exercised)."""
        self.stop_early = False
        """Set by run_harness: end the run as soon as anything is caught."""
        self.finished = False
        self.speeds = self._draw_speeds()
        self._expected: dict[int, dict[str, list[tuple[tuple[slice, ...], np.ndarray]]]] = {}

    # -- the harness loop ----------------------------------------------------------------------

    def _rank(self, r: int) -> Gen:
        body = self.program.function().body.stmts
        for it in range(self.iterations):
            self.current[r] = it
            yield STEP  # the host writes its inputs at a moment of its own
            for name, per_rank in self.inputs[it].items():
                self.mem[r][name][:] = np.asarray(per_rank[r]).reshape(-1)
            env: dict[str, Any] = dict(self.globals)
            env[NR.name] = self.n
            with contextlib.suppress(_Return):
                yield from self._seq(r, env, body)
            self._flush(r)  # kernel completion: every put this rank issued has landed
            yield STEP
            self.consumed[it][r] = {name: self.array(r, name).copy() for name in self.result_names}
            self._check_consumed(r, it)
            if self.fence:
                self.arrived[it] += 1
                while self.arrived[it] < self.n:
                    yield BLOCKED

    def _check_consumed(self, r: int, it: int) -> None:
        """Compare rank ``r``'s consumed result of call ``it`` with the collective's definition."""
        if it not in self._expected:
            self._expected[it] = reference(self.spec, self.n, self.inputs[it], 1)
        got = self.consumed[it][r]
        assert got is not None
        for name, items in self._expected[it].items():
            per_rank = len(items) // self.n
            for region, want in items[r * per_rank:(r + 1) * per_rank]:
                mine = got[name][region]
                if not np.array_equal(mine.astype(np.float64), np.asarray(want, dtype=np.float64)):
                    self.outcome.add("wrong-data", it, f"rank {r} {name}{_show(region)}: got "
                                     f"{mine.ravel()[:8]} want {np.ravel(want)[:8]}")

    # -- scheduling ----------------------------------------------------------------------------

    def _draw_speeds(self) -> list[float]:
        return [math.exp(self.rng.uniform(_SPEED_FLOOR, 0.0)) for _ in range(self.n)]

    def run(self) -> HarnessMachine:
        gens = {r: self._rank(r) for r in range(self.n)}
        blocked: set[int] = set()
        while gens:
            if self.stop_early and self.outcome.caught:
                return self
            live = sorted(gens)
            if self.jitter:
                if self.rng.random() < _REDRAW:
                    self.speeds = self._draw_speeds()
                r = self.rng.choices(live, weights=[self.speeds[x] for x in live])[0]
            else:
                r = self.rng.choice(live)
            self._deliver_one()
            try:
                event = next(gens[r])
            except StopIteration:
                del gens[r]
                blocked.discard(r)
                continue
            self.stats.steps += 1
            if self.stats.steps > self.max_steps:
                raise SimError("step limit exceeded")
            if event == BLOCKED:
                blocked.add(r)
                if blocked >= set(gens):
                    raise Deadlock(f"ranks {sorted(blocked)} all wait (calls {self.current}); signals {self.signals()}")
            else:
                blocked.clear()
        self.finished = True
        return self

    # -- deferred visibility and the cell invariant ----------------------------------------------

    def _deliver_one(self) -> None:
        pending = [r for r in range(self.n) if self.inflight[r]]
        if pending and self.rng.random() < _DELIVER:
            src = self.rng.choice(pending)
            peer, dst, region, data = self.inflight[src].pop(self.rng.randrange(len(self.inflight[src])))
            self._view(peer, dst)[region] = data

    def _flush(self, r: int) -> None:
        for peer, dst, region, data in self.inflight[r]:
            self._view(peer, dst)[region] = data
        self.inflight[r].clear()

    def _call(self, r: int, call: Call, a: list[Any]) -> Gen:
        if call.op is Op.NOTIFY:
            self._flush(r)  # the fence between this rank's puts and its notify
            result = yield from super()._call(r, call, a)
            sig, peer = a[0], int(a[1])
            idx = tuple(int(c) for c in a[2])
            value = int(self._view(peer, sig)[idx])
            if sig.buf in self.credit_signals and value < 0:
                self.outcome.add("invariant", self.current[peer],
                                 f"{sig.buf}{list(idx)} of rank {peer} is {value} after rank {r}'s notify")
            return result
        if call.op is Op.PUT and self.defer_puts and int(a[1]) != r:
            yield STEP
            dst, peer, src = a[0], int(a[1]), a[2]
            if len(a) > 4:
                doffs, soffs, shape = a[4], a[5], [int(x) for x in a[6]]
            else:
                doffs, soffs, shape = [0] * len(dst.shape), [0] * len(dst.shape), list(dst.shape)
            if isinstance(src, Tile):
                data = src.data[tuple(slice(int(o), int(o) + x) for o, x in zip(soffs, shape, strict=True))]
            else:
                data = self._view(r, src)[self._region(src, soffs, shape, "put")]
            region = self._region(dst, doffs, shape, "put", writes=True)
            self.inflight[r].append((peer, dst, region, np.array(data, copy=True)))
            self.deferred_puts += 1
            return None
        return (yield from super()._call(r, call, a))


def run_harness(program: Program, spec: CollectiveSpec, nranks: int, iterations: int, seed: int, *,
                fence: bool | None = None, jitter: bool = True, defer_puts: bool = False,
                stop_early: bool = False) -> Outcome:
    """Run the lowered one-call ``program`` harness style and classify what went wrong.

    ``fence`` None applies the harness's policy (CONSUME_FENCE); True/False forces it. With
    ``stop_early`` the run ends at the first failure (what a mutant test needs); otherwise every
    call runs and the cells are checked at the end (what a must-pass test needs).
    """
    use_fence = spec.name in CONSUME_FENCE if fence is None else fence
    m = HarnessMachine(program, spec, nranks, iterations, seed, use_fence, jitter, defer_puts)
    m.stop_early = stop_early
    out = m.outcome
    try:
        m.run()
    except Deadlock as err:
        out.add("deadlock", min(m.current), str(err))
    if m.finished:  # every rank retired every call, and no credit of a further call can arrive
        for name in sorted(m.credit_signals):
            for r in range(nranks):
                cells = m.mem[r][name]
                if np.any(cells != 0):
                    out.add("invariant", iterations - 1, f"{name} of rank {r} is {cells.tolist()} at the end")
    return out


def _show(region: tuple[slice, ...]) -> str:
    return "[" + ", ".join(f"{s.start or 0}:{'' if s.stop is None else s.stop}" for s in region) + "]"


def first_catch(program: Program, spec: CollectiveSpec, nranks: int, iterations: int, seeds: range, *,
                fence: bool | None = None, jitter: bool = True,
                defer_puts: bool = False) -> tuple[int, Outcome] | None:
    """The first seed (and its outcome, stopped at the first failure) that catches something, or None."""
    for seed in seeds:
        out = run_harness(program, spec, nranks, iterations, seed, fence=fence, jitter=jitter,
                          defer_puts=defer_puts, stop_early=True)
        if out.caught:
            return seed, out
    return None
