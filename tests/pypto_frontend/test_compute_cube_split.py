"""pypto's cube / vector split in a kernel: ``for aiv_id in pl.split_aiv(2, mode=...)`` runs its body once
per AIV lane, ``pl.aiv_shard`` gives each lane its half of a cube accumulator (rows in UP_DOWN, columns in
LEFT_RIGHT, the whole in NONE) in the vector buffer, ``pl.tile.get_subblock_idx()`` is the lane, and
``pl.aic_gather`` rejoins the lanes' halves for the cube (a data-parallel region),
``pl.cross_core_slot`` in ``optimizations=`` changes no value; ``pl.tile.transpose_view`` of a Mat tile
feeds a matmul its transpose. Run on two ranks against numpy; refusals at
the user's line."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from pldemu.ir.enums import MemorySpace
from pldemu.ir.ops import Op
from pldemu.ir.walk import function_calls
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import translate
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

NR = pl.dynamic("NR")
M, K, N = 16, 16, 16


@pl.program
class CubeSplit:
    """up: each lane's row half of a @ b plus its lane number; side: each lane's column half doubled;
    lanes: in NONE both lanes see the whole product and write their own cell (lane-dependent work)."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[M, K], pl.FP32], b: pl.Tensor[[K, N], pl.FP32],
          up: pl.Out[pl.Tensor[[M, N], pl.FP32]], side: pl.Out[pl.Tensor[[M, N], pl.FP32]],
          lanes: pl.Out[pl.Tensor[[2, N], pl.FP32]], tprod: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        acc = pl.matmul(pl.load(a, [0, 0], [M, K]), pl.load(b, [0, 0], [K, N]))
        for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
            half = pl.aiv_shard(acc)
            up = pl.assemble(up, pl.add(half, pl.cast(aiv_id, pl.FP32)), [aiv_id * (M // 2), 0])
        for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.LEFT_RIGHT):
            side = pl.assemble(side, pl.mul(pl.aiv_shard(acc), 2.0), [0, aiv_id * (N // 2)])
        kt = pl.tile.transpose_view(pl.load(b, [0, 0], [K, N], target_memory=pl.MemorySpace.Mat))
        pl.store(pl.matmul(pl.load(a, [0, 0], [M, K]), kt), [0, 0], tprod)  # a @ b.T
        for lane in pl.split_aiv(2, mode=pl.SplitMode.NONE):
            whole = pl.aiv_shard(acc)
            row = pl.reshape(whole[lane, :], [1, N])
            lanes = pl.assemble(lanes, pl.add(row, pl.cast(pl.tile.get_subblock_idx(), pl.FP32)), [lane, 0])

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, a: pl.Tensor[[M, K], pl.FP32], b: pl.Tensor[[K, N], pl.FP32],
             up: pl.Out[pl.Tensor[[M, N], pl.FP32]], side: pl.Out[pl.Tensor[[M, N], pl.FP32]],
             lanes: pl.Out[pl.Tensor[[2, N], pl.FP32]], tprod: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        with pl.spmd(1, optimizations=[pl.cross_core_slot(slot_num=2)]):
            self.k(a, b, up, side, lanes, tprod)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[NR, M, K], pl.FP32], b: pl.Tensor[[NR, K, N], pl.FP32],
                  up: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]], side: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]],
                  lanes: pl.Out[pl.Tensor[[NR, 2, N], pl.FP32]],
                  tprod: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]]) -> None:
        for r in pl.range(2):
            self.orch(a[r], b[r], up[r], side[r], lanes[r], tprod[r], device=r)


def _args() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(11)
    a = rng.integers(-3, 4, (2, M, K)).astype(np.float32)  # small integers: every product sum is exact
    b = rng.integers(-3, 4, (2, K, N)).astype(np.float32)
    return (a, b, np.zeros((2, M, N), np.float32), np.zeros((2, M, N), np.float32), np.zeros((2, 2, N), np.float32),
            np.zeros((2, M, N), np.float32))


