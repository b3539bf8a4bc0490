"""pypto's on-core scalar arrays: ``pl.array.create`` / ``arr[i]`` / ``arr[i] = v``, the explicit
``pl.array.get_element`` / ``update_element`` and the ``pl.Array[extent, dtype]`` annotation, run on two ranks to
numpy goldens (a histogram, its exclusive prefix sum, a BOOL "seen" mask, an INT64 running product); the
translation onto LOCAL buffers; pypto's refusals, each one error at the user's line."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from pldemu.ir import BufferKind
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
T, E = 24, 8


@pl.program
class Histogram:
    """Per rank: counts of expert ids, their exclusive prefix sum (explicit get/update spellings), which experts
    were seen (BOOL), and a running INT64 product past INT32's range; the loop variables `e` are re-used as
    plain names after their loops (pypto scopes a loop variable to its loop)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, ids: pl.Tensor[[1, T], pl.INT32], counts: pl.Out[pl.Tensor[[3, E], pl.INT32]],
          big: pl.Out[pl.Tensor[[1, 8], pl.INT64]]) -> None:
        hist: pl.Array[E, pl.INT32] = pl.array.create(E, pl.INT32)
        seen = pl.array.create(E, pl.BOOL)
        for e in pl.range(E):
            hist[e] = 0
            seen[e] = False
        for t in pl.range(T):
            e = pl.read(ids, [0, t])
            cur = hist[e]
            hist[e] = cur + 1
            seen[e] = True
        offsets = pl.array.create(E, pl.INT32)
        acc = pl.const(0, pl.INT32)
        for e in pl.range(E):
            offsets = pl.array.update_element(offsets, e, acc)
            acc = acc + pl.array.get_element(hist, e)
        for e in pl.range(E):
            pl.write(counts, [0, e], hist[e])
            pl.write(counts, [1, e], offsets[e])
            if seen[e]:
                pl.write(counts, [2, e], 1)
        prod = pl.array.create(2, pl.INT64)
        prod[0] = 1
        for _i in pl.range(5):
            prod[0] = prod[0] * 1000
        pl.write(big, [0, 0], prod[0])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, ids: pl.Tensor[[NR, 1, T], pl.INT32], counts: pl.Out[pl.Tensor[[NR, 3, E], pl.INT32]],
                  big: pl.Out[pl.Tensor[[NR, 1, 8], pl.INT64]]) -> None:
        for r in pl.range(2):
            self.k(ids[r], counts[r], big[r], device=r)


def _args() -> tuple[np.ndarray, ...]:
    ids = np.random.default_rng(7).integers(0, E - 2, (2, 1, T)).astype(np.int32)  # the last two never seen
    return ids, np.zeros((2, 3, E), np.int32), np.zeros((2, 1, 8), np.int64)


@pytest.mark.launcher
def test_arrays_run_on_two_ranks() -> None:
    ids, counts, big = _args()
    ir.compile(Histogram, distributed_config=DistributedConfig(device_ids=[0, 1]))(ids, counts, big)
    hist = np.stack([np.bincount(ids[r, 0], minlength=E) for r in range(2)])
    np.testing.assert_array_equal(counts[:, 0], hist)
    np.testing.assert_array_equal(counts[:, 1], np.cumsum(hist, axis=1) - hist)
    np.testing.assert_array_equal(counts[:, 2], (hist > 0).astype(np.int32))
    assert (big[:, 0, 0] == 10**15).all()


def test_an_array_is_a_local_buffer_read_and_written_in_place() -> None:
    built, _ = translate(Histogram, 2, _args())
    p = built.program
    local = {b.var.name: b.var.type for b in p.buffers if b.kind is BufferKind.LOCAL}
    arrays = {n: t for n, t in local.items() if re.match(r"(hist|seen|offsets|prod)", n)}
    assert sorted(str(t.dtype.value) for t in arrays.values()).count("int32") == 4  # hist, offsets, per rank
    assert {t.dtype.value for t in arrays.values()} == {"int32", "bool", "int64"}
    ops = [c.op for f in p.functions for c in function_calls(f)]
    assert ops.count(Op.TENSOR_WRITE) >= 2 * 8 and Op.TILE_LOAD not in ops


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[1, E], pl.INT32], y: pl.Out[pl.Tensor[[1, E], pl.INT32]]) -> None:
            a = pl.array.create(E, pl.INT32)
            if mistake == "extent":
                pl.array.create(0, pl.INT32)  # MARK-extent
            if mistake == "dtype":
                pl.array.create(E, pl.FP32)  # MARK-dtype
            if mistake == "float-value":
                a[0] = pl.const(1.5, pl.FP32)  # MARK-float-value
            if mistake == "range":
                a[E] = 1  # MARK-range
            if mistake == "wide-literal":
                a[0] = 1099511627776  # MARK-wide-literal
            if mistake == "tensor-element":
                x[0, 0] = 1  # MARK-tensor-element
            pl.write(y, [0, 0], a[0])

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[1, E], pl.INT32], y: pl.Out[pl.Tensor[[1, E], pl.INT32]]) -> None:
            self.k(x, y, device=0)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("extent", "array.create extent must be positive, got 0"),
    ("dtype", "array.create dtype must be integer, BOOL, or TASK_ID, got FP32"),
    ("float-value", r"value dtype \(fp32\) must match array dtype \(int32\)"),
    ("range", r"axis 0 region \[8, 9\) is outside its 8 elements"),
    ("wide-literal", "1099511627776 is not a value of the array's int32"),
    ("tensor-element", "an element write is not supported"),
])
def test_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    prog = _mistake(mistake)
    x, y = np.zeros((1, E), np.int32), np.zeros((1, E), np.int32)
    with pytest.raises(FrontendError, match=message) as info:
        translate(prog, 1, (x, y))
    source, first = inspect.getsourcelines(_mistake)
    line = first + next(i for i, s in enumerate(source) if f"MARK-{mistake}" in s)
    assert info.value.line == line


def test_the_annotation_is_checked() -> None:
    assert pl.Array[4, pl.INT32].extent == 4
    with pytest.raises(TypeError, match=r"Array requires \[extent, dtype\] notation"):
        pl.Array[[4], pl.INT32]
