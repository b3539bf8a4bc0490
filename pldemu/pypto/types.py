"""The annotation and dtype objects of pypto's DSL, as runtime values.

Python evaluates a method's annotations when the class body runs, so ``pl.Tensor[[NR, 64], pl.FP32]``
must be subscriptable; the results are plain frozen data the translator reads back from
``__annotations__``. ``pl.dynamic("NR")`` is a :class:`DynVar`; ``+ - * //`` with ints give a
:class:`DynExpr` that is evaluated once the dims are bound at call time.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import sys
from collections.abc import Callable, Mapping
from typing import Any

from pldemu.ir.dtypes import DType
from pldemu.pypto.errors import AnnotationError


@dataclasses.dataclass(frozen=True)
class PyDType:
    """A pypto dtype (``pl.FP32``): the pldemu dtype and its size in bytes."""

    name: str
    ir: DType
    nbytes: int

    def get_byte(self) -> int:
        """Bytes per element (pypto's ``DataType.get_byte``)."""
        return self.nbytes

    def __repr__(self) -> str:
        return f"pl.{self.name}"


_TORCH_NAMES = {"FP32": "float32", "FP16": "float16", "BF16": "bfloat16", "INT32": "int32", "INDEX": "int64",
                "INT8": "int8", "INT16": "int16", "INT64": "int64", "UINT8": "uint8", "UINT16": "uint16",
                "UINT32": "uint32", "BOOL": "bool"}


def torch_dtype(dtype: PyDType, torch: Any) -> Any:
    """The dtype of module ``torch`` (real torch, or pldemu's stand-in) for pypto's ``dtype``."""
    name = _TORCH_NAMES.get(dtype.name)
    found = getattr(torch, name, None) if name is not None else None
    if found is None:
        raise ValueError(f"Unsupported dtype {dtype!r} for an output tensor (torch has no {name or dtype.name})")
    return found


FP32 = PyDType("FP32", DType.FP32, 4)
FP16 = PyDType("FP16", DType.FP16, 2)
BF16 = PyDType("BF16", DType.BF16, 2)
INT32 = PyDType("INT32", DType.INT32, 4)
INDEX = PyDType("INDEX", DType.INDEX, 8)
INT8 = PyDType("INT8", DType.INT8, 1)
INT16 = PyDType("INT16", DType.INT16, 2)
INT64 = PyDType("INT64", DType.INT64, 8)
UINT8 = PyDType("UINT8", DType.UINT8, 1)
UINT16 = PyDType("UINT16", DType.UINT16, 2)
UINT32 = PyDType("UINT32", DType.UINT32, 4)
BOOL = PyDType("BOOL", DType.BOOL, 1)
DTYPES = (FP32, FP16, BF16, INT32, INDEX, INT8, INT16, INT64, UINT8, UINT16, UINT32, BOOL)
TASK_ID = PyDType("TASK_ID", DType.INT64, 8)
"""pypto's task-id type (``pl.Scalar[pl.TASK_ID]``): a name modules can be imported with; pldemu runs
each rank's tasks in program order, so no task id is ever read (pypto's in-chip task graph is out of
scope here)."""


def dtype_of_array(arr: Any) -> PyDType:
    """The pypto dtype of a host array's elements (an integer array is never ``INDEX``)."""
    found = next((d for d in DTYPES if d is not INDEX and d.ir.np == arr.dtype), None)
    if found is None:
        raise TypeError(f"no pypto dtype for a {arr.dtype} tensor")
    return found


def dtype_of_ir(dtype: DType) -> PyDType:
    """The pypto dtype (``pl.FP32``) of a pldemu dtype."""
    found = next((d for d in DTYPES if d.ir is dtype), None)
    if found is None:
        raise TypeError(f"no pypto dtype for {dtype.value}")
    return found


class _DynOps:
    """Arithmetic that builds :class:`DynExpr` trees."""

    def _bin(self, op: Callable[[int, int], int], sym: str, other: object, swap: bool = False) -> DynExpr:
        if not isinstance(other, (int, _DynOps)) or isinstance(other, bool):
            return NotImplemented
        lhs, rhs = (other, self) if swap else (self, other)
        return DynExpr(op, sym, lhs, rhs)

    def __add__(self, o: object) -> DynExpr:
        return self._bin(operator.add, "+", o)

    def __radd__(self, o: object) -> DynExpr:
        return self._bin(operator.add, "+", o, True)

    def __sub__(self, o: object) -> DynExpr:
        return self._bin(operator.sub, "-", o)

    def __rsub__(self, o: object) -> DynExpr:
        return self._bin(operator.sub, "-", o, True)

    def __mul__(self, o: object) -> DynExpr:
        return self._bin(operator.mul, "*", o)

    def __rmul__(self, o: object) -> DynExpr:
        return self._bin(operator.mul, "*", o, True)

    def __floordiv__(self, o: object) -> DynExpr:
        return self._bin(operator.floordiv, "//", o)

    def __rfloordiv__(self, o: object) -> DynExpr:
        return self._bin(operator.floordiv, "//", o, True)


@dataclasses.dataclass(frozen=True, eq=False)
class DynVar(_DynOps):
    """``pl.dynamic(name)``: a dimension bound from the host arguments' shapes at call time."""

    name: str

    def free(self) -> set[str]:
        return {self.name}

    def evaluate(self, env: Mapping[str, int]) -> int:
        return env[self.name]

    def __repr__(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True, eq=False)
class DynExpr(_DynOps):
    """Arithmetic over dynamic dims and ints."""

    op: Callable[[int, int], int]
    sym: str
    lhs: int | _DynOps
    rhs: int | _DynOps

    def free(self) -> set[str]:
        return set().union(*(x.free() for x in (self.lhs, self.rhs) if isinstance(x, (DynVar, DynExpr))))

    def evaluate(self, env: Mapping[str, int]) -> int:
        return self.op(dim_value(self.lhs, env), dim_value(self.rhs, env))

    def __repr__(self) -> str:
        return f"({self.lhs!r} {self.sym} {self.rhs!r})"


Dim = int | DynVar | DynExpr


def dim_value(d: object, env: Mapping[str, int]) -> int:
    """The value of one annotated dim once ``env`` binds its dynamic names."""
    return d.evaluate(env) if isinstance(d, (DynVar, DynExpr)) else d  # type: ignore[return-value]


class Direction(enum.Enum):
    """How a parameter is passed: In (bare), Out, InOut."""

    IN = "In"
    OUT = "Out"
    INOUT = "InOut"


@dataclasses.dataclass(frozen=True)
class TensorAnn:
    """``pl.Tensor[[dims], dtype]`` / ``pld.DistributedTensor[...]``, with its direction. A bare
    ``pl.Tensor`` (``pl.jit``: specialised from the argument) has ``dims`` and ``dtype`` None."""

    dims: tuple[Any, ...] | None
    dtype: PyDType | None
    distributed: bool = False
    direction: Direction = Direction.IN

    @property
    def bare(self) -> bool:
        return self.dims is None


@dataclasses.dataclass(frozen=True)
class ScalarAnn:
    """``pl.Scalar[dtype]``."""

    dtype: PyDType


@dataclasses.dataclass(frozen=True)
class TileAnn:
    """``pl.Tile[[dims], dtype]`` (optionally ``, pl.MemorySpace.X``): a tile parameter or variable."""

    dims: tuple[Any, ...]
    dtype: PyDType
    memory: Any = None


@dataclasses.dataclass(frozen=True)
class ArrayAnn:
    """``pl.Array[extent, dtype]``: an on-core scalar array (``pl.array.create``)."""

    extent: int
    dtype: PyDType


def _bad(message: str, depth: int = 2) -> AnnotationError:
    """The error of a malformed annotation, at the user's line: the frame that subscripted
    (``_bad`` is called from the factory's ``__getitem__``, ``depth`` frames below it)."""
    frame = sys._getframe(depth)
    return AnnotationError(message, frame.f_code.co_filename, frame.f_lineno)


class _TensorFactory:
    def __init__(self, distributed: bool) -> None:
        self.distributed = distributed

    def bare(self) -> TensorAnn:
        """The annotation ``pl.Tensor`` alone: shape and dtype come from the argument (``pl.jit``)."""
        return TensorAnn(None, None, self.distributed)

    def __getitem__(self, item: object) -> TensorAnn:
        what = "pld.DistributedTensor" if self.distributed else "pl.Tensor"
        if isinstance(item, tuple) and len(item) == 3 and isinstance(item[2], TensorLayout):
            item = item[:2] if _layout_ok(what, item[2]) else item
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (list, tuple))
                and isinstance(item[1], PyDType)):
            raise _bad(f"{what}[[dims], dtype] expected, got {what}[{item!r}]")
        for d in item[0]:
            if isinstance(d, bool) or not isinstance(d, (int, DynVar, DynExpr)):
                raise _bad(f"{what}: dim {d!r} is not an int or pl.dynamic expression")
        return TensorAnn(tuple(item[0]), item[1], self.distributed)


