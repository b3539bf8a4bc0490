"""End-to-end checks of every recipe on the test simulator (lowering_sim): results equal the
collective's definition, no deadlock under random interleavings, and every signal cell is back to
zero after one call and after back-to-back calls (the epilogue retires exactly what was issued)."""

from __future__ import annotations

import pytest
from lowering_helpers import simulate, specs_all

from pldemu.collectives import CollectiveSpec
from pldemu.ir import AllreduceMode, DType, ReduceOp

RANKS = (2, 3, 4, 5, 8)


@pytest.mark.parametrize("nranks", RANKS)
@pytest.mark.parametrize("spec", list(specs_all(17)) + list(specs_all(17, DType.FP16)), ids=str)
def test_every_collective_one_call(spec: CollectiveSpec, nranks: int) -> None:
    simulate(spec, nranks, seed=nranks)


@pytest.mark.parametrize("nranks", (1, 2, 3))
@pytest.mark.parametrize("spec", list(specs_all(64)), ids=str)
def test_back_to_back_calls_reuse_the_signal(spec: CollectiveSpec, nranks: int) -> None:
    for seed in range(3):
        simulate(spec, nranks, seed=seed, calls=3)


@pytest.mark.parametrize("dtype", [DType.FP32, DType.FP16])
@pytest.mark.parametrize("mode", list(AllreduceMode))
@pytest.mark.parametrize("size", [1, 7, 8, 17, 4096, 4097])
@pytest.mark.parametrize("nranks", [1, 2, 4, 5])
def test_allreduce_sizes(mode: AllreduceMode, dtype: DType, size: int, nranks: int) -> None:
    simulate(CollectiveSpec("allreduce", mode=mode, dtype=dtype, size=size), nranks, seed=size)


@pytest.mark.parametrize("dtype", [DType.FP32, DType.FP16])
@pytest.mark.parametrize("mode", list(AllreduceMode))
def test_allreduce_65537_several_chunks(mode: AllreduceMode, dtype: DType) -> None:
    simulate(CollectiveSpec("allreduce", mode=mode, dtype=dtype, size=65537), 4, seed=1, calls=2)


@pytest.mark.parametrize("op", list(ReduceOp))
@pytest.mark.parametrize("mode", list(AllreduceMode))
def test_allreduce_every_reduce_op(op: ReduceOp, mode: AllreduceMode) -> None:
    for dtype in (DType.FP32, DType.FP16):
        simulate(CollectiveSpec("allreduce", mode=mode, dtype=dtype, size=40, reduce=op), 3, seed=int(op))


@pytest.mark.parametrize("op", list(ReduceOp))
def test_reduce_scatter_every_op_and_long_rows(op: ReduceOp) -> None:
    simulate(CollectiveSpec("reduce_scatter", size=9000, reduce=op), 3, seed=5, calls=2)


def test_ring_with_fewer_elements_than_ranks() -> None:
    # Empty segments are legal: SIZE < NR still reduces every element.
    for dtype in (DType.FP32, DType.FP16):
        simulate(CollectiveSpec("allreduce", mode=AllreduceMode.ring, dtype=dtype, size=3), 8, seed=2)


@pytest.mark.parametrize("shape,valid", [((8, 16), (3, 10)), ((4, 8, 16), (2, 8, 10)), ((4, 8, 16), (1, 3, 5)),
                                         ((64, 64), (64, 64)), ((32,), (5,))])
def test_mesh_partial_valid_rectangle(shape: tuple[int, ...], valid: tuple[int, ...]) -> None:
    spec = CollectiveSpec("allreduce", shape=shape, valid_shape=valid)
    simulate(spec, 3, seed=3, calls=2)


@pytest.mark.parametrize("shape,valid", [((4, 8), (2, 8)), ((2, 3, 16), (1, 2, 16)), ((1, 40), (1, 9))])
def test_ring_partial_valid_prefix(shape: tuple[int, ...], valid: tuple[int, ...]) -> None:
    spec = CollectiveSpec("allreduce", mode=AllreduceMode.ring, shape=shape, valid_shape=valid)
    simulate(spec, 3, seed=4, calls=2)


@pytest.mark.parametrize("root", [0, 1, 3])
def test_broadcast_roots(root: int) -> None:
    simulate(CollectiveSpec("broadcast", root=root, shape=(3, 24)), 4, seed=root)


@pytest.mark.parametrize("max_recv", [1, 3])
def test_all_to_all_v_counts_and_stale_rows(max_recv: int) -> None:
    for seed in range(4):
        simulate(CollectiveSpec("all_to_all_v", size=16, max_recv=max_recv), 4, seed=seed, calls=2)


@pytest.mark.parametrize("nranks", [1, 2, 3, 5])
def test_runtime_extents_depend_on_nr(nranks: int) -> None:
    """Targets whose size is an NR expression: all geometry is computed at run time."""
    import numpy as np
    from lowering_sim import Machine

    from pldemu.ir import NR, ProgramBuilder
    from pldemu.lowering import lower_composite_ops

    pb = ProgramBuilder("dyn")
    mesh_t = pb.window("mesh_t", "fp32", [2, NR * 3000])
    ring_t = pb.window("ring_t", "fp16", [1, NR * 4100])
    sig = pb.signal("sig", [NR, 1])
    rsig = pb.signal("rsig", [2 * (NR - 1), NR])
    fb = pb.function()
    with fb.for_range(0, 2):
        fb.pld.tensor.allreduce(mesh_t, sig, op="max")
        fb.pld.tensor.allreduce(ring_t, rsig, op="sum", mode="ring")
    program = lower_composite_ops(pb.build())
    rng = np.random.default_rng(nranks)
    data: dict[str, list[np.ndarray]] = {"mesh_t": [rng.integers(-50, 50, (2, nranks * 3000)).astype(np.float32) for _ in range(nranks)],
            "ring_t": [rng.integers(-2, 3, (1, nranks * 4100)).astype(np.float16) for _ in range(nranks)]}
    m = Machine(program, nranks, init=lambda r, n, s, d: data[n][r] if n in data else None, seed=nranks).run()
    want_max = np.maximum.reduce(data["mesh_t"])
    want_sum = np.sum([x.astype(np.float64) for x in data["ring_t"]], axis=0) * nranks  # two chained sums
    for r in range(nranks):
        assert np.array_equal(m.array(r, "mesh_t"), want_max)
        assert np.array_equal(m.array(r, "ring_t").astype(np.float64), want_sum)
    assert all(v == 0 for per in m.signals().values() for rank in per for v in np.ravel(rank))
