"""``pypto.language`` (``pl``): the DSL names pypto's distributed programs use.

Decorators capture source (``pldemu.pypto.capture``); annotations are runtime values
(``pldemu.pypto.types``); every op (``pl.load``, ``pl.range``, ...) is a :class:`DslOp` the translator
dispatches on by name. A name pypto has and this layer does not is an AttributeError at import or
decoration time, with the user's file:line, saying what the name is and why pldemu does not run it
(``pldemu.pypto.errors.NOT_RUN``).
"""

from __future__ import annotations

import enum
import sys
from typing import Any

from pldemu.ir.enums import AtomicType, MemorySpace, PadValue
from pldemu.pypto.capture import function, program
from pldemu.pypto.errors import not_provided
from pldemu.pypto.jit import JITFunction, jit
from pldemu.pypto.types import (
    BF16,
    BOOL,
    FP16,
    FP32,
    INDEX,
    INT8,
    INT16,
    INT32,
    INT64,
    RUNTIME,
    TASK_ID,
    UINT8,
    UINT16,
    UINT32,
    Array,
    DslEnumType,
    DslOp,
    DynVar,
    InOut,
    Namespace,
    Out,
    PyDType,
    Scalar,
    Tensor,
    TensorLayout,
    Tile,
    Tuple,
    dynamic,
)

_DslEnumType = DslEnumType


class FunctionType(enum.Enum, metaclass=_DslEnumType):
    """``@pl.function(type=...)``."""

    Opaque = "Opaque"
    InCore = "InCore"
    Orchestration = "Orchestration"
    Inline = "Inline"


class Level(enum.Enum, metaclass=_DslEnumType):
    """pypto's machine levels: ``@pl.function(level=pl.Level.HOST)``, ``@pl.jit.incore(level=...)``. A
    kernel's core level does not change what it computes here."""

    AIV = "AIV"
    AIC = "AIC"
    CORE_GROUP = "CORE_GROUP"
    CHIP_DIE = "CHIP_DIE"
    CHIP = "CHIP"
    HOST = "HOST"


class MaskPattern:
    """``pl.tile.MaskPattern``: pypto's selectors of a mask gather (``pl.gather(x, mask_pattern=...)``); bit patterns
    read right to left, P0101 keeps positions 0, 2, 4, ..., P1010 positions 1, 3, 5, ...."""

    P0101 = 1
    P1010 = 2
    P0001 = 3
    P0010 = 4
    P0100 = 5
    P1000 = 6
    P1111 = 7


class Role(enum.Enum, metaclass=_DslEnumType):
    """``@pl.function(role=...)``: the HOST orchestrator, or a SubWorker (a Python task on the host)."""

    Orchestrator = "Orchestrator"
    SubWorker = "SubWorker"


class SplitMode(enum.Enum, metaclass=_DslEnumType):
    """``pl.split_aiv(n, mode=...)``: how the AIV lanes divide a region's tiles (NONE: each the whole tile)."""

    NONE = 0
    UP_DOWN = 1
    LEFT_RIGHT = 2


split_aiv = DslOp("pl.split_aiv")
aiv_shard = DslOp("pl.aiv_shard")
aic_gather = DslOp("pl.aic_gather")
cross_core_slot = DslOp("pl.cross_core_slot")
"""``optimizations=[pl.cross_core_slot(slot_num=N)]``: the cube / vector ring's depth (no value changes)."""
split = DslOp("pl.split")
"""``optimizations=[pl.split(mode)]`` of a ``pl.at`` / ``pl.spmd`` scope (no value changes here)."""
range = DslOp("pl.range")
unroll = DslOp("pl.unroll")
parallel = DslOp("pl.parallel")
pipeline = DslOp("pl.pipeline")
spmd = DslOp("pl.spmd")
spmd_submit = DslOp("pl.spmd_submit")
at = DslOp("pl.at")
scope = DslOp("pl.scope")
manual_scope = DslOp("pl.manual_scope")
no_dep = DslOp("pl.no_dep")
system = Namespace("pl.system", ("task_dummy", "syncall", "fence", "cacheinvalid", "task_invalid", "bar_v", "bar_m",
                                 "bar_all"))
