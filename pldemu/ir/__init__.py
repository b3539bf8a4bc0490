"""The pldemu IR: dtypes, types, expressions, statements, programs, op signatures, text form."""

from pldemu.ir.builder import FunctionBuilder, Pld, ProgramBuilder, as_list
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import (
    AllreduceMode,
    AtomicType,
    Layout,
    MemorySpace,
    NotifyOp,
    PadValue,
    ReduceOp,
    WaitCmp,
)
from pldemu.ir.nodes import (
    NR,
    Assign,
    BinOp,
    BinOpKind,
    BufferDecl,
    BufferKind,
    Call,
    CommCtxType,
    Const,
    Eval,
    Expr,
    For,
    Function,
    If,
    ListExpr,
    Program,
    Return,
    ScalarType,
    Seq,
    Stmt,
    TensorType,
    TileType,
    Type,
    Var,
    While,
)
from pldemu.ir.ops import COLLECTIVES, Op
from pldemu.ir.parser import ParseError, parse_file, parse_program
from pldemu.ir.printer import format_expr, format_program
from pldemu.ir.signatures import SIGNATURES, IRTypeError, make_call
from pldemu.ir.verifier import VerifyError, verify

__all__ = [
    "COLLECTIVES", "NR", "SIGNATURES", "AllreduceMode", "Assign", "AtomicType", "BinOp", "BinOpKind",
    "BufferDecl", "BufferKind", "Call", "CommCtxType", "Const", "DType", "Eval", "Expr", "For", "Function",
    "FunctionBuilder", "IRTypeError", "If", "Layout", "ListExpr", "MemorySpace", "NotifyOp", "Op", "PadValue",
    "ParseError", "Pld", "Program", "ProgramBuilder", "ReduceOp", "Return", "ScalarType", "Seq", "Stmt", "TensorType",
    "TileType", "Type", "Var", "VerifyError", "WaitCmp", "While", "as_list", "format_expr", "format_program",
    "make_call", "parse_file", "parse_program", "verify",
]
