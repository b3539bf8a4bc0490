"""Helpers of the tile-composite tests: build, lower and run a one-rank program on COMM_SELF."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from mpi4py import MPI

from pldemu.ir import FunctionBuilder, Program, ProgramBuilder, Var
from pldemu.lowering import lower_composite_ops
from pldemu.lowering.backend import STANDALONE, Backend
from pldemu.runtime import ProgramInstance, RuntimeOptions


def unary_program(name: str, dtype: str, shape: tuple[int, int],
                  body: Callable[[FunctionBuilder, Var], Var], out_dtype: str | None = None) -> Program:
    """local x -> tile.load -> body -> tile.store into local out (not lowered)."""
    pb = ProgramBuilder(name)
    x = pb.local("x", dtype, list(shape))
    out = pb.local("out", out_dtype or dtype, list(shape))
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], list(shape), hint="t")
    fb.pld.tile.store(body(fb, t), [0, 0], out)
    return pb.build()


def run_local(program: Program, inputs: Mapping[str, np.ndarray], outputs: tuple[str, ...] = ("out",),
              backend: Backend = STANDALONE, repeat: list[Mapping[str, np.ndarray]] | None = None,
              ) -> list[dict[str, np.ndarray]]:
    """Lower (for ``backend``) and run on one rank; one result dict per input set."""
    lowered = lower_composite_ops(program, backend=backend)
    results = []
    with ProgramInstance(lowered, MPI.COMM_SELF, RuntimeOptions()) as inst:
        for data in [inputs, *(repeat or [])]:
            for name, arr in data.items():
                inst.local(name)[...] = arr
            inst.run()
            results.append({name: inst.local(name).copy() for name in outputs})
    return results
