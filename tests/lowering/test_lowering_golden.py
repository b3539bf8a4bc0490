"""Golden text of a handful of lowered programs (reviewed by hand against the spec).

Regenerate after an intended change with::

    PLDEMU_REGEN_GOLDEN=1 /tmp/venv/bin/python -m pytest tests/lowering/test_lowering_golden.py

then read the diff of tests/lowering/golden/*.pld before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, DType, format_program, parse_file, verify
from pldemu.lowering import lower_composite_ops

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("PLDEMU_REGEN_GOLDEN") == "1"

CASES = {
    "allreduce_mesh_fp32_17": CollectiveSpec("allreduce", size=17),
    "allreduce_ring_fp16_17_nr4": CollectiveSpec("allreduce", mode=AllreduceMode.ring, dtype=DType.FP16, size=17,
                                                 nranks=4),
    "allgather_fp32_17": CollectiveSpec("allgather", size=17),
    "all_to_all_v_fp32_16": CollectiveSpec("all_to_all_v", size=16, max_recv=4),
    "broadcast_root1_fp32_64": CollectiveSpec("broadcast", size=64, root=1),
    "barrier": CollectiveSpec("barrier"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_golden(name: str) -> None:
    text = format_program(lower_composite_ops(collective_program(CASES[name]).program))
    path = GOLDEN / f"{name}.pld"
    if REGEN:
        path.write_text(text)
    assert path.read_text() == text, f"{path} is stale (see the module docstring to regenerate)"
    parsed = verify(parse_file(path))
    assert format_program(parsed) == text
