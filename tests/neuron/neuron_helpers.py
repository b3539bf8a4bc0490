"""Shared helpers for the neuron tests: corpus paths and small kernels written inline."""

from __future__ import annotations

from pathlib import Path

from pldemu.neuron.ir import Function
from pldemu.neuron.text import parse_file, parse_function
from pldemu.neuron.verifier import verify

CORPUS = Path(__file__).resolve().parents[2] / "pldemu" / "examples" / "neuron"
CORPUS_FILES = sorted(CORPUS.glob("*.nki"))
FULL = "[[4,8],[1,4]]+0"
"""The whole of an [8, 4] tensor."""


def corpus(name: str) -> Function:
    return verify(parse_file(CORPUS / f"{name}.nki"))


def kernel(body: str, tensors: str = "") -> Function:
    """A verified [8, 4] kernel: input x (bf16) in SBUF-ready form xs, plus ``tensors`` and ``body``."""
    head = ("kernel t\nhbm x[8, 4] bf16 input\nhbm xf[8, 4] fp32 input\nhbm xi[8, 4] int32 input\n"
            "sbuf xs[8, 4] bf16\nsbuf xfs[8, 4] fp32\nsbuf xis[8, 4] int32\n" + tensors +
            f"%lx = DMACopy(x{FULL}:bf16) dst=xs{FULL}:bf16 dtype=bf16\n"
            f"%lf = DMACopy(xf{FULL}:fp32) dst=xfs{FULL}:fp32 dtype=fp32\n"
            f"%li = DMACopy(xi{FULL}:int32) dst=xis{FULL}:int32 dtype=int32\n")
    return verify(parse_function(head + body, "<test>"))


def chain(producer: str, cast_dtype: str = "fp32") -> Function:
    """``%p = producer``; ``%c = TensorCopyOp(%p)`` to ``cast_dtype``; a consumer of ``%c``."""
    return kernel(f"%p = {producer}\n%c = TensorCopyOp(%p) dtype={cast_dtype}\n"
                  f"%u = ActivationOp(%c) func=exp dtype={cast_dtype}\n")
