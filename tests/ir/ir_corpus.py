"""A varied set of builder-made programs: together they use every Op, nested for/while/if, NR in
shapes, valid shapes, DN layout, strides, typed and negative constants, parameters of every kind."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from pldemu.ir import (
    NR,
    BinOp,
    BinOpKind,
    CommCtxType,
    Const,
    DType,
    FunctionBuilder,
    Layout,
    MemorySpace,
    Op,
    Program,
    ProgramBuilder,
    ReduceOp,
    ScalarType,
    TileType,
    Var,
)
from pldemu.ir.enums import PadValue
from pldemu.ir.nodes import (
    INDEX,
    LoopKind,
    Seq,
    Stmt,
    TaskKind,
    emax,
    emin,
)
from pldemu.ir.walk import program_calls, walk_stmts

I32 = DType.INT32
F32 = DType.FP32


def collectives() -> Program:
    """Every pld.tensor.* collective, each ReduceOp, mesh and ring on separate signals."""
    pb = ProgramBuilder("collectives", nranks=4)
    data = pb.window("data", "fp32", [4, 64])
    half = pb.window("half", "fp16", [1, 1000])
    rows = pb.window("rows", "fp32", [NR, 32])
    inp = pb.window("inp", "fp32", [NR, 32])
    a2av_in = pb.window("a2av_in", "fp32", [NR * 2, 8])
    a2av_out = pb.window("a2av_out", "fp32", [NR * 2, 8])
    row = pb.local("row", "fp32", [1, 32])
    send = pb.local("send_counts", "int32", [NR])
    recv = pb.window("recv_counts", "int32", [NR, 1])
    mesh = pb.signal("mesh_sig", [NR, 1])
    ring = pb.signal("ring_sig", [2 * (NR - 1), NR])
    fb = pb.function()
    pld = fb.pld
    with fb.for_range(3):
        for op in ReduceOp:
            pld.tensor.allreduce(data, mesh, op=op, mode="mesh")
    pld.tensor.allreduce(half, ring, op="max", mode="ring")
    pld.tensor.allgather(row, rows, mesh)
    pld.tensor.reduce_scatter(rows, mesh, op="Prod")
    pld.tensor.broadcast(rows, mesh, root=2)
    pld.tensor.barrier(mesh)
    pld.tensor.all_to_all(inp, rows, mesh)
    pld.tensor.all_to_all_v(a2av_in, a2av_out, mesh, send, recv)
    return pb.build()


def primitives() -> Program:
    """Distributed primitives and local tensor/tile ops over buffers with DN layout, strides, valid shapes."""
    pb = ProgramBuilder("primitives")
    win = pb.window("win", "fp32", [NR, 64])
    dn = pb.window("dn", "fp16", [32, 16], layout=Layout.DN)
    strided = pb.window("strided", "fp32", [4, 8], strides=[16, 1])
    partial = pb.window("partial", "fp32", [4, NR * 8], valid_shape=[3, NR * 8 - 1])
    sig = pb.signal("sig", [NR, 2])
    loc = pb.local("scratch", "fp32", [4, 64])
    idx = pb.local("idx", "int32", [8])
    fb = pb.function()
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(win)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    right = fb.let("right", (me + Const(1, I32)) % nr)
    stage = pld.tile.create([1, 64], "fp32")
    pld.tile.create([16, 16], "fp16", mem="Mat", hint="mat")
    pld.tile.put(win, right, loc, stage)
    pld.tile.put(win, right, loc, stage, [me, 0], [0, 0], [1, 64], atomic="Add")
    pld.tile.get(loc, right, win, stage)
    pld.tile.get(loc, right, win, stage, [0, 0], [right, 0], [1, 64])
    pld.tile.remote_load(win, right, [0, 0], [1, 64], valid_shape=[1, 17])
    pld.tile.remote_load(win, right, [me, 0], [1, 64])
    pld.system.notify(sig, right, [me, 1], Const(-1, I32), op="Set")
    pld.system.wait(sig, [me, 1], Const(0, I32), cmp="Eq")
    pld.system.wait(sig, [me, 0], 1)
    pld.system.fence()
    pld.system.bar_all()
    pld.system.host_task(0)
    pld.system.dispatch_end()
    pld.system.aiv_lane(0)
    pld.system.aiv_lane(0, sync=True)
    pld.system.aiv_lane(-1)
    fb.pld.tile.scalar_cast(me * 2, DType.INDEX)
    fb.pld.tile.scalar_cast(me, DType.INT8)
    pld.system.cacheinvalid()
    pld.system.cacheinvalid(win, [NR, 64], [me, 0])
    pld.tensor.view(win, [1, NR * 64])
    pld.tensor.view(loc, [256, 1], [200, 1])
    made = pld.tensor.create([nr * 2, 64], "fp32", hint="made")
    pld.tile.store(pld.tile.load(made, [0, 0], [2, 64]), [0, 0], made)
    val = pld.tensor.read(idx, [3])
    pld.tensor.write(idx, [3], val + Const(2, I32))
    t = pld.tile.load(loc, [0, 0], [4, 64])
    pld.tile.load(partial, [0, 0], [4, 8], valid_shape=[3, 7])
    pld.tile.load(strided, [1, 0], [2, 8])
    pld.tile.load(dn, [0, 0], [16, 16], hint="dn_tile")
    full = pld.tile.full([4, 64], -2.5, "fp32")
    pld.tile.full([16, 16], Const(1.0, DType.FP16), "fp16", hint="ones")
    pld.tile.store(t, [0, 0], loc)
    sv = pld.tile.set_validshape(t, [2, nr])
    pld.tile.fillpad(sv, pad="max", hint="padded")
    acc = pld.tile.add(t, full)
    acc = pld.tile.sub(acc, full)
    acc = pld.tile.mul(acc, t)
    acc = pld.tile.maximum(acc, t)
    acc = pld.tile.minimum(acc, full)
    acc = pld.tile.adds(acc, -0.5)
    acc = pld.tile.muls(acc, Const(3, DType.FP32))
    pld.tile.cast(acc, "fp16")
    return pb.build()


def control_flow() -> Program:
    """Nested while/if/else/for, every BinOpKind built as raw BinOp nodes, literals of every kind,
    a second function with parameters of every kind, and a non-default entry."""
    pb = ProgramBuilder("control")
    data = pb.window("data", "fp32", [2, 16])
    sig = pb.signal("sig", [NR, 1])
    counts = pb.local("counts", "int32", [NR])
    fb = pb.function("kernel")
    pld = fb.pld
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    nr = pld.system.nranks(ctx)
    k = fb.let("k", Const(0, I32))
    with fb.while_(k.lt(nr)):
        with fb.if_(k.ne(me)):
            pld.system.notify(sig, k, [me, 0], Const(1, I32))
        with fb.else_(), fb.for_range(0, NR, 2) as i:
            cond = BinOp(BinOpKind.AND, i.ge(1), BinOp(BinOpKind.OR, i.lt(5), Const(False)))
            with fb.if_(cond):
                pld.tensor.write(counts, [i], Const(-3, I32))
        fb.assign(k, k + Const(1, I32))
    with fb.for_range(0, emin(NR, 8)) as j:
        step = BinOp(BinOpKind.MUL, BinOp(BinOpKind.ADD, j, Const(1)), Const(2))
        with fb.for_range(j, emax(j, 4), step) as jj:
            x = fb.let("x", BinOp(BinOpKind.ADD, jj, BinOp(BinOpKind.MUL, j, Const(3))))
            y = fb.let("y", BinOp(BinOpKind.FLOORDIV, BinOp(BinOpKind.SUB, x, Const(-7)), Const(2)))
            fb.let("z", BinOp(BinOpKind.MOD, BinOp(BinOpKind.SUB, BinOp(BinOpKind.SUB, x, y), Const(1)),
                              Const(5)))
            fb.let("tq", BinOp(BinOpKind.TDIV, BinOp(BinOpKind.SUB, Const(-7), x), BinOp(BinOpKind.TREM, y, Const(-3))))
    with fb.if_(me.eq(0)):
        flag = fb.let("flag", Const(True, DType.BOOL))
    with fb.else_():
        fb.assign_to(flag, Const(False, DType.BOOL))
    fb.let("both", BinOp(BinOpKind.OR, flag, BinOp(BinOpKind.AND, me.gt(0), nr.le(4))))
    fb.let("f", BinOp(BinOpKind.ADD, Const(2.5, F32), Const(1e-3, F32)))
    fb.let("g", BinOp(BinOpKind.MUL, Const(-math.inf, F32), Const(math.inf, F32)))
    fb.let("h", BinOp(BinOpKind.DIV, Const(2.5, F32), Const(-0.0, F32)))
    fb.let("h", BinOp(BinOpKind.SUB, Const(1.0, DType.FP16), Const(-0.5, DType.FP16)))
    fb.let("e", BinOp(BinOpKind.MIN, Const(5, I32), Const(-5, DType.INT64)))
    fb.let("bad", Const(math.nan, F32))
    fb.let("t", Const(True, DType.INDEX))
    fb.let("big", Const(12345678901234, DType.INT64))
    fb.let("tiny", Const(-1e-30, F32))
    fb.ret(me, Const(-1))
    kernel = pb.build("kernel")

    n = Var("n", INDEX)
    params = [
        Var("w", data.type),
        Var("loc", counts.type),
        n,
        Var("tl", TileType(DType.FP32, (2, 16), (Const(1), n))),
        Var("m", TileType(DType.FP16, (16, 16), None, MemorySpace.Mat)),
        Var("c", CommCtxType()),
        Var("s", ScalarType(DType.FP32)),
    ]
    hb = FunctionBuilder("helper", params, used_names=[b.var.name for b in kernel.buffers])
    hp = hb.pld
    hp.tile.store(params[3], [0, 0], params[0])
    r = hp.system.rank(params[5])
    hp.tensor.write(params[1], [r], Const(7, I32))
    hp.tile.adds(params[3], params[6])
    hb.ret()
    return Program(kernel.name, kernel.buffers, (*kernel.functions, hb.build()), "kernel", None)


def tile_math() -> Program:
    """The tile composites and the primitives they lower to: every cast mode, every cmp type, each
    select route, tile.sel / tile.sels with their scratch, a narrowed tile.full."""
    pb = ProgramBuilder("tile_math")
    src = pb.local("src", "fp32", [16, 128])
    fb = pb.function("main")
    pld = fb.pld
    x = pld.tile.load(src, [0, 0], [16, 128], valid_shape=[11, 100], hint="x")
    s = pld.tile.sin(x, hint="s")
    c = pld.tile.cos(x, hint="c")
    for mode in ("None", "RINT", "ROUND", "FLOOR", "CEIL", "TRUNC", "ODD"):
        pld.tile.cast(s, "int32", mode=mode, hint="k")
    pld.tile.cast(c, "bf16", mode="RINT", hint="b")
    masks = [pld.tile.cmps(s, 0.0, cmp, hint="m") for cmp in ("EQ", "NE", "LT", "LE", "GT")]
    ge = pld.tile.cmp(s, c, "GE", hint="ge")
    pld.tile.select(ge, s, c, hint="tt")
    pld.tile.select(masks[0], s, -3.0, hint="ts")
    pld.tile.select(masks[1], 7.0, s, hint="st")
    tmp = pld.tile.create([1, 32], "uint8", hint="tmp")
    pld.tile.sel(ge, s, c, tmp, hint="sel")
    pld.tile.sels(ge, s, tmp, 0.0, hint="sels")
    pld.tile.full([16, 128], 0.0, "fp32", hint="narrow", valid_shape=[11, 100])
    for op in (Op.TILE_EXP, Op.TILE_LOG, Op.TILE_SQRT, Op.TILE_RSQRT, Op.TILE_RECIP, Op.TILE_NEG, Op.TILE_ABS):
        pld.tile.unary(op, x, hint="u")
    pld.tile.unary(Op.TILE_RSQRT, x, pld.tile.create([16, 128], "fp32", hint="scratch"), hint="hp")
    pld.tile.divs(pld.tile.div(s, s, hint="q"), 3.0, hint="qs")
    pld.tile.minimums(pld.tile.maximums(s, -0.5, hint="lo"), 0.5, hint="hi")
    rows = pld.tile.reduce(Op.TILE_ROW_SUM, x, pld.tile.create([16, 128], "fp32", hint="rtmp"), hint="rs")
    cols = pld.tile.reduce(Op.TILE_COL_SUM, x, hint="cs")
    for op in (Op.TILE_ROW_MAX, Op.TILE_ROW_MIN, Op.TILE_COL_MAX, Op.TILE_COL_MIN):
        pld.tile.reduce(op, x, hint="red")
    for op in (Op.TILE_ROW_ARGMAX, Op.TILE_ROW_ARGMIN, Op.TILE_COL_ARGMAX, Op.TILE_COL_ARGMIN, Op.TILE_ROW_PROD):
        pld.tile.reduce(op, x, pld.tile.create([16, 128], "fp32", hint="atmp"), hint="arg")
    pld.tile.reduce(Op.TILE_COL_PROD, x, hint="cp")
    pld.tile.unary(Op.TILE_RELU, x, hint="relu")
    fb.op(Op.TILE_FMODS, [pld.tile.binary(Op.TILE_FMOD, s, c, hint="fm"), 0.5], hint="fms")
    fb.op(Op.TILE_EXPANDS, [x, 2.0], hint="xs")
    _bitwise(fb, pb.local("isrc", "int16", [16, 128]))
    _partial_rem(fb, x)
    for op in Op:
        if op.text.startswith(("tile.row_expand", "tile.col_expand")):
            pld.tile.expand(op, x, rows if op.text.startswith("tile.row") else cols, hint="ex")
    return pb.build()


def _bitwise(fb: Any, src: Any) -> None:
    """The bitwise ops and shifts of a narrowed INT16 tile, tile-tile and tile-scalar, xor with its scratch."""
    pld = fb.pld
    i = pld.tile.load(src, [0, 0], [16, 128], valid_shape=[11, 100], hint="i")
    tmp = pld.tile.create([16, 128], "int16", hint="xtmp")
    for op in (Op.TILE_AND, Op.TILE_OR, Op.TILE_SHL, Op.TILE_SHR):
        pld.tile.binary(op, i, i, hint="bw")
    for op in (Op.TILE_ANDS, Op.TILE_ORS, Op.TILE_SHLS, Op.TILE_SHRS):
        fb.op(op, [i, 3], hint="bws")
    fb.op(Op.TILE_XOR, [i, i, tmp], hint="xr")
    fb.op(Op.TILE_XORS, [i, 5, tmp], hint="xrs")
    pld.tile.unary(Op.TILE_NOT, i, hint="inv")


def _partial_rem(fb: Any, x: Any) -> None:
    """The partial combines of a narrowed tile and a narrower one, rem / rems with their scratch, prelu with its
    slope tile and scratch, lrelu."""
    pld = fb.pld
    inner = pld.tile.set_validshape(x, [5, 64], hint="inner")
    for op in (Op.TILE_PART_ADD, Op.TILE_PART_MUL, Op.TILE_PART_MAX, Op.TILE_PART_MIN):
        pld.tile.binary(op, x, inner, hint="part")
    tmp = pld.tile.create([1, 136], "fp32", hint="rtmp")
    fb.op(Op.TILE_REMS, [fb.op(Op.TILE_REM, [x, x, tmp], hint="rem"), 2.5, tmp], hint="rems")
    fb.op(Op.TILE_PRELU, [x, x, pld.tile.create([17, 16], "uint8", hint="ptmp")], hint="prelu")
    fb.op(Op.TILE_LRELU, [x, 0.1], hint="lrelu")
    fb.op(Op.TILE_ADDSC, [fb.op(Op.TILE_ADDC, [x, x, x], hint="addc"), 1.5, x], hint="addsc")
    fb.op(Op.TILE_TRI, [Const(-1, DType.INT32), [16, 32], [12, 30]], {"dtype": DType.FP16, "upper": 1}, hint="tri")
    fb.op(Op.TILE_FILLPAD_EXPAND, [x, [32, 136]], {"pad": PadValue.min}, hint="wide")


def cube() -> Program:
    """The cube and the memory spaces: loads moved to Mat, Left, Right; tile.matmul, a narrowed product, a
    batch product and its batch_matmul_acc, tile.matmul_acc with and without init_cond; a 3-D transpose."""
    pb = ProgramBuilder("cube")
    a = pb.local("a", "bf16", [16, 32])
    b = pb.local("b", "bf16", [32, 16])
    c = pb.local("c", "fp32", [16, 16])
    fb = pb.function("main")
    t = fb.pld.tile
    a_mat = t.move(t.load(a, [0, 0], [16, 32], valid_shape=[9, 20], hint="a"), "Mat", hint="a_mat")
    left = t.move(a_mat, "Left", hint="a_l0")
    right = t.move(t.move(t.load(b, [0, 0], [32, 16], hint="b"), "Mat", hint="b_mat"), "Right", hint="b_l0")
    acc = t.matmul(left, right, hint="mm")
    acc = t.matmul_acc(acc, left, right, hint="acc")
    with fb.for_range(0, 2, hint="k") as k:
        fb.pld.tile.store(t.matmul_acc(acc, left, right, k.eq(0), hint="kacc"), [0, 0], c)
    b3 = t.move(t.transpose(t.create([2, 16, 32], "bf16", hint="w"), 1, 2, hint="wt"), "Right", hint="w_l0")
    bmm = t.matmul(left, b3, hint="bmm")
    t.matmul_acc(bmm, left, b3, hint="bacc")
    t.reshape(t.reshape(a_mat, [1, 16, 1, 32], hint="a4"), [16, 32], hint="a2")
    _bias_gemv(fb, a, right)
    return pb.build()


def _bias_gemv(fb: Any, a: Any, right: Any) -> None:
    """tile.matmul_bias with a bias row in Bias memory; tile.gemv of one row, its gemv_acc and gemv_bias."""
    t = fb.pld.tile
    bias = t.move(t.full([1, 16], 0.5, "fp32", hint="bias_v"), "Bias", hint="bias")
    left = t.move(t.load(a, [0, 0], [16, 32], hint="a16"), "Left", hint="a16_l0")
    fb.op(Op.TILE_MATMUL_BIAS, [left, right, bias], hint="mmb")
    row = t.move(t.load(a, [3, 0], [1, 32], hint="row"), "Left", hint="row_l0")
    gv = fb.op(Op.TILE_GEMV, [row, right], {"acc_phase": "partial"}, hint="gv")
    fb.op(Op.TILE_GEMV_ACC, [gv, row, right], {"acc_phase": "final"}, hint="gacc")
    fb.op(Op.TILE_GEMV_BIAS, [row, right, t.move(t.full([1, 16], 1.0, "fp32", hint="gb"), "Bias", hint="gbias")],
          hint="gvb")


def sort() -> Program:
    """The sort / gather / arange family: tile.ci (ascending, descending), sort32, mrgsort (format 1 and a 3-list
    format 2), both gathers (per row, flat) and a mask gather reinterpreting the index bits."""
    from pldemu.ir import DType, Op
    from pldemu.ir.nodes import Const

    pb = ProgramBuilder("sort")
    x = pb.local("x", "fp32", [1, 64])
    fb = pb.function("main")
    ids = fb.op(Op.TILE_CI, [Const(0, DType.UINT32), [1, 64]], {"dtype": DType.UINT32, "descending": 0}, hint="ids")
    fb.op(Op.TILE_CI, [Const(7, DType.INT32), [1, 16]], {"dtype": DType.INT32, "descending": 1}, hint="down")
    pairs = fb.op(Op.TILE_SORT32, [fb.pld.tile.load(x, [0, 0], [1, 64], hint="xt"), ids], hint="pairs")
    run = fb.op(Op.TILE_MRGSORT, [pairs], {"block_len": 64}, hint="run")
    fb.op(Op.TILE_MRGSORT_MERGE, [run, run, pairs], hint="all")
    top = fb.op(Op.TILE_GATHER_MASK, [run], {"pattern": 2, "dtype": DType.INT32}, hint="top")
    fb.op(Op.TILE_GATHER, [pairs, top], {"per_row": 1}, hint="g")
    fb.op(Op.TILE_GATHER, [pairs, top], {"per_row": 0}, hint="flat")
    return pb.build()


def views() -> Program:
    """Tile windows and elements: tile.slice (a copy of a window), tile.concat, tile.read / tile.write of one
    element, tile.assemble (in place), tile.scatter_mask (gather_mask's inverse) and tile.scatter (per row)."""
    from pldemu.ir import DType, Op
    from pldemu.ir.nodes import Const

    pb = ProgramBuilder("views")
    x = pb.local("x", "fp32", [4, 64])
    fb = pb.function("main")
    t = fb.pld.tile.load(x, [0, 0], [4, 64], hint="t")
    part = fb.op(Op.TILE_SLICE, [t, [2, 32], [1, 16]], hint="part")
    fb.pld.tile.concat(part, part)
    fb.pld.tile.write(t, [0, 2], fb.pld.tile.read(t, [0, 1]))
    fb.pld.tile.assemble(t, part, [2, 0])
    half = fb.op(Op.TILE_SLICE, [t, [4, 32], [0, 0]], hint="half")
    fb.op(Op.TILE_SCATTER_MASK, [half, t], {"pattern": 1}, hint="spread")
    cols = fb.op(Op.TILE_CI, [Const(0, DType.INT32), [1, 32]], {"dtype": DType.INT32, "descending": 0}, hint="cols")
    fb.op(Op.TILE_SCATTER, [t, fb.op(Op.TILE_SLICE, [t, [1, 32], [0, 0]], hint="row"), cols], {"per_row": 1},
          hint="placed")
    return pb.build()


def mx() -> Program:
    """tile.tquant_mx on both axes with its projections, and (function ``lowered``) what it lowers to:
    tquant_mx_raw, tmov_x2zz, the views, tile.transpose, tuple.make / tuple.get_item; and the pldemu
    extension tile.dequant_mx of each pair (left alone by the pass)."""
    from pldemu.ir import Function, Op
    from pldemu.lowering import lower_composite_ops

    pb = ProgramBuilder("mx")
    src = pb.local("src", "bf16", [32, 64])
    fb = pb.function("main")
    x = fb.pld.tile.load(src, [0, 0], [32, 64], hint="x")
    for axis in (0, 1):
        r = fb.let(f"r{axis}", fb.call(Op.TILE_TQUANT_MX, [x], {"group_axis": axis}))
        q = fb.let(f"q{axis}", fb.call(Op.TUPLE_GET_ITEM, [r], {"index": 0}))
        s = fb.let(f"s{axis}", fb.call(Op.TUPLE_GET_ITEM, [r], {"index": 1}))
        fb.let(f"d{axis}", fb.call(Op.TILE_DEQUANT_MX, [q, s], {"group_axis": axis}))
    program = pb.build()
    low = lower_composite_ops(program).function()
    return Program("mx", program.buffers, (program.function(), Function("lowered", low.params, low.body)))


def tasks() -> Program:
    """Every task construct: kinds, ids, explicit deps, no_dep, early resolve, scopes, loop kinds, defer_wait."""
    pb = ProgramBuilder("tasks")
    data = pb.window("data", "fp32", [1, 8])
    sig = pb.signal("sig", [NR, 1])
    fb = pb.function()
    pld = fb.pld
    me = pld.system.rank(pld.system.get_comm_ctx(sig))
    with fb.task_scope(manual=True):
        with fb.task(TaskKind.CORE_GROUP, "wait_tid", name="deferred_wait") as waiter:
            pld.system.defer_wait(sig, [me, 0], 1)
        with fb.task(TaskKind.CORE_GROUP, "use_tid", deps=(waiter.tid,)) as use:
            pld.tile.load(data, [0, 0], [1, 8])
    with fb.task(TaskKind.SPMD, "grid", blocks=Const(4), block_var=Var("b", INDEX), deps=(use.tid,),
                 no_dep=(data,), early_resolve=True):
        pld.tile.load(data, [0, 0], [1, 8])
    with fb.task(TaskKind.DUMMY, "join", deps=(waiter.tid, use.tid)):
        pass
    with fb.task_scope(manual=False):
        with fb.for_range(0, 4, kind=LoopKind.PARALLEL), fb.task(TaskKind.KERNEL, None, name="push"):
            pld.system.notify(sig, me, [me, 0], 1)
        with fb.for_range(0, 2, kind=LoopKind.PIPELINE):
            pld.tile.load(data, [0, 0], [1, 8])
    return pb.build()


def all_programs() -> list[Program]:
    return [collectives(), primitives(), control_flow(), tile_math(), cube(), sort(), views(), mx(), tasks()]


CORPUS: dict[str, Callable[[], Program]] = {
    "collectives": collectives,
    "primitives": primitives,
    "control_flow": control_flow,
    "tile_math": tile_math,
    "cube": cube,
    "sort": sort,
    "views": views,
    "mx": mx,
    "tasks": tasks,
}


def iter_stmts(seq: Seq) -> Iterator[Stmt]:
    """Every statement nested in ``seq``, in pre-order (the IR walker)."""
    return walk_stmts(seq.stmts)


def ops_used(program: Program) -> set[Op]:
    """Every op called anywhere in the program."""
    return {c.op for c in program_calls(program)}


__all__ = ["CORPUS", "all_programs", "iter_stmts", "ops_used"]
