"""Structural tests of the recipes: which primitives are emitted, the barrier protocol (Ge only, no
Set, call-local generations), and the epilogue's accounting on every cell and every ring row."""

from __future__ import annotations

from collections import defaultdict

import pytest
from lowering_helpers import calls_of, make_inputs, simulate, specs_all, wait_generations
from lowering_sim import Machine

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import NR, AllreduceMode, DType, NotifyOp, Program, ProgramBuilder, WaitCmp
from pldemu.ir.nodes import BufferKind, Const, static_int
from pldemu.ir.ops import Op
from pldemu.lowering import lower_composite_ops, lower_composite_ops_with_report

SYSTEM = {Op.GET_COMM_CTX, Op.RANK, Op.NRANKS, Op.NOTIFY, Op.WAIT}
EXPECTED_OPS = {
    ("allreduce", AllreduceMode.mesh): SYSTEM | {Op.TENSOR_VIEW, Op.TILE_LOAD, Op.REMOTE_LOAD, Op.TILE_ADD,
                                                 Op.TILE_STORE},
    ("allreduce", AllreduceMode.ring): SYSTEM | {Op.TENSOR_VIEW, Op.TILE_CREATE, Op.TILE_LOAD, Op.TILE_SET_VALIDSHAPE,
                                                 Op.PUT, Op.TILE_ADD, Op.TILE_STORE},
    ("allgather", AllreduceMode.mesh): SYSTEM | {Op.TILE_CREATE, Op.PUT},
    ("reduce_scatter", AllreduceMode.mesh): SYSTEM | {Op.TILE_LOAD, Op.REMOTE_LOAD, Op.TILE_ADD, Op.TILE_STORE},
    ("broadcast", AllreduceMode.mesh): SYSTEM | {Op.TILE_CREATE, Op.GET},
    ("barrier", AllreduceMode.mesh): SYSTEM,
    ("all_to_all", AllreduceMode.mesh): SYSTEM | {Op.TILE_CREATE, Op.PUT},
    ("all_to_all_v", AllreduceMode.mesh): SYSTEM | {Op.TILE_CREATE, Op.PUT, Op.TENSOR_READ},
}
SPECS = list(specs_all(17)) + list(specs_all(65537)) + list(specs_all(4097, DType.FP16))


def lowered(spec: CollectiveSpec) -> Program:
    return lower_composite_ops(collective_program(spec).program)


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_emitted_primitives(spec: CollectiveSpec) -> None:
    ops = {c.op for c in calls_of(lowered(spec))}
    assert ops == EXPECTED_OPS[(spec.name, spec.mode)]
    assert not ops & {Op.ALLREDUCE, Op.ALLGATHER, Op.REDUCE_SCATTER, Op.BROADCAST, Op.BARRIER, Op.ALL_TO_ALL,
                      Op.ALL_TO_ALL_V}


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_every_wait_is_ge_and_no_set_anywhere(spec: CollectiveSpec) -> None:
    p = lowered(spec)
    waits = calls_of(p, Op.WAIT)
    notifies = calls_of(p, Op.NOTIFY)
    assert waits and notifies
    assert all(w.attr("cmp") is WaitCmp.Ge for w in waits)
    assert all(n.attr("op") is NotifyOp.AtomicAdd for n in notifies)


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_puts_are_plain_copies(spec: CollectiveSpec) -> None:
    from pldemu.ir import AtomicType

    assert all(c.attr("atomic") is AtomicType.None_ for c in calls_of(lowered(spec), Op.PUT))


def _two_signal_program(builder_body: str) -> Program:
    pb = ProgramBuilder("gens")
    data = pb.window("data", "fp32", [1, 17])
    ring_data = pb.window("rdata", "fp16", [1, 40])
    sig = pb.signal("sig", [NR, 1])
    rsig = pb.signal("rsig", [2 * (NR - 1), NR])
    fb = pb.function()
    pld = fb.pld

    def calls() -> None:
        pld.tensor.barrier(sig)
        pld.tensor.allreduce(data, sig)
        pld.tensor.allreduce(ring_data, rsig, mode="ring")

    if builder_body == "flat":
        calls()
        calls()
    elif builder_body == "for":
        with fb.for_range(0, 3):
            calls()
    elif builder_body == "while":
        i = fb.let("i", 0)
        with fb.while_(i.lt(2)):
            calls()
            fb.assign(i, i + 1)
    elif builder_body == "if":
        with fb.if_(Const(True)):
            calls()
        with fb.else_():
            calls()
    return pb.build()


