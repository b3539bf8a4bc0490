"""BF16 buffers through .npy files: inputs saved by numpy (raw |V2) and --dump files (NAME.bf16.npy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pldemu.npdtypes import BFLOAT16
from pldemu.runtime.buffer_io import BF16_DUMP, load_npy, read_dump


def test_numpy_saved_bfloat16_reads_back_as_bfloat16(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float32).astype(BFLOAT16).reshape(2, 3)
    np.save(tmp_path / "x.npy", a)
    assert np.load(tmp_path / "x.npy").dtype.kind == "V"  # what numpy alone gives
    back = load_npy(tmp_path / "x.npy")
    assert back.dtype == BFLOAT16
    np.testing.assert_array_equal(back.astype(np.float32), a.astype(np.float32))


def test_read_dump_restores_bf16_bit_patterns_and_names(tmp_path: Path) -> None:
    a = np.array([1.5, -2.0], dtype=BFLOAT16)
    np.save(tmp_path / f"w{BF16_DUMP}.npy", a.view(np.uint16))
    np.save(tmp_path / "s.npy", np.array([3], np.int32))
    out = read_dump(tmp_path)
    assert set(out) == {"w", "s"}
    assert out["w"].dtype == BFLOAT16 and out["w"].astype(np.float32).tolist() == [1.5, -2.0]
    assert out["s"].dtype == np.int32
