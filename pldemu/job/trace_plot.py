"""Draw a trace as per-rank swimlanes (``pldemu trace-plot``), from the files a job left behind.

The trace is what ``pldemu run --trace FILE.json`` (or ``RuntimeOptions(trace=...)``) wrote: Chrome /
Perfetto trace events (:mod:`pldemu.runtime.instrument.trace`). One lane per rank (rank 0 on top);
each ``call N`` is a shaded band behind its ops; ops are bars coloured by primitive kind; grey arrows
go from a notify to the wait it satisfied; red crosses joined by a dashed line mark the two accesses
of a race report; black stars mark failures. Several files are merged (a failed job leaves
``FILE.rankR.json`` per failing rank). Launcher side: no MPI; matplotlib is imported by :func:`draw`.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COLOURS: dict[str, str] = {
    "put": "#1f77b4",
    "atomic put": "#17becf",
    "get": "#7fc97f",
    "remote_load": "#2ca02c",
    "notify": "#e6550d",
    "wait": "#fcd9a8",
    "load/store": "#9467bd",
    "tensor": "#bcbd22",
    "compute": "#8c8c8c",
}
"""Bar colour per slice category (``pldemu.runtime.instrument.trace.KINDS``); waits are pale: they are idle time."""

MIN_BAR = 0.0025
"""Bars narrower than this fraction of the visible time range are widened to it, so that a 5 us
notify still shows in a 20 ms window."""


class PlotError(Exception):
    """The input cannot be drawn (reported without a traceback, exit 2)."""


@dataclass(frozen=True)
class PlotView:
    """What to draw and how: ``calls`` ``"A:B"`` (or ``"A"``) zooms on those calls, ``start`` / ``end``
    (ms after the first event) bound the window, ``flows`` draws notify -> wait arrows, ``compress``
    cuts long idle gaps short; the figure's ``width`` (inches), ``dpi`` and ``title`` (None: program,
    ranks, races)."""

    calls: str | None = None
    start: float | None = None
    end: float | None = None
    flows: bool = True
    compress: bool = True
    width: float = 16.0
    dpi: int = 110
    title: str | None = None


@dataclass
class Trace:
    """The events of one or more trace files, sorted into what the plot draws (times in us)."""

    ranks: list[int] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    flows: list[tuple[float, int, float, int]] = field(default_factory=list)
    races: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    program: str = ""


def load(paths: Sequence[str]) -> Trace:
    """Read and merge trace files."""
    tr = Trace()
    starts: dict[tuple[str, Any], dict[str, Any]] = {}
    ends: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    ranks: set[int] = set()
    for i, path in enumerate(paths):
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise PlotError(f"{path}: cannot read a trace: {err}") from None
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if not isinstance(events, list):
            raise PlotError(f"{path}: no traceEvents list")
        if isinstance(doc, dict) and not tr.program:
            tr.program = str(doc.get("otherData", {}).get("program", ""))
        for ev in events:
            if not isinstance(ev, dict) or "ph" not in ev:
                continue
            ph, cat = ev["ph"], ev.get("cat", "")
            pid = ev.get("pid", 0)
            if ph == "M":
                ranks.add(int(pid))
                continue
            if ph == "X":
                ranks.add(int(pid))
                (tr.calls if cat == "call" else tr.slices).append(ev)
            elif ph == "s":
                starts[(str(i), ev.get("id"))] = ev
            elif ph == "f":
                ends.setdefault((str(i), ev.get("id")), []).append(ev)
            elif ph in ("i", "I"):
                ranks.add(int(pid))
                if cat == "race":
                    tr.races.append(ev)
                elif cat == "error":
                    tr.errors.append(ev)
    for key, s in starts.items():
        for f in ends.get(key, []):
            tr.flows.append((float(s["ts"]), int(s["pid"]), float(f["ts"]), int(f["pid"])))
    tr.ranks = sorted(ranks)
    if not tr.slices and not tr.calls:
        raise PlotError(f"{', '.join(paths)}: the trace has no slices to draw")
    return tr


def _window(tr: Trace, view: PlotView) -> tuple[float, float, float]:
    """(origin, lo, hi) in us: origin is the first event; [lo, hi] the visible span."""
    times = [float(e["ts"]) for e in tr.slices + tr.calls]
    ends = [float(e["ts"]) + float(e.get("dur", 0)) for e in tr.slices + tr.calls]
    origin, lo, hi = min(times), min(times), max(ends)
    if view.calls is not None:
        a, _, b = str(view.calls).partition(":")
        try:
            first, last = int(a), int(b or a)
        except ValueError:
            raise PlotError(f"--calls wants A:B (call numbers), got {view.calls!r}") from None
        chosen = [e for e in tr.calls if first <= int(e.get("args", {}).get("call", -1)) <= last]
        if not chosen:
            raise PlotError(f"--calls {view.calls}: the trace has no such call")
        lo = min(float(e["ts"]) for e in chosen)
        hi = max(float(e["ts"]) + float(e.get("dur", 0)) for e in chosen)
    if view.start is not None:
        lo = origin + view.start * 1e3
    if view.end is not None:
        hi = origin + view.end * 1e3
    if hi <= lo:
        raise PlotError(f"empty time window: {(lo - origin) / 1e3:g} .. {(hi - origin) / 1e3:g} ms")
    pad = (hi - lo) * 0.01
    return origin, lo - pad, hi + pad


class TimeMap:
    """Trace time (us) -> plot x (ms), with long idle gaps cut short.

    Harness work between calls (checks, barriers, native MPI) can take far longer than the calls
    themselves; drawn to scale, the calls become slivers. A gap where no rank runs anything, longer
    than ``GAP_FRACTION`` of the busy time, is drawn ``GAP_WIDTH`` of it wide, hatched, with its
    real length written in it. Inside busy stretches the scale is true.
    """

    def __init__(self, busy: list[tuple[float, float]], lo: float, hi: float, origin: float, compress: bool) -> None:
        self.origin = origin
        total = sum(b - a for a, b in busy) or (hi - lo)
        gap_w = total * GAP_WIDTH
        # pieces: (real start, real end, x start, x end, is a cut gap)
        self.pieces: list[tuple[float, float, float, float, bool]] = []
        xpos = (lo - origin) * 1e-3
        t = lo
        for a, b in [*busy, (hi, hi)]:
            if a > t:
                cut = compress and a - t > max(total * GAP_FRACTION, 200.0)
                width = gap_w if cut else a - t
                self.pieces.append((t, a, xpos, xpos + width * 1e-3, cut))
                xpos += width * 1e-3
            if b > a:
                self.pieces.append((a, b, xpos, xpos + (b - a) * 1e-3, False))
                xpos += (b - a) * 1e-3
            t = max(t, b)
        if not self.pieces:
            self.pieces.append((lo, hi, xpos, xpos + (hi - lo) * 1e-3, False))
        self._starts = [p[0] for p in self.pieces]

    def __call__(self, t: float) -> float:
        i = max(0, bisect_right(self._starts, t) - 1)
        a, b, xa, xb, _ = self.pieces[i]
        if t >= b or b == a:
            return xb if t >= b else xa
        return xa + (xb - xa) * (t - a) / (b - a)

    @property
    def gaps(self) -> list[tuple[float, float, float, float]]:
        """Cut gaps: (real start, real end, x start, x end)."""
        return [(a, b, xa, xb) for a, b, xa, xb, cut in self.pieces if cut]

    def ticks(self, per_ms: float) -> tuple[list[float], list[str]]:
        """Tick positions and labels (real ms since the first event) for the uncut pieces."""
        from matplotlib.ticker import MaxNLocator

        pos: list[float] = []
        labels: list[str] = []
        total = self.pieces[-1][3] - self.pieces[0][2]
        spacing = total * 0.045  # no two labels closer than this (pieces meet at cut gaps)
        for a, b, xa, xb, cut in self.pieces:
            if cut or xb - xa < spacing:
                continue
            n = max(1, int((xb - xa) * per_ms))
            ra, rb = (a - self.origin) * 1e-3, (b - self.origin) * 1e-3
            for v in MaxNLocator(nbins=n, steps=[1, 2, 2.5, 5, 10]).tick_values(ra, rb):
                at = self(self.origin + v * 1e3)
                if ra <= v <= rb and v >= 0 and all(abs(at - q) >= spacing for q in pos):
                    pos.append(at)
                    labels.append(f"{v:g}")
        return pos, labels


GAP_FRACTION = 0.08
"""A gap longer than this fraction of the busy time (and 0.2 ms) is cut short."""

GAP_WIDTH = 0.03
"""Width of a cut gap, as a fraction of the busy time."""

MAX_LISTED_RACES = 6
"""Race reports written out under the plot (each pair is numbered next to its markers)."""


def _busy(tr: Trace, lo: float, hi: float) -> list[tuple[float, float]]:
    spans = sorted((max(lo, float(e["ts"])), min(hi, float(e["ts"]) + float(e.get("dur", 0))))
                   for e in tr.calls + tr.slices)
    for ev in tr.races + tr.errors:
        t = float(ev["ts"])
        spans.append((t, t))
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if b < a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _short(location: str) -> str:
    """``main:23 x = pld.tile.remote_load(...)`` -> ``main:23 remote_load``; host locations unchanged."""
    if location.startswith("host:"):
        return location
    head, _, rest = location.partition(" ")
    call = re.search(r"([A-Za-z_][\w.]*)\(", rest)
    return f"{head} {call.group(1).rsplit('.', 1)[-1]}" if call else head


def _race_line(sides: list[dict[str, Any]]) -> str:
    """One line per race under the plot: region, target and both accesses, short locations."""
    a0 = sides[0].get("args", {})
    if "buffer" not in a0:
        return str(a0.get("report", sides[0].get("name", "")))
    parts = []
    for ev in sides:
        a = ev.get("args", {})
        host = str(a.get("at", "")).startswith("host:")
        when = f"after call {a.get('call')}" if host else f"call {a.get('call')}"
        parts.append(f"rank {ev['pid']} {a.get('kind', '?')} at {_short(str(a.get('at', '')))} ({when})")
    region = str(sides[0].get("name", "")).removeprefix("race: ")
    return f"{region} of rank {a0.get('target')}: " + " || ".join(parts)


@dataclass
class _Plot:
    """One drawing in progress: the trace, the visible span, the axes and what has been drawn."""

    tr: Trace
    view: PlotView
    x: TimeMap
    lo: float
    hi: float
    lane: dict[int, int]
    pairs: dict[Any, list[dict[str, Any]]]
    ax: Any = None
    kinds_seen: set[str] = field(default_factory=set)
    slices: int = 0
    flows: int = 0

    def visible(self, t0: float, t1: float) -> bool:
        return t1 >= self.lo and t0 <= self.hi

    @property
    def span(self) -> tuple[float, float]:
        """The visible span in plot x."""
        return self.x(self.lo), self.x(self.hi)


def _race_pairs(tr: Trace, lane: dict[int, int], lo: float, hi: float) -> dict[Any, list[dict[str, Any]]]:
    """The visible race reports, both sides of each under its pair id."""
    pairs: dict[Any, list[dict[str, Any]]] = {}
    for ev in tr.races:
        if int(ev["pid"]) in lane and lo <= float(ev["ts"]) <= hi:
            pairs.setdefault(ev.get("args", {}).get("pair", id(ev)), []).append(ev)
    return pairs


def _draw_gaps(p: _Plot) -> None:
    """Cut gaps: hatched, with their real length."""
    n = len(p.lane)
    for a, b, xa, xb in p.x.gaps:
        p.ax.axvspan(xa, xb, facecolor="white", edgecolor="#c8c8c8", hatch="////", lw=0, zorder=-2)
        p.ax.text((xa + xb) / 2, n - 0.5, f"+{(b - a) * 1e-3:.3g} ms", fontsize=7, color="#6f6f6f", ha="center",
                  va="bottom", rotation=90, zorder=8)


def _draw_calls(p: _Plot) -> None:
    """Calls: pale alternating bands behind each lane's ops (red when the call failed), labelled."""
    x, x_lo = p.x, p.span[0]
    for ev in p.tr.calls:
        t0, t1 = float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0))
        if not p.visible(t0, t1):
            continue
        call = int(ev.get("args", {}).get("call", 0))
        y = p.lane[int(ev["pid"])]
        face = "#fbe3e3" if ev.get("args", {}).get("failed") else ("#e6e6e6" if call % 2 else "#f2f2f2")
        p.ax.broken_barh([(x(t0), x(t1) - x(t0))], (y - 0.46, 0.92), facecolors=face, edgecolors="#c3c7cd",
                         linewidth=0.6, zorder=0)
        p.ax.text(max(x(t0), x_lo), y - 0.44, f" call {call}", fontsize=7, color="#5a6270", va="top", ha="left",
                  zorder=1, clip_on=True)


