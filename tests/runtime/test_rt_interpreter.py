"""The interpreter on hand-built primitive programs at one rank (COMM_SELF): tiles, loads/stores, valid
shapes, fillpad, FP16 math, control flow, views, tensor.read/write, poison, out-of-bounds transfers,
errors with locations, listeners, the handler table. (Self put/get/remote_load, a body that runs at any
rank count, is in tests/runtime_mpi/test_rt_exchange.py.)"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest
from helpers import instance
from rt_helpers import printed_line

from pldemu.ir import NR, Function, Op, Program, ProgramBuilder, Seq, Var
from pldemu.ir.nodes import INDEX
from pldemu.runtime import (
    HANDLERS,
    DeadlockError,
    OpCounter,
    OpEvent,
    ProgramError,
    RuntimeOptions,
    WindowAccessError,
)
from pldemu.runtime.values import Tile


def test_handler_table_covers_every_primitive_and_no_collective() -> None:
    assert isinstance(HANDLERS, MappingProxyType)
    assert set(HANDLERS) == {op for op in Op if not op.is_composite}


# -- tiles ---------------------------------------------------------------------------------------


def test_load_valid_region_and_store_writes_only_the_valid_region() -> None:
    pb = ProgramBuilder("tiles")
    src = pb.local("src", "fp32", [4, 8])
    dst = pb.window("dst", "fp32", [4, 8])
    fb = pb.function()
    t = fb.pld.tile.load(src, [1, 2], [2, 4], [2, 3])
    fb.pld.tile.store(t, [0, 0], dst)
    fb.ret(t)
    with instance(pb.build()) as inst:
        values = np.arange(32, dtype=np.float32).reshape(4, 8)
        inst.local("src")[...] = values
        stats = inst.run()
        d = inst.local("dst")
        np.testing.assert_array_equal(d[0:2, 0:3], values[1:3, 2:5])
        assert np.isnan(d[0:2, 3:]).all() and np.isnan(d[2:]).all()  # untouched: poison
        tile = stats.returned[0]
        assert isinstance(tile, Tile) and tile.valid == (2, 3) and tile.data.shape == (2, 4)
        assert np.isnan(tile.data[:, 3]).all()  # outside the valid region: poison


def test_fillpad_set_validshape_and_binary_ops_keep_lhs_valid_shape() -> None:
    pb = ProgramBuilder("pad")
    src = pb.local("src", "fp32", [2, 4])
    isrc = pb.local("isrc", "int32", [2, 4])
    fb = pb.function()
    pld = fb.pld
    t = pld.tile.load(src, [0, 0], [2, 4], [1, 2])
    z, hi, lo = (pld.tile.fillpad(t, pad, hint=f"p{pad}") for pad in ("zero", "max", "min"))
    it = pld.tile.load(isrc, [0, 0], [2, 4], [2, 1])
    ihi = pld.tile.fillpad(it, "max", hint="ihi")
    narrow = pld.tile.set_validshape(z, [1, 3], hint="narrow")
    s = pld.tile.add(narrow, hi)
    fb.ret(z, hi, lo, ihi, narrow, s)
    with instance(pb.build()) as inst:
        inst.local("src")[...] = 1.0
        inst.local("isrc")[...] = 5
        z_, hi_, lo_, ihi_, narrow_, s_ = inst.run().returned
        big = np.inf  # the device pads a float tile with +-inf (pto-isa's pad-value table)
        assert z_.valid == (2, 4) and z_.data.sum() == 2.0
        assert hi_.data[0, 0] == 1.0 and hi_.data[1, 3] == big and lo_.data[1, 0] == -big
        assert ihi_.data.dtype == np.int32 and ihi_.data[0, 3] == np.iinfo(np.int32).max and ihi_.data[1, 0] == 5
        assert narrow_.valid == (1, 3) and narrow_.data is z_.data  # same data, new valid shape
        assert s_.valid == (1, 3) and s_.data[0, 0] == 2.0  # element-wise over the physical tile


def test_fp16_math_stays_fp16_and_scalar_ops_cast_and_cast_rounds() -> None:
    pb = ProgramBuilder("fp16")
    fb = pb.function()
    pld = fb.pld
    a = pld.tile.full([1, 16], 2048.0, "fp16", hint="a")
    one = pld.tile.full([1, 16], 1.0, "fp16", hint="one")
    s = pld.tile.add(a, one, hint="s")  # 2049 is not an FP16 number: rounds back to 2048
    big = pld.tile.muls(a, 64.0, hint="big")  # 131072 overflows FP16
    inc = pld.tile.adds(one, 0.5, hint="inc")
    mx = pld.tile.maximum(a, one, hint="mx")
    mn = pld.tile.minimum(a, one, hint="mn")
    d = pld.tile.sub(a, one, hint="d")
    m = pld.tile.mul(one, one, hint="m")
    c = pld.tile.cast(pld.tile.full([1, 8], 0.1, "fp32", hint="f32"), "fp16", hint="c")
    fb.ret(s, big, inc, mx, mn, d, m, c)
    with instance(pb.build()) as inst:
        s_, big_, inc_, mx_, mn_, d_, m_, c_ = inst.run().returned
        for tile in (s_, big_, inc_, mx_, mn_, d_, m_, c_):
            assert tile.data.dtype == np.float16
        assert (s_.data == 2048).all() and np.isinf(big_.data).all() and (inc_.data == 1.5).all()
        assert (mx_.data == 2048).all() and (mn_.data == 1).all() and (d_.data == 2047).all()
        assert (m_.data == 1).all() and (c_.data == np.float16(0.1)).all()


# -- control flow, scalars ----------------------------------------------------------------------------


def _control_program() -> Program:
    pb = ProgramBuilder("control")
    nbuf = pb.local("n", "int32", [1])
    out = pb.local("out", "int64", [4])
    fb = pb.function()
    pld = fb.pld
    n = pld.tensor.read(nbuf, [0])
    acc = fb.let("acc", 0)
    with fb.for_range(0, n, 1) as i:  # runtime trip count
        fb.assign(acc, acc + i)
    pld.tensor.write(out, [0], acc)
    k = fb.let("k", 0)
    trips = fb.let("trips", 0)
    with fb.while_(k.lt(n)):  # runtime condition
        fb.assign(k, k + 3)
        fb.assign(trips, trips + 1)
    pld.tensor.write(out, [1], trips)
    with fb.if_(n.gt(5)):
        pld.tensor.write(out, [2], 1)
        fb.ret()
    with fb.else_():
        pld.tensor.write(out, [2], 2)
    pld.tensor.write(out, [3], 7)  # only reached without the early return
    return pb.build()


@pytest.mark.parametrize("n", [0, 4, 10])
def test_for_while_if_and_return_with_runtime_values(n: int) -> None:
    with instance(_control_program()) as inst:
        inst.local("n")[0] = n
        inst.local("out")[...] = -1
        inst.run()
        out = inst.local("out")
        assert out[0] == sum(range(n)) and out[1] == len(range(0, n, 3))
        assert out[2] == (1 if n > 5 else 2) and out[3] == (-1 if n > 5 else 7)


def test_scalar_fault_is_a_program_error_with_its_location() -> None:
    pb = ProgramBuilder("div")
    nbuf = pb.local("n", "int32", [1])
    fb = pb.function()
    n = fb.pld.tensor.read(nbuf, [0])
    fb.let("q", 10 // n)
    program = pb.build()
    with instance(program) as inst:
        inst.local("n")[0] = 0
        with pytest.raises(ProgramError, match=r"^main:\d+ q = 10 // n_val: ZeroDivisionError") as info:
            inst.run()
        line = int(str(info.value).split(":")[1].split()[0])
        assert printed_line(program, line) == "q = 10 // n_val"


# -- tensors ----------------------------------------------------------------------------------------


def test_view_keeps_the_window_and_read_write_own_elements() -> None:
    pb = ProgramBuilder("views")
    w = pb.window("w", "fp32", [4, 6])
    sig = pb.signal("sig", [2, 1])
    out = pb.local("out", "int32", [2])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(w))
    flat = pld.tensor.view(w, [1, 24], [1, 20])
    pld.tile.store(pld.tile.full([1, 8], 5.0, "fp32"), [0, 8], flat)
    back = pld.tile.remote_load(flat, me, [0, 6], [1, 4])  # through the window, via the view
    pld.tile.store(back, [0, 0], flat)
    pld.tensor.write(sig, [1, 0], 7)
    pld.tensor.write(out, [0], pld.tensor.read(sig, [1, 0]))
    pld.tensor.write(out, [1], pld.tensor.read(sig, [0, 0]))
    with instance(pb.build()) as inst:
        inst.run()
        w_ = inst.local("w").ravel()
        # w[6:10] came back through the window: two poison elements, two fives, stored at w[0:4].
        assert np.isnan(w_[0:2]).all() and (w_[2:4] == 5).all() and np.isnan(w_[4:8]).all()
        assert (w_[8:16] == 5).all() and np.isnan(w_[16:]).all()
        assert list(inst.local("out")) == [7, 0]
        assert inst.window("sig").read_cell(1) == 7


def test_poison_is_visible_and_can_be_turned_off() -> None:
    pb = ProgramBuilder("poison")
    pb.window("w", "fp32", [3])
    pb.local("i", "int32", [2])
    pb.local("h", "fp16", [2])
    pb.signal("s", [2])
    fb = pb.function()
    fb.ret(fb.pld.tile.create([2, 2], "fp32"))
    program = pb.build()
    with instance(program) as inst:
        created = inst.run().returned[0]
        assert np.isnan(inst.local("w")).all() and np.isnan(inst.local("h")).all()
        assert (inst.local("i") == np.iinfo(np.int32).min).all() and (inst.local("s") == 0).all()
        assert np.isnan(created.data).all()
    with instance(program, poison=False) as inst:
        created = inst.run().returned[0]
        assert (inst.local("w") == 0).all() and (inst.local("i") == 0).all() and (created.data == 0).all()


# -- distributed primitives onto myself -----------------------------------------------------------------


def test_out_of_bounds_put_is_refused_with_op_rank_peer_window_region_and_location() -> None:
    pb = ProgramBuilder("oob")
    src = pb.local("src", "fp32", [2, 8])
    w = pb.window("w", "fp32", [2, 8])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(w))
    stage = pld.tile.create([1, 8], "fp32")
    pld.tile.put(w, me, src, stage, [1, 4], [0, 0], [1, 8])
    program = pb.build()
    with instance(program) as inst, pytest.raises(WindowAccessError) as info:
        inst.run()
    text = str(info.value)
    assert text.startswith("main:") and "pld.tile.put(w, me, src, stage, [1, 4], [0, 0], [1, 8]" in text
    assert "put: rank 0 -> peer 0 on window 'w'" in text and "dim 1 covers [4, 12) outside [0, 8)" in text
    line = int(text.split(":")[1].split()[0])
    assert printed_line(program, line).startswith("pld.tile.put(w, me, src, stage, [1, 4]")


def test_out_of_bounds_local_load_and_bad_peer_are_refused() -> None:
    pb = ProgramBuilder("oob2")
    src = pb.local("src", "fp32", [2, 8])
    w = pb.window("w", "fp32", [2, 8])
    flag = pb.local("flag", "int32", [1])
    fb = pb.function()
    pld = fb.pld
    with fb.if_(pld.tensor.read(flag, [0]).eq(0)):
        pld.tile.load(src, [1, 0], [2, 8])
    with fb.else_():
        pld.tile.remote_load(w, 3, [0, 0], [1, 8])
    with instance(pb.build()) as inst:
        inst.local("flag")[0] = 0
        with pytest.raises(WindowAccessError, match=r"tile\.load: rank 0 -> peer 0 on local 'src'.*dim 0 covers"):
            inst.run()
        inst.local("flag")[0] = 1
        with pytest.raises(WindowAccessError, match=r"^main:\d+ .*remote_load: rank 0 -> peer 3.*out of range"):
            inst.run()


# -- signals, deadlock ---------------------------------------------------------------------------------


def test_notify_and_wait_on_myself_across_runs() -> None:
    pb = ProgramBuilder("credits")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.system.notify(sig, me, [me, 0], 2)
    pld.system.wait(sig, [me, 0], 2, cmp="Ge")
    pld.system.notify(sig, me, [me, 0], -1)  # net +1 per run
    with instance(pb.build()) as inst:
        for k in range(1, 4):
            stats = inst.run()
            assert stats.run == k and stats.window_ops["notifies"] == 2 and stats.window_ops["waits"] == 1
        assert inst.window("sig").read_cell(0) == 3


def test_unsatisfiable_wait_raises_deadlock_error_with_the_wait_for_report() -> None:
    pb = ProgramBuilder("stuck")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    pld.system.notify(sig, me, [me, 0], 2)
    pld.system.wait(sig, [me, 0], 1, cmp="Eq")  # 2 already passed 1: Eq can never match
    with instance(pb.build(), timeout=0.3) as inst, pytest.raises(DeadlockError) as info:
        inst.run()
    err = info.value
    text = str(err)
    assert err.primary and err.rank == 0 and err.location.startswith("main:")
    assert "deadlock: rank 0 waited" in text and "for sig[0, 0] == 1 (observed 2)" in text
    assert "wait-for graph (1 ranks" in text and "*rank 0: TIMED_OUT run 1 at main:" in text
    assert "cycle: rank 0 -> rank 0 (waits for itself)" in text
    assert "Eq wait for 1 but sig[0, 0] is already 2" in text


# -- validation before any MPI traffic -------------------------------------------------------------------


def test_remaining_collective_is_rejected_by_name_and_location() -> None:
    pb = ProgramBuilder("unlowered")
    t = pb.window("t", "fp32", [1, 16])
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    fb.pld.tensor.allreduce(t, sig)
    with pytest.raises(ProgramError, match=r"^main:\d+ t_out = pld\.tensor\.allreduce\(.*composite collective"):
        instance(pb.build()).__enter__()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda pb: pb.window("w", "fp32", [NR - 2, 4]), r"extents must not be negative"),
        (lambda pb: pb.window("w", "fp32", [4], valid_shape=[5]), r"valid shape \[5\] exceeds"),
        (lambda pb: pb.window("w", "fp32", [4, 4], strides=[8, 1]), r"strided buffers"),
    ],
)
def test_bad_buffers_are_program_errors(build: object, message: str) -> None:
    pb = ProgramBuilder("bad")
    build(pb)  # type: ignore[operator]
    pb.function()
    with pytest.raises(ProgramError, match=message):
        instance(pb.build()).__enter__()


def test_nranks_pin_and_entry_parameters_are_checked() -> None:
    pinned = ProgramBuilder("pinned", nranks=2)
    pinned.function()
    with pytest.raises(ProgramError, match=r"pinned to nranks=2 but the communicator has 1 ranks"):
        instance(pinned.build()).__enter__()
    params = Program("params", (), (Function("main", (Var("x", INDEX),), Seq(())),))
    with pytest.raises(ProgramError, match=r"entry function main takes parameters \(x\)"):
        instance(params).__enter__()


# -- locations, listeners --------------------------------------------------------------------------------


def test_every_call_site_location_is_its_line_in_the_printed_program() -> None:
    pb = ProgramBuilder("lines")
    w = pb.window("w", "fp32", [2, 8])
    sig = pb.signal("sig", [NR, 1])
    helper = pb.function("helper")
    helper.pld.tile.create([1, 8], "fp32")
    fb = pb.function("main")
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(w))
    with fb.for_range(0, 2) as i:
        with fb.if_(i.eq(0)):
            pld.system.notify(sig, me, [me, 0], 1)
        with fb.else_():
            k = fb.let("k", 0)
            with fb.while_(k.lt(1)):
                pld.system.notify(sig, me, [me, 0], 1)
                fb.assign(k, k + 1)
    pld.system.wait(sig, [me, 0], 2)
    fb.ret()
    program = pb.build()
    with instance(program) as inst:
        assert len(inst.sites) == 6  # helper: create; main: get_comm_ctx, rank, 2 notifies, wait
        for site in inst.sites:
            assert printed_line(program, site.location.line) == site.location.text, site.where
        inst.run()


def test_listeners_see_every_op_with_args_and_location() -> None:
    pb = ProgramBuilder("listen")
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    with fb.for_range(0, 3):
        pld.system.notify(sig, me, [me, 0], 1)
    with instance(pb.build()) as inst:
        inst.run()  # no listener yet: the untraced variant
        sites = inst.sites
        events: list[OpEvent] = []
        counter = OpCounter()
        inst.add_listener(events.append)
        inst.add_listener(counter)
        inst.run()
        assert inst.sites == sites  # the traced variant reuses the same call sites
        assert [e.op for e in events] == [Op.GET_COMM_CTX, Op.RANK] + [Op.NOTIFY] * 3
        notify = events[-1]
        assert notify.args[1:] == (0, (0, 0), 1) and notify.rank == 0
        assert str(notify.location).startswith("main:") and "pld.system.notify(sig" in str(notify.location)
        assert counter.counts[Op.NOTIFY] == 3
        assert inst.window("sig").read_cell(0) == 6


def test_options_are_validated() -> None:
    for kwargs, field in [({"timeout": 0}, "timeout"), ({"timeout": float("nan")}, "timeout"),
                          ({"timeout": True}, "timeout"), ({"windows": "mmap"}, "windows"),
                          ({"seed": 1.5}, "seed"), ({"poison": 1}, "poison"), ({"stage_pieces": "yes"}, "stage_pieces")]:
        with pytest.raises(ValueError, match=rf"RuntimeOptions\.{field}"):
            RuntimeOptions(**kwargs)  # type: ignore[arg-type]
    assert RuntimeOptions() == RuntimeOptions(timeout=30.0, windows="auto", seed=0, poison=True)


def test_a_host_task_outside_a_resident_job_is_refused_at_its_line() -> None:
    pb = ProgramBuilder("host_task")
    pb.local("x", "fp32", [1, 8])
    fb = pb.function()
    fb.pld.system.host_task(3)
    with instance(pb.build()) as inst:
        with pytest.raises(ProgramError, match=r"host task 3 .* runs only in a resident job"):
            inst.run()
        ran = []
        inst.on_host_task(ran.append)  # a resident job's rank: it runs the task
        inst.run()
        assert ran == [3]
