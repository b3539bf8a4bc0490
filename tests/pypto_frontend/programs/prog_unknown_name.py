"""A pl name pypto does not have, in pypto's style: one clear error at this file's line, at decoration."""

import pypto.language as pl


def test_unknown_name():
    @pl.program
    class Unknown:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]) -> pl.Tensor[[1, 8], pl.FP32]:
            t = pl.load(x, [0, 0], [1, 8])
            u = pl.frobnicate(t)
            pl.store(u, [0, 0], y)
            return y