def _layout_ok(what: str, layout: TensorLayout) -> bool:
    """A layout marker on a tensor annotation: ND is the default (pypto: never needs writing); DN refused in
    pypto's words; NZ is the cube's tile layout, whose bytes a host tensor does not have here."""
    if layout is TensorLayout.DN:
        raise _bad(f"pypto refuses it: {what}[..., pl.DN] is not supported: the DN layout-only shorthand forces "
                   "two coordinate systems (IR-logical post-view vs. runtime row-major) onto one annotation (write "
                   "the source shape with no marker, and pl.transpose(x, -2, -1) where DN is needed)", depth=3)
    if layout is TensorLayout.NZ:
        raise _bad(f"{what}[..., pl.NZ]: pldemu holds tensors row-major (ND); NZ is the cube's fractal tile layout "
                   "(pypto: never a pl.Tensor annotation)", depth=3)
    return True


class _TileFactory:
    def __getitem__(self, item: object) -> TileAnn:
        from pldemu.ir.enums import MemorySpace

        if not (isinstance(item, tuple) and len(item) in (2, 3) and isinstance(item[0], (list, tuple))
                and isinstance(item[1], PyDType) and (len(item) == 2 or isinstance(item[2], MemorySpace))):
            raise _bad(f"pl.Tile[[dims], dtype] or pl.Tile[[dims], dtype, pl.MemorySpace.X] expected, got "
                       f"pl.Tile[{item!r}] (pldemu takes no MemRef / TileView)")
        return TileAnn(tuple(item[0]), item[1], item[2] if len(item) == 3 else None)