yield_ = DslOp("pl.yield_")
load = DslOp("pl.load")
store = DslOp("pl.store")
add = DslOp("pl.add")
sub = DslOp("pl.sub")
mul = DslOp("pl.mul")
maximum = DslOp("pl.maximum")
minimum = DslOp("pl.minimum")
min = DslOp("pl.min")
max = DslOp("pl.max")
cast = DslOp("pl.cast")
const = DslOp("pl.const")
read = DslOp("pl.read")
write = DslOp("pl.write")
slice = DslOp("pl.slice")
assemble = DslOp("pl.assemble")
concat = DslOp("pl.concat")
cmp = DslOp("pl.cmp")
create_l1 = DslOp("pl.create_l1")
gather_row = DslOp("pl.gather_row")
div = DslOp("pl.div")
full = DslOp("pl.full")
exp = DslOp("pl.exp")
log = DslOp("pl.log")
sqrt = DslOp("pl.sqrt")
rsqrt = DslOp("pl.rsqrt")
recip = DslOp("pl.recip")
neg = DslOp("pl.neg")
abs = DslOp("pl.abs")
row_sum = DslOp("pl.row_sum")
row_max = DslOp("pl.row_max")
row_min = DslOp("pl.row_min")
col_sum = DslOp("pl.col_sum")
col_max = DslOp("pl.col_max")
col_min = DslOp("pl.col_min")
row_argmax = DslOp("pl.row_argmax")
row_argmin = DslOp("pl.row_argmin")
row_prod = DslOp("pl.row_prod")
col_prod = DslOp("pl.col_prod")
col_argmax = DslOp("pl.col_argmax")
col_argmin = DslOp("pl.col_argmin")
relu = DslOp("pl.relu")
fmod = DslOp("pl.fmod")
fmods = DslOp("pl.fmods")
expands = DslOp("pl.expands")
and_ = DslOp("pl.and_")
ands = DslOp("pl.ands")
or_ = DslOp("pl.or_")
ors = DslOp("pl.ors")
xor = DslOp("pl.xor")
xors = DslOp("pl.xors")
not_ = DslOp("pl.not_")
shl = DslOp("pl.shl")
shls = DslOp("pl.shls")
shr = DslOp("pl.shr")
shrs = DslOp("pl.shrs")
part_add = DslOp("pl.part_add")
part_mul = DslOp("pl.part_mul")
part_max = DslOp("pl.part_max")
part_min = DslOp("pl.part_min")
_PARTIAL = ("part_add", "part_mul", "part_max", "part_min")
rem = DslOp("pl.rem")
rems = DslOp("pl.rems")
prelu = DslOp("pl.prelu")
lrelu = DslOp("pl.lrelu")
sels = DslOp("pl.sels")
_TILE_ONLY = ("rem", "rems", "prelu", "lrelu", "sels")
"""pypto's tile functions it also exports as ``pl.X``."""
_ELEMENTWISE = ("fmod", "fmods", "expands", "and_", "ands", "or_", "ors", "xor", "xors", "not_", "shl", "shls",
                "shr", "shrs")
row_expand = DslOp("pl.row_expand")
row_expand_add = DslOp("pl.row_expand_add")
row_expand_sub = DslOp("pl.row_expand_sub")
row_expand_mul = DslOp("pl.row_expand_mul")
row_expand_div = DslOp("pl.row_expand_div")
row_expand_max = DslOp("pl.row_expand_max")
row_expand_min = DslOp("pl.row_expand_min")
row_expand_expdif = DslOp("pl.row_expand_expdif")
col_expand = DslOp("pl.col_expand")
col_expand_add = DslOp("pl.col_expand_add")
col_expand_sub = DslOp("pl.col_expand_sub")
col_expand_mul = DslOp("pl.col_expand_mul")
col_expand_div = DslOp("pl.col_expand_div")
col_expand_max = DslOp("pl.col_expand_max")
col_expand_min = DslOp("pl.col_expand_min")
col_expand_expdif = DslOp("pl.col_expand_expdif")
matmul = DslOp("pl.matmul")
matmul_acc = DslOp("pl.matmul_acc")
batch_matmul = DslOp("pl.batch_matmul")
move = DslOp("pl.move")
Mem = MemorySpace
"""pypto's second name of ``pl.MemorySpace``."""
_CUBE = ("matmul", "matmul_acc")
create_tile = DslOp("pl.create_tile")
create_tensor = DslOp("pl.create_tensor")
reshape = DslOp("pl.reshape")
transpose = DslOp("pl.transpose")
fillpad = DslOp("pl.fillpad")
set_validshape = DslOp("pl.set_validshape")
_LAYOUT = ("reshape", "transpose", "fillpad", "set_validshape")
_EXPANDS = tuple(f"{side}_expand{suffix}" for side in ("row", "col")
                 for suffix in ("", "_add", "_sub", "_mul", "_div", "_max", "_min", "_expdif"))
