"""Chunk widths, chunk counts and stage shapes for sizes 1, 7, 8, 17, 4096, 4097, 65537 in FP32 and
FP16 (16 KiB chunks, 32-byte alignment), and which collectives reject a transfer shorter than one
alignment unit: those that move data through a put/get stage (allgather, all_to_all, all_to_all_v,
broadcast). Mesh allreduce and reduce_scatter use remote_load tiles, and ring allreduce narrows its
stage with tile.set_validshape, so they accept every positive size."""

from __future__ import annotations

import pytest
from lowering_helpers import calls_of, ceil_div, ring_chunks

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, DType
from pldemu.ir.nodes import TileType, static_int
from pldemu.ir.ops import Op
from pldemu.lowering import CallReport, LoweringError, lower_composite_ops_with_report
from pldemu.lowering.common import Geometry, eval_nr

SIZES = [1, 7, 8, 17, 4096, 4097, 65537]
DTYPES = [DType.FP32, DType.FP16]

# (dtype, size) -> (chunk width C, chunk count) of mesh allreduce / reduce_scatter, worked by hand:
# FP32 chunk 4096 / align 8, FP16 chunk 8192 / align 16; a static size below one chunk shrinks C
# to ceil(size / align) * align.
MESH = {
    (DType.FP32, 1): (8, 1), (DType.FP32, 7): (8, 1), (DType.FP32, 8): (8, 1), (DType.FP32, 17): (24, 1),
    (DType.FP32, 4096): (4096, 1), (DType.FP32, 4097): (4096, 2), (DType.FP32, 65537): (4096, 17),
    (DType.FP16, 1): (16, 1), (DType.FP16, 7): (16, 1), (DType.FP16, 8): (16, 1), (DType.FP16, 17): (32, 1),
    (DType.FP16, 4096): (4096, 1), (DType.FP16, 4097): (4112, 1), (DType.FP16, 65537): (8192, 9),
}
# (dtype, size) -> [1, SIZE] transfer stage (None: rejected). Rounded DOWN to the alignment.
STAGE = {
    (DType.FP32, 1): None, (DType.FP32, 7): None, (DType.FP32, 8): (1, 8), (DType.FP32, 17): (1, 16),
    (DType.FP32, 4096): (1, 4096), (DType.FP32, 4097): (1, 4096), (DType.FP32, 65537): (1, 4096),
    (DType.FP16, 1): None, (DType.FP16, 7): None, (DType.FP16, 8): None, (DType.FP16, 17): (1, 16),
    (DType.FP16, 4096): (1, 4096), (DType.FP16, 4097): (1, 4096), (DType.FP16, 65537): (1, 8192),
}


def report(spec: CollectiveSpec) -> CallReport:
    (call,) = lower_composite_ops_with_report(collective_program(spec).program).calls
    return call


def test_geometry_constants() -> None:
    assert Geometry.of(DType.FP32) == Geometry(DType.FP32, 4096, 8)
    assert Geometry.of(DType.FP16) == Geometry(DType.FP16, 8192, 16)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_mesh_allreduce_chunks(size: int, dtype: DType) -> None:
    c, count = MESH[(dtype, size)]
    spec = CollectiveSpec("allreduce", dtype=dtype, size=size)
    call = report(spec)
    assert call.lowered.chunks is not None and static_int(call.lowered.chunks) == count
    assert static_int(call.lowered.credits) == 1 + count  # the epilogue retires 1 + chunk_count
    lowered = lower_composite_ops_with_report(collective_program(spec).program).program
    loads = calls_of(lowered, Op.TILE_LOAD)
    assert [t.type.shape for t in loads] == [(1, c)]  # type: ignore[union-attr]
    assert call.lowered.stage is None  # mesh moves data with remote_load: no put stage, no rejection


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_reduce_scatter_chunks(size: int, dtype: DType) -> None:
    c, count = MESH[(dtype, size)]
    spec = CollectiveSpec("reduce_scatter", dtype=dtype, size=size)
    call = report(spec)
    assert call.lowered.chunks is not None and static_int(call.lowered.chunks) == count
    lowered = lower_composite_ops_with_report(collective_program(spec).program).program
    assert [t.type.shape for t in calls_of(lowered, Op.TILE_LOAD)] == [(1, c)]  # type: ignore[union-attr]
    assert static_int(call.lowered.credits) == 2  # two barriers whatever the row length


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_ring_allreduce_chunks(size: int, dtype: DType) -> None:
    c, _ = MESH[(dtype, size)]
    call = report(CollectiveSpec("allreduce", mode=AllreduceMode.ring, dtype=dtype, size=size))
    assert call.lowered.stage == (1, c)
    for nranks in (1, 2, 3, 4, 5, 8):
        chunks = eval_nr(call.lowered.chunks, nranks)  # type: ignore[arg-type]
        assert chunks == ring_chunks(size, nranks, dtype)
        assert eval_nr(call.lowered.credits, nranks) == 2 * chunks
        assert eval_nr(call.lowered.rows, nranks) == 2 * (nranks - 1)  # type: ignore[arg-type]


