"""``pldemu python --estimate FUNCTION SCRIPT [ARGS]``: will a program fit this machine, from its
signature alone?

A model-scale script (pypto-lib's 43-layer forwards) builds every weight in host memory before its first
compiled call; on a machine too small for it the script spends many minutes and is killed by the kernel
before pldemu sees the call it would have estimated and refused (``execute._check_memory``). This reads the
function's annotated parameters instead, without running the script's ``main``: the script is imported
under another name than ``__main__`` (``sys.argv`` its own, as a script that parses its flags at import
expects), and the parameters of static shape are summed.

A call holds at least those bytes once in the caller (its host tensors) and :data:`RUN_COPIES` times across
the ranks (each rank its slice, in its window and the run's copies: ``pldemu.job.resources``); what the
ranks add (``create_tensor`` buffers, tiles, checkers, the processes) comes on top. Parameters of run-time
extents (``pl.dynamic``) are named and not counted, so the figure is a lower bound, and a refusal is
certain where it is given.
"""

from __future__ import annotations

import math
import runpy
from dataclasses import dataclass
from typing import Any

from pldemu.job.resources import RUN_COPIES, ResourceError, check_bytes, size_text
from pldemu.pypto.capture import CapturedFunction, CapturedProgram
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.jit.decorator import JITFunction
from pldemu.pypto.jit.deps import captured
from pldemu.pypto.types import TensorAnn

RUN_NAME = "__pldemu_estimate__"
"""The script's ``__name__`` while it is imported for an estimate: its ``if __name__ == "__main__"`` block
(input building, the call) does not run."""

BIGGEST = 4
"""Parameters a report names."""


@dataclass(frozen=True)
class SignatureEstimate:
    """The statically shaped parameters of one function (name, bytes; largest first) and those of run-time
    extents, which are not counted."""

    function: str
    sized: tuple[tuple[str, int], ...]
    unsized: tuple[str, ...]

    @property
    def parameters(self) -> int:
        return sum(b for _, b in self.sized)

    @property
    def total(self) -> int:
        """At least what a call holds: the parameters in the caller and :data:`RUN_COPIES` times in the ranks."""
        return (1 + RUN_COPIES) * self.parameters

    def describe(self) -> str:
        biggest = ", ".join(f"{n} {size_text(b)}" for n, b in self.sized[:BIGGEST])
        return (f"at least {size_text(self.total)} ({size_text(self.parameters)} of parameters x (1 in the caller "
                f"+ {RUN_COPIES} in the ranks))"
                + (f"; biggest parameters: {biggest}" if biggest else "")
                + ("; not counted, sized at run time: " + ", ".join(self.unsized) if self.unsized else ""))


def signature_estimate(fn: CapturedFunction) -> SignatureEstimate:
    """The bytes of ``fn``'s tensor parameters of static shape (every dim an int)."""
    sized: list[tuple[str, int]] = []
    unsized: list[str] = []
    for name in fn.params:
        ann = fn.annotations.get(name)
        if not isinstance(ann, TensorAnn):
            continue
        static = ann.dims is not None and ann.dtype is not None and all(
            isinstance(d, int) and not isinstance(d, bool) for d in ann.dims)
        if static:
            sized.append((name, math.prod(ann.dims or ()) * ann.dtype.nbytes))  # type: ignore[union-attr]
        else:
            unsized.append(name)
    sized.sort(key=lambda item: -item[1])
    return SignatureEstimate(fn.name, tuple(sized), tuple(unsized))


def entry_function(namespace: dict[str, Any], name: str, script: str) -> CapturedFunction:
    """The function ``name`` names in the script's globals: a ``pl.jit`` function, or a ``@pl.program``
    (its HOST function, else ``Program.method``)."""
    head, _, method = name.partition(".")
    found = namespace.get(head)
    if isinstance(found, JITFunction) and not method:
        return captured(found)
    if isinstance(found, CapturedProgram):
        fn = found.functions.get(method) if method else _program_entry(found)
        if fn is not None:
            return fn
    raise FrontendError(f"{name!r} is not a pl.jit function or a @pl.program (or Program.function) of {script}",
                        script, 0)


def _program_entry(prog: CapturedProgram) -> CapturedFunction | None:
    try:
        return prog.host()
    except FrontendError:
        return next(iter(prog.functions.values()), None) if len(prog.functions) == 1 else None


def estimate_script(path: str, name: str) -> tuple[SignatureEstimate, str | None]:
    """Import the script at ``path`` (``sys.argv`` and ``sys.path`` set by the caller) and estimate ``name``;
    the second item is the refusal's text when the estimate does not fit this machine, else None."""
    namespace = runpy.run_path(path, run_name=RUN_NAME)
    est = signature_estimate(entry_function(namespace, name, path))
    try:
        check_bytes(est.total, f"{name} needs {est.describe()}")
    except ResourceError as err:
        return est, str(err)
    return est, None


__all__ = ["RUN_NAME", "SignatureEstimate", "entry_function", "estimate_script", "signature_estimate"]
