"""pypto's sort / gather / arange family: ``pl.arange`` (INT32, UINT32, INT16, descending), ``pl.sort32`` and
``pl.mrgsort`` (format 1 ``block_len=64``, format 2 of two rows) to a row's top-k, read back with mask gathers
(P1010 as INT32 indices, P0101 values), ``pl.gather(x, dim=-1, index=)`` and ``pl.tile.gather`` (flat offsets),
run on two ranks against references written here with Python's ``sorted`` (stable: ties keep source order, as
pypto-lib's goldens assume); the .pld round trip; pypto's refusals and pldemu's run-time checks."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from pldemu.ir.ops import Op
from pldemu.ir.parser import parse_program
from pldemu.ir.printer import format_program
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
N, R, C, K = 128, 4, 16, 8


@pl.program
class TopK:
    """Row 0 and row 1 of ``scores`` each sorted (sort32 + one 4-way merge), then merged with each other (format
    2); the top K indices and values picked with mask gathers; a per-row index gather and a flat tile gather."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, scores: pl.Tensor[[2, N], pl.FP32], x: pl.Tensor[[R, C], pl.FP32], sel: pl.Tensor[[R, K], pl.INT32],
          idx_out: pl.Out[pl.Tensor[[3, 2 * N], pl.INT32]], val_out: pl.Out[pl.Tensor[[3, 2 * N], pl.FP32]],
          g_out: pl.Out[pl.Tensor[[2, R, K], pl.FP32]], seq: pl.Out[pl.Tensor[[3, C], pl.INT32]],
          seq16: pl.Out[pl.Tensor[[1, C], pl.INT16]]) -> None:
        ids = pl.arange(0, [1, N], dtype=pl.UINT32)
        row0 = pl.mrgsort(pl.sort32(scores[0:1, :], ids), block_len=64)
        row1 = pl.tile.mrgsort(pl.tile.sort32(pl.load(scores, [1, 0], [1, N]), ids), block_len=64)
        both = pl.tile.mrgsort(row0, row1, tmp=pl.create_tile([1, 4 * N], dtype=pl.FP32))
        pl.store(pl.gather(row0, mask_pattern=pl.tile.MaskPattern.P1010, output_dtype=pl.INT32), [0, 0], idx_out)
        pl.store(pl.tile.gather_mask(row0, pl.tile.MaskPattern.P0101), [0, 0], val_out)
        pl.store(pl.tensor.gather(row1, mask_pattern=pl.tile.MaskPattern.P1010, output_dtype=pl.INT32), [1, 0],
                 idx_out)
        pl.store(pl.gather(row1, mask_pattern=1), [1, 0], val_out)
        pl.store(pl.gather(both, mask_pattern=2, output_dtype=pl.INT32), [2, 0], idx_out)
        pl.store(pl.gather(both, mask_pattern=1), [2, 0], val_out)
        g_out[0, :, :] = pl.gather(x, dim=-1, index=sel)
        flat = pl.add(pl.load(sel, [0, 0], [R, K]), pl.col_expand(pl.load(sel, [0, 0], [R, K]), pl.full([1, K],
                      dtype=pl.INT32, value=C)))
        pl.store(pl.tile.gather(pl.load(x, [0, 0], [R, C]), flat, pl.create_tile([R, K], dtype=pl.INT32)), [1, 0, 0],
                 g_out)
        pl.store(pl.arange(5, [1, C]), [0, 0], seq)
        down = pl.tile.arange(pl.const(3, pl.UINT32), [1, C], dtype=pl.UINT32, descending=True)
        pl.store(pl.gather(down, mask_pattern=pl.tile.MaskPattern.P1111, output_dtype=pl.INT32), [1, 0], seq)
        pl.store(pl.tensor.ci(-4, [1, C], pl.INT32, True), [2, 0], seq)
        pl.store(pl.arange(100, [1, C], dtype=pl.INT16), [0, 0], seq16)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, scores: pl.Tensor[[NR, 2, N], pl.FP32], x: pl.Tensor[[NR, R, C], pl.FP32],
                  sel: pl.Tensor[[NR, R, K], pl.INT32], idx_out: pl.Out[pl.Tensor[[NR, 3, 2 * N], pl.INT32]],
                  val_out: pl.Out[pl.Tensor[[NR, 3, 2 * N], pl.FP32]], g_out: pl.Out[pl.Tensor[[NR, 2, R, K], pl.FP32]],
                  seq: pl.Out[pl.Tensor[[NR, 3, C], pl.INT32]], seq16: pl.Out[pl.Tensor[[NR, 1, C], pl.INT16]]) -> None:
        for r in pl.range(2):
            self.k(scores[r], x[r], sel[r], idx_out[r], val_out[r], g_out[r], seq[r], seq16[r], device=r)