class _ArrayFactory:
    def __getitem__(self, item: object) -> ArrayAnn:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int)
                and not isinstance(item[0], bool) and isinstance(item[1], PyDType)):
            raise _bad(f"Array requires [extent, dtype] notation, got pl.Array[{item!r}]")
        return ArrayAnn(item[0], item[1])


class _DirectionFactory:
    def __init__(self, direction: Direction) -> None:
        self.direction = direction

    def __getitem__(self, item: object) -> TensorAnn:
        if isinstance(item, _TensorFactory):
            item = item.bare()
        if not isinstance(item, TensorAnn):
            raise _bad(f"pl.{self.direction.value}[...] takes a tensor type, got {item!r}")
        return dataclasses.replace(item, direction=self.direction)


class _ScalarFactory:
    def __getitem__(self, item: object) -> ScalarAnn:
        if not isinstance(item, PyDType):
            raise _bad(f"pl.Scalar[dtype] expected, got pl.Scalar[{item!r}]")
        return ScalarAnn(item)


Tensor = _TensorFactory(False)
DistributedTensor = _TensorFactory(True)
Out = _DirectionFactory(Direction.OUT)
InOut = _DirectionFactory(Direction.INOUT)
Scalar = _ScalarFactory()
Tile = _TileFactory()
Array = _ArrayFactory()


