"""``%`` and ``//`` of device values run as the device runs them, C's truncation (pypto's code generators
emit ``arith.remsi`` / ``arith.divsi`` and C ``%`` / ``/`` for its FloorMod / FloorDiv): a program that
works only because ``%`` floors fails with the site at its line, both values and the rank; with
``truncation_warn`` the run passes and warns. Python-valued operands fold with Python's floor, as pypto
folds them."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from pldemu.pypto.execute import ProgramRunError, TruncationWarning
from pldemu.pypto.session import FrontendOptions, use_options
from pldemu.pypto.surface import ir
from pldemu.pypto.surface import language as pl
from pldemu.pypto.surface.ir.distributed_compiled_program import DistributedConfig
from pldemu.pypto.surface.language import distributed as pld

pytestmark = pytest.mark.launcher

NR = pl.dynamic("NR")
SHIFT = -1
FIELDS = 4


def _make_prev(wrap: bool):  # type: ignore[no-untyped-def]
    """Each device writes its predecessor ``(my_rank - 1) % nranks`` (``wrap``: ``(my_rank + nranks - 1)
    % nranks``, never a negative dividend) twice, ``(my_rank - 2) % nranks`` and a closure's ``SHIFT % 4``."""

    @pl.program
    class Prev:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, out: pl.Out[pl.Tensor[[1, FIELDS], pl.INT32]], win: pld.DistributedTensor[[1, 1], pl.INT32]
              ) -> pl.Tensor[[1, FIELDS], pl.INT32]:
            ctx = pld.get_comm_ctx(win)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)
            if wrap:
                prev = (my_rank + nranks - 1) % nranks
                back2 = (my_rank + 2 * nranks - 2) % nranks
            else:
                prev = (my_rank - 1) % nranks
                back2 = (my_rank - 2) % nranks
            pl.write(out, [0, 0], prev)
            pl.write(out, [0, 1], prev + 10)
            pl.write(out, [0, 2], back2)
            pl.write(out, [0, 3], SHIFT % 4)
            return out

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, outs: pl.Out[pl.Tensor[[NR, 1, FIELDS], pl.INT32]]) -> pl.Tensor[[NR, 1, FIELDS], pl.INT32]:
            buf = pld.alloc_window_buffer(pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                self.k(outs[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)
            return outs

    return Prev


def _line(text: str) -> str:
    """``test_truncation.py:N`` of the first line of this file holding ``text``."""
    with open(__file__) as f:
        return f"test_truncation.py:{next(i for i, line in enumerate(f, 1) if text in line)}"


def _run(wrap: bool, n: int = 3) -> np.ndarray:
    outs = np.full((n, 1, FIELDS), 99, np.int32)
    ir.compile(_make_prev(wrap), distributed_config=DistributedConfig(device_ids=list(range(n))))(outs)
    return outs[:, 0, :]


def test_a_negative_dividend_fails_with_both_values_at_its_line() -> None:
    with pytest.raises(ProgramRunError) as info:
        _run(wrap=False)
    text = str(info.value)
    assert "exited 1: a check failed" in text, text
    prev, back2 = _line("prev = (my_rank - 1) % nranks"), _line("back2 = (my_rank - 2) % nranks")
    assert (f"{prev}: `(my_rank - 1) % nranks` with a negative dividend (-1 % 3): the device computes -1 "
            "(C truncation), pypto's IR and Python give 2 (floor); rank 0, first seen at call 1") in text, text
    assert (f"{back2}: `(my_rank - 2) % nranks` with a negative dividend (-2 % 3): the device computes -2 "
            "(C truncation), pypto's IR and Python give 1 (floor); ranks 0, 1 (the values of rank 0), "
            "first seen at call 1") in text, text
    # Once per site: `prev` is used twice, and each rank's block of the program has its own copy.
    assert len(re.findall(r"^  test_truncation\.py:\d+: `", text, re.M)) == 2, text


def test_the_host_tensors_hold_what_the_device_computed() -> None:
    outs = np.full((3, 1, FIELDS), 99, np.int32)
    compiled = ir.compile(_make_prev(False), distributed_config=DistributedConfig(device_ids=[0, 1, 2]))
    with pytest.raises(ProgramRunError):
        compiled(outs)
    # The device's -1 and -2 on rank 0 (floor would give 2 and 1); SHIFT % 4 folded in Python: 3.
    assert outs[:, 0, :].tolist() == [[-1, 9, -2, 3], [0, 10, -1, 3], [1, 11, 0, 3]]


def test_a_never_negative_dividend_passes() -> None:
    assert _run(wrap=True).tolist() == [[2, 12, 1, 3], [0, 10, 2, 3], [1, 11, 0, 3]]


def test_truncation_warn_passes_and_warns() -> None:
    runtime = dataclasses.replace(FrontendOptions().runtime, truncation_warn=True)
    with use_options(FrontendOptions(runtime=runtime)), pytest.warns(TruncationWarning) as warned:
        got = _run(wrap=False)
    assert got.tolist() == [[-1, 9, -2, 3], [0, 10, -1, 3], [1, 11, 0, 3]]
    texts = [str(w.message) for w in warned]
    assert len(texts) == 2 and texts[0].startswith(f"Prev on 3 devices: {_line('prev = (my_rank - 1) % nranks')}: "
                                                   "`(my_rank - 1) % nranks` with a negative dividend"), texts


@pl.program
class BadPeer:
    """Rank 0 notifies the peer ``(my_rank - 1) % nranks``: -1 on the device, a refused access."""

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, out: pl.Out[pl.Tensor[[1, 1], pl.INT32]], sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]]
          ) -> pl.Tensor[[1, 1], pl.INT32]:
        ctx = pld.get_comm_ctx(sig)
        me = pld.rank(ctx)
        nranks = pld.nranks(ctx)
        pld.system.notify(sig, peer=(me - 1) % nranks, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pl.write(out, [0, 0], me)
        return out

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(self, outs: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]]) -> pl.Tensor[[NR, 1, 1], pl.INT32]:
        buf = pld.alloc_window_buffer(pl.INT32.get_byte())
        for r in pl.range(pld.world_size()):
            self.k(outs[r], pld.window(buf, [1, 1], dtype=pl.INT32), device=r)
        return outs


def test_a_failure_it_caused_names_the_truncation_first() -> None:
    with pytest.raises(ProgramRunError) as info:
        ir.compile(BadPeer, distributed_config=DistributedConfig(device_ids=[0, 1]))(np.zeros((2, 1, 1), np.int32))
    text = str(info.value)
    site = _line("pld.system.notify(sig, peer=(me - 1) % nranks")
    assert re.search(rf"truncating division: {site}: `\(me - 1\) % nranks` with a negative dividend \(-1 % 2\): "
                     r"the device computes -1 .*\n(.*\n)?then WindowAccessError", text), text
