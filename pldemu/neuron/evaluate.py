"""Run a kernel before and after the pass and measure both against the float64 and fp32 references."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pldemu.neuron.interpreter import Numerics, make_inputs, run
from pldemu.neuron.ir import Function


@dataclass(frozen=True)
class Errors:
    """Max abs and max relative error of one output against the float64 reference."""

    max_abs: float
    max_rel: float


def errors(got: np.ndarray, ref: np.ndarray) -> Errors:
    diff = np.abs(got - ref)
    nonzero = ref != 0
    rel = float(np.max(diff[nonzero] / np.abs(ref[nonzero]))) if nonzero.any() else 0.0
    return Errors(float(np.max(diff)) if diff.size else 0.0, rel)


@dataclass(frozen=True)
class OutputComparison:
    """One output tensor: errors before and after the pass, and whether after equals the fp32 reference."""

    tensor: str
    before: Errors
    after: Errors
    after_equals_fp32: bool
    before_equals_fp32: bool

    @property
    def never_less_precise(self) -> bool:
        return self.after.max_abs <= self.before.max_abs and self.after.max_rel <= self.before.max_rel


def compare(before: Function, after: Function, seed: int = 0) -> tuple[OutputComparison, ...]:
    """Execute both programs on the same inputs (``seed``) against the references of ``before``."""
    inputs = make_inputs(before, seed)
    exact = run(before, inputs, Numerics.FLOAT64)
    fp32 = run(before, inputs, Numerics.FP32)
    got_before = run(before, inputs, Numerics.HARDWARE)
    got_after = run(after, inputs, Numerics.HARDWARE)
    return tuple(
        OutputComparison(name, errors(got_before[name], exact[name]), errors(got_after[name], exact[name]),
                         bool(np.array_equal(got_after[name], fp32[name], equal_nan=True)),
                         bool(np.array_equal(got_before[name], fp32[name], equal_nan=True)))
        for name in exact)


__all__ = ["Errors", "OutputComparison", "compare", "errors"]