@pytest.mark.parametrize("where", ["flat", "for", "while", "if"])
def test_generations_restart_at_one_in_every_call(where: str) -> None:
    p = lower_composite_ops(_two_signal_program(where))
    # barrier: 1; mesh allreduce (one chunk): 1, 2; ring (one subchunk): 1, 2 for the RS and AG rounds.
    per_round = ["1", "1", "2", "1", "2", "1", "2"]
    gens = wait_generations(p)
    assert gens == per_round * (len(gens) // len(per_round))
    assert len(gens) == len(per_round) * (2 if where in ("flat", "if") else 1)


def test_generations_derived_from_loop_indices() -> None:
    mesh = wait_generations(lowered(CollectiveSpec("allreduce", size=65537)))
    assert mesh == ["1", "gen"]  # gen = col // 4096 + 2, computed in the chunk loop
    ring = wait_generations(lowered(CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=65537)))
    assert ring == ["ready", "ready + 1", "ready_1", "ready_1 + 1"]  # ready = 2k + 1


@pytest.mark.parametrize("nranks", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("spec", list(specs_all(17)) + list(specs_all(9000, DType.FP16)), ids=str)
def test_epilogue_retires_exactly_what_the_call_issued(spec: CollectiveSpec, nranks: int) -> None:
    """Evaluate the lowered call at NR ranks: on every signal cell of every rank (every ring row), the
    credits peers posted equal the credits the owner retired, retirement is a self-notify, and the
    per-cell credit count equals the epilogue's N from the report."""
    machine = simulate(spec, nranks, seed=nranks)
    report = lower_composite_ops_with_report(collective_program(spec).program)
    (call,) = report.calls
    n_credits = _eval(call.lowered.credits, nranks)
    posted: dict[tuple[int, str, tuple[int, ...]], int] = defaultdict(int)
    retired: dict[tuple[int, str, tuple[int, ...]], int] = defaultdict(int)
    kinds = {b.var.name: b.kind for b in machine.program.buffers}
    for src, dst, buf, cell, value in machine.stats.log:
        if buf == "recv_counts":
            continue
        assert kinds[buf] is BufferKind.SIGNAL
        if value > 0:
            assert src != dst, "credits go to peers only"
            posted[(dst, buf, cell)] += value
        else:
            assert src == dst, "only the owner retires credits"
            retired[(dst, buf, cell)] -= value
    assert posted == retired
    rows = _eval(call.lowered.rows, nranks) if call.lowered.rows is not None else 1
    assert len(posted) == nranks * (nranks - 1) * rows  # every non-self cell of every row
    assert set(posted.values()) == {n_credits}


def _eval(e: object, nranks: int) -> int:
    from pldemu.lowering.common import eval_nr

    assert not isinstance(e, (int, type(None)))
    v = eval_nr(e, nranks)  # type: ignore[arg-type]
    assert v is not None
    return v


def test_all_to_all_v_waits_for_destinations_on_demand() -> None:
    p = lowered(CollectiveSpec("all_to_all_v", size=16))
    text_waits = wait_generations(p)
    assert text_waits == ["1", "2"]  # readiness per destination, then completion wait-all
    reads = calls_of(p, Op.TENSOR_READ)
    assert [r.args[0].name for r in reads] == ["recv_counts", "send_counts"]  # type: ignore[union-attr]


def test_all_to_all_v_zero_rows_publish_nothing() -> None:
    spec = CollectiveSpec("all_to_all_v", size=16, max_recv=2)
    inputs = make_inputs(spec, 3, seed=0)
    for counts in inputs["send_counts"]:
        counts[:] = 0
    program = lower_composite_ops(collective_program(spec).program)
    machine = Machine(program, 3, init=lambda r, n, s, d: inputs.get(n, [None] * 3)[r], seed=0).run()
    published = [e for e in machine.stats.log if e[2] == "recv_counts" and e[0] != e[1]]
    assert published == []
    for r in range(3):
        assert machine.array(r, "recv_counts").ravel().tolist() == [0, 0, 0]  # stale counts reset


def test_stage_and_chunk_facts_in_report() -> None:
    (call,) = lower_composite_ops_with_report(
        collective_program(CollectiveSpec("allreduce", mode=AllreduceMode.ring, size=65537)).program).calls
    assert call.lowered.stage == (1, 4096)
    assert _eval(call.lowered.chunks, 4) == 5
    assert static_int(call.lowered.credits) is None  # 2 * chunks depends on NR