def _draw_ops(p: _Plot) -> None:
    """Ops, one broken_barh per (lane, kind) so that thousands of slices stay cheap."""
    x_lo, x_hi = p.span
    min_w = (x_hi - x_lo) * MIN_BAR
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for ev in p.tr.slices:
        t0, t1 = float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0))
        if p.visible(t0, t1):
            bars.setdefault((p.lane[int(ev["pid"])], str(ev.get("cat", "compute"))), []).append(
                (p.x(t0), max(p.x(t1) - p.x(t0), min_w)))
    order = list(COLOURS)
    for (y, kind), spans in sorted(bars.items(), key=lambda kv: order.index(kv[0][1]) if kv[0][1] in order else 99):
        p.kinds_seen.add(kind)
        tall = 0.5 if kind == "wait" else 0.62
        p.ax.broken_barh(spans, (y - tall / 2, tall), facecolors=COLOURS.get(kind, "#444444"),
                         edgecolors="none", zorder=2 if kind == "wait" else 3)
    p.slices = sum(len(v) for v in bars.values())


def _draw_flows(p: _Plot) -> None:
    """Notify -> satisfied wait arrows, from and to the bar edges facing each other."""
    from matplotlib.patches import FancyArrowPatch

    for ts, src, tf, dst in p.tr.flows if p.view.flows else ():
        if not (p.visible(ts, ts) or p.visible(tf, tf)) or src not in p.lane or dst not in p.lane:
            continue
        p.flows += 1
        y0, y1 = p.lane[src], p.lane[dst]
        dy = 0.0 if y0 == y1 else (0.31 if y1 > y0 else -0.31)
        # A patch (not an annotation) so that arrows from outside the window are clipped to the axes.
        p.ax.add_patch(FancyArrowPatch((p.x(ts), y0 + dy), (p.x(tf), y1 - dy), arrowstyle="-|>", color="#3b3b3b",
                                       alpha=0.5, lw=0.7, shrinkA=0, shrinkB=0, mutation_scale=7, zorder=4))