def test_ring_chunk_counts_by_hand() -> None:
    # FP32 65537 at 4 ranks: longest segment ceil(65537 / 4) = 16385 -> 5 subchunks of 4096.
    assert ring_chunks(65537, 4, DType.FP32) == 5
    # FP16 65537 at 4 ranks: ceil(65537 / 64) * 16 = 16400 -> ceil(16400 / 8192) = 3 subchunks.
    assert ring_chunks(65537, 4, DType.FP16) == 3
    # FP16 17 at 4 ranks: boundaries 0, 16, 17, 17, 17 -> longest 16 -> 1 subchunk of 32.
    assert ring_chunks(17, 4, DType.FP16) == 1


@pytest.mark.parametrize("name", ["allgather", "all_to_all", "broadcast"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_stage_shapes_and_rejection(name: str, size: int, dtype: DType) -> None:
    spec = CollectiveSpec(name, dtype=dtype, size=size)
    want = STAGE[(dtype, size)]
    if want is None:
        with pytest.raises(LoweringError, match="alignment unit"):
            report(spec)
        return
    call = report(spec)
    assert call.lowered.stage == want
    lowered = lower_composite_ops_with_report(collective_program(spec).program).program
    (create,) = calls_of(lowered, Op.TILE_CREATE)
    assert isinstance(create.type, TileType) and create.type.shape == want


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_all_to_all_v_stage_trades_rows_for_columns(size: int, dtype: DType) -> None:
    spec = CollectiveSpec("all_to_all_v", dtype=dtype, size=size, max_recv=4)
    base = STAGE[(dtype, size)]
    if base is None:
        with pytest.raises(LoweringError, match="alignment unit"):
            report(spec)
        return
    cols = base[1]
    rows = min(4, (16384 // dtype.itemsize) // cols)
    assert report(spec).lowered.stage == (rows, cols)


def test_stage_of_a_runtime_width_takes_the_chunk_bound() -> None:
    from pldemu.ir import NR
    from pldemu.ir.nodes import Const

    geo = Geometry.of(DType.FP32)
    assert geo.stage_shape([Const(1), NR * 17]) == (1, 4096)
    assert geo.stage_shape([NR, Const(17)]) == (1, 16)  # runtime rows: one stage row
    assert geo.stage_shape([Const(3), Const(17)]) == (3, 16)
    assert geo.stage_shape([Const(1000), Const(17)]) == (256, 16)  # rows capped by the 16 KiB budget
    assert geo.chunk_cols(NR * 17) == 4096
    assert ceil_div(17, 8) * 8 == geo.chunk_cols(Const(17))


def test_ring_runtime_size_uses_the_full_chunk() -> None:
    from pldemu.ir import NR, ProgramBuilder
    from pldemu.lowering import lower_composite_ops

    pb = ProgramBuilder("dyn")
    t = pb.window("t", "fp16", [1, NR * 64])
    s = pb.signal("s", [2 * (NR - 1), NR])
    pb.function().pld.tensor.allreduce(t, s, mode="ring")
    rep = lower_composite_ops_with_report(pb.build())
    assert rep.calls[0].lowered.stage == (1, 8192)
    for n in (2, 3, 4):
        assert eval_nr(rep.calls[0].lowered.chunks, n) == ring_chunks(64 * n, n, DType.FP16)  # type: ignore[arg-type]
    lower_composite_ops(rep.program)
