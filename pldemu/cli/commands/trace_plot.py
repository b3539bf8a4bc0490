"""``pldemu trace-plot FILE.json -o FILE.png``: draw a trace as per-rank swimlanes.

The drawing is :mod:`pldemu.job.trace_plot`'s; this module parses the options and prints the result.

    pldemu trace-plot run.json -o run.png
    pldemu trace-plot run.json -o calls2-3.png --calls 2:3      # zoom on calls 2 and 3
    pldemu trace-plot run.json -o zoom.png --start 1.5 --end 4    # milliseconds from the first event

Exit status: 0 drawn, 2 unreadable input or bad options.
"""

from __future__ import annotations

import argparse

from pldemu.job.exits import EXIT_OK, usage_error
from pldemu.job.trace_plot import PlotError, PlotView, draw, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pldemu trace-plot`` options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("traces", nargs="+", metavar="FILE.json", help="trace file(s) to draw (merged)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.png", help="where to write the PNG")
    parser.add_argument("--calls", metavar="A:B", default=None,
                        help="only the time span of calls A..B (inclusive; 'A' alone for one call)")
    parser.add_argument("--start", type=float, default=None, metavar="MS",
                        help="start of the window, milliseconds after the first event")
    parser.add_argument("--end", type=float, default=None, metavar="MS",
                        help="end of the window, milliseconds after the first event")
    parser.add_argument("--no-flows", action="store_true", help="do not draw notify -> wait arrows")
    parser.add_argument("--no-compress", action="store_true",
                        help="draw idle gaps between calls to scale (default: long gaps are cut short)")
    parser.add_argument("--width", type=float, default=16.0, metavar="IN", help="figure width in inches")
    parser.add_argument("--dpi", type=int, default=110, help="resolution of the PNG (default 110)")
    parser.add_argument("--title", default=None, help="figure title (default: program, ranks, races)")


def view_of(args: argparse.Namespace) -> PlotView:
    """The :class:`~pldemu.job.trace_plot.PlotView` the parsed options describe."""
    return PlotView(args.calls, args.start, args.end, not args.no_flows, not args.no_compress, args.width, args.dpi,
                    args.title)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pldemu trace-plot``."""
    try:
        import matplotlib  # noqa: F401  (an optional dependency: say what to install, before reading)
    except ImportError:
        return usage_error("trace-plot", "drawing needs matplotlib, which is not installed: "
                           "pip install 'pldemu[plot]' (or pip install matplotlib)")
    try:
        tr = load(args.traces)
        drawn = draw(tr, args.output, view_of(args))
    except PlotError as err:
        return usage_error("trace-plot", str(err))
    print(f"pldemu trace-plot: wrote {args.output} ({drawn['ranks']} ranks, {drawn['slices']} slices, "
          f"{drawn['flows']} flows, {drawn['races']} races)")
    return EXIT_OK


__all__ = ["add_arguments", "run", "view_of"]
