"""pypto's ``pl.`` names that were refused as unknown: spellings of ops pldemu ran under ``pl.tile.*`` /
``pl.tensor.*`` (sin, cos, maximums, minimums, cmps, sel, dim, the block queries), pypto's tile functions
exported as ``pl.X`` (addc, addsc, tri, fillpad_expand, matmul_bias, the GEMV forms), its compile-time statements
(static_assert, static_print, func_attr, dump_tag), while loops (``pl.while_`` / ``pl.cond`` and Python's
``while``), ``pl.submit``, ``pl.cluster``, ``pl.ScopeMode``, the layouts; and the names pldemu does not run,
each one error at the user's line saying what it is. Goldens are numpy's, written cell by cell where the
rounding matters (two roundings for addc, the exact dot product plus the bias rounded once)."""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest
from test_pypto_plugin import inner_pytest, show, write

from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import AnnotationError, FrontendError, missing_pypto_name
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

R, C = 8, 32
K, N = 32, 16
B = 4


@pl.program
class Names:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[R, C], pl.FP32], i8: pl.Tensor[[R, C], pl.INT8], n: pl.Tensor[[1, 8], pl.INT32],
          y: pl.Out[pl.Tensor[[9, R, C], pl.FP32]], q: pl.Out[pl.Tensor[[R, C], pl.INT8]],
          z: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> None:
        pl.func_attr({"stationary": x, "note": 1})
        pl.static_assert(R * C == 256, "one tile")
        t = pl.load(x, [0, 0], [R, C])
        y = pl.assemble(y, pl.sin(t), [0, 0, 0])
        y = pl.assemble(y, pl.tensor.cos(x), [1, 0, 0])
        y = pl.assemble(y, pl.minimums(pl.maximums(t, -1.0), 1.0), [2, 0, 0])
        big = pl.cmps(t, 0.5, cmp_type=4)
        y = pl.assemble(y, pl.sel(big, t, pl.tile.full([R, C], pl.FP32, -7.0), pl.tile.create([1, 32], pl.UINT8)),
                        [3, 0, 0])
        y = pl.assemble(y, pl.addc(t, t, pl.tile.full([R, C], pl.FP32, 0.25)), [4, 0, 0])
        y = pl.assemble(y, pl.tile.addsc(t, 0.1, t), [5, 0, 0])
        y = pl.assemble(y, pl.tri(-1, [R, C], dtype=pl.FP32, upper=True), [6, 0, 0])
        part = pl.load(x, [0, 0], [R, 16], valid_shape=[5, 11])
        y = pl.assemble(y, pl.fillpad_expand(part, [R, C], pad_value=-math.inf), [7, 0, 0])
        y = pl.assemble(y, pl.tile.fillpad_expand(part, [R, C]), [8, 0, 0])
        q = pl.assemble(q, pl.maximums(pl.load(i8, [0, 0], [R, C]), 300), [0, 0])
        stop = pl.read(n, [0, 0])
        for (i, total) in pl.while_(init_values=(0, 0)):
            pl.cond(i < stop)
            _i_next, total_next = pl.yield_(i + 1, total + i * i)
        pl.write(z, [0, 0], pl.cast(total_next, pl.INT32))
        p = 1
        while p < stop * 10:
            p = p * 3
        pl.write(z, [0, 1], pl.cast(p, pl.INT32))
        pl.write(z, [0, 2], pl.cast(pl.dim(x, -1), pl.INT32))

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], i8: pl.Tensor[[R, C], pl.INT8], n: pl.Tensor[[1, 8], pl.INT32],
                  y: pl.Out[pl.Tensor[[9, R, C], pl.FP32]], q: pl.Out[pl.Tensor[[R, C], pl.INT8]],
                  z: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> None:
        pl.static_assert(pl.dim(x, 0) == R)
        pl.static_print("rows", pl.dim(x, 0))
        self.k(x, i8, n, y, q, z)


