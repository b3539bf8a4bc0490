"""Attribute enums of the pld ops. Values follow the append-only ABI of the protocol digest."""

from __future__ import annotations

import enum


class NotifyOp(enum.IntEnum):
    AtomicAdd = 0
    Set = 1


class WaitCmp(enum.IntEnum):
    Eq = 0
    Ge = 1


class AtomicType(enum.IntEnum):
    # "None" is a keyword in Python; the text form still spells it None.
    None_ = 0
    Add = 1


class ReduceOp(enum.IntEnum):
    Sum = 0
    Max = 1
    Min = 2
    Prod = 3


class MemorySpace(enum.IntEnum):
    """Where a tile lives (pypto's ``pl.MemorySpace``): DDR (global), Vec (UB), Mat (L1), Left / Right (L0A /
    L0B, the cube's operands), Acc (L0C, its accumulator), Bias. On a CPU it is bookkeeping: the IR checks
    pypto's rules on which spaces an op takes (tile.matmul: Left x Right -> Acc)."""

    DDR = 0
    Vec = 1
    Mat = 2
    Left = 3
    Right = 4
    Acc = 5
    Bias = 6


class Layout(enum.IntEnum):
    ND = 0
    DN = 1


class TileLayout(enum.IntEnum):
    """How a tile's bytes are arranged (block layout / in-box layout). ND: row-major; DN: column-major;
    ZZ: 16x2-byte boxes, boxes row-major, bytes row-major in a box (MX scale, fractal 32); NN: its
    transpose dual (boxes and bytes column-major). ``transposed`` is what tile.transpose_view gives."""

    ND = 0
    DN = 1
    ZZ = 2
    NN = 3
    NZ = 4
    ZN = 5

    @property
    def transposed(self) -> TileLayout:
        return _TRANSPOSED[self]


_TRANSPOSED = {TileLayout.ND: TileLayout.DN, TileLayout.DN: TileLayout.ND, TileLayout.ZZ: TileLayout.NN,
               TileLayout.NN: TileLayout.ZZ, TileLayout.NZ: TileLayout.ZN, TileLayout.ZN: TileLayout.NZ}


class AllreduceMode(enum.IntEnum):
    mesh = 0
    ring = 1


class PadValue(enum.IntEnum):
    """tile.fillpad fill value: zero, or the identity-safe extremes of the element type."""

    zero = 0
    max = 1
    min = 2


class CastMode(enum.IntEnum):
    """tile.cast round mode (the tile-op registry's numbering; PTO-ISA RoundMode CAST_*)."""

    None_ = 0  # no rounding: int -> float; float -> int truncates like the C++ cast
    RINT = 1  # nearest, ties to even
    ROUND = 2  # nearest, ties away from zero
    FLOOR = 3
    CEIL = 4
    TRUNC = 5
    ODD = 6  # round to odd (inexact results take the neighbour with an odd last bit)


class CmpType(enum.IntEnum):
    """tile.cmp / tile.cmps comparison (PTO-ISA CmpMode numbering; not EQ/NE/LT/GT/GE/LE)."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


ATTR_ENUMS: tuple[type[enum.IntEnum], ...] = (
    NotifyOp,
    WaitCmp,
    AtomicType,
    ReduceOp,
    MemorySpace,
    Layout,
    AllreduceMode,
    PadValue,
    CastMode,
    CmpType,
)


def enum_text(value: enum.IntEnum) -> str:
    """Text-form spelling of an enum member (AtomicType.None_ prints as None)."""
    return value.name.rstrip("_")


def enum_parse(cls: type[enum.IntEnum], text: str) -> enum.IntEnum:
    """Inverse of enum_text, with an error that lists the legal spellings."""
    for member in cls:
        if enum_text(member) == text:
            return member
    legal = ", ".join(enum_text(m) for m in cls)
    raise ValueError(f"unknown {cls.__name__} {text!r}; expected one of {legal}")
