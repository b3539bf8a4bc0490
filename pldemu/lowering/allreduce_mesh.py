"""``pld.tensor.allreduce`` mode=mesh: every rank remote-loads every peer's chunk and reduces locally.

Fully valid target (one contiguous stream)::

    flat = tensor.view(target, [1, N])
    barrier(1)                                   # ready: every rank has staged its input
    for col in range(0, N, C):                   # C = 16 KiB, shrunk for a short static N
        acc = load own [1, C] chunk, valid [1, min(C, N - col)]
        for peer != me: acc = reduce(acc, remote_load(peer's chunk))
        barrier(col // C + 2)                    # post-reduce: nobody still reads this chunk
        tile.store(acc, [0, col], flat)
    epilogue(1 + ceil(N / C))

Partial-valid ND target: one rectangle (leading dimensions collapsed), two barriers, epilogue 2.

Split into ``lanes`` L > 1 (pypto's ``core_num``: a HOST builtin's grid of L blocks per rank), the
fully valid stream is cut into 256-element chunks dealt block-cyclically, and each lane runs the
recipe above on its own signal column of a ``[NR, S]`` signal (S >= L)::

    for lane in range(L):
        barrier(1) on column lane
        for k in range(ceil(max(N - lane * C, 0) / (L * C))):    # chunks lane, lane + L, ...
            chunk at col = lane * C + k * L * C, then barrier(k + 2) on column lane, store
        epilogue(1 + that count) on column lane

Lanes share no chunk and no signal cell, and lane c of a rank meets only lane c of its peers, so
running them one after another on a rank is one schedule of pypto's concurrent blocks: every rank
finishes lane c before lane c + 1, and the results are those of any interleaving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pldemu.ir.builder import FunctionBuilder
from pldemu.ir.nodes import (
    Call,
    Const,
    Expr,
    ExprLike,
    TensorType,
    Var,
    ceildiv,
    emax,
    emin,
    static_int,
)
from pldemu.ir.ops import Op
from pldemu.lowering.common import (
    CHUNK_BYTES,
    Comm,
    Geometry,
    Lowered,
    LoweringContext,
    bind_runtime,
    emit_barrier,
    emit_comm,
    emit_epilogue,
    emit_peer_loop,
    numel,
    show,
    subst_nr,
    target_geometry,
)

LANE_CHUNK = 256
"""Elements per chunk of a lane-split call: pypto's HOST allreduce builtin reduces 256-element tiles."""


