"""``tile.reshape``'s handler: row-major order kept, the valid box mapped through unit axes, the pad zero."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from tile_helpers import run_local

from pldemu.ir import ProgramBuilder

R, C = 8, 16


def test_reshape_handler_keeps_row_major_order_and_the_mapped_box() -> None:
    pb = ProgramBuilder("r")
    x, out = pb.local("x", "bf16", [R, C]), pb.local("out", "bf16", [1, R, 1, C])
    fb = pb.function()
    t = fb.pld.tile.load(x, [0, 0], [R, C], valid_shape=[5, 9])
    fb.pld.tile.store(fb.pld.tile.reshape(t, [1, R, 1, C]), [0, 0, 0, 0], out)
    data = np.arange(R * C, dtype=np.float32).reshape(R, C).astype(ml_dtypes.bfloat16)
    got = run_local(pb.build(), {"x": data, "out": np.zeros((1, R, 1, C), ml_dtypes.bfloat16)})[0]["out"]
    np.testing.assert_array_equal(got[0, :5, 0, :9], data[:5, :9])
    assert (got[0, 5:] == 0).all() and (got[0, :, 0, 9:] == 0).all()
