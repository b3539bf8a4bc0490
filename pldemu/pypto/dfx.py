"""A call's ``config=RunConfig(...)``: what its DFX switches mean on pldemu, and the options the call runs with.

pypto's five DFX switches make simpler write its diagnostics per dispatch under
``<output_dir>/dfx_outputs/rank{r}/d{k}/`` in simpler's formats. pldemu has no PTO2 task graph, rings,
PMU or per-task argument marshalling, so it cannot write those files. Where pldemu has data of the same
kind, its own Chrome/Perfetto trace (``RuntimeOptions.trace``: every rank's ops as timed slices, notify
-> wait arrows), the switch writes that trace, in pldemu's format, to
``<output_dir>/dfx_outputs/pldemu_trace_call<k>.json`` (the k-th traced call of that folder); every other
switch is accepted and has no effect (:data:`DFX_SWITCHES`).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from pathlib import Path
from typing import Any

from pldemu.pypto.session import FrontendOptions, current_options

DFX_FOLDER = "dfx_outputs"
"""pypto's folder of a run's diagnostics, under ``compiled.output_dir``."""
TRACE_PREFIX = "pldemu_trace_call"


class Answer(enum.Enum):
    """What pldemu does for one DFX switch."""

    TRACE = "pldemu's Chrome/Perfetto trace of the call"
    NONE = "no effect"


@dataclasses.dataclass(frozen=True)
class DfxSwitch:
    """One of pypto's DFX switches (a ``RunConfig`` field), pldemu's answer and why."""

    field: str
    answer: Answer
    why: str


DFX_SWITCHES: tuple[DfxSwitch, ...] = (
    DfxSwitch("enable_chip_swimlane", Answer.TRACE,
              "per-task timing: pldemu's trace times every op of every rank (its format, not simpler's records)"),
    DfxSwitch("enable_dep_gen", Answer.NONE, "PTO2 dependency edges: pldemu runs no PTO2 task graph"),
    DfxSwitch("enable_scope_stats", Answer.NONE, "ring-fill peaks per scope: pldemu has no runtime rings"),
    DfxSwitch("enable_pmu", Answer.NONE, "AICore hardware counters: pldemu runs no AICore"),
    DfxSwitch("enable_dump_args", Answer.NONE, "per-task argument dumps: pldemu marshals no task arguments"),
)
"""Each DFX switch and pldemu's answer (docs/pypto-frontend.md has the same table)."""


def check_config(config: Any, who: str) -> None:
    """``config=`` must be a ``pypto.runtime.RunConfig`` (or None)."""
    from pldemu.pypto.surface.runtime.runner import RunConfig

    if config is not None and not isinstance(config, RunConfig):
        raise TypeError(f"{who}: config= takes a pypto.runtime.RunConfig, got {type(config).__name__}")


def wants_trace(config: Any) -> bool:
    """Some switch of ``config`` that pldemu answers with its trace is on."""
    return config is not None and any(bool(getattr(config, s.field)) for s in DFX_SWITCHES if s.answer is Answer.TRACE)


def next_trace_file(output_dir: Path) -> Path:
    """``<output_dir>/dfx_outputs/pldemu_trace_call<k>.json``, the first k not taken by an earlier call."""
    folder = output_dir / DFX_FOLDER
    return next(path for k in itertools.count() if not (path := folder / f"{TRACE_PREFIX}{k}.json").exists())


def call_options(config: Any, output_dir: Path, base: FrontendOptions | None = None) -> FrontendOptions:
    """The options one call runs with: ``base`` (the session's, by default) and, when ``config`` asks for a
    trace, ``RuntimeOptions.trace`` set to the call's own file under ``output_dir`` (folder made here)."""
    opts = base or current_options()
    if not wants_trace(config) or opts.codegen_only:
        return opts
    trace = next_trace_file(output_dir)
    trace.parent.mkdir(parents=True, exist_ok=True)
    return dataclasses.replace(opts, runtime=dataclasses.replace(opts.runtime, trace=str(trace.resolve())))


__all__ = ["DFX_FOLDER", "DFX_SWITCHES", "TRACE_PREFIX", "Answer", "DfxSwitch", "call_options", "check_config",
           "next_trace_file", "wants_trace"]