def _draw_races(p: _Plot) -> list[str]:
    """Both sides of each race as red crosses joined by a dashed line, numbered; returns the lines
    listed under the plot."""
    texts: list[str] = []
    ordered = sorted(p.pairs.values(), key=lambda sides: min(float(e["ts"]) for e in sides))
    for k, sides in enumerate(ordered, 1):
        xs = [p.x(float(e["ts"])) for e in sides]
        ys = [p.lane[int(e["pid"])] for e in sides]
        if len(sides) == 2:
            p.ax.plot(xs, ys, color="#d62728", lw=0.9, ls="--", alpha=0.7, zorder=5)
        p.ax.scatter(xs, ys, marker="X", s=70, color="#d62728", edgecolors="white", linewidths=0.6, zorder=6)
        if k <= MAX_LISTED_RACES:
            for xv, yv in zip(xs, ys, strict=True):
                p.ax.text(xv, yv + 0.24, str(k), color="#b01b1b", fontsize=7, fontweight="bold", ha="center",
                          va="top", zorder=7)
            texts.append(f"race {k}: {_race_line(sides)}")
    if len(p.pairs) > MAX_LISTED_RACES:
        texts.append(f"... and {len(p.pairs) - MAX_LISTED_RACES} more race reports in this window")
    return texts


