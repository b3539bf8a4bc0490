"""The one enum of op names. The value is the canonical text-form name."""

from __future__ import annotations

import enum


class Op(enum.Enum):
    # Composite distributed collectives (lowered by LowerCompositeOps).
    ALLREDUCE = "pld.tensor.allreduce"
    ALLGATHER = "pld.tensor.allgather"
    REDUCE_SCATTER = "pld.tensor.reduce_scatter"
    BROADCAST = "pld.tensor.broadcast"
    BARRIER = "pld.tensor.barrier"
    ALL_TO_ALL = "pld.tensor.all_to_all"
    ALL_TO_ALL_V = "pld.tensor.all_to_all_v"

    # Distributed primitives.
    PUT = "pld.tile.put"
    GET = "pld.tile.get"
    REMOTE_LOAD = "pld.tile.remote_load"
    NOTIFY = "pld.system.notify"
    WAIT = "pld.system.wait"
    # Registers ``signal[offsets] >= expected`` as a completion condition of the enclosing task and
    # returns: the core is freed, the task completes once the condition holds (pypto's deferred wait).
    DEFER_WAIT = "pld.system.defer_wait"
    GET_COMM_CTX = "pld.system.get_comm_ctx"
    RANK = "pld.system.rank"
    NRANKS = "pld.system.nranks"
    # Memory-ordering markers, spelled as pypto spells them (InsertCommFence inserts them; they only
    # change anything under ``--visibility fenced``): a completion barrier for every earlier write of
    # the rank, and a clean + invalidate of the scalar data cache (whole, or the line of a view's base).
    FENCE = "system.fence"
    CACHEINVALID = "system.cacheinvalid"
    # The pipe drain (``pipe_barrier(PIPE_ALL)``), which PTOAS emits before every tnotify (PTOAS#718):
    # every DMA transfer the rank issued has left its engine, so its reads have their bytes; its writes
    # are issued, not yet visible to other ranks (PTOAS#744: that takes a fence).
    BAR_ALL = "system.bar_all"
    # A host task (pypto's SubWorker): the process that called the program runs a Python function on the
    # host tensors; every rank meets it there (only a resident job, whose launcher can run it, has one).
    HOST_TASK = "system.host_task"
    # The end of one HOST dispatch on this rank: its tasks complete before the rank's next dispatch starts
    # (pypto keeps a rank's dispatches in program order); a no-op where no task is in flight.
    DISPATCH_END = "system.dispatch_end"
    # The AIV lane the code after it runs on (``lane`` >= 0; -1: the split region ended), or with ``sync=1`` a
    # cross-lane barrier (pypto's syncall) that lane passes: a marker for the task race check, which treats
    # the lanes of a ``pl.split_aiv`` region as concurrent between their barriers (the translator runs them
    # one after the other).
    AIV_LANE = "system.aiv_lane"

    # Local tensor / tile ops.
    # A rank-local tensor allocated when the statement runs, at the extents it evaluates then (pypto's
    # orchestration ``tensor.create``: its extents may be run-time scalars); a fresh buffer each time.
    TENSOR_CREATE = "tensor.create"
    TENSOR_VIEW = "tensor.view"
    TENSOR_READ = "tensor.read"
    TENSOR_WRITE = "tensor.write"
    TILE_CREATE = "tile.create"
    TILE_FULL = "tile.full"
    TILE_LOAD = "tile.load"
    TILE_STORE = "tile.store"
    TILE_SET_VALIDSHAPE = "tile.set_validshape"
    TILE_FILLPAD = "tile.fillpad"
    TILE_ADD = "tile.add"
    TILE_SUB = "tile.sub"
    TILE_MUL = "tile.mul"
    TILE_MAXIMUM = "tile.maximum"
    TILE_MINIMUM = "tile.minimum"
    TILE_ADDS = "tile.adds"
    TILE_MULS = "tile.muls"
    TILE_CAST = "tile.cast"
    TILE_CMP = "tile.cmp"
    TILE_CMPS = "tile.cmps"
    TILE_SEL = "tile.sel"
    TILE_SELS = "tile.sels"
    # Unary math and division (runtime/ops/math.py).
    TILE_EXP = "tile.exp"
    TILE_LOG = "tile.log"
    TILE_SQRT = "tile.sqrt"
    TILE_RSQRT = "tile.rsqrt"
    TILE_RECIP = "tile.recip"
    TILE_NEG = "tile.neg"
    TILE_ABS = "tile.abs"
    TILE_DIV = "tile.div"
    TILE_DIVS = "tile.divs"
    TILE_MAXIMUMS = "tile.maximums"
    TILE_MINIMUMS = "tile.minimums"
    TILE_RELU = "tile.relu"
    TILE_FMOD = "tile.fmod"
    TILE_FMODS = "tile.fmods"
    TILE_EXPANDS = "tile.expands"
    # Partial combines (TPARTADD ...: the lhs's valid box, the lhs's value where rhs is not valid), the
    # floored remainder (TREM / TREMS, with pypto's scratch ``tmp``), parametric and leaky ReLU.
    TILE_PART_ADD = "tile.part_add"
    TILE_PART_MUL = "tile.part_mul"
    TILE_PART_MAX = "tile.part_max"
    TILE_PART_MIN = "tile.part_min"
    TILE_REM = "tile.rem"
    TILE_REMS = "tile.rems"
    TILE_PRELU = "tile.prelu"
    TILE_LRELU = "tile.lrelu"
    # Three-operand adds (TADDC / TADDSC: two additions, each rounded), the triangular mask (TTRI), the pad
    # of a smaller tile into a larger one (TFILLPAD_EXPAND).
    TILE_ADDC = "tile.addc"
    TILE_ADDSC = "tile.addsc"
    TILE_TRI = "tile.tri"
    TILE_FILLPAD_EXPAND = "tile.fillpad_expand"
    # Bitwise ops and shifts of integer tiles (runtime/ops/math.py); xor / xors take pypto's scratch ``tmp``.
    TILE_AND = "tile.and"
    TILE_OR = "tile.or"
    TILE_XOR = "tile.xor"
    TILE_NOT = "tile.not"
    TILE_SHL = "tile.shl"
    TILE_SHR = "tile.shr"
    TILE_ANDS = "tile.ands"
    TILE_ORS = "tile.ors"
    TILE_XORS = "tile.xors"
    TILE_SHLS = "tile.shls"
    TILE_SHRS = "tile.shrs"
    # Row / column reductions and expands (runtime/ops/reduce.py).
    TILE_ROW_SUM = "tile.row_sum"
    TILE_ROW_MAX = "tile.row_max"
    TILE_ROW_MIN = "tile.row_min"
    TILE_COL_SUM = "tile.col_sum"
    TILE_COL_MAX = "tile.col_max"
    TILE_COL_MIN = "tile.col_min"
    TILE_ROW_ARGMAX = "tile.row_argmax"
    TILE_ROW_ARGMIN = "tile.row_argmin"
    TILE_ROW_PROD = "tile.row_prod"
    TILE_COL_PROD = "tile.col_prod"
    TILE_COL_ARGMAX = "tile.col_argmax"
    TILE_COL_ARGMIN = "tile.col_argmin"
    TILE_ROW_EXPAND = "tile.row_expand"
    TILE_COL_EXPAND = "tile.col_expand"
    TILE_ROW_EXPAND_ADD = "tile.row_expand_add"
    TILE_ROW_EXPAND_SUB = "tile.row_expand_sub"
    TILE_ROW_EXPAND_MUL = "tile.row_expand_mul"
    TILE_ROW_EXPAND_DIV = "tile.row_expand_div"
    TILE_ROW_EXPAND_MAX = "tile.row_expand_max"
    TILE_ROW_EXPAND_MIN = "tile.row_expand_min"
    TILE_ROW_EXPAND_EXPDIF = "tile.row_expand_expdif"
    TILE_COL_EXPAND_ADD = "tile.col_expand_add"
    TILE_COL_EXPAND_SUB = "tile.col_expand_sub"
    TILE_COL_EXPAND_MUL = "tile.col_expand_mul"
    TILE_COL_EXPAND_DIV = "tile.col_expand_div"
    TILE_COL_EXPAND_MAX = "tile.col_expand_max"
    TILE_COL_EXPAND_MIN = "tile.col_expand_min"
    TILE_COL_EXPAND_EXPDIF = "tile.col_expand_expdif"
    # The cube and memory spaces (runtime/ops/matmul.py).
    TILE_MOVE = "tile.move"
    TILE_MATMUL = "tile.matmul"
    TILE_MATMUL_ACC = "tile.matmul_acc"
    TILE_BATCH_MATMUL = "tile.batch_matmul"
    TILE_BATCH_MATMUL_ACC = "tile.batch_matmul_acc"
    # The bias forms (the [1, N] bias the accumulator starts from) and GEMV (a [1, K] row, a [16, N] result
    # valid [1, N], as pypto types TGEMV's).
    TILE_MATMUL_BIAS = "tile.matmul_bias"
    TILE_GEMV = "tile.gemv"
    TILE_GEMV_ACC = "tile.gemv_acc"
    TILE_GEMV_BIAS = "tile.gemv_bias"
    # Layout (runtime/ops/layout.py).
    TILE_RESHAPE = "tile.reshape"
    TILE_SLICE = "tile.slice"
    TILE_CONCAT = "tile.concat"
    TILE_READ = "tile.read"
    TILE_WRITE = "tile.write"
    TILE_ASSEMBLE = "tile.assemble"
    # An integer device scalar as another integer dtype (pypto's scalar Cast, e.g. an INDEX loop product
    # cast to INT32): the result has that dtype, its value wrapped as the scalar register holds it.
    SCALAR_CAST = "scalar.cast"
    # Sort, gather, arange (runtime/ops/sort.py).
    TILE_CI = "tile.ci"
    TILE_SORT32 = "tile.sort32"
    TILE_MRGSORT = "tile.mrgsort"
    TILE_MRGSORT_MERGE = "tile.mrgsort_merge"
    TILE_GATHER = "tile.gather"
    TILE_GATHER_MASK = "tile.gather_mask"
    TILE_SCATTER_MASK = "tile.scatter_mask"
    TILE_SCATTER = "tile.scatter"
    # MX quantisation primitives and zero-copy views (what tile.tquant_mx lowers to: lowering/mx.py).
    TILE_TQUANT_MX_RAW = "tile.tquant_mx_raw"
    TILE_TMOV_X2ZZ = "tile.tmov_x2zz"
    TILE_REINTERPRET_VIEW = "tile.reinterpret_view"
    TILE_TRANSPOSE_VIEW = "tile.transpose_view"
    TILE_TRANSPOSE = "tile.transpose"
    # pldemu extension, not in the spec's pass (never emitted, never lowered): the MXFP8 decode a consumer
    # of the public (quant, scale) pair performs, quant * 2^(e8m0 - 127) in FP32, so a program can check it.
    TILE_DEQUANT_MX = "tile.dequant_mx"
    # Tuples of multi-result ops: MakeTuple and its projection (TupleGetItem).
    TUPLE_MAKE = "tuple.make"
    TUPLE_GET_ITEM = "tuple.get_item"

    # Tile composites (lowered by LowerCompositeOps: lowering/math.py, lowering/select.py).
    TILE_SIN = "tile.sin"
    TILE_COS = "tile.cos"
    TILE_SELECT = "tile.select"
    TILE_TQUANT_MX = "tile.tquant_mx"

    @property
    def text(self) -> str:
        return self.value

    @property
    def is_tile_composite(self) -> bool:
        """True for the tile composites that LowerCompositeOps rewrites (sin, cos, select, tquant_mx)."""
        return self in TILE_COMPOSITES

    @property
    def is_composite(self) -> bool:
        """True for every op only LowerCompositeOps can run (collectives and tile composites)."""
        return self in COLLECTIVES or self in TILE_COMPOSITES

    @property
    def is_collective(self) -> bool:
        """True for the pld.tensor.* composites that LowerCompositeOps rewrites."""
        return self in COLLECTIVES

    @classmethod
    def parse(cls, text: str) -> Op:
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown op {text!r}") from None


COLLECTIVES: frozenset[Op] = frozenset(
    {
        Op.ALLREDUCE,
        Op.ALLGATHER,
        Op.REDUCE_SCATTER,
        Op.BROADCAST,
        Op.BARRIER,
        Op.ALL_TO_ALL,
        Op.ALL_TO_ALL_V,
    }
)

TILE_COMPOSITES: frozenset[Op] = frozenset({Op.TILE_SIN, Op.TILE_COS, Op.TILE_SELECT, Op.TILE_TQUANT_MX})
