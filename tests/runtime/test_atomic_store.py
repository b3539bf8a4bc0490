"""``tile.store(..., atomic=Add)``: pypto's ``pl.assemble(..., atomic=pl.AtomicType.Add)``, an element-wise add
into the region (into a local tensor and into a window); the attribute is left out of the text while it holds
its default, so every program written before prints as it did, and ``atomic=Add`` round-trips."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import instance

from pldemu.ir import ProgramBuilder
from pldemu.ir.parser import parse_program
from pldemu.ir.printer import format_program


def _program(kind: str) -> ProgramBuilder:
    pb = ProgramBuilder("acc")
    src = pb.local("src", "fp32", [2, 8])
    dst = pb.window("dst", "fp32", [2, 8]) if kind == "window" else pb.local("dst", "fp32", [2, 8])
    fb = pb.function()
    t = fb.pld.tile.load(src, [0, 0], [2, 8], [1, 8])
    fb.pld.tile.store(t, [1, 0], dst)
    fb.pld.tile.store(t, [1, 0], dst, atomic="Add")
    fb.pld.tile.store(t, [1, 0], dst, atomic="Add")
    return pb


@pytest.mark.parametrize(("kind", "visibility"), [("local", "eager"), ("window", "eager"), ("window", "deferred"),
                                                  ("window", "fenced")])
def test_an_atomic_store_adds_into_the_region(kind: str, visibility: str) -> None:
    # deferred: the atomic add is not buffered (as an atomic put), fenced: it is, and lands at the call's end
    with instance(_program(kind).build(), visibility=visibility) as inst:
        inst.local("src")[...] = np.arange(16, dtype=np.float32).reshape(2, 8)
        inst.local("dst")[...] = 0.0
        inst.run()
        d = inst.local("dst")
        np.testing.assert_array_equal(d[1], 3 * np.arange(8, dtype=np.float32))  # stored once, added twice
        assert not d[0].any()


def test_the_default_is_not_printed_and_add_round_trips() -> None:
    text = format_program(_program("local").build())
    lines = [line.strip() for line in text.splitlines() if "tile.store" in line]
    assert lines[0].endswith("dst)") and all(line.endswith("dst, atomic=Add)") for line in lines[1:]), text
    assert format_program(parse_program(text)) == text