@dataclasses.dataclass(frozen=True)
class TupleAnn:
    """``pl.Tuple[T1, T2]``: a return or variable annotation of several values (pypto's parser reads the AST;
    pldemu, like it, never inspects the value)."""

    items: tuple[Any, ...]


class _TupleFactory:
    def __getitem__(self, item: object) -> TupleAnn:
        return TupleAnn(item if isinstance(item, tuple) else (item,))


Tuple = _TupleFactory()


def plain_annotation(value: Any) -> Any:
    """An annotation as the translator reads it: a bare ``pl.Tensor`` / ``pld.DistributedTensor`` is
    the :class:`TensorAnn` whose shape and dtype the argument gives."""
    return value.bare() if isinstance(value, _TensorFactory) else value


def bare_tensor(ann: Any) -> bool:
    """A tensor annotation without shape and dtype."""
    return isinstance(ann, TensorAnn) and ann.bare


class BakedInt(int):
    """A ``pl.jit`` scalar argument specialised into the program: pypto writes it into the generated
    source as a literal, so where a body passes it on unchanged it folds as Python does (floor ``//`` and
    ``%``), not as a device scalar."""


class BakedFloat(float):
    """The float counterpart of :class:`BakedInt`."""


def baked(value: Any) -> Any:
    """``value`` marked as specialised (a bool stays itself: Python cannot subclass it)."""
    if isinstance(value, bool):
        return value
    return BakedInt(value) if isinstance(value, int) else BakedFloat(value) if isinstance(value, float) else value


class _Runtime:
    """``pl.RUNTIME``: in ``compile(n=pl.RUNTIME)`` (signature mode), a scalar parameter left a runtime
    value instead of being specialised."""

    def __repr__(self) -> str:
        return "pl.RUNTIME"


RUNTIME = _Runtime()


def dynamic(name: str) -> DynVar:
    """``pl.dynamic("NR")``: a dim bound at call time from the host tensors' shapes."""
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"pl.dynamic takes a name, got {name!r}")
    return DynVar(name)


@dataclasses.dataclass(frozen=True)
class DslOp:
    """A name of the DSL that only means something inside a program body (``pl.load``): the
    translator dispatches on ``name``; called from Python it says so."""

    name: str

    def __call__(self, *args: object, **kwargs: object) -> Any:
        raise RuntimeError(f"{self.name} can only be used inside a @pl.program function body")

    def __repr__(self) -> str:
        return self.name


class DslEnumType(enum.EnumMeta):
    """pypto's enums: a member this layer lacks is an AttributeError that names the enum (``obj``) and the
    member (``name``), so ``pldemu pytest`` reports it as one line, as for a missing module name."""

    def __getattr__(cls, name: str) -> Any:
        member = cls.__dict__.get("_member_map_", {}).get(name)
        if member is not None:
            return member
        if name.startswith("__"):
            raise AttributeError(name)
        from pldemu.pypto.errors import NOT_RUN, not_provided, pypto_name_of

        full = pypto_name_of(cls, name)
        message = not_provided(full) if full is not None and full in NOT_RUN else f"{cls.__qualname__} has no member {name!r}"
        raise AttributeError(message, name=name, obj=cls)


class TensorLayout(enum.Enum, metaclass=DslEnumType):
    """``pl.TensorLayout`` (``pl.ND`` / ``pl.DN`` / ``pl.NZ``): how a GM tensor's bytes are arranged. pypto derives
    it from the ops that use a tensor; ``pl.create_tensor(layout=)`` takes one (its values are the same to
    pldemu), a ``pl.Tensor`` annotation only ND (pypto refuses DN there; NZ is the cube's tile layout)."""

    __pypto_name__ = "pypto.language.TensorLayout"

    ND = "ND"
    DN = "DN"
    NZ = "NZ"


_PYPTO_MODULES = {"pl": "pypto.language", "pld": "pypto.language.distributed"}