@pytest.mark.launcher
def test_lanes_split_a_cube_accumulator() -> None:
    a, b, up, side, lanes, tprod = _args()
    ir.compile(CubeSplit, distributed_config=DistributedConfig(device_ids=[0, 1]))(a, b, up, side, lanes, tprod)
    np.testing.assert_array_equal(tprod, a @ b.transpose(0, 2, 1))  # pl.tile.transpose_view
    prod = a @ b
    lane_of_row = (np.arange(M) >= M // 2).astype(np.float32)[None, :, None]
    np.testing.assert_array_equal(up, prod + lane_of_row)
    np.testing.assert_array_equal(side, 2 * prod)
    np.testing.assert_array_equal(lanes, prod[:, :2] + np.arange(2, dtype=np.float32)[None, :, None])


def test_a_shard_is_a_window_moved_to_the_vector_buffer() -> None:
    built, _ = translate(CubeSplit, 2, _args())
    calls = [c for f in built.program.functions for c in function_calls(f)]
    # per rank: 2 + 2 lane halves and the NONE lanes' two row subscripts; the six shards cross to Vec
    assert [c.op for c in calls].count(Op.TILE_SLICE) == 2 * (4 + 2)
    to_vec = [c for c in calls if c.op is Op.TILE_MOVE and c.type.memory is MemorySpace.Vec]  # type: ignore[union-attr]
    assert len(to_vec) == 2 * 6


def _mistake(mistake: str):  # type: ignore[no-untyped-def]
    @pl.program
    class Prog:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[M, N], pl.FP32], y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
            t = pl.load(x, [0, 0], [M, N])
            if mistake == "outside":
                t = pl.aiv_shard(t)  # MARK-outside
            if mistake == "gather":
                for _ in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
                    half = pl.aiv_shard(t)
                    for _ in pl.range(2):
                        t = pl.aic_gather(half)  # MARK-gather
            if mistake == "sync-outside":
                pl.system.syncall()  # MARK-sync-outside
            if mistake == "sync-nested":
                for _ in pl.split_aiv(2, mode=pl.SplitMode.NONE):
                    for _ in pl.range(2):
                        pl.system.syncall()  # MARK-sync-nested
            if mistake == "sync-hard-workspace":
                for _ in pl.split_aiv(2, mode=pl.SplitMode.NONE):
                    pl.system.syncall(gm_workspace=x)  # MARK-sync-hard-workspace
            if mistake == "sync-soft-count":
                for _ in pl.split_aiv(2, mode=pl.SplitMode.NONE):
                    pl.system.syncall(mode="soft", gm_workspace=x)  # MARK-sync-soft-count
            if mistake == "odd":
                for _ in pl.split_aiv(3, mode=pl.SplitMode.UP_DOWN):
                    t = pl.aiv_shard(t)  # MARK-odd
            pl.store(t, [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[M, N], pl.FP32], y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
            self.k(x, y)

    return Prog


@pytest.mark.parametrize(("mistake", "message"), [
    ("outside", "pl.aiv_shard outside a pl.split_aiv region"),
    ("gather", "pl.aic_gather inside a loop or branch of an UP_DOWN / LEFT_RIGHT region is not supported"),
    ("odd", "does not split into 3 lanes along axis 0"),
    ("sync-outside", "pl.system.syncall is supported by pldemu as a statement at the top level of a "
                     "pl.split_aiv region body"),
    ("sync-nested", "pl.system.syncall is supported by pldemu as a statement at the top level"),
    ("sync-hard-workspace", "pypto refuses it: syncall(mode='hard') takes no gm_workspace/used_cores"),
    ("sync-soft-count", "pypto refuses it: soft syncall requires explicit used_cores"),
])
def test_mistakes_are_one_error_at_the_users_line(mistake: str, message: str) -> None:
    args = (np.zeros((M, N), np.float32), np.zeros((M, N), np.float32))
    with pytest.raises(FrontendError, match=re.escape(message)) as err:
        translate(_mistake(mistake), 1, args)
    assert err.value.file == __file__
    src, start = inspect.getsourcelines(inspect.getmodule(_mistake))  # type: ignore[arg-type]
    want = next(max(start, 1) + i for i, line in enumerate(src) if f"MARK-{mistake}" in line)
    assert err.value.line == want, str(err.value)


@pl.program
class Rejoin:
    """Each lane scales its half of a @ b by (lane + 1); pl.aic_gather rejoins the halves (rows in UP_DOWN, columns
    in LEFT_RIGHT) and the cube multiplies the whole by b again, outside the regions."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[M, K], pl.FP32], b: pl.Tensor[[K, N], pl.FP32],
          rows: pl.Out[pl.Tensor[[M, N], pl.FP32]], cols: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        bt = pl.load(b, [0, 0], [K, N])
        acc = pl.matmul(pl.load(a, [0, 0], [M, K]), bt)
        for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
            top = pl.aic_gather(pl.mul(pl.aiv_shard(acc), pl.cast(aiv_id + 1, pl.FP32)))
        pl.store(pl.matmul(top, bt), [0, 0], rows)
        for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.LEFT_RIGHT):
            side = pl.aiv_shard(acc)
            side = pl.aic_gather(pl.mul(side, pl.cast(aiv_id + 1, pl.FP32)))
        pl.store(pl.matmul(side, bt), [0, 0], cols)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, a: pl.Tensor[[NR, M, K], pl.FP32], b: pl.Tensor[[NR, K, N], pl.FP32],
                  rows: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]], cols: pl.Out[pl.Tensor[[NR, M, N], pl.FP32]]) -> None:
        for r in pl.range(pld.world_size()):
            self.k(a[r], b[r], rows[r], cols[r], device=r)


def _rejoin_args() -> tuple[np.ndarray, ...]:
    a, b = _args()[:2]
    return a, b, np.zeros((2, M, N), np.float32), np.zeros((2, M, N), np.float32)


def test_a_gather_assembles_each_lanes_half() -> None:
    built, _ = translate(Rejoin, 1, tuple(x[:1] for x in _rejoin_args()))
    calls = [c for f in built.program.functions for c in function_calls(f)]
    made = [c for c in calls if c.op is Op.TILE_CREATE]
    assert [c.type.shape for c in made] == [(M, N), (M, N)]  # type: ignore[union-attr]
    assert [c.op for c in calls].count(Op.TILE_ASSEMBLE) == 4  # two lanes x two regions


@pytest.mark.launcher
def test_gathered_halves_feed_the_cube() -> None:
    a, b, rows, cols = _rejoin_args()
    ir.compile(Rejoin, distributed_config=DistributedConfig(device_ids=[0, 1]))(a, b, rows, cols)
    prod = a @ b
    by_row = np.where(np.arange(M)[None, :, None] < M // 2, 1.0, 2.0).astype(np.float32)
    by_col = np.where(np.arange(N)[None, None, :] < N // 2, 1.0, 2.0).astype(np.float32)
    np.testing.assert_array_equal(rows, (prod * by_row) @ b)
    np.testing.assert_array_equal(cols, (prod * by_col) @ b)


@pl.program
class Barrier:
    """Two lanes, one barrier: each lane's part before it runs before either lane's part after it."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[M, N], pl.FP32], y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        for lane in pl.split_aiv(2, mode=pl.SplitMode.NONE):
            y = pl.store(pl.load(x, [lane * 8, 0], [8, N]), [lane * 8, 0], y)
            pl.system.fence()
            pl.system.syncall()
            pl.system.cacheinvalid()
            y = pl.store(pl.load(y, [(1 - lane) * 8, 0], [8, N]), [lane * 8, 0], y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, x: pl.Tensor[[M, N], pl.FP32], y: pl.Out[pl.Tensor[[M, N], pl.FP32]]) -> None:
        self.k(x, y)


def test_the_lanes_meet_at_a_syncall() -> None:
    built, _ = translate(Barrier, 1, (np.zeros((M, N), np.float32), np.zeros((M, N), np.float32)))
    calls = [c for f in built.program.functions for c in function_calls(f)
             if c.op in (Op.AIV_LANE, Op.TILE_STORE, Op.FENCE)]
    seen = [(c.attr("lane"), c.attr("sync")) if c.op is Op.AIV_LANE else c.op.text for c in calls]
    assert seen == [(0, 0), "tile.store", "system.fence", (0, 1), (1, 0), "tile.store", "system.fence", (1, 1),
                    (0, 0), "tile.store", (1, 0), "tile.store", (-1, 0)]
