"""Handlers of the cube and the memory spaces: tile.move, tile.matmul, tile.batch_matmul, tile.matmul_acc.

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``). Memory spaces are bookkeeping on
a CPU: ``tile.move`` returns the tile itself (tiles are values, never written in place); the IR's
signatures check which spaces each op takes (pypto's rules).

Numerics (pypto states only "the cube multiplies in the input precision and accumulates in FP32"):

- **Float operands** (FP16, BF16, FP32): every product is exact (an FP16 / BF16 product fits FP32's
  mantissa; an FP32 one fits float64's), and the dot product of one output element is taken in float64,
  then **rounded once** to the FP32 accumulator. The device sums in FP32 in an order pypto does not
  define (nor the rounding of its partial sums), so its result can differ from pldemu's by a few FP32
  ulps times the depth K; pldemu's is the correctly rounded one for all practical K.
- **Integer operands** (INT8 and the other integer types pypto's deducer lets through): products and
  sums in int64, **wrapped** (two's complement) to the INT32 accumulator, as INT32 arithmetic wraps.
- ``matmul_acc``: ``acc + lhs @ rhs`` with the same rule: the old accumulator value plus the exact dot
  product, rounded (floats) or wrapped (integers) once. ``init_cond`` true overwrites instead.
- Only the box the cube computes is read: lhs valid M x lhs valid K, rhs valid K x rhs valid N (pypto's
  deducer). The result's cells outside its valid box are poison, like any fresh tile's; ``matmul_acc``
  keeps the accumulator's cells outside the product's box.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import Op
from pldemu.npdtypes import is_float_dtype
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile, prefix


def exact_product(lhs: Tile, rhs: Tile) -> np.ndarray:
    """``lhs @ rhs`` over the box the cube computes (lhs valid M, K; rhs valid N), batch dims broadcast:
    float64 for float operands (every product exact), int64 for integer ones (wrapping past 2^63)."""
    m, k, n = lhs.valid[-2], lhs.valid[-1], rhs.valid[-1]
    wide = np.float64 if is_float_dtype(lhs.data.dtype) else np.int64
    a = lhs.data[..., :m, :k].astype(wide)
    b = rhs.data[..., :k, :n].astype(wide)
    return np.matmul(a, b)


def to_accumulator(x: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """A float64 / int64 result rounded once (nearest, ties to even) or wrapped to the accumulator dtype."""
    return x.astype(dtype)  # numpy's float64 -> float32 rounds to nearest-even; int64 -> int32 wraps


def _move(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    tile: Tile = args[0]
    return tile


def _matmul(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lhs: Tile = args[0]
    rhs: Tile = args[1]
    dtype = np.dtype(np.float32) if is_float_dtype(lhs.data.dtype) else np.dtype(np.int32)
    product = exact_product(lhs, rhs)
    batch = product.shape[:-2]
    out = m.poison.array((*batch, lhs.data.shape[-2], rhs.data.shape[-1]), dtype)
    out[..., :product.shape[-2], :product.shape[-1]] = to_accumulator(product, dtype)
    return Tile(out, (*batch, lhs.valid[-2], rhs.valid[-1]))


def _matmul_acc(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    acc: Tile = args[0]
    product = exact_product(args[1], args[2])
    box = prefix(product.shape)
    out = acc.data.copy()
    if len(args) > 3 and bool(args[3]):
        out[box] = to_accumulator(product, out.dtype)
    else:
        out[box] = to_accumulator(acc.data[box].astype(product.dtype) + product, out.dtype)
    return Tile(out, acc.valid)


MATMUL_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_MOVE: _move,
    Op.TILE_MATMUL: _matmul,
    Op.TILE_BATCH_MATMUL: _matmul,
    Op.TILE_MATMUL_ACC: _matmul_acc,
    Op.TILE_BATCH_MATMUL_ACC: _matmul_acc,  # the product's box spans the batch dims too
})
"""Entries of the one handler table (merged there)."""

__all__ = ["MATMUL_HANDLERS", "exact_product", "to_accumulator"]