class Namespace:
    """A dotted group of DSL ops (``pld.system``); an unknown member raises AttributeError, saying why when
    pypto has the name and pldemu does not run it (:data:`pldemu.pypto.errors.NOT_RUN`)."""

    def __init__(self, prefix: str, names: tuple[str, ...], same: Mapping[str, DslOp] | None = None) -> None:
        """``names``: the namespace's own ops (``DslOp("pld.system.notify")``); ``same``: members that are an op
        already named elsewhere (pypto's ``pld.system.rank`` is ``pld.rank``), so one rule runs both spellings."""
        self._prefix = prefix
        for n in names:
            setattr(self, n, DslOp(f"{prefix}.{n}"))
        for n, op in (same or {}).items():
            setattr(self, n, op)

    @property
    def __pypto_name__(self) -> str:
        """The pypto module this namespace stands for (``pl.tile``: ``pypto.language.tile``)."""
        head, _, rest = self._prefix.partition(".")
        return _PYPTO_MODULES.get(head, head) + ("." + rest if rest else "")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_prefix":
            raise AttributeError(name)
        from pldemu.pypto.errors import not_provided

        raise AttributeError(not_provided(f"{self.__pypto_name__}.{name}"), name=name, obj=self)

    def __repr__(self) -> str:
        return self._prefix


__all__ = ["BF16", "BOOL", "DTYPES", "FP16", "FP32", "INDEX", "INT8", "INT16", "INT32", "INT64", "RUNTIME", "TASK_ID", "UINT8", "UINT16", "UINT32", "Array", "ArrayAnn", "Direction", "DistributedTensor", "DslEnumType", "DslOp", "DynExpr", "DynVar", "InOut", "Namespace", "Out", "PyDType", "Scalar", "ScalarAnn", "Tensor", "TensorAnn", "TensorLayout", "Tile", "TileAnn", "Tuple", "TupleAnn", "bare_tensor", "dim_value", "dtype_of_array", "dtype_of_ir", "dynamic", "plain_annotation"]


class SymInt(int):
    """An int that also knows its pldemu IR expression in ``NR`` (the rank count): ``pld.world_size()``
    and ``pl.dynamic("NR")`` evaluate to one, and arithmetic keeps it, so a window shaped
    ``[pld.world_size(), 1]`` is declared ``[NR, 1]``, as pldemu's collective recipes require."""

    expr: Any

    def __new__(cls, value: int, expr: Any) -> SymInt:
        out = super().__new__(cls, value)
        out.expr = expr
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # A SymInt that reached an IR constant travels to the ranks as the plain int it is.
        return (int, (int(self),))

    def _wrap(self, other: object, op: Callable[[Any, Any], Any], swap: bool) -> Any:
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        o_expr = other.expr if isinstance(other, SymInt) else other
        a, b = (other, self) if swap else (self, other)
        ea, eb = (o_expr, self.expr) if swap else (self.expr, o_expr)
        from pldemu.ir.nodes import as_expr

        return SymInt(op(int(a), int(b)), op(as_expr(ea), eb))

    def __add__(self, o: object) -> Any:
        return self._wrap(o, operator.add, False)

    def __radd__(self, o: object) -> Any:
        return self._wrap(o, operator.add, True)

    def __sub__(self, o: object) -> Any:
        return self._wrap(o, operator.sub, False)

    def __rsub__(self, o: object) -> Any:
        return self._wrap(o, operator.sub, True)

    def __mul__(self, o: object) -> Any:
        return self._wrap(o, operator.mul, False)

    def __rmul__(self, o: object) -> Any:
        return self._wrap(o, operator.mul, True)

    def __floordiv__(self, o: object) -> Any:
        return self._wrap(o, operator.floordiv, False)

    def __rfloordiv__(self, o: object) -> Any:
        return self._wrap(o, operator.floordiv, True)


def dim_expr(d: int) -> Any:
    """A shape entry for pldemu IR: ``NR``-based for a :class:`SymInt`, a constant otherwise."""
    from pldemu.ir.nodes import Const

    return d.expr if isinstance(d, SymInt) else Const(int(d))