def lower_allreduce_mesh(call: Call, fb: FunctionBuilder, ctx: LoweringContext, target: Var, signal: Var,
                         tile_op: Op) -> Lowered:
    """Emit the mesh recipe (arguments already validated by ``lower_allreduce``)."""
    t, geo, valid = target_geometry(target)
    lanes = call.attr("lanes")
    assert isinstance(lanes, int)
    if valid is not None:
        if lanes > 1:
            raise ctx.error("target", "fully valid when lanes > 1 (the lanes split one linear stream)",
                            f"valid {show(valid)} of shape {show(t.shape)}")
        return _rectangle(fb, ctx, target, signal, tile_op, t, valid, geo)

    comm = emit_comm(fb, ctx, target, signal)
    n_sym = numel(t.shape)
    n: Expr = subst_nr(n_sym, comm.nr)
    n = bind_runtime(fb, "size", n)  # a runtime extent: the chunk loop bound and every tail width
    if lanes > 1:
        c = replace(geo, chunk=LANE_CHUNK).chunk_cols(n_sym)
        flat = fb.pld.tensor.view(target, [1, n])
        _lanes(fb, comm, flat, tile_op, n, c, lanes)
        # Per cell: lane 0's credits, the most any lane issues.
        most = 1 + ceildiv(n_sym, lanes * c) if comm.variant.mesh_post_reduce_barrier else Const(1)
        return Lowered(target, most, None, ceildiv(n_sym, c), None)
    c = geo.chunk_cols(n_sym)
    flat = fb.pld.tensor.view(target, [1, n])
    emit_barrier(fb, comm, 1)  # ready: every rank's input is staged before anyone reads it

    chunks_sym = ceildiv(n_sym, c)
    if static_int(chunks_sym) == 1:
        _chunk(fb, comm, flat, tile_op, n, c, Const(0), Const(0) // c + 2)
    else:
        # A loop, not an unrolled sequence: N may be large or a runtime extent.
        with fb.for_range(0, n, c, hint="col") as col:
            _chunk(fb, comm, flat, tile_op, n, c, col, col // c + 2)

    # One ready credit plus one post-reduce credit per chunk, as an expression when N is runtime
    # (only the ready credit when the variant drops the post-reduce barrier).
    total_sym = 1 + chunks_sym if comm.variant.mesh_post_reduce_barrier else Const(1)
    total = subst_nr(total_sym, comm.nr)
    emit_epilogue(fb, comm, bind_runtime(fb, "credits", total))
    return Lowered(target, total_sym, None, chunks_sym, None)


def _lanes(fb: FunctionBuilder, comm: Comm, flat: Var, tile_op: Op, n: Expr, c: int, lanes: int) -> None:
    """The recipe split into ``lanes`` lanes, each on its own signal column (module docstring)."""
    stride = lanes * c
    with fb.for_range(0, lanes, hint="lane") as lane:
        mine = replace(comm, lane=lane)
        first = lane * c
        count = fb.let("lane_chunks", ceildiv(emax(n - first, 0), stride))
        emit_barrier(fb, mine, 1)  # ready, on this lane's column
        with fb.for_range(0, count, hint="k") as k:
            _chunk(fb, mine, flat, tile_op, n, c, fb.let("col", first + k * stride), k + 2)
        emit_epilogue(fb, mine, count + 1 if comm.variant.mesh_post_reduce_barrier else 1)


def _chunk(fb: FunctionBuilder, comm: Comm, flat: Var, tile_op: Op, n: Expr, c: int, col: Expr,
           gen: ExprLike) -> None:
    """Reduce the chunk at ``col`` across all ranks, barrier ``gen``, store it back."""
    tile = fb.pld.tile
    width: ExprLike = emin(c, n - col)
    if static_int(width) is None:
        width = fb.let("valid", width)
    # The tail chunk carries valid [1, min(C, N - col)] so the allocation stays static while the
    # read and store extents stay exact.
    acc = tile.load(flat, [0, col], [1, c], [1, width], hint="acc")

    def add_peer(peer: Var) -> None:
        got = tile.remote_load(flat, peer, [0, col], [1, c], [1, width], hint="peer_chunk")
        fb.assign(acc, fb.call(tile_op, [acc, got]))

    emit_peer_loop(fb, comm, "peer", add_peer)
    if comm.variant.mesh_post_reduce_barrier:
        if static_int(gen) is None:
            gen = fb.let("gen", gen)
        # Post-reduce barrier: without it a fast rank could store its result over bytes a slow peer
        # has not remote-loaded yet (write-after-read across ranks).
        emit_barrier(fb, comm, gen)
    tile.store(acc, [0, col], flat)


def _is_collapsible(valid: Sequence[Expr], shape: Sequence[Expr]) -> bool:
    """Do the leading valid dimensions cover a contiguous run of collapsed rows?

    Row-major: once a leading dimension is partial (or the prefix of 1s ends), every later leading
    dimension must be full, else the valid rows have gaps and no single [rows, cols] box holds them.
    """
    past = False
    for v, d in zip(valid, shape, strict=True):
        full = v == d or (static_int(v) is not None and static_int(v) == static_int(d))
        if past:
            if not full:
                return False
            continue
        if static_int(v) != 1:
            past = True
    return True


def _rectangle(fb: FunctionBuilder, ctx: LoweringContext, target: Var, signal: Var, tile_op: Op,
               t: TensorType, valid: tuple[Expr, ...], geo: Geometry) -> Lowered:
    if len(valid) != len(t.shape):
        raise ctx.error("target", f"a valid_shape of rank {len(t.shape)}", show(valid))
    for v, d in zip(valid, t.shape, strict=True):
        sv, sd = static_int(v), static_int(d)
        if sv is not None and (sv < 1 or (sd is not None and sv > sd)):
            raise ctx.error("target", f"a valid_shape inside the shape {show(t.shape)} with positive extents",
                            show(valid))
    if not _is_collapsible(valid[:-1], t.shape[:-1]):
        raise ctx.error("target", "a partial valid_shape representable as one [rows, cols] box after collapsing "
                        "the leading dimensions (the valid rows would have gaps)",
                        f"valid {show(valid)} of shape {show(t.shape)}")
    rows_sym, cols_sym = numel(t.shape[:-1]), t.shape[-1]
    vrows_sym, vcols_sym = numel(valid[:-1]), valid[-1]
    # Constant valid rectangles use their compact shape; symbolic ones fall back to the physical
    # rectangle, which must then be static.
    box = _static_pair(vrows_sym, vcols_sym) or _static_pair(rows_sym, cols_sym)
    if box is None:
        raise ctx.error("target", "a partial valid_shape whose tile is statically bounded",
                        f"valid {show(valid)} of shape {show(t.shape)}")
    if box[0] * box[1] * geo.dtype.itemsize > CHUNK_BYTES:
        raise ctx.error("target", f"a partial valid rectangle within one {CHUNK_BYTES}-byte chunk "
                        "(chunking a partial rectangle is not supported)",
                        f"{box[0]} x {box[1]} {geo.dtype.value} = {box[0] * box[1] * geo.dtype.itemsize} bytes")

    comm = emit_comm(fb, ctx, target, signal)
    rows, cols = subst_nr(rows_sym, comm.nr), subst_nr(cols_sym, comm.nr)
    vrows, vcols = subst_nr(vrows_sym, comm.nr), subst_nr(vcols_sym, comm.nr)
    flat = fb.pld.tensor.view(target, [rows, cols], [vrows, vcols])
    tile = fb.pld.tile
    emit_barrier(fb, comm, 1)
    # The valid extents only need spelling out when the tile is the (larger) physical rectangle.
    extent = None if (static_int(vrows), static_int(vcols)) == box else [vrows, vcols]
    acc = tile.load(flat, [0, 0], list(box), extent, hint="acc")

    def add_peer(peer: Var) -> None:
        got = tile.remote_load(flat, peer, [0, 0], list(box), extent, hint="peer_box")
        fb.assign(acc, fb.call(tile_op, [acc, got]))

    emit_peer_loop(fb, comm, "peer", add_peer)
    credits = 2 if comm.variant.mesh_post_reduce_barrier else 1
    if credits == 2:
        emit_barrier(fb, comm, 2)  # post-reduce: the same write-after-read hazard as a chunk
    tile.store(acc, [0, 0], flat)
    emit_epilogue(fb, comm, credits)
    return Lowered(target, Const(credits), None, Const(1), None)


def _static_pair(a: Expr, b: Expr) -> tuple[int, int] | None:
    va, vb = static_int(a), static_int(b)
    return (va, vb) if va is not None and vb is not None else None
