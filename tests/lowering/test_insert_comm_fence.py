"""InsertCommFence, as Before/Expected pairs: the cases of pypto's own structural tests for its pass,
written in pldemu's terms (a put stands for pypto's remote_store; pldemu has no function calls, so
the opaque-call case has no counterpart), plus wait runs, pure wait loops and a get into a window."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import AllreduceMode, DType, Program, format_program, parse_program
from pldemu.ir.verifier import verify
from pldemu.lowering import (
    DropMarker,
    InsertCommFence,
    InsertToolchainDrains,
    Marker,
    insert_fences,
    lower_composite_ops,
)
from pldemu.lowering.toolchain_drains import PLACED_BY
from pldemu.mutants import MUTANTS

HEADER = """\
program p {
  window win: fp32[1, 16]
  window win_b: fp32[2, 8]
  signal sig: int32[NR, 1]
  local loc: fp32[1, 16]
  local flags: int32[4]

  func main() {
    ctx = pld.system.get_comm_ctx(win)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    peer = (me + 1) % nr
    t = tile.load(loc, [0, 0], [1, 16])
    stage = tile.create([1, 16], dtype=fp32)
"""

INV = "system.cacheinvalid(win, [1, 16], [0, 0])"
INV_B = "system.cacheinvalid(win_b, [2, 8], [0, 0])"


def program(body: str, extra: str = "") -> Program:
    return verify(parse_program(HEADER + body + "\n  }\n" + extra + "}\n"))


CASES: dict[str, tuple[str, str]] = {
    "window_store_then_notify": (
        """tile.store(t, [0, 0], win)
           pld.system.notify(sig, peer, [me, 0], 1)""",
        f"""tile.store(t, [0, 0], win)
           {INV}
           system.fence()
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "scalar_write_to_window_then_notify": (
        """tensor.write(win, [0, 3], 2.0:fp32)
           pld.system.notify(sig, peer, [me, 0], 1)""",
        f"""tensor.write(win, [0, 3], 2.0:fp32)
           {INV}
           system.fence()
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "scalar_write_to_plain_tensor_is_not_published": (
        """tensor.write(flags, [1], 7:int32)
           pld.system.notify(sig, peer, [me, 0], 1)""",
        """tensor.write(flags, [1], 7:int32)
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "put_gets_fence_only": (
        """pld.tile.put(win, peer, loc, stage)
           pld.system.notify(sig, peer, [me, 0], 1)""",
        """pld.tile.put(win, peer, loc, stage)
           system.fence()
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "plain_tensor_store_no_markers": (
        """tile.store(t, [0, 0], loc)
           pld.system.notify(sig, peer, [me, 0], 1)""",
        """tile.store(t, [0, 0], loc)
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "multiple_window_stores_each_get_cacheinvalid_and_fence": (
        """tile.store(t, [0, 0], win)
           tile.store(t, [0, 0], win)
           pld.system.notify(sig, peer, [me, 0], 1)""",
        f"""tile.store(t, [0, 0], win)
           {INV}
           system.fence()
           tile.store(t, [0, 0], win)
           {INV}
           system.fence()
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "two_distinct_windows_each_get_cacheinvalid": (
        """tile.store(t, [0, 0], win)
           tensor.write(win_b, [1, 2], 1.0:fp32)
           pld.system.notify(sig, peer, [me, 0], 1)""",
        f"""tile.store(t, [0, 0], win)
           {INV}
           system.fence()
           tensor.write(win_b, [1, 2], 1.0:fp32)
           {INV_B}
           system.fence()
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "write_inside_if_branch": (
        """if me == 0 {
             tile.store(t, [0, 0], win)
           }
           pld.system.notify(sig, peer, [me, 0], 1)""",
        f"""if me == 0 {{
             tile.store(t, [0, 0], win)
             {INV}
             system.fence()
           }}
           pld.system.notify(sig, peer, [me, 0], 1)"""),
    "notify_inside_if_write_before": (
        """tile.store(t, [0, 0], win)
           if me == 0 {
             pld.system.notify(sig, peer, [me, 0], 1)
           }""",
        f"""tile.store(t, [0, 0], win)
           {INV}
           system.fence()
           if me == 0 {{
             pld.system.notify(sig, peer, [me, 0], 1)
           }}"""),
    "notify_inside_loop_after_write": (
        """tile.store(t, [0, 0], win)
           for i in range(0, nr, 1) {
             pld.system.notify(sig, i, [me, 0], 1)
           }""",
        f"""tile.store(t, [0, 0], win)
           {INV}
           system.fence()
           for i in range(0, nr, 1) {{
             pld.system.notify(sig, i, [me, 0], 1)
           }}"""),
    "loop_back_edge_notify_then_write": (
        """for i in range(0, 4, 1) {
             pld.system.notify(sig, peer, [me, 0], 1)
             tile.store(t, [0, 0], win)
           }""",
        f"""for i in range(0, 4, 1) {{
             pld.system.notify(sig, peer, [me, 0], 1)
             tile.store(t, [0, 0], win)
             {INV}
             system.fence()
           }}"""),
    "combo_ring_barrier_idiom": (
        """for s in range(0, nr - 1, 1) {
             for p in range(0, nr, 1) {
               if p != me {
                 pld.system.notify(sig, p, [me, 0], 1)
               }
             }
             tile.store(t, [0, 0], win)
           }""",
        f"""for s in range(0, nr - 1, 1) {{
             for p in range(0, nr, 1) {{
               if p != me {{
                 pld.system.notify(sig, p, [me, 0], 1)
               }}
             }}
             tile.store(t, [0, 0], win)
             {INV}
             system.fence()
           }}"""),
    "combo_two_phase_loops": (
        """for s in range(0, nr, 1) {
             pld.system.notify(sig, peer, [me, 0], 1)
             tile.store(t, [0, 0], win)
           }
           for u in range(0, nr, 1) {
             pld.system.notify(sig, peer, [me, 0], 1)
             tile.store(t, [0, 0], win)
           }""",
        f"""for s in range(0, nr, 1) {{
             pld.system.notify(sig, peer, [me, 0], 1)
             tile.store(t, [0, 0], win)
             {INV}
             system.fence()
           }}
           for u in range(0, nr, 1) {{
             pld.system.notify(sig, peer, [me, 0], 1)
             tile.store(t, [0, 0], win)
             {INV}
             system.fence()
           }}"""),
    "wait_then_read_inserts_whole_gm_cacheinvalid": (
        """pld.system.wait(sig, [peer, 0], 1)
           v = tensor.read(win, [0, 0])""",
        """pld.system.wait(sig, [peer, 0], 1)
           system.cacheinvalid()
           v = tensor.read(win, [0, 0])"""),
    "notify_wait_read_handshake": (
        """tensor.write(win, [0, 0], 1.0:fp32)
           pld.system.notify(sig, peer, [me, 0], 1)
           pld.system.wait(sig, [peer, 0], 1)
           v = tensor.read(win, [0, 0])""",
        f"""tensor.write(win, [0, 0], 1.0:fp32)
           {INV}
           system.fence()
           pld.system.notify(sig, peer, [me, 0], 1)
           pld.system.wait(sig, [peer, 0], 1)
           system.cacheinvalid()
           v = tensor.read(win, [0, 0])"""),
    "bare_barrier_notify_no_marker": (
        """pld.system.notify(sig, peer, [me, 0], 1)""",
        """pld.system.notify(sig, peer, [me, 0], 1)"""),
    "consecutive_waits_share_one_cacheinvalid": (
        """pld.system.wait(sig, [peer, 0], 1)
           pld.system.wait(sig, [me, 0], 1)
           v = tensor.read(win, [0, 0])""",
        """pld.system.wait(sig, [peer, 0], 1)
           pld.system.wait(sig, [me, 0], 1)
           system.cacheinvalid()
           v = tensor.read(win, [0, 0])"""),
    "pure_wait_loop_gets_single_whole_gm_cacheinvalid": (
        """k = 1:int32
           while k < nr {
             src = (me + k) % nr
             pld.system.wait(sig, [src, 0], 1)
             k = k + 1:int32
           }
           for s in range(0, nr, 1) {
             if s != me {
               pld.system.wait(sig, [s, 0], 1)
             }
           }
           v = tensor.read(win, [0, 0])""",
        """k = 1:int32
           while k < nr {
             src = (me + k) % nr
             pld.system.wait(sig, [src, 0], 1)
             k = k + 1:int32
           }
           for s in range(0, nr, 1) {
             if s != me {
               pld.system.wait(sig, [s, 0], 1)
             }
           }
           system.cacheinvalid()
           v = tensor.read(win, [0, 0])"""),
    "wait_loop_that_reads_is_not_pure": (
        """for s in range(0, nr, 1) {
             pld.system.wait(sig, [s, 0], 1)
             v = tensor.read(win, [0, s])
           }""",
        """for s in range(0, nr, 1) {
             pld.system.wait(sig, [s, 0], 1)
             system.cacheinvalid()
             v = tensor.read(win, [0, s])
           }"""),
    "get_into_window_gets_cacheinvalid_and_fence": (
        """pld.tile.get(win, peer, win, stage)
           pld.tile.get(loc, peer, win, stage)""",
        f"""pld.tile.get(win, peer, win, stage)
           {INV}
           system.fence()
           pld.tile.get(loc, peer, win, stage)"""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_before_expected(name: str) -> None:
    before, expected = CASES[name]
    out = InsertCommFence().apply(program(before))
    assert format_program(out) == format_program(program(expected))
    assert out == program(expected)
    verify(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_idempotent(name: str) -> None:
    once = InsertCommFence().apply(program(CASES[name][0]))
    assert InsertCommFence().apply(once) == once


def test_host_function_untouched() -> None:
    extra = """  func host() {
    tile.store(tile.load(loc, [0, 0], [1, 16]), [0, 0], win)
    pld.system.wait(sig, [0, 0], 1)
  }
"""
    before = program("tile.store(t, [0, 0], win)", extra)
    out = InsertCommFence(host=frozenset({"host"})).apply(before)
    assert out.function("host") == before.function("host")
    assert out.function("main") != before.function("main")


def test_marker_keeps_the_origin_of_the_statement_it_follows() -> None:
    out = InsertCommFence().apply(program("tile.store(t, [0, 0], win)"))
    store, inv, fence = out.function().body.stmts[-3:]
    assert store.origin is not None and not store.origin.placed_by
    assert inv.origin == fence.origin == replace(store.origin, placed_by="InsertCommFence")
    assert str(inv.origin) == f"{store.origin}, placed by InsertCommFence"


# ----------------------------------------------------------------------------------------------
# drop: one marker left out (the mutant catalogue's broken placements)
# ----------------------------------------------------------------------------------------------

DROP_BODY = """tile.store(t, [0, 0], win)
           pld.tile.put(win, peer, loc, stage)
           pld.system.wait(sig, [0, 0], 1)
           pld.tile.put(win_b, peer, loc, stage)
           pld.system.wait(sig, [1, 0], 1)
           tile.store(t, [0, 0], win)"""


@pytest.mark.parametrize("kind, index, gone", [
    (Marker.WRITE_INVALIDATE, 0, 0), (Marker.WRITE_FENCE, 0, 1), (Marker.PUT_FENCE, 0, 2),
    (Marker.WAIT_INVALIDATE, 0, 3), (Marker.PUT_FENCE, 1, 4), (Marker.WAIT_INVALIDATE, 1, 5),
    (Marker.WRITE_INVALIDATE, 1, 6), (Marker.WRITE_FENCE, 1, 7),
])
def test_drop_leaves_out_exactly_the_kth_marker_of_its_kind(kind: Marker, index: int, gone: int) -> None:
    """``gone``: the position of the dropped marker among all markers, in program order."""
    full = InsertCommFence().apply(program(DROP_BODY))
    dropped = InsertCommFence(drop=DropMarker(kind, index)).apply(program(DROP_BODY))
    lines = [line.strip() for line in format_program(full).splitlines()]
    markers = [i for i, line in enumerate(lines) if line.startswith("system.")]
    assert len(markers) == 8  # (inv, fence) after each store, a fence after each put, inv after each wait
    want = lines[:markers[gone]] + lines[markers[gone] + 1:]
    assert [line.strip() for line in format_program(dropped).splitlines()] == want
    verify(dropped)
    assert InsertCommFence().apply(dropped) == full  # the pass puts back the one marker (not a whole pair)
    assert InsertCommFence(drop=DropMarker(kind, index)).apply(dropped) == dropped  # the same drop: idempotent


def test_drop_beyond_the_last_marker_changes_nothing() -> None:
    before = program(DROP_BODY)
    assert InsertCommFence(drop=DropMarker(Marker.PUT_FENCE, 2)).apply(before) == InsertCommFence().apply(before)


@pytest.mark.parametrize("kind, index", [("put-fence", 0), (Marker.PUT_FENCE, -1), (Marker.PUT_FENCE, True)])
def test_drop_marker_validation(kind: object, index: object) -> None:
    with pytest.raises(ValueError, match="DropMarker"):
        DropMarker(kind, index)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# idempotent: twice is once, on every recipe, mutant and litmus program
# ----------------------------------------------------------------------------------------------

LITMUS = Path(__file__).resolve().parents[1] / "races" / "fences"
RECIPES = [CollectiveSpec(name, dtype=dt, size=size) for name in
           ("allgather", "reduce_scatter", "broadcast", "barrier", "all_to_all", "all_to_all_v")
           for dt, size in ((DType.FP32, 17), (DType.FP16, 64))]
RECIPES += [CollectiveSpec("allreduce", mode=mode, dtype=DType.FP32, size=size)
            for mode in AllreduceMode for size in (17, 64)]
RECIPES += [CollectiveSpec("broadcast", root=1, size=64)]


def _twice_is_once(fences: InsertCommFence, program: Program) -> None:
    for apply in (fences.apply, insert_fences):  # the pass, and the pass with the toolchain's drains
        once = apply(program)
        twice = apply(once)
        assert format_program(twice) == format_program(once)
        assert twice == once


@pytest.mark.parametrize("spec", RECIPES, ids=str)
def test_idempotent_on_every_recipe(spec: CollectiveSpec) -> None:
    _twice_is_once(InsertCommFence(), lower_composite_ops(collective_program(spec).program))


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_idempotent_on_every_mutant(name: str) -> None:
    """The mutant's lowering under the full pass, and a drop entry under its own pass (the same marker
    stays dropped)."""
    m = MUTANTS[name]
    lowered = lower_composite_ops(m.program, variant=m.variant)
    _twice_is_once(InsertCommFence(), lowered)
    if m.drop is not None:
        _twice_is_once(InsertCommFence(drop=m.drop), lowered)
        assert InsertCommFence(drop=m.drop).apply(m.lower()) == m.lower()


@pytest.mark.parametrize("path", sorted(LITMUS.rglob("*.pld")), ids=lambda p: p.name)
def test_idempotent_on_every_litmus_program(path: Path) -> None:
    _twice_is_once(InsertCommFence(), verify(parse_program(path.read_text(), path.name)))


# ----------------------------------------------------------------------------------------------
# the toolchain's drains (PTOAS#718): system.bar_all() before every notify
# ----------------------------------------------------------------------------------------------


def test_a_drain_goes_before_every_notify_with_the_notifys_origin() -> None:
    before = program("""tile.store(t, [0, 0], win)
           pld.system.notify(sig, peer, [me, 0], 1)
           for i in range(0, nr, 1) {
             pld.system.notify(sig, i, [me, 0], 1)
           }""")
    out = insert_fences(before)
    want = program(f"""tile.store(t, [0, 0], win)
           {INV}
           system.fence()
           system.bar_all()
           pld.system.notify(sig, peer, [me, 0], 1)
           for i in range(0, nr, 1) {{
             system.bar_all()
             pld.system.notify(sig, i, [me, 0], 1)
           }}""")
    assert format_program(out) == format_program(want)
    drain, notify = out.function().body.stmts[-3:-1]
    assert notify.origin is not None and drain.origin == replace(notify.origin, placed_by=PLACED_BY)
    assert InsertToolchainDrains().apply(InsertCommFence().apply(before)) == out  # the two steps commute
    assert InsertCommFence().apply(InsertToolchainDrains().apply(before)) == out


def test_drains_leave_host_functions_alone() -> None:
    extra = """  func host() {
    pld.system.notify(sig, 0, [0, 0], 1)
  }
"""
    before = program("pld.system.notify(sig, peer, [me, 0], 1)", extra)
    out = InsertToolchainDrains(host=frozenset({"host"})).apply(before)
    assert out.function("host") == before.function("host")
    assert "system.bar_all()" in format_program(out)
