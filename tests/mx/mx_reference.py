"""An independent MXFP8 reference for the tests, written from shared/reference/tile-ops.md section 4 alone.

It shares no code with pldemu (neither the handler nor the check's oracle): the shared exponent comes
from np.frexp of the group max, the scaling is applied with np.ldexp in float64, the ZZ byte image is
built by an explicit loop over the reference's offset formula.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np


def groups_view(x: np.ndarray, axis: int) -> np.ndarray:
    """[n_groups, 32] copy, group order = exponent order (axis 1: m*G + g; axis 0: DN [K/32, N])."""
    if axis == 1:
        return x.reshape(-1, 32)
    k, n = x.shape  # the transposed [K, N] source
    return x.reshape(k // 32, 32, n).transpose(0, 2, 1).reshape(-1, 32)


def e8m0_of(groups: np.ndarray) -> np.ndarray:
    """max(E - 8, 0) of each group's max |x| (E the biased FP32 exponent field), 0xFF for NaN groups."""
    amax = np.abs(groups).max(axis=1)
    _, e = np.frexp(amax)
    biased = np.where(amax >= np.ldexp(1.0, -126), e + 126, 0)
    biased = np.where(np.isinf(amax), 255, biased)
    out = np.maximum(biased - 8, 0)
    return np.where(np.isnan(amax), 255, out).astype(np.uint8)


def reference(x_src: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data bytes, exponents [G] in raw order, public-layout source as float64) for tile.tquant_mx."""
    x = x_src.astype(np.float64)
    if axis == 0:
        x = np.ascontiguousarray(x.T)
    g = groups_view(x, axis)
    e = e8m0_of(g).astype(np.int64)
    with np.errstate(invalid="ignore"):
        scaled = np.where((e == 255)[:, None], np.nan, np.ldexp(g, (127 - e)[:, None]))
    q = np.clip(scaled, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    if axis == 1:
        data = q.reshape(x.shape)
    else:
        k, n = x.shape
        data = q.reshape(k // 32, n, 32).transpose(0, 2, 1).reshape(k, n)
    return data, e.astype(np.uint8), x


def zz_image(e: np.ndarray) -> np.ndarray:
    """ZZ bytes [align16(R), C] of an [R, C] exponent matrix, element by element."""
    rows, cols = e.shape
    pad = -(-rows // 16) * 16
    out = np.zeros(pad * cols, np.uint8)
    for m in range(rows):
        for g in range(cols):
            out[((m // 16) * (cols // 2) + g // 2) * 32 + (m % 16) * 2 + (g % 2)] = e[m, g]
    return out.reshape(pad, cols)


def scale_bytes(x_src: np.ndarray, axis: int) -> np.ndarray:
    """The public scale's bytes: axis 1 ZZ of [M, K/32]; axis 0 ZZ of the transposed [N, K/32] exponents,
    seen as [K/32, N]."""
    _, e, x = reference(x_src, axis)
    if axis == 1:
        return zz_image(e.reshape(x.shape[0], -1))
    k, n = x.shape
    return zz_image(e.reshape(k // 32, n).T).reshape(k // 32, n)


def dequantised(x_src: np.ndarray, axis: int) -> np.ndarray:
    """What tile.dequant_mx must give for tile.tquant_mx(x_src): data * 2^(e8m0 - 127) in the quant layout
    ([M, K] or [K, N]), NaN where e8m0 is 0xFF, rounded once to FP32."""
    data, e, x = reference(x_src, axis)
    if axis == 1:
        per = np.repeat(e.reshape(x.shape[0], -1), 32, axis=1)
    else:
        per = np.repeat(e.reshape(x.shape[0] // 32, x.shape[1]), 32, axis=0)
    value = np.ldexp(data.view(ml_dtypes.float8_e4m3fn).astype(np.float64), per.astype(np.int64) - 127)
    with np.errstate(over="ignore"):
        return np.where(per == 255, np.nan, value).astype(np.float32)
