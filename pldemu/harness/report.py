"""The report of a single run (:class:`pldemu.harness.run.Ran`), as ``pldemu run`` prints it on rank 0
and as the JSON file ``--report`` writes for ``pldemu.launch``'s ``RunResult``.

Pure formatting: no MPI, importable by a launcher.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pldemu.harness.run import Ran, RankFigures, RunPlan
from pldemu.ir import Program
from pldemu.job.run_io import expectation_summary
from pldemu.runtime.options import RuntimeOptions

if TYPE_CHECKING:
    from pldemu.harness.repeat import RepeatResult
    from pldemu.runtime.instrument.invariants import Violation
    from pldemu.runtime.instrument.races import RaceReport


def format_report(program: Program, source: str, options: RuntimeOptions, plan: RunPlan, ran: Ran) -> str:
    """Rank 0's report of a single run: the figures of every rank, then each checker's verdict."""
    parts = [_header(program, source, plan.lowered, ran.backend, options, ran.gathered, plan.iters)]
    if ran.repeated is not None:
        parts.append(repeat_summary(ran.repeated))
    elif options.invariants:
        parts.append(invariant_summary(ran.violations, options.cell_check))
    if options.race_detect:
        from pldemu.harness.repeat import signal_buffers

        parts.append(race_summary(ran.races, ran.repeated.races if ran.repeated is not None else None,
                                  bool(signal_buffers(program))))
        parts += [f"    {note}" for note in ran.notes]
    if plan.io.checks:
        found = [m for g in ran.gathered for m in g.mismatches]
        parts.append(expectation_summary(plan.io, sum(g.checked for g in ran.gathered), found))
    if ran.truncations:
        from pldemu.runtime.truncation import summary

        parts.append(summary(ran.truncations, options.truncation_warn))
    return "\n".join(parts)


def json_report(program: Program, ran: Ran) -> dict[str, Any]:
    """``--report``'s content: what the Python API's ``RunResult`` is made of."""
    violations = ran.violations if ran.repeated is None else list(ran.repeated.violations)
    return {
        "program": program.name, "ranks": len(ran.gathered), "backend": ran.backend, "exit_code": ran.code,
        "seconds": [g.seconds for g in ran.gathered], "ops": dict(ran.ops()),
        "races": [r.describe() for r in ran.races], "notes": list(ran.notes),
        "invariants": [v.describe() for v in violations],
        "mismatches": [m.describe() for g in ran.gathered for m in g.mismatches],
        "truncations": [t.to_json() for t in ran.truncations],
    }


def race_summary(reports: Sequence[RaceReport], total: int | None = None, signals: bool = True) -> str:
    """The race detector's verdict as printed under the report (every report kept, one per line;
    ``total``: how many there were, when only the first ones were kept; ``signals``: whether the
    program has a signal buffer, i.e. whether a notify -> wait can have ordered anything)."""
    if not reports and not signals:
        return ("  races: none (no two conflicting window accesses by different ranks were unordered; the program "
                "has no signals, so no notify -> wait ordered any)")
    if not reports:
        return "  races: none (every pair of conflicting window accesses was ordered by a notify -> wait)"
    total = len(reports) if total is None else total
    lines = [f"  races: {total} report(s)" + (f", the first {len(reports)}:" if total > len(reports) else "")]
    lines += [f"    {r.describe()}" for r in reports]
    return "\n".join(lines)


def invariant_summary(violations: Sequence[Violation], cell_check: bool = True) -> str:
    """The invariant checker's verdict on one run (``--invariants`` without ``--iters``)."""
    if not violations:
        rest = ", every signal cell 0 at rest" if cell_check else "; signal cells at rest not checked: --no-cell-check"
        return f"  invariants: none broken (no negative cell, no cell written by both Set and AtomicAdd{rest})"
    return "\n".join([f"  invariants: {len(violations)} violation(s)", *(f"    {v.describe()}" for v in violations)])


def repeat_summary(result: RepeatResult) -> str:
    """The block checks' verdict of ``--iters`` K > 1, printed under the report."""
    if not result.cell_check:
        cells = "  signal cells at rest: not checked (--no-cell-check)"
    elif result.cells_nonzero:
        cells = (f"  signal cells at rest: {result.cells_nonzero} non-zero over {len(result.rows)} block ends "
                 "(each rank printed its first; --no-cell-check if the program leaves cells non-zero on purpose)")
    else:
        cells = f"  signal cells at rest: all 0 at every one of {len(result.rows)} block ends"
    lines = [cells]
    if result.violations:
        n = result.invariant_violations
        lines.append(f"  invariants: {n} violation(s)"
                     + (f", the first {len(result.violations)}:" if n > len(result.violations) else ""))
        lines += [f"    {v.describe()}" for v in result.violations]
    return "\n".join(lines)


def _header(program: Program, source: str, lowered: bool, backend: str, options: RuntimeOptions,
            gathered: Sequence[RankFigures], iters: int = 1) -> str:
    n = len(gathered)
    seconds = [g.seconds for g in gathered]
    calls = "" if iters == 1 else f" over {iters} calls"
    ops: Counter[str] = Counter()
    for g in gathered:
        ops.update(g.ops)
    lines = [
        f"pldemu run: program {program.name} ({source}{', lowered' if lowered else ''})",
        f"  ranks {n}, windows {backend}, wait timeout {options.timeout:g}s, seed {options.seed}",
        f"  wall time {max(seconds) * 1e3:.2f} ms{calls} (slowest rank; fastest {min(seconds) * 1e3:.2f} ms)",
        "  ops executed (all ranks): " + (", ".join(f"{op} {k}" for op, k in sorted(ops.items())) or "none"),
        "  buffers (final contents per rank):",
    ]
    for decl in program.buffers:
        name = decl.var.name
        lines.append(f"    {decl.kind.value} {name}")
        for r, g in enumerate(gathered):
            lines.append(f"      rank {r}: {g.buffers[name]}")
    return "\n".join(lines)


__all__ = ["format_report", "invariant_summary", "json_report", "race_summary", "repeat_summary"]
