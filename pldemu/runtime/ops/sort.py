"""Handlers of the sort / gather / arange family: tile.ci, tile.sort32, tile.mrgsort, tile.mrgsort_merge,
tile.gather, tile.gather_mask, tile.scatter and tile.scatter_mask.

Registered into the one handler table (``pldemu.runtime.ops.HANDLERS``); every handler is whole-array numpy.

- **Pairs.** sort32 turns ``[..., N]`` FP32 values and their 32-bit indices into ``[..., 2N]`` (value, index)
  pairs: the value in the even slot, the index's u32 bits in the odd FP32 slot (pypto's tests read them back
  with a mask gather whose ``output_dtype`` reinterprets the bits). Each block of 32 is sorted descending.
- **Ties.** pypto does not fix the order of equal values; pypto-lib's goldens assume a stable sort ("to match NPU
  sort32 deterministic order"), so pldemu sorts stably: equal values keep their source order (lower position
  first; in a merge, the earlier run or list first). NaNs sort after every number.
- **Merges** (``mrgsort``) assume sorted runs, as the hardware's merge does: a run (or list) that is not sorted
  descending is refused with its row and run, not silently fully sorted.
- **Gathers.** An index outside the source is refused (pypto leaves it undefined); only the indices' valid box is
  read (the rest of the result is poison, like any fresh tile's).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from pldemu.ir import Op
from pldemu.ir.sort_signatures import MASK_PATTERNS
from pldemu.runtime.errors import ProgramError
from pldemu.runtime.machine import Handler, Machine
from pldemu.runtime.sites import CallSite
from pldemu.runtime.values import Tile, prefix


def _ci(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    shape: tuple[int, ...] = args[1]
    step = -1 if site.attrs["descending"] else 1
    # int64 arithmetic, then wrapped to the dtype (a UINT32 sequence past 2**32 wraps as the device's counter)
    values = int(args[0]) + step * np.arange(shape[-1], dtype=np.int64)
    return Tile(values.astype(site.attrs["dtype"]).reshape(shape), shape)


def _descending(values: np.ndarray) -> np.ndarray:
    """The stable order that sorts ``values`` descending along the last axis (NaNs last)."""
    return np.argsort(-values, axis=-1, kind="stable")


def _sort32(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    src: Tile = args[0]
    idx: Tile = args[1]
    lead, n = src.data.shape[:-1], src.data.shape[-1]
    values = src.data.reshape(*lead, n // 32, 32)
    bits = np.ascontiguousarray(idx.data).view(np.uint32).view(np.float32).reshape(values.shape)
    order = _descending(values)
    pairs = np.stack([np.take_along_axis(values, order, -1), np.take_along_axis(bits, order, -1)], axis=-1)
    return Tile(pairs.reshape(*lead, 2 * n).astype(src.data.dtype), (*lead, 2 * n))


def _check_runs(name: str, values: np.ndarray, run: int) -> None:
    """Every run of ``run`` pairs along the last axis is sorted descending (NaNs at its end), as a merge needs."""
    n = values.shape[-1]
    pad = (-n) % run
    padded = np.concatenate([values, np.full((*values.shape[:-1], pad), -np.inf, values.dtype)], axis=-1)
    runs = padded.reshape(*values.shape[:-1], -1, run)
    ordered = np.where(np.isnan(runs), -np.inf, runs)
    bad = (ordered[..., 1:] > ordered[..., :-1]) | (np.isnan(runs[..., :-1]) & ~np.isnan(runs[..., 1:]))
    if bad.any():
        where = np.argwhere(bad)[0]
        raise ProgramError(f"{name}: run {int(where[-2])} of row {tuple(int(i) for i in where[:-2])} is not sorted "
                           f"descending (a merge needs sorted runs: sort32 first)")


def _merge_pairs(pairs: np.ndarray, group: int) -> np.ndarray:
    """``pairs`` ``[..., P, 2]`` with every ``group`` consecutive pairs merged (stable, descending)."""
    p = pairs.shape[-2]
    out = np.empty_like(pairs)
    full = p - p % group
    for lo, hi, size in ((0, full, group), (full, p, p - full)):
        if hi <= lo:
            continue
        chunk = pairs[..., lo:hi, :].reshape(*pairs.shape[:-2], (hi - lo) // size, size, 2)
        order = _descending(chunk[..., 0])[..., None]
        merged = np.take_along_axis(chunk, np.broadcast_to(order, chunk.shape), axis=-2)
        out[..., lo:hi, :] = merged.reshape(*pairs.shape[:-2], hi - lo, 2)
    return out


def _mrgsort(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    src: Tile = args[0]
    run = site.attrs["block_len"] // 2  # pairs per run
    pairs = src.data.reshape(*src.data.shape[:-1], -1, 2)
    _check_runs("tile.mrgsort", pairs[..., 0], run)
    out = _merge_pairs(pairs, 4 * run)
    return Tile(out.reshape(src.data.shape), src.data.shape)


def _mrgsort_merge(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    lists: list[Tile] = list(args)
    for i, t in enumerate(lists):
        vals = t.data.reshape(*t.data.shape[:-1], -1, 2)[..., 0]
        _check_runs(f"tile.mrgsort_merge: list {i}", vals, vals.shape[-1])
    pairs = np.concatenate([t.data.reshape(*t.data.shape[:-1], -1, 2) for t in lists], axis=-2)
    out = _merge_pairs(pairs, pairs.shape[-2])
    shape = (*lists[0].data.shape[:-1], 2 * pairs.shape[-2])
    return Tile(out.reshape(shape), shape)


def _checked_index(op: str, indexes: np.ndarray, data: np.ndarray, per_row: bool, whole: str) -> np.ndarray:
    """The indexes as int64, each within a row of ``data`` (``per_row``) or within all of it (flat); an index
    outside is the op's error (pypto leaves it undefined)."""
    index = indexes.astype(np.int64)
    limit = data.shape[-1] if per_row else data.size
    if index.size and (index.min() < 0 or index.max() >= limit):
        bad = index[(index < 0) | (index >= limit)][0]
        what = "a row's" if per_row else whole
        raise ProgramError(f"{op}: index {int(bad)} is outside {what} {limit} elements (pypto leaves an "
                           "out-of-range index undefined)")
    return index


