"""Printing, JSON and the busbw plot of a bench run; the targets of the performance issue."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pldemu.bench.bulk import BulkRow
from pldemu.bench.collectives import CollectiveRow
from pldemu.bench.common import format_size
from pldemu.bench.micro import MicroRow
from pldemu.bench.signals import SignalRow

COLLECTIVE_HEADER = (
    f"#{'':39}{' pldemu ':-^36}   {' native MPI ':-^36}\n"
    f"# {'collective':<16} {'size(B)':>10} {'count':>10}"
    f" {'time(us)':>11} {'algbw':>7} {'busbw':>7} {'#wrong':>7}"
    f"   {'time(us)':>11} {'algbw':>7} {'busbw':>7} {'#wrong':>7}   {'ratio':>6}"
)
"""Column titles of the collectives table (algbw, busbw in GB/s; ratio = pldemu / native time)."""

SIGNAL_HEADER = f"# {'signal':<20} {'raw MPI(us)':>12} {'pldemu(us)':>11} {'ratio':>6} {'windows(us)':>12}"
BULK_HEADER = (
    f"# {'op':<12} {'size(B)':>10} {'pldemu(us)':>11} {'GB/s':>7} {'memcpy(us)':>11} {'GB/s':>7}"
    f" {'%memcpy':>8} {'#wrong':>7}"
)
MICRO_HEADER = f"# {'micro (one process, best of many)':<36} {'value':>10}"

BOUND_HEADER = (
    f"# {'recipe':<16} {'size(B)':>10} {'time(us)':>11} {'bound(us)':>10} {'ratio':>6}"
    f"   = {'phases':>6} x {'raw round(us)':>13} + {'MB moved':>9} / {'memcpy GB/s':>11}"
    f"   {'floor(us)':>10} {'ratio':>6} = phases x {'futex hop(us)':>13} + copy"
)
"""Column titles of the bounds table: bound and floor use no pldemu figure (see ``collectives.py``)."""


def format_collective(row: CollectiveRow) -> str:
    """One collectives-table row."""
    c = row.case
    p, n = row.figures(row.pldemu), row.figures(row.native)
    size = c.actual_bytes
    return (
        f"  {c.label:<16} {size:>10} {c.count:>10}"
        f" {p[0]:>11.1f} {p[1]:>7.3f} {p[2]:>7.3f} {_wrong(row.pldemu.wrong):>7}"
        f"   {n[0]:>11.1f} {n[1]:>7.3f} {n[2]:>7.3f} {_wrong(row.native.wrong):>7}   {row.ratio:>6.2f}"
    )


def format_signal(row: SignalRow) -> str:
    """One signals-table row."""
    win = f"{row.windows.median * 1e6:>12.1f}" if row.windows is not None else f"{'-':>12}"
    return (
        f"  {row.what:<20} {row.raw.median * 1e6:>12.1f} {row.pldemu.median * 1e6:>11.1f}"
        f" {row.ratio:>6.2f} {win}"
    )


def format_bulk(row: BulkRow) -> str:
    """One bulk-table row."""
    return (
        f"  {row.op:<12} {row.nbytes:>10} {row.pldemu.median * 1e6:>11.1f} {row.pldemu_gbps:>7.2f}"
        f" {row.memcpy.median * 1e6:>11.1f} {row.memcpy_gbps:>7.2f} {100 * row.fraction:>7.0f}%"
        f" {_wrong(row.pldemu.wrong):>7}"
    )


def format_micro(row: MicroRow) -> str:
    """One micro row."""
    return f"  {row.what:<36} {row.value:>10.2f} {row.unit}"


def format_bound(row: CollectiveRow) -> str:
    """One bounds-table row: measured time, the pldemu-independent bound and floor, and their terms."""
    t = row.pldemu.median * 1e6
    b = (row.bound_s or math.nan) * 1e6
    f = row.floor_s * 1e6
    return (
        f"  {row.case.label:<16} {row.case.actual_bytes:>10} {t:>11.1f} {b:>10.1f} {t / b:>6.2f}"
        f"   = {row.barriers:>6} x {row.round_s * 1e6:>13.1f}"
        f" + {row.bytes_moved / 1e6:>9.1f} / {row.memcpy_gbps:>11.2f}"
        f"   {f:>10.1f} {t / f if f > 0 else math.nan:>6.2f} = phases x {row.hop_s * 1e6:>13.1f} + copy"
    )


def _wrong(value: int) -> str:
    return "n/a" if value < 0 else str(value)


# ----------------------------------------------------------------------------------------------
# Targets
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One target of the performance issue, evaluated on this run."""

    name: str
    measured: float
    limit: float
    higher_is_better: bool = False
    unit: str = "x"

    @property
    def met(self) -> bool:
        """True when the measured figure is on the right side of the limit."""
        if math.isnan(self.measured):
            return False
        return self.measured >= self.limit if self.higher_is_better else self.measured <= self.limit

    def format(self) -> str:
        """``  notify->wait hop / raw MPI hop      0.83x <= 1.50x   met``."""
        rel = ">=" if self.higher_is_better else "<="
        if self.unit == "%":
            fig = f"{100 * self.measured:6.0f}% {rel} {100 * self.limit:.0f}%"
        else:
            fig = f"{self.measured:6.2f}x {rel} {self.limit:.2f}x"
        return f"  {self.name:<44} {fig:<18} {'met' if self.met else 'NOT MET'}"


