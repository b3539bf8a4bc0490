"""Programs and a CLI runner shared by the library tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[2] / "pldemu" / "examples" / "sum_inputs.pld"
ALLREDUCE_PLD = EXAMPLE.read_text()
"""A mesh sum-allreduce of window x; y is a rank-local buffer whose shape depends on NR."""

SHAPE = (2, 64)


def rank_data(rank: int) -> np.ndarray:
    """Per-rank data, exact in any summation order (halves)."""
    return ((np.arange(128, dtype=np.float32).reshape(SHAPE) % 5) + rank) * np.float32(0.5)


def summed(ranks: int) -> np.ndarray:
    return np.sum([rank_data(r) for r in range(ranks)], axis=0, dtype=np.float32)


def write_program(folder: Path, text: str = ALLREDUCE_PLD, name: str = "ar.pld") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def save(folder: Path, name: str, arr: np.ndarray, rank: int | None = None) -> None:
    target = folder if rank is None else folder / f"rank{rank}"
    target.mkdir(parents=True, exist_ok=True)
    np.save(target / f"{name}.npy", arr)