_REDUCTIONS = ("row_sum", "row_max", "row_min", "col_sum", "col_max", "col_min", "row_argmax", "row_argmin",
               "row_prod", "col_prod", "col_argmax", "col_argmin")
_SORT = ("sort32", "mrgsort", "gather", "arange", "scatter")
arange = DslOp("pl.arange")
sort32 = DslOp("pl.sort32")
mrgsort = DslOp("pl.mrgsort")
gather = DslOp("pl.gather")
scatter = DslOp("pl.scatter")
_MATH = ("div", "exp", "log", "sqrt", "rsqrt", "recip", "neg", "abs")
sin = DslOp("pl.sin")
cos = DslOp("pl.cos")
maximums = DslOp("pl.maximums")
minimums = DslOp("pl.minimums")
cmps = DslOp("pl.cmps")
sel = DslOp("pl.sel")
dim = DslOp("pl.dim")
get_block_idx = DslOp("pl.get_block_idx")
get_block_num = DslOp("pl.get_block_num")
get_subblock_idx = DslOp("pl.get_subblock_idx")
addc = DslOp("pl.addc")
addsc = DslOp("pl.addsc")
tri = DslOp("pl.tri")
fillpad_expand = DslOp("pl.fillpad_expand")
matmul_bias = DslOp("pl.matmul_bias")
gemv = DslOp("pl.gemv")
gemv_acc = DslOp("pl.gemv_acc")
gemv_bias = DslOp("pl.gemv_bias")
_FUSED = ("addc", "addsc", "tri", "fillpad_expand", "matmul_bias", "gemv", "gemv_acc", "gemv_bias")
"""pypto's tile functions it also exports as ``pl.X`` (fillpad_expand is unified)."""
static_assert = DslOp("pl.static_assert")
"""``pl.static_assert(cond[, "message"])``: checked when the program is translated (pypto: at parse time)."""
static_print = DslOp("pl.static_print")
"""``pl.static_print(...)``: printed once when the program is translated (pypto: at parse time)."""
while_ = DslOp("pl.while_")
cond = DslOp("pl.cond")
func_attr = DslOp("pl.func_attr")
dump_tag = DslOp("pl.dump_tag")
cluster = DslOp("pl.cluster")
submit = DslOp("pl.submit")
optimizations = Namespace("pl.optimizations", ("split", "cross_core_slot", "Split", "CrossCoreSlot", "Optimization"))
"""``optimizations=[pl.optimizations.split(...)]``: pypto's module of ``pl.split`` / ``pl.cross_core_slot`` and of
the entries' classes (``Split(mode)``, ``CrossCoreSlot(slot_num=)``, their base ``Optimization``); no entry changes a
value."""


class ScopeMode(enum.Enum, metaclass=_DslEnumType):
    """``pl.scope(mode=pl.ScopeMode.MANUAL)``: a scope's dependency tracking (AUTO: pypto's automatic edges)."""

    AUTO = 0
    MANUAL = 1


ND = TensorLayout.ND
DN = TensorLayout.DN
NZ = TensorLayout.NZ
TaskId = Scalar[TASK_ID]
"""pypto's ``pl.Scalar[pl.TASK_ID]``."""
IntLike = int | Any
"""pypto's type alias of an extent or offset (an int, a scalar, an expression), for helpers' annotations."""


class PrefetchAsyncContext:
    """The type of ``pl.prefetch.make_context(...)`` (annotations only)."""


class AsyncEvent:
    """The type of ``pl.prefetch.async_prefetch(...)`` (annotations only)."""


class AsyncSession:
    """The type of ``pl.prefetch.session(...)`` (annotations only)."""


tensor = Namespace("pl.tensor", ("add", "sub", "mul", "maximum", "minimum", "cast", "slice", "assemble", "dim",
                                 "read", "write", "create_l1", "gather_row", "cmp",
                                 *_MATH, "divs", *_EXPANDS, "full", *_CUBE, *_LAYOUT, "create", *_SORT, "ci",
                                 "get_block_idx", *_REDUCTIONS, "adds", "subs", "muls", "concat",
                                 *_ELEMENTWISE, *_PARTIAL, "sin", "cos", "get_subblock_idx", "get_block_num",
                                 "fillpad_expand", "create_tensor", "dump_tag", "no_dep", "view"))