TARGET_SIZE = 16 << 20
"""The size the bandwidth targets are stated at (16 MiB)."""

NATIVE_TARGETS = {"allreduce mesh": 3.0, "allreduce ring": 6.0, "reduce_scatter": 1.5, "allgather": 1.0,
                  "all_to_all": 1.0, "broadcast": 1.0, "all_to_all_v": 1.0}
"""The issue's limits of pldemu time / native time at :data:`TARGET_SIZE`, by row label."""


def targets(
    signals: Sequence[SignalRow], bulk: Sequence[BulkRow], colls: Sequence[CollectiveRow]
) -> list[Target]:
    """The issue's targets that this run measured."""
    out: list[Target] = []
    for s in signals:
        if s.what.startswith("notify"):
            out.append(Target("notify->wait hop / raw MPI hop", s.ratio, 1.0))
        else:
            out.append(Target("pld.tensor.barrier / raw signal round", s.ratio, 1.0))
    for b in bulk:
        if b.nbytes == TARGET_SIZE:
            out.append(Target(f"{b.op} 16M bandwidth / memcpy", b.fraction, 0.70, True, "%"))
    for c in colls:
        if c.case.actual_bytes != TARGET_SIZE:
            continue
        limit = NATIVE_TARGETS.get(c.case.label)
        if limit is not None:
            out.append(Target(f"{c.case.label} 16M time / native", c.ratio, limit))
        bound = c.bound_s
        if bound and c.case.name == "allreduce":
            out.append(Target(f"{c.case.label} 16M time / its MPI bound", c.pldemu.median / bound, 1.5))
    return out


# ----------------------------------------------------------------------------------------------
# The whole run
# ----------------------------------------------------------------------------------------------


@dataclass
class BenchReport:
    """Everything one bench run measured (identical on every rank)."""

    nranks: int
    backend: str
    dtype: str
    warmup: int
    iters: int
    sizes: tuple[int, ...]
    signals: list[SignalRow] = field(default_factory=list)
    bulk: list[BulkRow] = field(default_factory=list)
    collectives: list[CollectiveRow] = field(default_factory=list)
    micro: list[MicroRow] = field(default_factory=list)

    @property
    def wrong(self) -> int:
        """Wrong elements over every checked measurement (pldemu and native)."""
        total = 0
        for c in self.collectives:
            total += max(c.pldemu.wrong, 0) + max(c.native.wrong, 0)
        for b in self.bulk:
            total += max(b.pldemu.wrong, 0)
        return total

    def targets(self) -> list[Target]:
        """The issue's targets this run measured."""
        return targets(self.signals, self.bulk, self.collectives)

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "nranks": self.nranks,
            "backend": self.backend,
            "dtype": self.dtype,
            "warmup": self.warmup,
            "iters": self.iters,
            "sizes": [format_size(s) for s in self.sizes],
            "signals": [s.as_dict() for s in self.signals],
            "bulk": [b.as_dict() for b in self.bulk],
            "collectives": [c.as_dict() for c in self.collectives],
            "micro": [m.as_dict() for m in self.micro],
            "targets": [
                {"name": t.name, "measured": t.measured, "limit": t.limit, "met": t.met} for t in self.targets()
            ],
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`as_dict` to ``path``."""
        Path(path).write_text(json.dumps(self.as_dict(), indent=2, allow_nan=True) + "\n")

    def plot(self, path: str | Path) -> None:
        """busbw against size, pldemu (solid) and native MPI (dashed), one colour per collective."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        series: dict[str, list[CollectiveRow]] = {}
        for c in self.collectives:
            if c.case.name != "barrier":
                series.setdefault(c.case.label, []).append(c)
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, (label, rows) in enumerate(series.items()):
            rows = sorted(rows, key=lambda r: r.case.actual_bytes)
            xs = [r.case.actual_bytes for r in rows]
            colour = f"C{i % 10}"
            ax.plot(xs, [r.figures(r.pldemu)[2] for r in rows], "-o", color=colour, label=f"{label} pldemu")
            ax.plot(xs, [r.figures(r.native)[2] for r in rows], "--x", color=colour, label=f"{label} native")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size per rank (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(f"pldemu vs native MPI, {self.nranks} ranks, {self.backend} windows, {self.dtype}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)


__all__ = [
    "BOUND_HEADER",
    "BULK_HEADER",
    "COLLECTIVE_HEADER",
    "MICRO_HEADER",
    "SIGNAL_HEADER",
    "BenchReport",
    "Target",
    "format_bound",
    "format_bulk",
    "format_collective",
    "format_micro",
    "format_signal",
    "targets",
]