def _args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(11)
    scores = np.round(rng.standard_normal((2, 2, N)), 1).astype(np.float32)  # one decimal: many ties
    x = rng.standard_normal((2, R, C)).astype(np.float32)
    sel = rng.integers(0, C, (2, R, K)).astype(np.int32)
    return (scores, x, sel, np.zeros((2, 3, 2 * N), np.int32), np.zeros((2, 3, 2 * N), np.float32),
            np.zeros((2, 2, R, K), np.float32), np.zeros((2, 3, C), np.int32), np.zeros((2, 1, C), np.int16))


def _stable_desc(values: list[float]) -> list[int]:
    """The positions of ``values`` sorted descending, ties in source order (Python's sort is stable)."""
    return sorted(range(len(values)), key=lambda i: -values[i])


@pytest.mark.launcher
def test_topk_gathers_and_aranges_run_on_two_ranks() -> None:
    scores, x, sel, idx_out, val_out, g_out, seq, seq16 = _args()
    ir.compile(TopK, distributed_config=DistributedConfig(device_ids=[0, 1]))(scores, x, sel, idx_out, val_out, g_out,
                                                                            seq, seq16)
    for r in range(2):
        rows = [scores[r, i].tolist() for i in range(2)]
        for i in range(2):
            order = _stable_desc(rows[i])
            assert idx_out[r, i, :N].tolist() == order
            assert val_out[r, i, :N].tolist() == [rows[i][j] for j in order]
        both = rows[0] + rows[1]  # the format-2 merge: ties take row 0's first, then source order
        order = _stable_desc(both)
        assert idx_out[r, 2].tolist() == [j % N for j in order]
        assert val_out[r, 2].tolist() == [both[j] for j in order]
        for i in range(R):
            assert g_out[r, 0, i].tolist() == [x[r, i, j] for j in sel[r, i]]
            assert g_out[r, 1, i].tolist() == [x[r].reshape(-1)[j + C] for j in sel[r, i]]  # flat: one row down
    assert (seq[:, 0] == np.arange(5, 5 + C)).all()
    assert (seq[:, 1].view(np.uint32) == np.array([(3 - k) % 2**32 for k in range(C)], np.uint32)).all()
    assert (seq[:, 2] == np.arange(-4, -4 - C, -1)).all()
    assert (seq16[:, 0] == np.arange(100, 100 + C)).all()