tile = Namespace("pl.tile", ("get_block_idx", "load", "store", "add", "sub", "mul", "maximum", "minimum", "adds", "muls",
                             "subs", "cast", "batch_matmul_acc",
                             *_MATH, "divs", *_REDUCTIONS, *_EXPANDS, "full", "maximums", "minimums", *_CUBE,
                             "batch_matmul", "move", *_LAYOUT, "create", *_SORT, "ci",
                             "gather_mask", "concat", "read", "write", "aiv_shard", "aic_gather",
                             "get_subblock_idx", "transpose_view", "slice", "relu", *_ELEMENTWISE,
                             "max", "min", "cmp", "cmps", "sel", *_PARTIAL, *_TILE_ONLY, "sin", "cos",
                             "get_block_num", "assemble", *_FUSED, "create_tile", "extract", "fillpad_inplace",
                             "gather_row", "scatter_mask"))
tile.MaskPattern = MaskPattern  # type: ignore[attr-defined]

prefetch = Namespace("pl.prefetch", ("make_context", "async_prefetch", "session", "wait"))
"""pypto's asynchronous GM -> L2 prefetch: a cache hint, values unchanged (``translate/prefetch.py``)."""
array = Namespace("pl.array", ("create", "get_element", "update_element"))
"""pypto's on-core scalar arrays (``pl.array.create(extent, dtype)``, ``arr[i]``, ``arr[i] = v``)."""



def __getattr__(name: str) -> Any:
    """A name pypto has and this layer does not: an AttributeError that says what it is and why pldemu does not
    run it (``not_provided``), naming this module and the name as ``pldemu pytest`` / ``pldemu python`` read it."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(not_provided(f"pypto.language.{name}"), name=name, obj=sys.modules[__name__])


__all__ = ["BF16", "BOOL", "DN", "FP16", "FP32", "INDEX", "INT8", "INT16", "INT32", "INT64", "ND", "NZ", "RUNTIME", "TASK_ID", "UINT8", "UINT16", "UINT32", "Array", "AsyncEvent", "AsyncSession", "AtomicType", "DynVar", "FunctionType", "InOut", "IntLike", "JITFunction", "Level", "Mem", "MemorySpace", "Out", "PadValue", "PrefetchAsyncContext", "PyDType", "Role", "Scalar", "ScopeMode", "SplitMode", "TaskId", "Tensor", "TensorLayout", "Tile", "Tuple", "abs", "add", "addc", "addsc", "aic_gather", "aiv_shard", "and_", "ands", "arange", "array", "assemble", "at", "batch_matmul", "cast", "cluster", "cmp", "cmps", "col_argmax", "col_argmin", "col_expand", "col_expand_add", "col_expand_div", "col_expand_expdif", "col_expand_max", "col_expand_min", "col_expand_mul", "col_expand_sub", "col_max", "col_min", "col_prod", "col_sum", "concat", "cond", "const", "cos", "create_l1", "create_tensor", "create_tile", "cross_core_slot", "dim", "div", "dump_tag", "dynamic", "exp", "expands", "fillpad", "fillpad_expand", "fmod", "fmods", "full", "func_attr", "function", "gather", "gather_row", "gemv", "gemv_acc", "gemv_bias", "get_block_idx", "get_block_num", "get_subblock_idx", "jit", "load", "log", "lrelu", "manual_scope", "matmul", "matmul_acc", "matmul_bias", "max", "maximum", "maximums", "min", "minimum", "minimums", "move", "mrgsort", "mul", "neg", "no_dep", "not_", "optimizations", "or_", "ors", "parallel", "part_add", "part_max", "part_min", "part_mul", "pipeline", "prefetch", "prelu", "program", "range", "read", "recip", "relu", "rem", "rems", "reshape", "row_argmax", "row_argmin", "row_expand", "row_expand_add", "row_expand_div", "row_expand_expdif", "row_expand_max", "row_expand_min", "row_expand_mul", "row_expand_sub", "row_max", "row_min", "row_prod", "row_sum", "rsqrt", "scatter", "scope", "sel", "sels", "set_validshape", "shl", "shls", "shr", "shrs", "sin", "slice", "sort32", "split", "split_aiv", "spmd", "spmd_submit", "sqrt", "static_assert", "static_print", "store", "sub", "submit", "system", "tensor", "tile", "transpose", "tri", "unroll", "while_", "write", "xor", "xors", "yield_"]
