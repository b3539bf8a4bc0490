"""``pld.tensor.all_to_all_v(input, target, signal, send_counts, recv_counts) -> target``.

input and target are [NR * MAX_RECV, SIZE] (MAX_RECV static); sender s owns target rows
[s * MAX_RECV, (s + 1) * MAX_RECV) of every receiver, and recv_counts[s] tells how many are valid::

    for src in range(0, nr):                     # reset own counts, atomically
        notify(recv_counts, me, [src, 0], -tensor.read(recv_counts, [src, 0]), AtomicAdd)
    notify every peer (credit 1)                 # ready: my counts are reset, my target is free
    for dest in range(0, nr):
        if dest != me: wait(signal, [dest, 0], 1, Ge)        # dest is ready
        rows = clamp(send_counts[dest], 0, MAX_RECV)
        if rows > 0:
            notify(recv_counts, dest, [me, 0], rows, AtomicAdd)
            put(target, dest, input, stage, [me * MAX_RECV, 0], [dest * MAX_RECV, 0], [rows, SIZE])
    barrier(2)                                   # completion: every payload and count has landed
    epilogue(2)

The reset and the publication are atomic adds, never Set: a Set would mix with AtomicAdd on the
same cells (and a whole-line scalar write-back could clobber a neighbouring count). A sender waits
for each destination on demand rather than for everyone before its first send.
"""

from __future__ import annotations

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import NotifyOp
from pldemu.ir.nodes import NR, Call, Const, Expr, emax, emin
from pldemu.lowering.common import (
    Geometry,
    Lowered,
    LoweringContext,
    check_dims,
    check_separate_input,
    check_signal,
    check_target_dtype,
    check_window,
    emit_barrier,
    emit_comm,
    emit_epilogue,
    emit_notify_all,
    emit_wait,
    eval_nr,
    same_extent,
    show,
    stage_tile,
    subst_nr,
    tensor_arg,
    window_target,
)


def lower_all_to_all_v(call: Call, fb: FunctionBuilder, ctx: LoweringContext) -> Lowered:
    """Lower one all_to_all_v."""
    src, it = tensor_arg(ctx, call, 0, "input")
    target, t = window_target(ctx, call, 1)
    if len(t.shape) != 2:
        raise ctx.error("target", "2-D [NR * MAX_RECV, SIZE]", show(t.shape))
    max_recv = _max_recv(ctx, t.shape[0])
    check_target_dtype(ctx, "input", it, t)
    if len(it.shape) != 2 or not all(same_extent(a, b, ctx.nranks) for a, b in zip(it.shape, t.shape, strict=True)):
        raise ctx.error("input", f"shaped like the target {show(t.shape)}", show(it.shape))
    check_separate_input(ctx, src, it, target, t)
    signal = check_signal(ctx, call, 2)
    send, st = tensor_arg(ctx, call, 3, "send_counts")
    if st.dtype is not DType.INT32 or st.window:
        raise ctx.error("send_counts", "an INT32 local tensor of [NR]",
                        f"{'window' if st.window else 'local'} {st.dtype.value}{show(st.shape)}")
    check_dims(ctx, "send_counts", st, [lambda n: n], "[NR]")
    recv, rt = tensor_arg(ctx, call, 4, "recv_counts")
    if rt.dtype is not DType.INT32:
        raise ctx.error("recv_counts", "an INT32 window of [NR, 1]", rt.dtype.value)
    check_window(ctx, "recv_counts", rt)
    check_dims(ctx, "recv_counts", rt, [lambda n: n, lambda n: 1], "[NR, 1]")
    if ctx.root(recv) & (ctx.root(signal) | ctx.root(target)):
        raise ctx.error("recv_counts", "its own buffer (not the signal or the target)", recv.name)

    comm = emit_comm(fb, ctx, target, signal)
    size = subst_nr(t.shape[1], comm.nr)
    stage, shape = stage_tile(fb, ctx, Geometry.of(t.dtype), "target", [Const(max_recv), t.shape[1]])
    system = fb.pld.system
    me = comm.me

    # Reset my counts with AtomicAdd(-current): no peer publishes before my readiness credit below.
    with fb.for_range(0, comm.nr, hint="src") as s:
        stale = fb.pld.tensor.read(recv, [s, 0])
        system.notify(recv, me, [s, 0], 0 - stale, op=NotifyOp.AtomicAdd)
    emit_notify_all(fb, comm)  # readiness: credit 1 of this call

    with fb.for_range(0, comm.nr, hint="dest") as dest:
        if comm.variant.a2av_readiness_wait:  # the variant may drop it (the a2av-no-readiness mutant)
            with fb.if_(dest.ne(me)):
                emit_wait(fb, comm, dest, 1)  # Ge: dest has reset its counts and freed its target
        want = fb.pld.tensor.read(send, [dest])
        rows = fb.let("rows", emin(emax(want, 0), max_recv))
        with fb.if_(rows.gt(0)):  # zero-row destinations keep the reset count: nothing to publish
            system.notify(recv, dest, [me, 0], rows, op=NotifyOp.AtomicAdd)
            fb.pld.tile.put(target, dest, src, stage, [me * max_recv, 0],
                            [dest * max_recv, 0], [rows, size])
    emit_barrier(fb, comm, 2)  # completion: credit 2, then wait-all Ge 2
    # Retire both credits. A fast peer may already have posted both of its next-call credits (the
    # cell can reach 4); subtracting 2 keeps them.
    emit_epilogue(fb, comm, 2)
    return Lowered(target, Const(2), None, None, shape)


def _max_recv(ctx: LoweringContext, rows: Expr) -> int:
    """MAX_RECV = rows / NR, which must be a static integer (rows = k * NR, or divisible by a pinned NR)."""
    pinned = ctx.nranks
    if pinned is not None:
        v = eval_nr(rows, pinned)
        if v is None or v % pinned != 0 or v == 0:
            raise ctx.error("target", f"rows divisible by the pinned NR = {pinned} (MAX_RECV = rows / NR)",
                            show(rows))
        return v // pinned
    k = eval_nr(rows, 1)
    if k is None or k <= 0 or not same_extent(rows, k * NR, None):
        raise ctx.error("target", "rows of the form k * NR (MAX_RECV = k rows per sender must be static; pin "
                        "nranks to use a constant row count)", show(rows))
    return k


__all__ = ["lower_all_to_all_v"]
