"""Bound signal ops (``ops.comm.Binding``): a notify or wait whose signal is a program buffer named
directly is compiled to its site's specialised entry, and that entry indexes, wraps, refuses and
blocks exactly as the handler does (one rank, COMM_SELF)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from helpers import instance

from pldemu.ir import NR, Program, ProgramBuilder, Var
from pldemu.ir.builder import FunctionBuilder
from pldemu.runtime import DeadlockError, OpEvent, WindowAccessError

Body = Callable[[FunctionBuilder, Var], None]
"""Emits a function's signal ops on ``sig`` (the buffer itself, or a view of the same shape)."""


def _program(body: Body, through_view: bool, shape: list[Any] | None = None) -> Program:
    pb = ProgramBuilder("bound")
    sig = pb.signal("sig", shape or [NR, 1])
    fb = pb.function()
    body(fb, fb.pld.tensor.view(sig, shape or [NR, 1]) if through_view else sig)
    return pb.build()


def _credit(fb: FunctionBuilder, sig: Var) -> None:
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.system.notify(sig, me, [me, 0], 2)
    pld.system.wait(sig, [me, 0], 2, cmp="Ge")
    pld.system.notify(sig, me, [me, 0], -1)


def test_only_a_named_buffer_with_a_full_index_is_bound() -> None:
    def one_d(fb: FunctionBuilder, sig: Var) -> None:
        fb.pld.system.notify(sig, 0, [0], 1)

    cases = [(_program(_credit, through_view=False), 3), (_program(_credit, through_view=True), 0),
             (_program(one_d, through_view=False, shape=[2]), 0)]
    for program, bound in cases:
        with instance(program) as inst:
            source = inst.python_source()
            assert len(re.findall(r"^ +_b\d+\(", source, re.MULTILINE)) == bound, source
            inst.run()
            assert inst.window("sig").read_cell(0) == 1


def test_a_listener_sees_a_bound_site_as_any_other() -> None:
    events: list[OpEvent] = []
    with instance(_program(_credit, through_view=False)) as inst:
        inst.add_listener(events.append)
        inst.run()
    assert [e.args[1:] for e in events[-3:]] == [(0, (0, 0), 2), ((0, 0), 2), (0, (0, 0), -1)]


def _errors(body: Body) -> list[str]:
    """The error ``body`` raises on a bound site and on the handler's (through a view)."""
    out = []
    for through_view in (False, True):
        with instance(_program(body, through_view), timeout=0.2) as inst, \
                pytest.raises((WindowAccessError, DeadlockError)) as info:
            inst.run()
        out.append(str(info.value))
    return out


def _messages(body: Body) -> list[str]:
    """:func:`_errors` from the op's own words on (the statements they name differ: sig, sig_view)."""
    return [text[text.index(": ", text.index("pld.system.")) + 2:] for text in _errors(body)]


@pytest.mark.parametrize("index", [[1, 0], [0, 1], [-1, 0]], ids=["row", "col", "negative"])
def test_a_bound_site_refuses_what_the_handler_refuses(index: list[int]) -> None:
    def notify(fb: FunctionBuilder, sig: Var) -> None:
        fb.pld.system.notify(sig, 0, index, 1)

    def wait(fb: FunctionBuilder, sig: Var) -> None:
        fb.pld.system.wait(sig, index, 1)

    for body, op in ((notify, "notify"), (wait, "wait")):
        bound, handled = _messages(body)
        assert bound == handled and bound.startswith(f"{op}: rank 0 -> peer 0 on signal 'sig': index "), bound


def test_a_bound_wait_that_blocks_reports_the_deadlock_as_the_handler_does() -> None:
    def stuck(fb: FunctionBuilder, sig: Var) -> None:
        fb.pld.system.notify(sig, 0, [0, 0], 2)
        fb.pld.system.wait(sig, [0, 0], 1, cmp="Eq")

    for text in _errors(stuck):  # the reports differ in the statement they name (sig, sig_view)
        assert "deadlock: rank 0 waited" in text and "for sig[0, 0] == 1 (observed 2)" in text
        assert "cycle: rank 0 -> rank 0 (waits for itself)" in text
        assert "Eq wait for 1 but sig[0, 0] is already 2" in text


def test_a_bound_notify_wraps_values_outside_int32_like_the_handler() -> None:
    def wrap(fb: FunctionBuilder, sig: Var) -> None:
        fb.pld.system.notify(sig, 0, [0, 0], 2**31 + 5)

    cells = []
    for through_view in (False, True):
        with instance(_program(wrap, through_view)) as inst:
            inst.run()
            cells.append(inst.window("sig").read_cell(0))
    assert cells == [-(2**31) + 5] * 2
