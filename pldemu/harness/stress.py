"""Race hunting inside an MPI job: run a collective (or a user's program) under perturbed schedules until
the first failure.

:func:`stress` is what every rank of a ``pldemu stress`` job runs. It is the checking harness
(:func:`pldemu.harness.check.run_check`) with the ``stop_at_failure`` hook (the shared block loop of
``pldemu.harness.blocks``): iterations run back to back on one
signal buffer in blocks; at every block end the ranks agree whether anything failed, and the run
stops at the first block that did. The failure kinds are the catalogue's
(``pldemu.mutants.FAILURE_KINDS``):

* ``wrong-data``: a result element differs from the oracle (first index, expected and seen value);
* ``invariant``: a protocol invariant broke (``pldemu.runtime.instrument.invariants``): a negative cell, Set
  mixed with AtomicAdd, a cell not 0 at rest, a rank out of step;
* ``deadlock``: a wait timed out; the lowest stuck rank prints the wait-for report;
* ``race``: the race detector (``RuntimeOptions.race_detect``) found two unordered accesses.

A user's program (a lowered ``pldemu.ir.Program``) runs through
:func:`pldemu.harness.repeat.run_program_iterations` instead: the same blocks, checkpoints and kinds,
except ``wrong-data`` (a user's program has no oracle) and ``out-of-step`` (there is no epoch window).

**Which kind is reported.** The run stops at the end of the first block with a failure; several
kinds may have shown in it. The outcome names the *root cause* first (:data:`PRIORITY`): a broken
protocol invariant, then a race, then wrong data (a symptom, and the kind most at the mercy of
timing), and a deadlock only when no invariant or race was known when its wait gave up
(``DeadlockError.causes``: every rank's first violation, read one-sidedly from the status board, and
what earlier checkpoints found; else every rank's Set/AtomicAdd shadows). The invariants and
the race detector judge the order the protocol allows, not the order this run happened to take, so
a replay (same seed, same flags) reports the same kind far more often than a timing symptom would.
Every kind seen is listed too, with ``first_iteration``: the first iteration anything failed in.

The outcome is one small JSON object (:class:`StressOutcome`) written to ``result_path``: by rank 0
when the run ends normally (all ranks agreed on it), or by a rank that hit a deadlock or crash, into
``result_path.rank<R>``, just before it aborts the job (a deadlocked job cannot agree on anything;
the lowest stuck rank writes first and the others wait a moment, so its report wins).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mpi4py import MPI

from pldemu.harness.blocks import Hooks, silent, stop_at_failure
from pldemu.harness.check import CheckResult, run_check
from pldemu.harness.common import Failure
from pldemu.harness.repeat import RepeatResult, run_program_iterations
from pldemu.job.launch import abort_job
from pldemu.job.outcome import (
    KIND_ORDER,
    PRIORITY,
    StressOutcome,
    read_outcome,
    write_outcome,
    write_progress,
)
from pldemu.mpi import BoundedComm
from pldemu.runtime.errors import Cause, DeadlockError
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from pldemu.runtime.interpreter import ProgramInstance


PROGRESS_EVERY = 2.0
"""Seconds between progress lines (and progress-file updates)."""

NON_PRIMARY_GRACE = 1.0
"""Seconds a deadlocked rank that is not the one printing the report waits before aborting the job,
so that the reporting rank's result file is the one written."""


def _merge(per_rank: list[dict[str, Failure]]) -> dict[str, Failure]:
    """The earliest failure of each kind over all ranks."""

    def key(f: Failure) -> tuple[int, int]:
        return (f.iteration if f.iteration >= 0 else 1 << 30, f.rank)

    out: dict[str, Failure] = {}
    for kinds in per_rank:
        for kind, f in kinds.items():
            if kind not in out or key(f) < key(out[kind]):
                out[kind] = f
    return out


def _seen(kinds: dict[str, int]) -> tuple[str, ...]:
    """Every kind seen as ``kind@iteration``, earliest first (ties in :data:`KIND_ORDER`)."""
    order = sorted((k for k in KIND_ORDER if k in kinds),
                   key=lambda k: (kinds[k] if kinds[k] >= 0 else 1 << 30, KIND_ORDER.index(k)))
    return tuple(f"{k}@{kinds[k]}" for k in order)


@dataclass(frozen=True)
class StressJob:
    """What one stress job runs and where its outcome goes.

    ``program`` is a built-in collective (a ``CollectiveProgram``, run by ``run_check``: every kind,
    wrong data included) or a user's program: a LOWERED ``pldemu.ir.Program`` or a
    ``ProgramInstance`` of one, run by :func:`pldemu.harness.repeat.run_program_iterations` (no
    oracle, so no wrong-data; ``lower`` and ``consume_fence`` do not apply, ``cell_check=False``
    skips the at-rest check of its signal cells). ``iters`` calls at most, checked every ``block``.
    ``result_path``: where the outcome's JSON goes; ``replay``: the command line that replays the run;
    ``progress``: rank 0 prints a line every :data:`PROGRESS_EVERY` seconds."""

    program: Any
    iters: int
    block: int
    lower: Callable[[Any], Any] | None = None
    consume_fence: bool | None = None
    cell_check: bool = True
    result_path: str | None = None
    replay: str = ""
    progress: bool = True

    @property
    def user(self) -> bool:
        """True for a user's program (no oracle)."""
        from pldemu.ir import Program
        from pldemu.runtime.interpreter import ProgramInstance

        return isinstance(self.program, (Program, ProgramInstance))


