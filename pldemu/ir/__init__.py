"""The pldemu IR: dtypes, types, expressions, statements, programs, op signatures, text form.

Modules: ``dtypes``/``enums``/``ops`` (vocabularies, one ``Op`` enum), ``nodes`` (frozen dataclasses
plus the one evaluator of static / NR expressions, ``evaluate``), ``signatures`` (one ``op ->
signature`` table, ``make_call``), ``builder`` (the Python builder API), ``walk`` (the one IR walker),
``scope`` (name scoping, shared by parser and verifier), ``verifier``, ``printer`` and ``parser``
(the ``.pld`` text form), ``source`` (locations).
"""

from pldemu.ir.builder import FunctionBuilder, Pld, ProgramBuilder, as_list
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import (
    AllreduceMode,
    AtomicType,
    CastMode,
    CmpType,
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
    eval_nr,
    evaluate,
)
from pldemu.ir.ops import COLLECTIVES, Op
from pldemu.ir.parser import ParseError, parse_file, parse_program
from pldemu.ir.printer import format_expr, format_program
from pldemu.ir.signatures import SIGNATURES, IRTypeError, make_call
from pldemu.ir.verifier import VerifyError, verify
from pldemu.ir.walk import program_calls, walk_calls, walk_expr, walk_stmts

__all__ = [
    "COLLECTIVES",
    "NR",
    "SIGNATURES",
    "AllreduceMode",
    "Assign",
    "AtomicType",
    "BinOp",
    "BinOpKind",
    "BufferDecl",
    "BufferKind",
    "Call",
    "CastMode",
    "CmpType",
    "CommCtxType",
    "Const",
    "DType",
    "Eval",
    "Expr",
    "For",
    "Function",
    "FunctionBuilder",
    "IRTypeError",
    "If",
    "Layout",
    "ListExpr",
    "MemorySpace",
    "NotifyOp",
    "Op",
    "PadValue",
    "ParseError",
    "Pld",
    "Program",
    "ProgramBuilder",
    "ReduceOp",
    "Return",
    "ScalarType",
    "Seq",
    "Stmt",
    "TensorType",
    "TileType",
    "Type",
    "Var",
    "VerifyError",
    "WaitCmp",
    "While",
    "as_list",
    "eval_nr",
    "evaluate",
    "format_expr",
    "format_program",
    "make_call",
    "parse_file",
    "parse_program",
    "program_calls",
    "verify",
    "walk_calls",
    "walk_expr",
    "walk_stmts",
]