def test_names_translate_onto_the_sort_ops_and_round_trip() -> None:
    built, _ = translate(TopK, 2, _args())
    ops = [c.op for f in built.program.functions for c in function_calls(f)]
    for op, n in ((Op.TILE_SORT32, 4), (Op.TILE_MRGSORT, 4), (Op.TILE_MRGSORT_MERGE, 2), (Op.TILE_GATHER, 4),
                  (Op.TILE_GATHER_MASK, 14), (Op.TILE_CI, 10)):
        assert ops.count(op) == n, op
    text = format_program(built.program)
    assert format_program(parse_program(text)) == text


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[1, 64], pl.FP32], h: pl.Tensor[[1, 64], pl.FP16],
              y: pl.Out[pl.Tensor[[1, 64], pl.INT32]]) -> None:
            ids = pl.arange(0, [1, 64], dtype=pl.UINT32)
            s = pl.sort32(x, ids)
            if mistake == "ci-dtype":
                pl.arange(0, [1, 64], dtype=pl.FP32)  # MARK-ci-dtype
            if mistake == "ci-rows":
                pl.arange(0, [2, 64])  # MARK-ci-rows
            if mistake == "fp16":
                pl.sort32(h, pl.arange(0, [1, 64], dtype=pl.UINT32))  # MARK-fp16
            if mistake == "block":
                pl.mrgsort(s, block_len=48)  # MARK-block
            if mistake == "formats":
                pl.mrgsort(s, s, block_len=64)  # MARK-formats
            if mistake == "tile-tmp":
                pl.tile.mrgsort(s, s)  # MARK-tile-tmp
            if mistake == "dim":
                pl.gather(x, dim=0, index=pl.arange(0, [1, 8]))  # MARK-dim
            if mistake == "width":
                pl.gather(s, mask_pattern=2, output_dtype=pl.INT16)  # MARK-width
            if mistake == "compare":
                pl.gather(x, kvalue=1.0, cmp_mode="eq", out_cols=8)  # MARK-compare
            pl.store(pl.gather(s, mask_pattern=2, output_dtype=pl.INT32), [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[1, 64], pl.FP32], h: pl.Tensor[[1, 64], pl.FP16],
                      y: pl.Out[pl.Tensor[[1, 64], pl.INT32]]) -> None:
            self.k(x, h, y, device=0)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("ci-dtype", "dtype must be one of INT16, INT32, UINT16, UINT32, got fp32"),
    ("ci-rows", r"leading dims must be 1 and the innermost not 1, got \[2, 64\]"),
    ("fp16", "src must be FP32 in pldemu"),
    ("block", "block_len must be a positive multiple of 64, got 48"),
    ("formats", "format1 .* and format2 .* are mutually exclusive"),
    ("tile-tmp", "format2 on tiles needs tmp"),
    ("dim", "gathers along the last axis only"),
    ("width", "output_dtype must have the bit width of fp32, got int16"),
    ("compare", "the compare form .* is not supported by pldemu"),
])
def test_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((1, 64), np.float32), np.zeros((1, 64), np.float16), np.zeros((1, 64), np.int32))
    with pytest.raises(FrontendError, match=message) as info:
        translate(_mistake(mistake), 1, args)
    source, first = inspect.getsourcelines(_mistake)
    assert info.value.line == first + next(i for i, s in enumerate(source) if f"MARK-{mistake}" in s)


@pl.program
class MergeHalves:
    """pypto-lib's greedy sampler: a tensor-level sorted row's two halves merged (format 2) with no scratch,
    which pypto synthesises for a tensor's merge (the halves are windows of a tensor-level value)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, scores: pl.Tensor[[1, N], pl.FP32], val_out: pl.Out[pl.Tensor[[1, N], pl.FP32]]) -> None:
        pairs = pl.mrgsort(pl.sort32(scores[0:1, :], pl.arange(0, [1, N], dtype=pl.UINT32)), block_len=64)
        both = pl.mrgsort(pairs[:, 0:N], pairs[:, N:2 * N])
        pl.store(pl.gather(both, mask_pattern=pl.tile.MaskPattern.P0101), [0, 0], val_out)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, scores: pl.Tensor[[1, N], pl.FP32], val_out: pl.Out[pl.Tensor[[1, N], pl.FP32]]) -> None:
        self.k(scores, val_out)


@pytest.mark.launcher
def test_halves_of_a_tensor_level_sort_merge_without_a_scratch() -> None:
    scores = np.random.default_rng(12).standard_normal((1, N)).astype(np.float32)
    out = np.zeros((1, N), np.float32)
    ir.compile(MergeHalves, distributed_config=DistributedConfig(device_ids=[0]))(scores, out)
    np.testing.assert_array_equal(out[0], np.sort(scores[0])[::-1])