class _Progress:
    """The ``before_run`` hook of a stress run: remembers the current iteration (a deadlock report
    names it) and prints progress on rank 0."""

    def __init__(self, job: StressJob, me: int) -> None:
        self.job, self.me = job, me
        self.start = self.last_print = time.monotonic()
        self.current = 0

    def __call__(self, it: int) -> None:
        self.current = it
        now = time.monotonic()
        if self.me == 0 and now - self.last_print >= PROGRESS_EVERY:
            self.last_print = now
            if self.job.result_path is not None:  # a job killed by its timeout is reported from this
                write_progress(self.job.result_path, it)
            if self.job.progress:
                print(f"# stress: {it}/{self.job.iters} iterations, no failure so far ({now - self.start:.1f} s)",
                      flush=True)


def stress(comm: MPI.Intracomm, job: StressJob, options: RuntimeOptions) -> StressOutcome:
    """Run ``job`` under ``options`` and stop at the first block with a failure.

    Collective. Returns the same outcome on every rank when the run ends normally. A deadlock or a
    crash ends the whole MPI job (``MPI_Abort``) after this rank printed what it knows and wrote its
    result file, so this function does not return then.
    """
    if job.user and (job.lower is not None or job.consume_fence is not None):
        raise ValueError("stress: lower and consume_fence apply to a built-in collective, not a user's program")
    me = comm.Get_rank()
    progress = _Progress(job, me)
    instance: list[ProgramInstance] = []
    hooks = Hooks(emit=silent, before_run=progress, on_instance=instance.append, stop_after=stop_at_failure)
    try:
        result: CheckResult | RepeatResult
        if job.user:
            result = run_program_iterations(comm, job.program, job.iters, options, job.block, hooks=hooks,
                                            cell_check=job.cell_check)
        else:
            result = run_check(comm, job.program, job.iters, options, job.block, hooks=hooks, lower=job.lower,
                               consume_fence=job.consume_fence)
    except DeadlockError as err:
        outcome = _deadlock_outcome(err, progress, instance[0] if instance else None, job.replay, me)
        _abort(comm, job.result_path, outcome, str(err) if err.primary else None,
               0.0 if err.primary else NON_PRIMARY_GRACE)
    except Exception as err:  # a crash of any rank ends the job; say what it was first
        outcome = StressOutcome("error", progress.current, progress.current + 1, me, f"{type(err).__name__}: {err}",
                                time.monotonic() - progress.start, job.replay)
        _abort(comm, job.result_path, outcome, f"# rank {me}: {type(err).__name__}: {err}", NON_PRIMARY_GRACE)
    kinds = _merge(BoundedComm(comm, max(60.0, 4 * float(options.timeout))).allgather(result.kinds))
    outcome = replace(_outcome(result, kinds, time.monotonic() - progress.start, job), notes=tuple(result.notes))
    if me == 0 and job.result_path is not None:
        write_outcome(job.result_path, outcome)
    return outcome


def _deadlock_outcome(err: DeadlockError, progress: _Progress, inst: ProgramInstance | None, replay: str,
                      me: int) -> StressOutcome:
    """The outcome this rank reports for a deadlock: its root cause (an invariant broken or a race
    found before it, ``err.causes``) when one is known, else the deadlock."""
    it = progress.current
    seconds = time.monotonic() - progress.start
    detail = str(err) if err.primary else f"rank {me} stuck at {err.location}"
    causes = err.causes or _mixing_causes(inst)
    kinds = {"deadlock": it}
    for c in causes:
        kinds.setdefault(c.kind, c.iteration if c.iteration >= 0 else it)
    if causes:
        first = causes[0]
        at = kinds[first.kind]
        text = detail if err.primary and err.causes else first.text + "\nthen " + detail
        return StressOutcome(first.kind, at, it + 1, me, text, seconds, replay, err.primary, min(kinds.values()),
                             _seen(kinds))
    return StressOutcome("deadlock", it, it + 1, me, detail, seconds, replay, err.primary, it, _seen(kinds))


def _outcome(result: CheckResult | RepeatResult, kinds: dict[str, Failure], seconds: float,
             job: StressJob) -> StressOutcome:
    """The outcome of a run that ended normally (every rank agrees on ``kinds``)."""
    primary = next((kinds[k] for k in PRIORITY if k in kinds), None)
    if primary is None and result.ok:
        return StressOutcome(None, None, result.iters, -1, "", seconds, job.replay)
    if primary is None:  # failed without a classified line (cannot happen with the current harnesses)
        return StressOutcome("error" if job.user else "wrong-data", None, result.iters, -1, result.summary(),
                             seconds, job.replay)
    its = {k: f.iteration for k, f in kinds.items()}
    known = [i for i in its.values() if i >= 0]
    return StressOutcome(primary.kind, primary.iteration, result.iters, primary.rank, primary.text, seconds,
                         job.replay, True, min(known) if known else None, _seen(its))


def _mixing_causes(inst: ProgramInstance | None) -> tuple[Cause, ...]:
    """Set/AtomicAdd mixing on any rank, read one-sidedly from the shadows (a deadlock's root cause when
    the board did not name one)."""
    checker = getattr(inst, "invariants", None)
    if checker is None:
        return ()
    try:
        return tuple(Cause("invariant", v.iteration, v.describe()) for v in checker.scan())
    except Exception:  # best effort on a failing job: a peer may already be gone
        return ()


def _abort(comm: MPI.Intracomm, result_path: str | None, outcome: StressOutcome, text: str | None,
           grace: float) -> None:
    # A launcher that reads the result file prints the outcome, wait-for graph included: printing it
    # here too would show it twice.
    if text and result_path is None:
        print(text, file=sys.stderr, flush=True)
    if result_path is not None:
        write_outcome(f"{result_path}.rank{outcome.rank}", outcome)
    if grace:
        time.sleep(grace)
    abort_job(comm, 3)


__all__ = ["KIND_ORDER", "PRIORITY", "StressJob", "StressOutcome", "read_outcome", "stress", "write_outcome"]
