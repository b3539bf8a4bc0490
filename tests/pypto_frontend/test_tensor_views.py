"""A tensor's slice made at the orchestration level is pypto's view: passed to an inline function's (or a
kernel's) tensor parameter it is that tensor, whose reads see the base's cells at the view's offsets and whose
writes (an Out parameter: slice assignment, ``pl.assemble``, ``pl.store``) land in the base's region. Run
on one and two ranks against numpy; bounds are checked against the view, at the user's line."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

from pldemu.ir.nodes import format_expr
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld
from pldemu.pypto.surface.runtime import RunConfig

T, C, TILES = 4, 16, 3
ROWS = T * TILES
NR = pl.dynamic("NR")


@pytest.fixture(autouse=True)
def _build_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_PROG_BUILD_DIR", str(tmp_path / "build_output"))


def _line_of(marker: str) -> int:
    src, _ = inspect.getsourcelines(sys.modules[__name__])
    return next(i for i, line in enumerate(src, 1) if marker in line and "_line_of" not in line)


@pl.jit.inline
def mix(x: pl.Tensor[[T, 2, C], pl.FP32], bias: pl.Tensor[[2, C], pl.FP32],
        y: pl.Tensor[[T, C], pl.FP32], z: pl.Tensor[[T, 2 * C], pl.FP32]):
    """y = x[:, 0] + x[:, 1] + bias (its two rows in turn); z = 2 * x seen as [T, 2C]: every access through
    the views."""
    rows = pl.tensor.dim(x, 0)
    flat = pl.reshape(x, [rows, 2 * C])  # a view too: the same cells seen with wider rows
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="mix"):
        for h in pl.range(2):
            r0 = h * 2
            summed = pl.add(flat[r0:r0 + 2, 0:C], flat[r0:r0 + 2, C:2 * C])
            y[r0:r0 + 2, :] = pl.add(summed, bias)
        pl.assemble(z, pl.mul(flat, 2.0), [0, 0])
    return y


@pl.jit.inline
def first_bias(bias: pl.Tensor[[1, C], pl.FP32], y: pl.Tensor[[T, C], pl.FP32]):
    """Adds bias[0, 0] (an element read through a view) to row 0 of y, with pl.load / pl.store of the view
    (and its ``.shape`` / ``.dtype``, as pl.jit folds them)."""
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="first"):
        row = pl.add(pl.load(y, [0, 0], [1, C]), pl.full([1, y.shape[1]], dtype=y.dtype, value=0.0))
        pl.store(pl.add(row, pl.read(bias, [0, 0])), [0, 0], y)
    return y


@pl.jit
def views_orch(x: pl.Tensor[[ROWS, 2, C], pl.FP32], bias: pl.Tensor[[2, C], pl.FP32],
               y: pl.Out[pl.Tensor[[ROWS, C], pl.FP32]], z: pl.Out[pl.Tensor[[ROWS, 2 * C], pl.FP32]]):
    for t in pl.range(TILES):
        t0 = t * T
        x_tile = pl.slice(x, [T, 2, C], [t0, 0, 0])
        y_tile = y[t0:t0 + T, :]
        z_tile = pl.slice(z, [T, 2 * C], [t0, 0])
        mix(x_tile, bias[0:2, :], y_tile, z_tile)
        first_bias(bias[1:2, :], y_tile)
    return y


@pl.jit.host
def views_host(x: pl.Tensor[[NR, ROWS, 2, C], pl.FP32], bias: pl.Tensor[[NR, 2, C], pl.FP32],
               y: pl.Out[pl.Tensor[[NR, ROWS, C], pl.FP32]], z: pl.Out[pl.Tensor[[NR, ROWS, 2 * C], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        views_orch(x[r], bias[r], y[r], z[r], device=r)


def _args(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(41)
    x = rng.standard_normal((n, ROWS, 2, C)).astype(np.float32)
    bias = rng.standard_normal((n, 2, C)).astype(np.float32)
    return x, bias, np.full((n, ROWS, C), -7.0, np.float32), np.full((n, ROWS, 2 * C), -7.0, np.float32)


@pytest.mark.launcher
@pytest.mark.parametrize("n", [1, 2])
def test_slices_passed_to_inline_functions_are_views_of_the_base(n: int) -> None:
    x, bias, y, z = _args(n)
    views_host(x, bias, y, z, config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n)))))
    want = x[:, :, 0] + x[:, :, 1] + np.tile(bias, (1, ROWS // 2, 1))
    want[:, ::T] += bias[:, 1:2, 0:1]
    np.testing.assert_allclose(y, want, rtol=1e-6)
    np.testing.assert_array_equal(z, 2 * x.reshape(n, ROWS, 2 * C))


def test_a_view_is_read_and_written_on_its_base_at_its_offsets() -> None:
    args = [a[0] for a in _args(1)]
    built, _ = translate(views_orch.compile(*args).program, 1, args)
    calls = [c for f in built.program.functions for c in function_calls(f)]
    # the Out views' writes are stores into y and z themselves, at the tile's row t0 (+ the callee's offset)
    stores = [c for c in calls if c.op is Op.TILE_STORE]
    assert {c.args[2].name for c in stores} == {"y", "z"}
    assert {format_expr(c.args[1].items[0]) for c in stores} == {"t0 + r0", "t0"}
    # x is read through its [T, 2C] reshape: a view of x seen as [ROWS, 2C], not a copy
    loads = [c for c in calls if c.op is Op.TILE_LOAD and c.args[0].name != "bias"]
    assert {c.args[0].name for c in loads} == {"x_view", "y"}


@pl.jit.inline
def overreach(y: pl.Tensor[[T, C], pl.FP32]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="over"):
        y[T - 1:T + 1, :] = pl.full([2, C], dtype=pl.FP32, value=0.0)  # MARK-overreach
    return y


@pl.jit
def overreach_orch(y: pl.Out[pl.Tensor[[ROWS, C], pl.FP32]]):
    overreach(y[0:T, :])
    return y


def test_a_view_out_of_its_bounds_is_refused_at_the_users_line() -> None:
    y = np.zeros((ROWS, C), np.float32)
    with pytest.raises(FrontendError, match=r"y\[view\]: axis 0 region \[3, 5\) is outside its 4 elements") as err:
        translate(overreach_orch.compile(y).program, 1, [y])
    assert (err.value.file, err.value.line) == (__file__, _line_of("MARK-overreach"))


@pl.jit.inline
def edge_store(y: pl.Tensor[[T, C], pl.FP32]):
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="edge"):
        two = pl.full([2, C], dtype=pl.FP32, value=1.0)
        pl.store(pl.set_validshape(two, 1, C), [T - 1, 0], y)  # only its valid row is written: inside the view
    return y


@pl.jit
def edge_orch(y: pl.Out[pl.Tensor[[ROWS, C], pl.FP32]]):
    edge_store(y[T:2 * T, :])
    return y


def test_a_store_through_a_view_is_bounded_by_the_tiles_valid_box() -> None:
    y = np.zeros((ROWS, C), np.float32)
    built, _ = translate(edge_orch.compile(y).program, 1, [y])
    (store,) = [c for f in built.program.functions for c in function_calls(f) if c.op is Op.TILE_STORE]
    assert store.args[2].name == "y" and format_expr(store.args[1].items[0]) == str(2 * T - 1)


LAYERS = 3


@pl.jit.inline
def bump_layer(cache: pl.Tensor[[T, C], pl.FP32], delta: pl.Tensor[[T, C], pl.FP32]):
    """cache += delta, through the view the caller passes (a layer of a stacked cache)."""
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="bump"):
        cache[0:T, :] = pl.add(cache[0:T, :], delta[0:T, :])
    return cache


@pl.jit
def layers_orch(caches: pl.InOut[pl.Tensor[[LAYERS, T, C], pl.FP32]], delta: pl.Tensor[[T, C], pl.FP32]):
    cache_1 = caches[1]  # a scalar index drops the layer axis: a view (pypto's tensor.slice)
    bump_layer(cache_1, delta)
    for layer in pl.range(2, LAYERS):  # a run-time index: the view's offset is folded at run time
        bump_layer(caches[layer, :, :], delta)
    return caches


@pl.jit.host
def layers_host(caches: pl.InOut[pl.Tensor[[NR, LAYERS, T, C], pl.FP32]], delta: pl.Tensor[[NR, T, C], pl.FP32]):
    for r in pl.range(pld.world_size()):
        layers_orch(caches[r], delta[r], device=r)


@pytest.mark.launcher
@pytest.mark.parametrize("n", [1, 2])
def test_an_indexed_layer_of_a_stacked_tensor_is_a_view(n: int) -> None:
    rng = np.random.default_rng(43)
    caches = rng.standard_normal((n, LAYERS, T, C)).astype(np.float32)
    delta = rng.standard_normal((n, T, C)).astype(np.float32)
    want = caches.copy()
    want[:, 1] += delta
    want[:, 2] += delta
    layers_host(caches, delta, config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(n)))))
    np.testing.assert_array_equal(caches, want)


W, PAD, REAL = 24, 8, 4


@pl.jit.inline
def tail_load(row: pl.Tensor[[1, W], pl.FP32], out: pl.Tensor[[1, PAD], pl.FP32]):
    """The last REAL cells of a view, loaded as a PAD-wide tile that overhangs the view (pypto-lib's
    ``hc_pre`` group loads): only the valid box is read, the rest padded with zeros."""
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tail"):
        tail = pl.load(row, [0, W - REAL], [1, PAD], valid_shape=[1, REAL], target_memory=pl.MemorySpace.Vec)
        pl.store(pl.fillpad(tail, pad_value=pl.PadValue.zero), [0, 0], out)
    return out


@pl.jit
def tail_orch(base: pl.Tensor[[2, W], pl.FP32], out: pl.Out[pl.Tensor[[1, PAD], pl.FP32]]):
    tail_load(base[1:2, :], out)
    return out


@pytest.mark.launcher
def test_a_load_overhanging_a_view_reads_only_its_valid_box() -> None:
    base = np.arange(2 * W, dtype=np.float32).reshape(2, W)
    out = np.full((1, PAD), -7.0, np.float32)
    tail_orch(base, out)
    np.testing.assert_array_equal(out[0], np.concatenate([base[1, W - REAL:], np.zeros(PAD - REAL, np.float32)]))


@pl.jit.inline
def doubled_rows(w: pl.Tensor[[C], pl.FP32], out: pl.Tensor[[T, C], pl.FP32]):
    """Every row of out = 2 * w, w reshaped to one row and read with ``pl.tile.load`` in each block."""
    w_row = pl.reshape(w, [1, C])
    for tok in pl.spmd(T, name_hint="rows"):
        pl.tile.store(pl.mul(pl.tile.load(w_row, [0, 0], [1, C]), 2.0), [tok, 0], out)
    return out


@pl.jit
def layer_rows_orch(flat_w: pl.Tensor[[LAYERS * C], pl.FP32], out: pl.Out[pl.Tensor[[LAYERS, T, C], pl.FP32]]):
    for layer in pl.range(LAYERS):  # the view starts at layer * C: a whole row of the reshape for every layer
        layer_w: pl.Tensor[[C], pl.FP32] = pl.slice(flat_w, [C], [layer * C])
        doubled_rows(layer_w, out[layer])
    return out


@pytest.mark.launcher
def test_a_flat_layer_view_reshaped_to_a_row_is_read_by_tile_load() -> None:
    flat_w = np.random.default_rng(44).standard_normal(LAYERS * C).astype(np.float32)
    out = np.zeros((LAYERS, T, C), np.float32)
    layer_rows_orch(flat_w, out)
    np.testing.assert_array_equal(out, np.repeat(2 * flat_w.reshape(LAYERS, 1, C), T, axis=1))


@pl.jit.inline
def add_thrice(x: pl.Tensor[[T, C], pl.FP32], acc: pl.Tensor[[T, C], pl.FP32]):
    """acc += x three times, acc carried through ``pl.range(init_values=)`` (a view: rebound, written in place)."""
    for _, (a,) in pl.range(3, init_values=(acc,)):
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="add"):
            a = pl.assemble(a, pl.add(pl.load(a, [0, 0], [T, C]), pl.load(x, [0, 0], [T, C])), [0, 0])
        a = pl.yield_(a)
    return acc


@pl.jit
def carried_orch(x: pl.Tensor[[ROWS, C], pl.FP32], y: pl.InOut[pl.Tensor[[ROWS, C], pl.FP32]]):
    for t in pl.range(TILES):
        add_thrice(x[t * T:(t + 1) * T, :], y[t * T:(t + 1) * T, :])
    return y


@pytest.mark.launcher
def test_a_view_carried_through_a_loop_is_written_in_place() -> None:
    x = np.random.default_rng(45).standard_normal((ROWS, C)).astype(np.float32)
    y = np.ones((ROWS, C), np.float32)
    carried_orch(x, y)
    np.testing.assert_array_equal(y, ((1 + x) + x) + x)


@pl.jit.inline
def scaled_rows(w: pl.Tensor[[C], pl.FP16], out: pl.Tensor[[T, C], pl.FP32]):
    """Every row of out = 3 * w, the view reshaped to a row inside the operand of another op (not bound to a
    name first, pypto-lib's rmsnorm casts its norm weights so): the reshape's view is read where the cast uses
    it."""
    for tok in pl.spmd(T, name_hint="rows"):
        out[tok:tok + 1, :] = pl.mul(pl.cast(pl.reshape(w, [1, C]), target_type=pl.FP32), 3.0)
    return out


@pl.jit
def nested_view_orch(flat_w: pl.Tensor[[LAYERS * C], pl.FP16], out: pl.Out[pl.Tensor[[LAYERS, T, C], pl.FP32]]):
    for layer in pl.range(LAYERS):
        layer_w: pl.Tensor[[C], pl.FP16] = pl.slice(flat_w, [C], [layer * C])
        scaled_rows(layer_w, out[layer])
    return out


@pytest.mark.launcher
def test_a_view_made_inside_another_ops_operand_is_read_there() -> None:
    flat_w = np.random.default_rng(46).standard_normal(LAYERS * C).astype(np.float16)
    out = np.zeros((LAYERS, T, C), np.float32)
    nested_view_orch(flat_w, out)
    want = 3 * flat_w.astype(np.float32).reshape(LAYERS, 1, C)
    np.testing.assert_array_equal(out, np.repeat(want, T, axis=1))


@pl.jit
def node_rows_orch(buf: pl.Tensor[[LAYERS, T, C], pl.FP32], node_t: pl.Tensor[[1], pl.INT32],
                   out: pl.Out[pl.Tensor[[T, C], pl.FP32]]):
    """pypto-lib deepseek_v3_2 decode_back's combine read: a [1, rows, C] slice of a 3-D buffer at a run-time
    node, rows from b0, reshaped to [rows, C] (one run of the buffer: a one-element axis, a narrowed one, a
    whole one)."""
    node = pl.cast(pl.tensor.read(node_t, [0]), pl.INDEX)
    for b0 in pl.range(0, T, 2):
        rows = pl.reshape(pl.slice(buf, [1, 2, C], [node, b0, 0]), [2, C])
        with pl.at(level=pl.Level.CORE_GROUP):
            out = pl.assemble(out, pl.mul(rows[:, :], 2.0), [b0, 0])
    return out


@pytest.mark.launcher
def test_a_slice_with_leading_one_element_axes_reshapes_as_one_run() -> None:
    buf = np.random.default_rng(45).standard_normal((LAYERS, T, C)).astype(np.float32)
    out = np.zeros((T, C), np.float32)
    node_rows_orch(buf, np.array([LAYERS - 1], np.int32), out)
    np.testing.assert_array_equal(out, 2 * buf[LAYERS - 1])
