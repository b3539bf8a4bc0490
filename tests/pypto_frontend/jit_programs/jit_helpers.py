"""Helpers that the jit programs import from another module (pypto-lib keeps its barriers so): an
``@pl.jit.inline`` handshake spliced at its call sites and an ``@pl.jit.opaque`` staging step. Not a
test file: the programs import it."""

import pypto.language as pl
import pypto.language.distributed as pld


@pl.jit.inline
def handshake(
    sig: pld.DistributedTensor[[2, 1], pl.INT32],
    peer: pl.Scalar[pl.INT32],
    row: pl.Scalar[pl.INT32],
    expected: pl.Scalar[pl.INT32],
):
    """Count one on ``peer``'s cell ``row``, then wait until this rank's own cell ``row`` holds ``expected``."""
    pld.system.notify(sig, peer=peer, offsets=[row, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(sig, offsets=[row, 0], expected=expected, cmp=pld.WaitCmp.Ge)
    return sig


@pl.jit.opaque
def stage(src: pl.Tensor, dst: pld.DistributedTensor, cols: pl.Scalar[pl.INT32]):
    """Copy one row into this rank's window (bare annotations: typed by the caller's arguments)."""
    row = pl.load(src, [0, 0], [1, cols])
    return pl.store(row, [0, 0], dst)