def _draw_errors(p: _Plot) -> None:
    """Failures as black stars."""
    for ev in p.tr.errors:
        pid = int(ev["pid"])
        if pid in p.lane and p.visible(float(ev["ts"]), float(ev["ts"])):
            p.ax.scatter([p.x(float(ev["ts"]))], [p.lane[pid]], marker="*", s=160, color="black", zorder=7)


def _draw_axes(p: _Plot) -> None:
    """Lanes, the time axis (real ms at the ticks, whatever was cut), the legend and the title."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ax, n = p.ax, len(p.lane)
    x_lo, x_hi = p.span
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"rank {r}" for r in p.tr.ranks])
    pos, labels = p.x.ticks(per_ms=10.0 / max(x_hi - x_lo, 1e-9))
    ax.set_xticks(pos)
    ax.set_xticklabels(labels)
    ax.set_xlabel("time (ms since the first event, common clock of all ranks"
                  + ("; hatched: idle gaps cut short)" if p.x.gaps else ")"))
    ax.grid(axis="x", color="#e3e3e3", lw=0.6, zorder=-1)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles: list[Any] = [Patch(facecolor=COLOURS[k], label=k) for k in COLOURS if k in p.kinds_seen]
    if p.flows:
        handles.append(Line2D([], [], color="#3b3b3b", alpha=0.6, lw=0.9, marker=">", markersize=4,
                              label="notify -> wait"))
    if p.pairs:
        handles.append(Line2D([], [], color="#d62728", ls="--", marker="X", markersize=7, label="race"))
    if p.tr.errors:
        handles.append(Line2D([], [], color="black", ls="", marker="*", markersize=10, label="failure"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    ax.set_title(p.view.title if p.view.title is not None else _title(p), fontsize=10, loc="left")


def _title(p: _Plot) -> str:
    """Program, ranks, calls and race reports."""
    ncalls = len({int(e.get("args", {}).get("call", 0)) for e in p.tr.calls})
    npairs = len(p.pairs)
    title = f"{p.tr.program or 'trace'}: {len(p.lane)} ranks, {ncalls} call{'s' if ncalls != 1 else ''}"
    return title + (f", {npairs} race report{'s' if npairs != 1 else ''}" if npairs else ", no race reports")


def draw(tr: Trace, out: str, view: PlotView) -> dict[str, int]:
    """Draw ``tr`` into ``out``; returns what was drawn (counts), for the caller's message."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    origin, lo, hi = _window(tr, view)
    lane = {r: i for i, r in enumerate(tr.ranks)}
    p = _Plot(tr, view, TimeMap(_busy(tr, lo, hi), lo, hi, origin, compress=view.compress), lo, hi, lane,
              _race_pairs(tr, lane, lo, hi))
    # How many races get listed under the plot decides the figure height.
    listed = min(len(p.pairs), MAX_LISTED_RACES)
    foot = 0.22 * listed + (0.22 if len(p.pairs) > listed else 0.0)
    height = 1.5 + 0.9 * len(lane) + foot
    fig, p.ax = plt.subplots(figsize=(view.width, height))
    _draw_gaps(p)
    _draw_calls(p)
    _draw_ops(p)
    _draw_flows(p)
    texts = _draw_races(p)
    _draw_errors(p)
    _draw_axes(p)
    fig.tight_layout(rect=(0, foot / height, 1, 1))
    for i, line in enumerate(texts):
        fig.text(0.01, (foot - 0.22 * (i + 0.8)) / height, line, fontsize=7.5, color="#8b1a1a", ha="left",
                 va="bottom", family="monospace")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=view.dpi)
    plt.close(fig)
    return {"ranks": len(lane), "slices": p.slices, "flows": p.flows, "races": len(p.pairs)}


__all__ = ["COLOURS", "PlotError", "PlotView", "TimeMap", "Trace", "draw", "load"]