def _args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, (R, C)).astype(np.float32)
    i8 = rng.integers(-128, 128, (R, C)).astype(np.int8)
    n = np.zeros((1, 8), np.int32)
    n[0, 0] = 5
    return x, i8, n, np.zeros((9, R, C), np.float32), np.zeros((R, C), np.int8), np.zeros((1, 8), np.int32)


def test_names_translate_onto_the_tile_ops(capsys: pytest.CaptureFixture[str]) -> None:
    built, _ = translate(Names, 1, _args())
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    assert [ops.count(op) for op in (Op.TILE_SIN, Op.TILE_COS, Op.TILE_MAXIMUMS, Op.TILE_MINIMUMS, Op.TILE_CMPS,
                                     Op.TILE_SEL, Op.TILE_ADDC, Op.TILE_ADDSC, Op.TILE_TRI,
                                     Op.TILE_FILLPAD_EXPAND)] == [1, 1, 2, 1, 1, 1, 1, 1, 1, 2]
    out = capsys.readouterr().out
    assert out.count("static_print [") == 1 and f"{__file__}:" in out and ": rows 8" in out


def _golden(x: np.ndarray, i8: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    y = np.zeros((9, R, C), np.float32)
    y[2] = np.clip(x, -1, 1)
    y[3] = np.where(x > 0.5, x, np.float32(-7))
    y[4] = (x + x) + np.float32(0.25)  # two float32 additions
    y[5] = (x + np.float32(0.1)) + x
    y[6] = np.triu(np.ones((R, C)), -1)
    y[7] = -np.inf  # pad_value=-math.inf: the device pads with -inf
    y[7, :5, :11] = x[:5, :11]
    y[8, :5, :11] = x[:5, :11]
    q = np.maximum(i8, np.int8(300 - 256))  # 300 taken in INT8 first: 44
    return y, q, [sum(i * i for i in range(5)), 81, C]


@pytest.mark.launcher
def test_names_compute() -> None:
    args = _args()
    ir.compile(Names, distributed_config=DistributedConfig(device_ids=[0]))(*args)
    x, i8, _, y, q, z = args
    want_y, want_q, want_z = _golden(x, i8)
    np.testing.assert_allclose(y[0], np.sin(x), atol=1e-5, rtol=1e-4)  # pypto's lowering's accuracy
    np.testing.assert_allclose(y[1], np.cos(x), atol=1e-5, rtol=1e-4)
    np.testing.assert_array_equal(y[2:], want_y[2:])
    np.testing.assert_array_equal(q, want_q)
    assert z[0, :3].tolist() == want_z


@pl.program
class Cube:
    @pl.function(type=pl.FunctionType.InCore)
    def mm(self, a: pl.Tensor[[R, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16], bias: pl.Tensor[[1, N], pl.FP32],
           y: pl.Out[pl.Tensor[[R, N], pl.FP32]], g: pl.Out[pl.Tensor[[2, N], pl.FP32]]) -> pl.Tensor[[R, N], pl.FP32]:
        ta = pl.load(a, [0, 0], [R, K], target_memory=pl.Mem.Mat)
        tb = pl.load(b, [0, 0], [K, N], target_memory=pl.Mem.Mat)
        tbias = pl.load(bias, [0, 0], [1, N])
        pl.store(pl.matmul_bias(ta, tb, tbias), [0, 0], y)
        row = pl.load(a, [2, 0], [1, K], target_memory=pl.Mem.Mat)
        acc = pl.tile.gemv(row, tb, acc_phase="partial")
        acc = pl.gemv_acc(acc, row, tb, acc_phase="final")
        pl.store(acc, [0, 0], g)
        pl.store(pl.gemv_bias(row, tb, tbias), [1, 0], g)
        return y

    @pl.function(type=pl.FunctionType.InCore)
    def blocks(self, o: pl.Out[pl.Tensor[[1, 64], pl.INT32]]) -> pl.Tensor[[1, 64], pl.INT32]:
        pl.write(o, [0, pl.get_block_idx()], pl.cast(pl.get_block_idx() * 10 + pl.tile.get_block_num(), pl.INT32))
        return o

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, a: pl.Tensor[[R, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16], bias: pl.Tensor[[1, N], pl.FP32],
             y: pl.Out[pl.Tensor[[R, N], pl.FP32]], g: pl.Out[pl.Tensor[[2, N], pl.FP32]],
             o: pl.Out[pl.Tensor[[1, 64], pl.INT32]]) -> None:
        pl.dump_tag(a)
        scratch = pl.create_tensor([1, 64], pl.INT32, layout=pl.DN)
        with pl.scope(mode=pl.ScopeMode.MANUAL):
            y, first = pl.submit(self.mm, a, b, bias, y, g)
            o, _ = pl.spmd_submit(self.blocks, o, core_num=B, deps=[first])
        with pl.cluster(name_hint="tail"):  # noqa: SIM117 - pldemu, like pypto, takes one context per with
            with pl.at(level=pl.Level.CORE_GROUP):
                pl.write(o, [0, 63], pl.cast(pl.get_subblock_idx() + pl.tensor.get_block_num() + 40, pl.INT32))
                pl.write(scratch, [0, 0], 1)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[R, K], pl.BF16], b: pl.Tensor[[K, N], pl.BF16],
                  bias: pl.Tensor[[1, N], pl.FP32, pl.ND], y: pl.Out[pl.Tensor[[R, N], pl.FP32]],
                  g: pl.Out[pl.Tensor[[2, N], pl.FP32]], o: pl.Out[pl.Tensor[[1, 64], pl.INT32]]) -> None:
        self.orch(a, b, bias, y, g, o)


