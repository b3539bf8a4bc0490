"""pypto's dependency rules (``pldemu.runtime.taskdeps``) on task graphs written by hand in ``.pld``: one
graph per rule, each with the edge it must have or must not have (issue 40, stage 2)."""

from __future__ import annotations

import pytest

from pldemu.ir import parse_program, verify
from pldemu.runtime.taskdeps import (
    Direction,
    Tag,
    TaskArgs,
    TensorMap,
    body_directions,
    static_edges,
    submissions,
)

HEAD = """program g {
  local a: fp32[4, 8]
  local b: fp32[4, 8]
  signal sig: int32[NR, 1]

  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
"""
STORE_A = "t = tile.load(b, [0, 0], [4, 8])\n      tile.store(t, [0, 0], a)"
READ_A = "u = tile.load(a, [0, 0], [4, 8])\n      tile.store(u, [0, 0], b)"
RMW_A = "v = tile.load(a, [0, 0], [4, 8])\n      tile.store(v, [0, 0], a)"


def _edges(body: str) -> dict[int, frozenset[int]]:
    program = verify(parse_program(HEAD + body + "\n  }\n}\n", "graph.pld"))
    return static_edges(program.function())


def _task(name: str, text: str, head: str = "core_group") -> str:
    return f"    task {name} = {head} {{\n      {text}\n    }}\n"


RULES = [
    # (rule, body, edges that must hold: consumer -> producers)
    ("RAW: a reader after a writer", _task("w", STORE_A) + _task("r", READ_A), {1: {0}}),
    ("WAR is never ordered (readers are not recorded)", _task("r", READ_A) + _task("w", RMW_A), {1: set()}),
    ("WAW: a second Out writer is promoted to INOUT behind the prior writer",
     _task("w1", STORE_A) + _task("w2", STORE_A), {1: {0}}),
    ("notify writes its signal (pypto #2391): the waiter follows the notifier",
     _task("n", "pld.system.notify(sig, me, [me, 0], 1, op=Set)")
     + _task("x", "pld.system.wait(sig, [me, 0], 1, cmp=Ge)"), {1: {0}}),
    ("a manual scope takes no automatic edge",
     "    scope manual {\n" + _task("w", STORE_A) + _task("r", READ_A) + "    }\n", {1: set()}),
    ("explicit deps order a manual scope",
     "    scope manual {\n" + _task("w", STORE_A) + "    task r = core_group deps [w] {\n      " + READ_A
     + "\n    }\n    }\n", {1: {0}}),
    ("no_dep drops the edge of that argument",
     _task("w", STORE_A) + "    task r = core_group nodep [a] {\n      " + READ_A + "\n    }\n", {1: set()}),
    ("a dummy task joins its deps",
     _task("w", STORE_A) + _task("r", READ_A) + "    task j = dummy deps [w, r]\n", {2: {0, 1}}),
]


@pytest.mark.parametrize(("rule", "body", "want"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_gives_its_edges(rule: str, body: str, want: dict[int, set[int]]) -> None:
    edges = _edges(body)
    for consumer, producers in want.items():
        assert edges[consumer] == frozenset(producers), rule


def test_out_in_a_sequential_loop_is_inout_and_in_a_parallel_loop_stays_output_existing() -> None:
    for kind, tag in (("range", Tag.INOUT), ("pipeline", Tag.INOUT), ("parallel", Tag.OUTPUT_EXISTING)):
        body = f"    for i in {kind}(0, 2, 1) {{\n" + _task("w", STORE_A) + "    }\n"
        program = verify(parse_program(HEAD + body + "\n  }\n}\n", "graph.pld"))
        (sub,) = submissions(program.function())
        assert sub.args.tags["a"] is tag, kind


def test_notify_atomic_add_reads_and_writes_its_signal() -> None:
    body = _task("n", "pld.system.notify(sig, me, [me, 0], 1, op=AtomicAdd)")
    program = verify(parse_program(HEAD + body + "\n  }\n}\n", "graph.pld"))
    (sub,) = submissions(program.function())
    assert body_directions(sub.task, {}) == {"sig": Direction.INOUT}


def _branches(then: str, orelse: str, after: str = "") -> str:
    return f"    if me == 0 {{\n{then}    }} else {{\n{orelse}    }}\n{after}"


def test_each_branch_of_an_if_starts_from_the_writes_before_it() -> None:
    # a dispatch to two devices: rank 0's copy in the then-branch, rank 1's in the else-branch. Rank 1's first
    # writer of a is no writer behind rank 0's (it stays OUTPUT_EXISTING) and takes no edge into the other branch;
    # after the if a task may follow either branch's writers
    body = _branches(_task("w0", STORE_A) + _task("r0", READ_A), _task("w1", STORE_A) + _task("r1", READ_A),
                     _task("r2", READ_A) + _task("w2", STORE_A))
    program = verify(parse_program(HEAD + body + "\n  }\n}\n", "graph.pld"))
    subs = submissions(program.function())
    assert [s.args.tags["a"] for s in subs] == [
        Tag.OUTPUT_EXISTING, Tag.INPUT, Tag.OUTPUT_EXISTING, Tag.INPUT, Tag.INPUT, Tag.INOUT]
    assert subs[3].args.tags["b"] is Tag.OUTPUT_EXISTING  # rank 1's first writer of b (r0 wrote it on rank 0)
    assert subs[4].args.tags["b"] is Tag.INOUT  # behind r0 or r1, whichever branch ran
    assert _edges(body) == {0: frozenset(), 1: frozenset({0}), 2: frozenset(), 3: frozenset({2}),
                            4: frozenset({0, 1, 2, 3}), 5: frozenset({0, 1, 2, 3, 4})}


def test_a_parallel_loop_in_the_second_branch_takes_no_edge_between_its_steps() -> None:
    # the rank's TensorMap as the scheduler fills it, one submission per step: each step of rank 1's copy wrote y
    # OUTPUT_EXISTING as rank 0's does; promoted behind rank 0's writes it took an edge to every earlier step
    # (quadratic in the steps, and a race between two steps hidden)
    loop = "    for i in parallel(0, 3, 1) {\n" + _task("w", STORE_A) + "    }\n"
    nested = "    if me == 1 {\n" + loop + "    } else {\n" + loop + "    }\n"
    for body in (_branches(loop, loop), _branches(loop, nested)):
        program = verify(parse_program(HEAD + body + "\n  }\n}\n", "graph.pld"))
        for sub in submissions(program.function()):
            tmap = TensorMap()
            assert [tmap.submit(TaskArgs(step, sub.args.tags)) for step in range(3)] == [frozenset()] * 3
