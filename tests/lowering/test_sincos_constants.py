"""The sin / cos recipe's FP32 constants are rounded without numpy (``struct``, so that the launcher
of ``pldemu run`` lowers without importing it) and are exactly what ``numpy.float32`` gives."""

from __future__ import annotations

import ast
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from pldemu.lowering import math as sincos


def _literals() -> list[str]:
    """Every string the module rounds with ``_f32`` (read from its source: no second copy here)."""
    tree = ast.parse(Path(sincos.__file__).read_text())
    return [node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_f32"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)]


def test_every_recipe_constant_is_numpys_float32() -> None:
    literals = _literals()
    assert len(literals) == 16  # the 4-part pi split, the pi/2 head and tail, the Horner terms, 0.5 4 -2 1
    for text in literals:
        assert sincos._f32(text) == float(np.float32(text)), text
    for name in ("PI_INV", "PI_V2", "PI_C1", "PI_C2", "PI_C3", "PI_C4", "PI_HALF_HEAD", "PI_HALF_TAIL", "R0", "R1",
                 "R2", "R3", "HALF", "M4", "NEG2", "ONE"):
        value = getattr(sincos, name)
        assert isinstance(value, float) and float(np.float32(value)) == value, name


def _samples(rng: random.Random, n: int) -> list[str]:
    """Decimal strings across float32's range, and doubles at and next to float32 rounding midpoints."""
    out = [repr(rng.uniform(-1, 1) * 10.0 ** rng.randint(-40, 38)) for _ in range(n)]
    for _ in range(n):
        bits = rng.randrange(0x0080_0000, 0x7F7F_0000)
        lo = struct.unpack("<f", struct.pack("<I", bits))[0]
        hi = struct.unpack("<f", struct.pack("<I", bits + 1))[0]
        mid = (lo + hi) / 2  # exact in a double: a float32 tie
        out += [repr(mid), repr(float(np.nextafter(mid, np.inf))), repr(float(np.nextafter(mid, -np.inf)))]
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_rounding_matches_numpy_on_ties_and_across_the_range(seed: int) -> None:
    for text in _samples(random.Random(seed), 2000):
        assert sincos._f32(text) == float(np.float32(text)), text