def _dot(a: np.ndarray, b: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Each cell: the exact dot product plus the bias, rounded once to FP32 (math.fsum)."""
    return np.array([[math.fsum([float(a[i, k]) * float(b[k, j]) for k in range(K)] + [float(bias[0, j])])
                      for j in range(b.shape[1])] for i in range(a.shape[0])]).astype(np.float32)


@pytest.mark.launcher
def test_cube_bias_gemv_submit_cluster_and_block_queries() -> None:
    import ml_dtypes

    rng = np.random.default_rng(3)
    a = rng.standard_normal((R, K)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal((1, N)).astype(np.float32)
    y, g, o = np.zeros((R, N), np.float32), np.zeros((2, N), np.float32), np.zeros((1, 64), np.int32)
    ir.compile(Cube, distributed_config=DistributedConfig(device_ids=[0]))(a, b, bias, y, g, o)
    np.testing.assert_array_equal(y, _dot(a, b, bias))
    once = _dot(a[2:3], b, np.zeros((1, N)))
    np.testing.assert_array_equal(g[0], _dot(a[2:3], b, once)[0])  # gemv, then gemv_acc adds it once more
    np.testing.assert_array_equal(g[1], _dot(a[2:3], b, bias)[0])
    assert o[0, :B].tolist() == [10 * i + B for i in range(B)] and o[0, 63] == 41


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            if mistake == "maximums-tensor":
                t = pl.maximums(x, 1.0)  # MARK-maximums-tensor
            if mistake == "minimums-tile":
                t = pl.tile.minimums(t, t)  # MARK-minimums-tile
            if mistake == "cmps-tile":
                pl.cmps(t, t)  # MARK-cmps-tile
            if mistake == "addsc-tile":
                t = pl.addsc(t, t, t)  # MARK-addsc-tile
            if mistake == "addc-scalar":
                t = pl.tile.addc(t, 2.0, t)  # MARK-addc-scalar
            if mistake == "tri-int64":
                pl.tri(0, [R, C], dtype=pl.INT64)  # MARK-tri-int64
            if mistake == "expand-smaller":
                t = pl.fillpad_expand(t, [R, 16])  # MARK-expand-smaller
            if mistake == "gemv-rows":
                two, square = pl.load(x, [0, 0], [2, C], target_memory=pl.Mem.Mat), pl.load(x, [0, 0], [C, C])
                pl.gemv(two, square)  # MARK-gemv-rows
            if mistake == "assert-false":
                pl.static_assert(R > 100, "need many rows")  # MARK-assert-false
            if mistake == "assert-runtime":
                pl.static_assert(pl.read(x, [0, 0]) > 0.0)  # MARK-assert-runtime
            if mistake == "assert-message":
                pl.static_assert(R > 1, str(R))  # MARK-assert-message
            if mistake == "while-call":
                for (i,) in pl.while_(init_values=(0,)):
                    pl.cond(i < pl.cast(pl.read(x, [0, 0]), pl.INT32))  # MARK-while-call
                    _i_out = pl.yield_(i + 1)
            if mistake == "while-forever":
                j = 0
                while True:  # MARK-while-forever
                    j = j + 1
            if mistake == "cond-misplaced":
                pl.cond(R > 1)  # MARK-cond-misplaced
            if mistake == "while-target":
                for i in pl.while_(init_values=(0,)):  # MARK-while-target
                    pl.cond(i < 3)
            if mistake == "func-attr-late":
                pl.func_attr({"k": 1})  # MARK-func-attr-late
            if mistake == "dump-in-kernel":
                pl.dump_tag(x)  # MARK-dump-in-kernel
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            self.k(x, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("maximums-tensor", "pypto refuses it: pl.maximums takes a tile (its tile function's deducer wants a TileType); "
                        "pl.maximum takes a tensor"),
    ("minimums-tile", "pypto refuses it: pl.tile.minimums: rhs must be a scalar (pl.minimum takes a tile)"),
    ("cmps-tile", "pypto refuses it: pl.cmps: rhs must be a scalar"),
    ("addsc-tile", "pypto refuses it: pl.addsc: rhs must be a scalar (pl.addc takes a tile)"),
    ("addc-scalar", "pypto refuses it: pl.tile.addc: rhs must be a tile (pl.addsc takes a scalar)"),
    ("tri-int64", "tile.tri requires dtype to be one of {INT8, UINT8, INT16, INT32, UINT16, UINT32, FP16, BF16, FP32}, "
                  "but got INT64"),
    ("expand-smaller", "tile.fillpad_expand destination dimension 1 (16) must be positive and >= source dimension (32)"),
    ("gemv-rows", "tile.gemv requires lhs physical and logical row extent to be exactly 1 (GEMV)"),
    ("assert-false", "pypto refuses it: static_assert failed: need many rows (condition `R > 100` evaluated to False)"),
    ("assert-runtime", "pypto refuses it: static_assert condition must be compile-time evaluable"),
    ("assert-message", "pypto refuses it: static_assert() message must be a string literal"),
    ("while-call", "while condition `i < pl.cast(pl.read(x, [0, 0]), pl.INT32)` computes a value before the loop"),
    ("while-forever", "while condition `True` is always true: the loop never ends"),
    ("cond-misplaced", "pl.cond(...) is the first statement of a pl.while_() loop's body"),
    ("while-target", "pypto refuses it: While loop target must be a tuple of 1 names for pl.while_()"),
    ("func-attr-late", "pypto refuses it: pl.func_attr must precede every other statement of the function body"),
    ("dump-in-kernel", "pypto refuses it: pl.dump_tag() is only valid inside an Orchestration or Inline function"),
])
def test_what_pldemu_or_pypto_refuses_is_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((R, C), np.float32), np.zeros((R, C), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    assert err.value.line == _line_of(f"MARK-{mistake}"), str(err.value)


def _pipe() -> None:
    @pl.program
    class Pipe:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32]) -> None:
            pl.tpush_to_aiv(pl.load(x, [0, 0], [R, C]), split=0)  # MARK-pipe


def _subc() -> None:
    @pl.program
    class Subc:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[R, C], pl.FP32], y: pl.Out[pl.Tensor[[R, C], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [R, C])
            pl.store(pl.tile.subc(t, t, t), [0, 0], y)  # MARK-subc


@pytest.mark.parametrize(("which", "message"), [
    ("pipe", "pl.tpush_to_aiv is not provided by pldemu's pypto layer (out of scope, pypto's cross-core pipe between "
             "a cluster's cube (AIC) and vector (AIV) cores"),
    ("subc", "pl.tile.subc is not provided by pldemu's pypto layer (out of scope, pypto documents pl.subc / pl.subsc "
             "as lhs - rhs - rhs2 (its docstrings and torch codegen) while pto-isa's TSUBC / TSUBSC compute src0 - "
             "src1 + src2"),
])
def test_a_name_pldemu_does_not_run_is_refused_where_the_body_uses_it(which: str, message: str) -> None:
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        {"pipe": _pipe, "subc": _subc}[which]()
    assert (err.value.file, err.value.line) == (__file__, _line_of(f"MARK-{which}"))


def test_submit_predicate_and_a_dn_tensor_annotation_are_refused_at_their_line() -> None:
    with pytest.raises(AnnotationError, match=re.escape("pypto refuses it: pl.Tensor[..., pl.DN] is not supported")) \
            as err:
        pl.Tensor[[R, C], pl.FP32, pl.DN]  # MARK-dn
    assert (err.value.file, err.value.line) == (__file__, _line_of("MARK-dn"))
    with pytest.raises(AnnotationError, match="NZ is the cube's fractal tile layout"):
        pl.Tensor[[R, C], pl.FP32, pl.NZ]

    @pl.program
    class Pred:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, y: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> pl.Tensor[[1, 8], pl.INT32]:
            pl.write(y, [0, 0], 1)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, y: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> None:
            y, _tid = pl.submit(self.k, y, predicate=(y[0, 0] > 0))  # MARK-predicate

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, y: pl.Out[pl.Tensor[[1, 8], pl.INT32]]) -> None:
            self.orch(y)

    with pytest.raises(FrontendError, match=re.escape("pl.submit(predicate=...) is not supported by pldemu")) as err2:
        translate(Pred, 1, (np.zeros((1, 8), np.int32),))
    assert err2.value.line == _line_of("MARK-predicate")


@pytest.mark.parametrize(("get", "name", "why"), [
    (lambda: pl.FP8E4M3FN, "pypto.language.FP8E4M3FN", "an element type pldemu's IR has no tensors of"),
    (lambda: pl.tile.matmul_mx, "pypto.language.tile.matmul_mx", "pypto's MX block-scale matmul"),
    (lambda: pl.TensorLayout.MX_A_ZZ, "pypto.language.TensorLayout.MX_A_ZZ", "pypto's MX block-scale matmul"),
    (lambda: pl.parse_program, "pypto.language.parse_program", "pypto's parser entry point"),
    (lambda: pl.AUTO, "pypto.language.AUTO", "pypto's cross-core pipe"),
])
def test_a_name_pldemu_does_not_run_says_what_it_is(get, name: str, why: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AttributeError) as err:
        get()
    assert missing_pypto_name(err.value) == name
    assert str(err.value).startswith(f"{name} is not provided by pldemu's pypto layer (out of scope, {why}")


def test_from_import_of_a_name_pldemu_does_not_run_is_one_collection_line(tmp_path: Path) -> None:
    write(tmp_path / "test_fp4.py", "import pytest\nfrom pypto.language import FP4\n\ndef test_never():\n    pass\n")
    res = inner_pytest(tmp_path, "-q", "test_fp4.py")
    assert res.returncode == 1, show(res)
    want = ("test_fp4.py:2: pypto.language.FP4 is not provided by pldemu's pypto layer (out of scope, an element "
            "type pldemu's IR has no tensors of")
    assert want in res.stdout and "Traceback" not in res.stdout, show(res)


def _line_of(marker: str) -> int:
    src, start = inspect.getsourcelines(inspect.getmodule(_line_of))  # type: ignore[arg-type]
    return next(max(start, 1) + i for i, line in enumerate(src) if marker in line and "_line_of" not in line)

