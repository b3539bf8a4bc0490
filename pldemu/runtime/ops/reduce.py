"""Handlers of the row / column reductions and expands: row_sum/max/min/prod, col_sum/max/min/prod,
row_argmax/argmin, col_argmax/argmin,
row_expand and col_expand with add/sub/mul/div/max/min/expdif, and the plain broadcasts.

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``). Everything runs in the tile's
dtype (no widening: pypto accumulates in the input dtype), each addition rounded to it.

- **Reductions read the valid box only** (pypto's deducers bound the loops by the valid extent; pypto's
  user docs say the pad takes part, so a program that relies on it fills the pad first, as pypto-lib
  does with ``fillpad``). The result's rows / columns outside the valid box are poison, like any fresh
  tile's.
- **Summation order.** pypto says passing a ``tmp_tile`` switches between a binary tree and sequential
  accumulation (pypto's tile.col_sum docstring: the tmp selects the binary tree). pldemu follows it:
  with a scratch, a *binary tree*: element ``j`` is added to element ``j + w/2`` of the ``w`` remaining
  (an odd last one carried to the next level), until one is left; without, *sequential* from the first
  element (``((x0 + x1) + x2) + ...``). pypto's row reductions always have a scratch (required on a tile,
  synthesised by its conversion for a tensor), so row sums are trees; a tensor-level ``col_sum`` has none.
  Products (row_prod, col_prod) follow the same order rule, each multiplication rounded (integers wrap).
  Max / min are exact in any order; a NaN propagates; an empty extent gives the identity (0, 1, -inf / +inf
  or the integer type's extremes).
- **Expands** compute ``x op v`` over the whole physical tile, ``v`` broadcast along the row or column;
  ``expdif`` is ``exp(x - v)``, two steps each rounded; ``div`` divides as ``tile.div`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import Op
from pldemu.npdtypes import is_float_dtype
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.ops.math import divide
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile, prefix


def tree_sum(a: np.ndarray, axis: int, ufunc: np.ufunc = np.add) -> np.ndarray:
    """The binary-tree sum (``ufunc``: np.multiply for a product) of ``a`` along ``axis`` (kept, length 1),
    each step in ``a``'s dtype."""
    a = np.moveaxis(a, axis, -1)
    if a.shape[-1] == 0:
        return np.moveaxis(np.full((*a.shape[:-1], 1), ufunc.identity, a.dtype), -1, axis)
    while a.shape[-1] > 1:
        half = a.shape[-1] // 2
        pairs = ufunc(a[..., :half], a[..., half:2 * half])
        a = np.concatenate([pairs, a[..., 2 * half:]], axis=-1) if a.shape[-1] % 2 else pairs
    return np.moveaxis(a, -1, axis)


def sequential_sum(a: np.ndarray, axis: int, ufunc: np.ufunc = np.add) -> np.ndarray:
    """The left-to-right sum (``ufunc``: np.multiply for a product) of ``a`` along ``axis`` (kept, length 1):
    ``accumulate`` takes one element at a time, each step rounded to ``a``'s dtype."""
    if a.shape[axis] == 0:
        return np.full(tuple(1 if i == axis % a.ndim else d for i, d in enumerate(a.shape)), ufunc.identity, a.dtype)
    return np.take(ufunc.accumulate(a, axis=axis), [-1], axis=axis)


def _extreme(ufunc: np.ufunc) -> Callable[[np.ndarray, int], np.ndarray]:
    def reduce(a: np.ndarray, axis: int) -> np.ndarray:
        if is_float_dtype(a.dtype):
            start: Any = -np.inf if ufunc is np.maximum else np.inf
        else:
            info = np.iinfo(a.dtype)
            start = info.min if ufunc is np.maximum else info.max
        return np.asarray(ufunc.reduce(a, axis=axis, keepdims=True, initial=a.dtype.type(start)), a.dtype)

    return reduce


def _reduction(axis: int, sums: bool, ufunc: np.ufunc | None = None, step: np.ufunc = np.add) -> Handler:
    """A reduction over ``axis`` of the valid box: a sum (``step``: np.multiply for a product; a tree with a
    scratch argument, else sequential) or ``ufunc``'s extreme."""
    extreme = _extreme(ufunc) if ufunc is not None else None

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        tile: Tile = args[0]
        box = tile.data[prefix(tile.valid)]
        if extreme is not None:
            red = extreme(box, axis)
        else:
            red = (tree_sum if len(args) > 1 else sequential_sum)(box, axis, step)
        shape = list(tile.data.shape)
        shape[axis] = 1
        out = m.poison.array(tuple(shape), tile.data.dtype)
        out[prefix(red.shape)] = red
        return Tile(out, red.shape)

    return handler


def _arg_reduction(axis: int, pick: Callable[..., np.ndarray]) -> Handler:
    """pypto's row_argmax / row_argmin over the valid box: the INT32 index of the first extreme (ties to the
    lowest index, as torch.argmax; a NaN is the extreme, as numpy's); an empty extent gives 0."""

    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        tile: Tile = args[0]
        box = tile.data[prefix(tile.valid)]
        shape = list(tile.data.shape)
        shape[axis] = 1
        if box.shape[axis] == 0:
            red = np.zeros(tuple(1 if i == axis % box.ndim else d for i, d in enumerate(box.shape)), np.int32)
        else:
            red = pick(box, axis=axis, keepdims=True).astype(np.int32)
        out = m.poison.array(tuple(shape), np.dtype(np.int32))
        out[prefix(red.shape)] = red
        return Tile(out, red.shape)

    return handler


def _expand(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Handler:
    def handler(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
        x: Tile = args[0]
        return Tile(np.asarray(fn(x.data, args[1].data), x.data.dtype), x.valid)

    return handler


def _broadcast(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.broadcast_to(v, x.shape).copy()


def _expdif(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.exp(np.subtract(x, v))


_EXPAND_FNS: Mapping[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = MappingProxyType({
    "": _broadcast, "_add": np.add, "_sub": np.subtract, "_mul": np.multiply, "_div": divide,
    "_max": np.maximum, "_min": np.minimum, "_expdif": _expdif,
})
"""The expand ops' element functions by name suffix (``tile.row_expand_add`` -> ``_add``)."""

REDUCE_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_ROW_SUM: _reduction(-1, True),
    Op.TILE_ROW_MAX: _reduction(-1, False, np.maximum),
    Op.TILE_ROW_MIN: _reduction(-1, False, np.minimum),
    Op.TILE_COL_SUM: _reduction(-2, True),
    Op.TILE_COL_MAX: _reduction(-2, False, np.maximum),
    Op.TILE_COL_MIN: _reduction(-2, False, np.minimum),
    Op.TILE_ROW_ARGMAX: _arg_reduction(-1, np.argmax),
    Op.TILE_ROW_ARGMIN: _arg_reduction(-1, np.argmin),
    Op.TILE_COL_ARGMAX: _arg_reduction(-2, np.argmax),
    Op.TILE_COL_ARGMIN: _arg_reduction(-2, np.argmin),
    Op.TILE_ROW_PROD: _reduction(-1, True, step=np.multiply),
    Op.TILE_COL_PROD: _reduction(-2, True, step=np.multiply),
    **{Op(f"tile.{side}_expand{suffix}"): _expand(fn) for side in ("row", "col") for suffix, fn in _EXPAND_FNS.items()},
})
"""Entries of the one handler table (merged there)."""

__all__ = ["REDUCE_HANDLERS", "sequential_sum", "tree_sum"]