def _gather(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    src: Tile = args[0]
    idx: Tile = args[1]
    box = prefix(idx.valid)
    per_row = bool(site.attrs["per_row"])
    index = _checked_index("tile.gather", idx.data[box], src.data, per_row, "the source's")
    out = m.poison.array(idx.data.shape, src.data.dtype)
    if per_row:
        rows = src.data[tuple(slice(0, v) for v in index.shape[:-1])]
        out[box] = np.take_along_axis(rows, index, axis=-1)
    else:
        out[box] = src.data.reshape(-1)[index]
    return Tile(out, idx.valid)


def _gather_mask(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    src: Tile = args[0]
    stride, phase = MASK_PATTERNS[site.attrs["pattern"]]
    picked = np.ascontiguousarray(src.data[..., phase::stride])
    out = picked.view(site.attrs["dtype"])
    return Tile(out, out.shape)


def _scatter_mask(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    src: Tile = args[0]
    dst: Tile = args[1]
    stride, phase = MASK_PATTERNS[site.attrs["pattern"]]
    out = dst.data.copy()
    out[..., phase::stride] = src.data
    return Tile(out, dst.valid)


def _scatter(m: Machine, site: CallSite, args: tuple[Any, ...]) -> Tile:
    """A copy of ``dst`` with ``src``'s elements over the indexes' valid box written where they point (per row:
    the column in the same row; flat: the offset in the whole tile). Of two elements sent to one cell the later
    in row-major order wins (pto.tscatter's loop order; pypto leaves it open)."""
    dst: Tile = args[0]
    src: Tile = args[1]
    idx: Tile = args[2]
    box = prefix(idx.valid)
    per_row = bool(site.attrs["per_row"])
    index = _checked_index("tile.scatter", idx.data[box], dst.data, per_row, "the destination's")
    out = dst.data.copy()
    flat = index + np.arange(index.shape[0])[:, None] * dst.data.shape[-1] if per_row else index
    out.reshape(-1)[flat.reshape(-1)] = src.data[box].reshape(-1)  # numpy: a repeated index keeps the last value
    return Tile(out, dst.valid)


SORT_HANDLERS: Mapping[Op, Handler] = MappingProxyType({
    Op.TILE_SCATTER: _scatter,
    Op.TILE_SCATTER_MASK: _scatter_mask,
    Op.TILE_CI: _ci,
    Op.TILE_SORT32: _sort32,
    Op.TILE_MRGSORT: _mrgsort,
    Op.TILE_MRGSORT_MERGE: _mrgsort_merge,
    Op.TILE_GATHER: _gather,
    Op.TILE_GATHER_MASK: _gather_mask,
})
"""Entries of the one handler table (merged there)."""

__all__ = ["SORT_HANDLERS"]
