"""An InCore kernel called from an Opaque entry that also has pl.at scopes (pypto promotes the entry to an
Orchestration: the call is a task of its own), the rows a pl.dynamic dimension of the class form bound from the
call's tensors; an InOut accumulator the kernel adds into per row block of a pl.range and a pl.at reads after,
then a `with pl.spmd(2):` whose sole pl.at (pypto's explicit InCore carrier) normalises its block's rows of the accumulator."""
import numpy as np
import pypto.language as pl
from pypto import ir

ROWS = pl.dynamic("ROWS")
C, TR = 32, 8


@pl.program
class KernelInOpaque:
    @pl.function(type=pl.FunctionType.InCore)
    def accumulate(self, x: pl.Tensor[[ROWS, C], pl.FP32], r0: pl.Scalar[pl.INDEX],
                   acc: pl.InOut[pl.Tensor[[ROWS, C], pl.FP32]]) -> pl.Tensor[[ROWS, C], pl.FP32]:
        t = pl.load(x, [r0, 0], [TR, C])
        a = pl.load(acc, [r0, 0], [TR, C])
        return pl.store(pl.add(a, pl.mul(t, t)), [r0, 0], acc)

    @pl.function
    def entry(self, x: pl.Tensor[[ROWS, C], pl.FP32], acc: pl.InOut[pl.Tensor[[ROWS, C], pl.FP32]],
              out: pl.Out[pl.Tensor[[ROWS, C], pl.FP32]]) -> pl.Tensor[[ROWS, C], pl.FP32]:
        n = pl.tensor.dim(x, 0)
        for r in pl.range(0, n, TR):
            acc = self.accumulate(x, r, acc)
        with pl.spmd(2):  # noqa: SIM117 (pypto's carrier form: a sole pl.at in the pl.spmd body)
            with pl.at(level=pl.Level.CORE_GROUP, name_hint="scale"):
                blk = pl.tile.get_block_idx()
                rows = acc[blk * 8:blk * 8 + 8, :]
                out = pl.assemble(out, pl.row_expand_div(rows, pl.row_max(rows)), [blk * 8, 0])
        return out


def test_kernel_in_opaque() -> None:
    rng = np.random.default_rng(31)
    x = rng.standard_normal((16, C)).astype(np.float32)
    acc = np.abs(rng.standard_normal((16, C))).astype(np.float32) + 0.5
    out = np.zeros((16, C), np.float32)
    want_acc = acc + x * x
    ir.compile(KernelInOpaque)(x, acc, out)
    np.testing.assert_allclose(acc, want_acc, rtol=1e-6)
    np.testing.assert_allclose(out, want_acc / want_acc.max(1, keepdims=True), rtol=1e-6)
