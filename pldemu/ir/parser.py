"""Parser for the ``.pld`` text form: the inverse of :mod:`pldemu.ir.printer`.

A hand-written tokenizer plus recursive-descent parser. ``parse_program(format_program(p))`` rebuilds
``p`` structurally: calls are built only through :func:`pldemu.ir.signatures.make_call` (types deduced,
attributes canonical) and operators become plain ``BinOp`` nodes (no constant folding).

Beyond what the printer emits, hand-written files may use: ``# comments``, blank lines, trailing commas,
calls and lists spread over several lines, operator precedence without parentheses
(``or`` < ``and`` < comparisons < ``+ -`` < ``* // %``), attributes in any order (defaults filled in),
``range(stop)`` / ``range(start, stop)``, and ``} else if COND {``.

Scoping follows the verifier: buffers, ``NR`` and the function's parameters are visible everywhere in a
function; ``NAME = EXPR`` binds NAME with the value's type; names first bound inside a ``for``/``while``
body are not visible after it; a name first bound inside an ``if`` is visible after it only if both
branches bind it with the same type. Type rules beyond what ``make_call`` checks are left to the
verifier. Every problem is a :class:`ParseError` carrying ``file:line:col`` and the offending line.
"""

from __future__ import annotations

import contextlib
import difflib
import enum
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pldemu.ir import nodes as ir
from pldemu.ir.dtypes import DType
from pldemu.ir.enums import Layout, MemorySpace, TileLayout, enum_parse, enum_text
from pldemu.ir.ops import Op
from pldemu.ir.scope import Scope
from pldemu.ir.signatures import SIGNATURES, AttrSpec, IRTypeError, Param, make_call
from pldemu.ir.walk import MAX_NESTING, expr_depth


class ParseError(ValueError):
    """A syntax or typing problem in ``.pld`` text, located at ``filename:line:col`` (1-based).

    ``str(err)`` is ``filename:line:col: message`` followed by the offending source line and a caret.
    """

    def __init__(self, message: str, filename: str, line: int, col: int, source_line: str = "",
                 length: int = 1) -> None:
        self.message, self.filename, self.line, self.col = message, filename, line, col
        text = f"{filename}:{line}:{col}: {message}"
        if source_line.strip():
            pad = "".join(ch if ch == "\t" else " " for ch in source_line[: col - 1])
            width = max(1, min(length, len(source_line) - col + 1))
            text += f"\n    {source_line}\n    {pad}^{'~' * (width - 1)}"
        super().__init__(text)


# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------

NAME, INT, FLOAT, STRING, OP, NEWLINE, EOF = "name", "int", "float", "string", "op", "newline", "eof"


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    line: int
    col: int
    value: int | float | str | None = None

    def is_op(self, *texts: str) -> bool:
        return self.kind == OP and self.text in texts

    def is_name(self, *texts: str) -> bool:
        return self.kind == NAME and self.text in texts

    def describe(self) -> str:
        if self.kind == NEWLINE:
            return "end of line"
        if self.kind == EOF:
            return "end of file"
        return f"'{self.text}'"


_TOKEN_RE = re.compile(
    r"""
     (?P<ws>[ \t\r\f]+)
    |(?P<comment>\#[^\n]*)
    |(?P<newline>\n)
    |(?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
    |(?P<int>\d+)
    |(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)
    |(?P<string>"(?:[^"\\\n]|\\.)*")
    |(?P<op>//|==|!=|<=|>=|[-+*/%<>=()\[\]{},:])
    """,
    re.VERBOSE,
)

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}

_CHAR_HINTS = {
    ";": "unexpected ';': statements are separated by newlines",
    "!": "unexpected '!': inequality is written !=",
    '"': "unterminated string literal",
    "'": "strings use double quotes",
    ".": "unexpected '.': op names look like tile.load, variable names contain no dots",
}

ErrorAt = Callable[[str, int, int, int], ParseError]


def tokenize(text: str, error_at: ErrorAt) -> list[Token]:
    """Split ``text`` into tokens. Newlines inside ( ) and [ ] are dropped, like Python's."""
    tokens: list[Token] = []
    open_brackets: list[Token] = []
    line, line_start, pos = 1, 0, 0
    closers = {")": "(", "]": "["}
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        col = pos - line_start + 1
        if m is None:
            ch = text[pos]
            raise error_at(_CHAR_HINTS.get(ch, f"unexpected character {ch!r}"), line, col, 1)
        kind = m.lastgroup
        assert kind is not None
        lexeme = m.group()
        pos = m.end()
        if kind in ("ws", "comment"):
            continue
        if kind == "newline":
            if not open_brackets and tokens and tokens[-1].kind != NEWLINE:
                tokens.append(Token(NEWLINE, "\n", line, col))
            line, line_start = line + 1, pos
            continue
        value: int | float | str | None = None
        if kind in (INT, FLOAT):
            if pos < len(text) and (text[pos].isalnum() or text[pos] in "_."):
                raise error_at(f"invalid number literal {lexeme + text[pos]!r}...", line, col, len(lexeme) + 1)
            value = int(lexeme) if kind == INT else float(lexeme)
        elif kind == STRING:
            value = re.sub(r"\\(.)", lambda e: _ESCAPES.get(e.group(1), e.group(1)), lexeme[1:-1])
        tok = Token(kind, lexeme, line, col, value)
        if kind == OP:
            if lexeme in "([":
                open_brackets.append(tok)
            elif lexeme in ")]":
                if not open_brackets:
                    raise error_at(f"unmatched '{lexeme}'", line, col, 1)
                opener = open_brackets.pop()
                if opener.text != closers[lexeme]:
                    raise error_at(f"'{lexeme}' does not match the '{opener.text}' at line {opener.line}, "
                                   f"column {opener.col}", line, col, 1)
            elif lexeme in "{}" and open_brackets:
                opener = open_brackets[-1]
                raise error_at(f"'{opener.text}' is never closed", opener.line, opener.col, 1)
        tokens.append(tok)
    if open_brackets:
        opener = open_brackets[-1]
        raise error_at(f"'{opener.text}' is never closed", opener.line, opener.col, 1)
    lines = text.split("\n")
    end_line, end_col = len(lines), len(lines[-1]) + 1
    if tokens and tokens[-1].kind != NEWLINE:
        tokens.append(Token(NEWLINE, "\n", end_line, end_col))
    tokens.append(Token(EOF, "", end_line, end_col))
    return tokens


# ----------------------------------------------------------------------------------------------
# Parser
# ----------------------------------------------------------------------------------------------

KEYWORDS = frozenset({"for", "while", "if", "else", "return", "and", "or", "true", "false", "inf", "nan"})
"""Words that cannot name a variable, buffer, parameter or loop index."""

_ADD_OPS = {"+": ir.BinOpKind.ADD, "-": ir.BinOpKind.SUB}
_MUL_OPS = {"*": ir.BinOpKind.MUL, "//": ir.BinOpKind.FLOORDIV, "/": ir.BinOpKind.DIV, "%": ir.BinOpKind.MOD}
_CMP_OPS = {k.value: k for k in ir.BinOpKind if k.is_compare}
_FUNC_OPS = {k.value: k for k in ir.BinOpKind if k.is_function}
"""``min(a, b)``, ``max(a, b)``, ``tdiv(a, b)``, ``trem(a, b)``: operators spelled as functions."""
_BUFFER_KINDS = {k.value: k for k in ir.BufferKind}
_OP_NAMES = [op.text for op in Op]

_T = TypeVar("_T")


def _did_you_mean(word: str, candidates: list[str] | set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def suggest_op(name: str) -> str | None:
    """The known op closest to ``name``: same last component first, then by spelling."""
    last = name.rsplit(".", 1)[-1]
    same_tail = [text for text in _OP_NAMES if text.rsplit(".", 1)[-1] == last]
    if len(same_tail) == 1:
        return same_tail[0]
    close = difflib.get_close_matches(name, same_tail or _OP_NAMES, n=1, cutoff=0.6)
    return close[0] if close else None


class _Nesting:
    def __init__(self, parser: _Parser, tok: Token) -> None:
        self.parser, self.tok = parser, tok

    def __enter__(self) -> None:
        self.parser.depth += 1
        if self.parser.depth > MAX_NESTING:
            raise self.parser.error(f"nested more than {MAX_NESTING} levels deep (parentheses, calls, blocks); "
                                    "split it with intermediate assignments or functions", self.tok)

    def __exit__(self, *exc: object) -> None:
        self.parser.depth -= 1


class _Parser:
    def __init__(self, text: str, filename: str) -> None:
        self.filename = filename
        self.lines = text.split("\n")
        self.toks = tokenize(text, self._error_at)
        self.i = 0
        self.depth = 0
        self.expr_nesting = 0
        """Open parentheses, calls and blocks around the current token (bounded by MAX_NESTING)."""
        self.misclosed: list[tuple[str, Token, Token]] = []
        """Blocks closed by a '}' left of their opener's indentation: (what, opener, closer), the
        likely culprit when the program's own brace turns out to be missing."""

    # -- token helpers ---------------------------------------------------------------------------

    def _error_at(self, message: str, line: int, col: int, length: int = 1) -> ParseError:
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return ParseError(message, self.filename, line, col, source, length)

    def error(self, message: str, tok: Token) -> ParseError:
        length = len(tok.text) if tok.kind not in (NEWLINE, EOF) else 1
        return self._error_at(message, tok.line, tok.col, length)

    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != EOF:
            self.i += 1
        return tok

    def expect_op(self, text: str, context: str) -> Token:
        tok = self.peek()
        if not tok.is_op(text):
            raise self.error(f"expected '{text}' {context}, got {tok.describe()}", tok)
        return self.advance()

    def expect_keyword(self, text: str, context: str) -> Token:
        tok = self.peek()
        if not tok.is_name(text):
            raise self.error(f"expected '{text}' {context}, got {tok.describe()}", tok)
        return self.advance()

    def skip_newlines(self) -> None:
        while self.peek().kind == NEWLINE:
            self.advance()

    def end_of_statement(self) -> None:
        tok = self.peek()
        if tok.kind == NEWLINE:
            self.advance()
        elif not tok.is_op("}"):
            raise self.error(f"expected the end of the line, got {tok.describe()}", tok)

    def name_token(self, what: str) -> Token:
        """A plain identifier that may name a variable, buffer, parameter or loop index."""
        tok = self.peek()
        if tok.kind != NAME:
            raise self.error(f"expected {what}, got {tok.describe()}", tok)
        if "." in tok.text:
            raise self.error(f"{what} cannot contain dots: '{tok.text}'", tok)
        if tok.text in KEYWORDS:
            raise self.error(f"'{tok.text}' is a reserved word and cannot be used as {what}", tok)
        if tok.text == ir.NR.name:
            raise self.error(f"'{ir.NR.name}' is the rank-count symbol and cannot be used as {what}", tok)
        return self.advance()

    def comma_or_close(self, close: str, context: str) -> bool:
        """After an item of a bracketed list: consume ',' (True: more may follow) or stop before close."""
        tok = self.peek()
        if tok.is_op(","):
            self.advance()
            return True
        if tok.is_op(close):
            return False
        raise self.error(f"expected ',' or '{close}' {context}, got {tok.describe()}", tok)

    def comma_list(self, close: str, context: str, item: Callable[[], _T]) -> list[_T]:
        """``item()`` repeated, separated by ',' (a trailing one allowed), up to and consuming ``close``.

        The opening bracket is already consumed; ``context`` names the list in the error that a
        missing separator raises.
        """
        items: list[_T] = []
        while not self.peek().is_op(close):
            items.append(item())
            if not self.comma_or_close(close, context):
                break
        self.advance()
        return items

    # -- program level --------------------------------------------------------------------------

    def program(self) -> ir.Program:
        self.skip_newlines()
        head = self.peek()
        if not head.is_name("program"):
            raise self.error(f"a .pld file starts with 'program NAME {{', got {head.describe()}", head)
        self.advance()
        name_tok = self.peek()
        if name_tok.kind != NAME:
            raise self.error(f"expected the program name, got {name_tok.describe()}", name_tok)
        self.advance()
        nranks, entry = self.program_options()
        open_tok = self.advance()
        buffers: dict[str, tuple[ir.BufferDecl, Token]] = {}
        functions: dict[str, tuple[ir.Function, Token]] = {}
        while True:
            self.skip_newlines()
            tok = self.peek()
            if tok.is_op("}"):
                self.advance()
                break
            if tok.kind == EOF:
                raise self.missing_program_brace(open_tok, tok)
            if tok.kind == NAME and tok.text in _BUFFER_KINDS:
                if functions:
                    raise self.error("declare buffers before the first function", tok)
                decl, decl_tok = self.buffer_decl()
                prev = buffers.get(decl.var.name)
                if prev is not None:
                    raise self.error(f"buffer '{decl.var.name}' is already declared at line {prev[1].line}",
                                     decl_tok)
                buffers[decl.var.name] = (decl, decl_tok)
            elif tok.is_name("func"):
                globals_ = {ir.NR.name: ir.NR.type} | {n: d.var.type for n, (d, _) in buffers.items()}
                fn, fn_tok = self.function(globals_)
                prev_fn = functions.get(fn.name)
                if prev_fn is not None:
                    raise self.error(f"function '{fn.name}' is already defined at line {prev_fn[1].line}",
                                     fn_tok)
                functions[fn.name] = (fn, fn_tok)
            else:
                raise self.error("expected a buffer declaration (window/signal/local NAME: TYPE) or a "
                                 f"function (func NAME(...) {{ ... }}), got {tok.describe()}", tok)
            self.end_of_statement()
        self.skip_newlines()
        tail = self.peek()
        if tail.kind != EOF:
            raise self.error(f"unexpected {tail.describe()} after the end of the program", tail)
        return ir.Program(name_tok.text, tuple(d for d, _ in buffers.values()),
                       tuple(f for f, _ in functions.values()), entry, nranks)

    def program_options(self) -> tuple[int | None, str]:
        """``[nranks=INT] [entry=NAME]`` after the program name, up to (not consuming) '{'."""
        options: set[str] = set()
        nranks: int | None = None
        entry = "main"
        while not self.peek().is_op("{"):
            opt = self.peek()
            if not opt.is_name("nranks", "entry"):
                raise self.error(f"expected '{{' or a program option (nranks=INT, entry=NAME), "
                                 f"got {opt.describe()}", opt)
            if opt.text in options:
                raise self.error(f"program option '{opt.text}' given twice", opt)
            options.add(self.advance().text)
            self.expect_op("=", f"after '{opt.text}'")
            value = self.peek()
            if opt.text == "nranks":
                if value.kind != INT:
                    raise self.error(f"nranks must be an integer literal, got {value.describe()}", value)
                assert isinstance(value.value, int)
                nranks = value.value
            else:
                if value.kind != NAME or "." in value.text:
                    raise self.error(f"entry must be a function name, got {value.describe()}", value)
                entry = value.text
            self.advance()
        return nranks, entry

    def buffer_decl(self) -> tuple[ir.BufferDecl, Token]:
        kind = _BUFFER_KINDS[self.advance().text]
        name_tok = self.name_token("a buffer name")
        self.expect_op(":", f"after the buffer name '{name_tok.text}'")
        scope = Scope.of({ir.NR.name: ir.NR.type})
        t = self.tensor_type(kind is not ir.BufferKind.LOCAL, scope)
        group = None
        if kind is not ir.BufferKind.LOCAL and self.peek().is_name("group"):
            self.advance()
            self.expect_op("[", "after 'group'")
            group = tuple(self.comma_list("]", "in the group's rank list", lambda: self.int_literal("a rank")))
        return ir.BufferDecl(ir.Var(name_tok.text, t), kind, group), name_tok

    def function(self, globals_: dict[str, ir.Type]) -> tuple[ir.Function, Token]:
        self.advance()  # func
        name_tok = self.name_token("a function name")
        self.expect_op("(", f"after the function name '{name_tok.text}'")
        scope = Scope.of(globals_)
        params: list[ir.Var] = []

        def param() -> ir.Var:
            ptok = self.name_token("a parameter name")
            if any(p.name == ptok.text for p in params):
                raise self.error(f"parameter '{ptok.text}' given twice", ptok)
            self.expect_op(":", f"after the parameter name '{ptok.text}' (parameters are NAME: TYPE)")
            t = self.param_type(scope)
            params.append(ir.Var(ptok.text, t))
            scope.bind(ptok.text, t)
            return params[-1]

        self.comma_list(")", "in the parameter list", param)
        body = self.block(scope, f"function '{name_tok.text}'")
        return ir.Function(name_tok.text, tuple(params), body), name_tok

    # -- types ----------------------------------------------------------------------------------

    def dtype(self) -> DType:
        tok = self.peek()
        if tok.kind != NAME:
            raise self.error(f"expected a dtype, got {tok.describe()}", tok)
        try:
            dtype = DType.parse(tok.text)
        except ValueError as err:
            raise self.error(f"{err}{_did_you_mean(tok.text, {d.value for d in DType})}", tok) from None
        self.advance()
        return dtype

    def enum_word(self, cls: type[enum.IntEnum], what: str) -> enum.IntEnum:
        tok = self.peek()
        if tok.kind not in (NAME, STRING):
            legal = ", ".join(enum_text(m) for m in cls)
            raise self.error(f"{what} must be one of {legal}, got {tok.describe()}", tok)
        text = tok.value if tok.kind == STRING else tok.text
        assert isinstance(text, str)
        try:
            value = enum_parse(cls, text)
        except ValueError:
            folded = [m for m in cls if enum_text(m).lower() == text.lower()]
            if not folded:
                legal_names = [enum_text(m) for m in cls]
                raise self.error(f"{what} must be one of {', '.join(legal_names)}, got '{text}'"
                                 f"{_did_you_mean(text, set(legal_names))}", tok) from None
            value = folded[0]
        self.advance()
        return value

    def dims(self, scope: Scope, context: str) -> tuple[ir.Expr, ...]:
        self.expect_op("[", context)
        return tuple(self.comma_list("]", "in the dimension list", lambda: self.expr(scope)))

    def int_literal(self, what: str) -> int:
        sign = -1 if self.peek().is_op("-") else 1
        if sign < 0:
            self.advance()
        tok = self.peek()
        if tok.kind != INT:
            raise self.error(f"{what} must be an integer literal, got {tok.describe()}", tok)
        self.advance()
        assert isinstance(tok.value, int)
        return sign * tok.value

    def tensor_type(self, window: bool, scope: Scope) -> ir.TensorType:
        dtype = self.dtype()
        shape = self.dims(scope, "after the dtype (a shape like fp32[4, NR])")
        valid: tuple[ir.Expr, ...] | None = None
        layout = Layout.ND
        strides: tuple[int, ...] | None = None
        seen: set[str] = set()
        while self.peek().is_name("valid", "layout", "strides"):
            opt = self.advance()
            if opt.text in seen:
                raise self.error(f"'{opt.text}' given twice", opt)
            seen.add(opt.text)
            if opt.text == "valid":
                valid = self.dims(scope, "after 'valid'")
            elif opt.text == "layout":
                value = self.enum_word(Layout, "layout")
                assert isinstance(value, Layout)
                layout = value
            else:
                self.expect_op("[", "after 'strides'")
                strides = tuple(self.comma_list("]", "in the stride list", lambda: self.int_literal("a stride")))
        return ir.TensorType(dtype, shape, valid, window, layout, strides)

    def param_type(self, scope: Scope) -> ir.Type:
        tok = self.peek()
        if tok.is_name("window"):
            self.advance()
            return self.tensor_type(True, scope)
        if tok.is_name("ctx"):
            self.advance()
            return ir.CommCtxType()
        if tok.is_name("tile"):
            self.advance()
            dtype = self.dtype()
            self.expect_op("[", "after the tile dtype (a static shape like tile fp32[16, 16])")
            shape = self.comma_list("]", "in the tile shape", lambda: self.int_literal("a tile extent"))
            valid: tuple[ir.Expr, ...] | None = None
            memory = MemorySpace.Vec
            if self.peek().is_name("valid"):
                self.advance()
                valid = self.dims(scope, "after 'valid'")
            if self.peek().is_name("mem"):
                self.advance()
                mem = self.enum_word(MemorySpace, "mem")
                assert isinstance(mem, MemorySpace)
                memory = mem
            layout = TileLayout.ND
            if self.peek().is_name("layout"):
                self.advance()
                word = self.enum_word(TileLayout, "layout")
                assert isinstance(word, TileLayout)
                layout = word
            return ir.TileType(dtype, tuple(shape), valid, memory, layout)
        if tok.kind != NAME:
            raise self.error(f"expected a parameter type, got {tok.describe()}", tok)
        if tok.text.lower() not in {d.value for d in DType}:
            raise self.error(f"unknown parameter type '{tok.text}'; expected a dtype (index, fp32, ...), "
                             "DTYPE[DIMS], window DTYPE[DIMS], tile DTYPE[INTS] or ctx", tok)
        if self.peek(1).is_op("["):
            return self.tensor_type(False, scope)
        return ir.ScalarType(self.dtype())

    # -- statements -----------------------------------------------------------------------------

    def nested(self, tok: Token) -> contextlib.AbstractContextManager[None]:
        """One more level of nesting at ``tok``: deeper than MAX_NESTING is an error, not a crash."""
        return _Nesting(self, tok)

    def indent_of(self, tok: Token) -> int:
        line = self.lines[tok.line - 1] if 0 < tok.line <= len(self.lines) else ""
        return len(line) - len(line.lstrip()) + 1

    def block(self, scope: Scope, what: str) -> ir.Seq:
        open_tok = self.expect_op("{", f"to open the body of the {what}")
        stmts: list[ir.Stmt] = []
        with self.nested(open_tok):
            while True:
                self.skip_newlines()
                tok = self.peek()
                if tok.is_op("}"):
                    if tok.col < self.indent_of(open_tok):
                        self.misclosed.append((what, open_tok, tok))
                    self.advance()
                    return ir.Seq(tuple(stmts))
                if tok.kind == EOF:
                    raise self.error(f"missing '}}' to close the {what} opened at line {open_tok.line}", tok)
                stmts.append(self.statement(scope))
                self.end_of_statement()

    def missing_program_brace(self, open_tok: Token, tok: Token) -> ParseError:
        """EOF inside the program: blame the block whose '}' was taken from an outer one, if any."""
        if self.misclosed:
            what, opener, closer = self.misclosed[-1]
            return self.error(f"missing '}}' to close the {what} opened at line {opener.line} (the '}}' at "
                              f"line {closer.line}, column {closer.col}, lines up with an outer block)", opener)
        return self.error(f"missing '}}' to close the program opened at line {open_tok.line}", tok)

    def statement(self, scope: Scope) -> ir.Stmt:
        tok = self.peek()
        if tok.kind == NAME:
            nxt = self.peek(1)
            if nxt.is_op("="):
                return self.assign_stmt(scope)
            if tok.text == "for":
                return self.for_stmt(scope)
            if tok.text == "while":
                return self.while_stmt(scope)
            if tok.text == "if":
                return self.if_stmt(scope)
            if tok.text == "return":
                return self.return_stmt(scope)
            if tok.text == "task" and nxt.kind == NAME:
                return self.task_stmt(scope)
            if tok.text == "scope" and nxt.is_name("auto", "manual"):
                return self.task_scope_stmt(scope)
            if tok.text == "else":
                raise self.error("'else' without a matching 'if'", tok)
            if nxt.kind == OP and nxt.text in ("+", "-", "*", "//", "%") and self.peek(2).is_op("="):
                raise self.error(f"'{nxt.text}=' is not supported; write "
                                 f"{tok.text} = {tok.text} {nxt.text} ...", nxt)
        value = self.expr(scope)
        if isinstance(value, ir.Call):
            return ir.Eval(value, ir.SourcePos(self.filename, tok.line))
        raise self.error("this expression does nothing on its own; a statement is NAME = EXPR, an op "
                         "call, for, while, if or return", tok)

    def assign_stmt(self, scope: Scope) -> ir.Assign:
        name_tok = self.name_token("a variable name")
        self.advance()  # =
        value_tok = self.peek()
        value = self.expr(scope)
        if value.type == ir.NONE:
            assert isinstance(value, ir.Call)
            raise self.error(f"{value.op.text} returns nothing; call it as a statement instead of "
                             f"assigning it to '{name_tok.text}'", value_tok)
        var = ir.Var(name_tok.text, value.type)
        scope.bind(var.name, var.type)
        return ir.Assign(var, value, ir.SourcePos(self.filename, name_tok.line))

    def for_stmt(self, scope: Scope) -> ir.For:
        for_tok = self.advance()
        var_tok = self.name_token("a loop variable")
        self.expect_keyword("in", "after the loop variable (for NAME in range(start, stop, step))")
        kind_tok = self.peek()
        kinds = {k.value: k for k in ir.LoopKind}
        if not (kind_tok.kind == NAME and kind_tok.text in kinds):
            raise self.error("expected 'range' after 'in' (for loops iterate over range(start, stop, step), "
                             f"parallel(...) or pipeline(...)), got {kind_tok.describe()}", kind_tok)
        self.advance()
        open_tok = self.expect_op("(", f"after '{kind_tok.text}'")
        bounds = self.comma_list(")", "in range(...)", lambda: self.expr(scope))
        if not 1 <= len(bounds) <= 3:
            raise self.error(f"range takes 1 to 3 arguments (stop | start, stop | start, stop, step), "
                             f"got {len(bounds)}", open_tok)
        if len(bounds) == 1:
            bounds.insert(0, ir.Const(0))
        if len(bounds) == 2:
            bounds.append(ir.Const(1))
        var = ir.Var(var_tok.text, ir.INDEX)
        inner = scope.child()
        inner.bind(var.name, var.type)
        body = self.block(inner, "for loop")
        scope.leave_loop(inner, f"the for loop at line {for_tok.line}")
        return ir.For(var, bounds[0], bounds[1], bounds[2], body, kinds[kind_tok.text])

    def task_stmt(self, scope: Scope) -> ir.Task:
        """``task [TID =] KIND[(BLOCKS) [block B]] ["NAME"] [deps [..]] [nodep [..]] [early] { ... }``."""
        task_tok = self.advance()
        tid: ir.Var | None = None
        if self.peek(1).is_op("="):
            tid = ir.Var(self.name_token("a task id").text, ir.TASK_ID)
            self.advance()
        kinds = {k.value: k for k in ir.TaskKind}
        kind_tok = self.peek()
        if kind_tok.kind != NAME or kind_tok.text not in kinds:
            raise self.error(f"expected a task kind ({', '.join(kinds)}), got {kind_tok.describe()}", kind_tok)
        self.advance()
        kind = kinds[kind_tok.text]
        fields: dict[str, Any] = {}
        inner = scope.child()
        if kind is ir.TaskKind.SPMD:
            self.expect_op("(", "after 'spmd' (spmd(BLOCKS))")
            fields["blocks"] = self.expr(scope)
            self.expect_op(")", "after the block count")
            if self.peek().is_name("block"):
                self.advance()
                fields["block_var"] = ir.Var(self.name_token("a block index").text, ir.INDEX)
                inner.bind(fields["block_var"].name, ir.INDEX)
        if self.peek().kind == STRING:
            fields["name"] = self.advance().value
        for word, item in (("deps", lambda: self.expr(scope)), ("nodep", lambda: self.expr(scope))):
            if self.peek().is_name(word):
                self.advance()
                self.expect_op("[", f"after '{word}'")
                fields["deps" if word == "deps" else "no_dep"] = tuple(self.comma_list("]", f"in {word} [...]", item))
        if self.peek().is_name("early"):
            self.advance()
            fields["early_resolve"] = True
        body = ir.Seq() if kind is ir.TaskKind.DUMMY else self.block(inner, f"{kind.value} task")
        if kind is not ir.TaskKind.DUMMY:
            scope.leave_loop(inner, f"the task at line {task_tok.line}")
        if tid is not None:
            scope.bind(tid.name, tid.type)
        return ir.Task(kind, body, tid, origin=ir.SourcePos(self.filename, task_tok.line), **fields)

    def task_scope_stmt(self, scope: Scope) -> ir.TaskScope:
        self.advance()
        manual = self.advance().text == "manual"
        return ir.TaskScope(manual, self.block(scope, "scope"))

    def while_stmt(self, scope: Scope) -> ir.While:
        while_tok = self.advance()
        cond = self.expr(scope)
        inner = scope.child()
        body = self.block(inner, "while loop")
        scope.leave_loop(inner, f"the while loop at line {while_tok.line}")
        return ir.While(cond, body)

    def if_stmt(self, scope: Scope) -> ir.If:
        if_tok = self.advance()
        cond = self.expr(scope)
        then = scope.child()
        then_body = self.block(then, "if")
        other = scope.child()
        orelse: ir.Seq | None = None
        mark = self.i
        self.skip_newlines()
        if self.peek().is_name("else"):
            self.advance()
            nested = self.peek().is_name("if")  # `else if`: the else branch holds one nested If
            orelse = ir.Seq((self.if_stmt(other),)) if nested else self.block(other, "else")
        else:
            self.i = mark
        scope.join_branches(then, other, f"the if at line {if_tok.line}")
        return ir.If(cond, then_body, orelse)

    def return_stmt(self, scope: Scope) -> ir.Return:
        self.advance()
        values: list[ir.Expr] = []
        while self.peek().kind != NEWLINE and not self.peek().is_op("}"):
            values.append(self.expr(scope))
            if not self.peek().is_op(","):
                break
            self.advance()
        return ir.Return(tuple(values))

    # -- expressions ----------------------------------------------------------------------------

    def expr(self, scope: Scope) -> ir.Expr:
        start = self.peek()
        self.expr_nesting += 1
        try:
            with self.nested(start):
                lhs = self.and_expr(scope)
                while self.peek().is_name("or"):
                    self.advance()
                    lhs = ir.BinOp(ir.BinOpKind.OR, lhs, self.and_expr(scope))
        finally:
            self.expr_nesting -= 1
        if self.expr_nesting == 0 and expr_depth(lhs) > MAX_NESTING:
            # A long chain (1 + 1 + ...) nests without recursing here, but every later walk recurses.
            raise self.error(f"expression nested {expr_depth(lhs)} levels deep (at most {MAX_NESTING}); "
                             "split it with intermediate assignments", start)
        return lhs

    def and_expr(self, scope: Scope) -> ir.Expr:
        lhs = self.compare(scope)
        while self.peek().is_name("and"):
            self.advance()
            lhs = ir.BinOp(ir.BinOpKind.AND, lhs, self.compare(scope))
        return lhs

    def compare(self, scope: Scope) -> ir.Expr:
        lhs = self.additive(scope)
        tok = self.peek()
        if tok.kind == OP and tok.text in _CMP_OPS:
            self.advance()
            lhs = ir.BinOp(_CMP_OPS[tok.text], lhs, self.additive(scope))
            nxt = self.peek()
            if nxt.kind == OP and nxt.text in _CMP_OPS:
                raise self.error("comparisons cannot be chained; combine them with 'and' or use parentheses",
                                 nxt)
        return lhs

    def additive(self, scope: Scope) -> ir.Expr:
        lhs = self.term(scope)
        while self.peek().kind == OP and self.peek().text in _ADD_OPS:
            kind = _ADD_OPS[self.advance().text]
            lhs = ir.BinOp(kind, lhs, self.term(scope))
        return lhs

    def term(self, scope: Scope) -> ir.Expr:
        lhs = self.unary(scope)
        while self.peek().kind == OP and self.peek().text in _MUL_OPS:
            tok = self.advance()
            kind = _MUL_OPS[tok.text]
            lhs = ir.BinOp(kind, lhs, self.unary(scope))
            if kind is ir.BinOpKind.DIV and not lhs.type.dtype.is_float:
                raise self.error("unexpected '/': integer division is written // (/ divides floats)", tok)
        return lhs

    def unary(self, scope: Scope) -> ir.Expr:
        tok = self.peek()
        if tok.is_op("-"):
            nxt = self.peek(1)
            if nxt.kind in (INT, FLOAT) or nxt.is_name("inf", "nan"):
                self.advance()
                return self.literal(negate=True)
            raise self.error("unary minus applies only to number literals; write 0 - x", tok)
        return self.atom(scope)

    def literal(self, negate: bool = False) -> ir.Const:
        tok = self.advance()
        value: int | float | bool
        dtype = DType.FP32
        if tok.kind in (INT, FLOAT):
            assert isinstance(tok.value, (int, float))
            value = tok.value
            dtype = DType.INDEX if tok.kind == INT else DType.FP32
        elif tok.text == "inf":
            value = math.inf
        elif tok.text == "nan":
            value = math.nan
        else:
            value, dtype = tok.text == "true", DType.BOOL
        if negate:
            value = -value
        if isinstance(value, float) and math.isnan(value):
            value = math.nan  # one shared object, so equal programs compare equal
        if self.peek().is_op(":"):
            self.advance()
            dtype_tok = self.peek()
            dtype = self.dtype()
            if isinstance(value, float) and dtype.is_int:
                raise self.error(f"a float literal cannot have the integer type {dtype.value}; "
                                 f"write an integer", dtype_tok)
        if dtype.is_int and isinstance(value, int):
            lo, hi = dtype.int_range()
            if not lo <= value <= hi:
                raise self.error(f"the literal {value} does not fit {dtype.value} ({lo} .. {hi})", tok)
        return ir.Const(value, dtype)

    def atom(self, scope: Scope) -> ir.Expr:
        tok = self.peek()
        if tok.kind in (INT, FLOAT):
            return self.literal()
        if tok.is_op("("):
            self.advance()
            inner = self.expr(scope)
            self.expect_op(")", "to close the parenthesis")
            return inner
        if tok.is_op("["):
            raise self.error("a [list] can only be an op argument", tok)
        if tok.kind != NAME:
            raise self.error(f"expected an expression, got {tok.describe()}", tok)
        if tok.text in ("true", "false", "inf", "nan"):
            return self.literal()
        if self.peek(1).is_op("("):
            if tok.text in _FUNC_OPS:
                return self.function_op(scope)
            if "." in tok.text:
                return self.call(scope)
            if tok.text == "range":
                raise self.error("range(...) only appears in 'for NAME in range(...)'", tok)
            guess = suggest_op(tok.text)
            hint = f"; did you mean '{guess}'?" if guess else " (op names are dotted, like tile.load)"
            raise self.error(f"unknown function '{tok.text}'{hint}", tok)
        if tok.text in KEYWORDS:
            raise self.error(f"expected an expression, got the keyword '{tok.text}'", tok)
        if "." in tok.text:
            if tok.text in _OP_NAMES:
                raise self.error(f"op '{tok.text}' must be called: {tok.text}(...)", tok)
            raise self.error(f"unknown name '{tok.text}' (variable names contain no dots; op calls need "
                             "parentheses)", tok)
        self.advance()
        t = scope.names.get(tok.text)
        if t is None:
            why = scope.hidden.get(tok.text)
            if why is not None:
                raise self.error(f"'{tok.text}' is not defined here: {why}", tok)
            raise self.error(f"undefined variable '{tok.text}'{_did_you_mean(tok.text, set(scope.names))}",
                             tok)
        return ir.Var(tok.text, t)

    def function_op(self, scope: Scope) -> ir.Expr:
        """``min(a, b)``, ``max(a, b)``, ``tdiv(a, b)`` or ``trem(a, b)``."""
        fn = self.advance()
        open_tok = self.advance()  # (
        operands = self.comma_list(")", f"in {fn.text}(...)", lambda: self.expr(scope))
        if len(operands) != 2:
            raise self.error(f"{fn.text} takes exactly two arguments, got {len(operands)}", open_tok)
        return ir.BinOp(_FUNC_OPS[fn.text], operands[0], operands[1])

    def list_expr(self, scope: Scope) -> ir.ListExpr:
        self.advance()  # [
        return ir.ListExpr(tuple(self.comma_list("]", "in the list", lambda: self.expr(scope))))

    def call(self, scope: Scope) -> ir.Call:
        name_tok = self.advance()
        try:
            op = Op(name_tok.text)
        except ValueError:
            guess = suggest_op(name_tok.text)
            raise self.error(f"unknown op '{name_tok.text}'" + (f"; did you mean '{guess}'?" if guess else ""),
                             name_tok) from None
        sig = SIGNATURES[op]
        specs = {s.name: s for s in sig.attrs}
        self.advance()  # (
        args: list[ir.Arg] = []
        arg_toks: list[Token] = []
        attrs: dict[str, ir.AttrValue] = {}
        attr_toks: dict[str, Token] = {}

        def argument() -> None:
            tok = self.peek()
            if tok.kind == NAME and self.peek(1).is_op("="):
                spec = specs.get(tok.text)
                if spec is None:
                    known = ", ".join(specs) or "none"
                    raise self.error(f"{op.text} has no attribute '{tok.text}' (its attributes: {known})"
                                     f"{_did_you_mean(tok.text, set(specs))}", tok)
                if tok.text in attrs:
                    raise self.error(f"attribute '{tok.text}' given twice", tok)
                self.advance()
                self.advance()  # =
                attrs[tok.text] = self.attr_value(op, spec)
                attr_toks[tok.text] = tok
            else:
                if attrs:
                    raise self.error(f"positional argument after an attribute in {op.text}(...)", tok)
                arg_toks.append(tok)
                args.append(self.list_expr(scope) if tok.is_op("[") else self.expr(scope))

        self.comma_list(")", f"in the arguments of {op.text}", argument)
        for spec in sig.attrs:
            if spec.default is None and spec.name not in attrs:
                raise self.error(f"{op.text} needs the attribute {spec.name}=...", name_tok)
        try:
            return make_call(op, args, attrs)
        except IRTypeError as err:
            raise self.error(str(err), self._blame(err, sig.params, name_tok, arg_toks, attr_toks)) from err

    @staticmethod
    def _blame(err: IRTypeError, params: tuple[Param, ...], call_tok: Token, arg_toks: list[Token],
               attr_toks: dict[str, Token]) -> Token:
        """The token an IRTypeError is about: its argument, its attribute, or the op name."""
        if err.arg in attr_toks:
            return attr_toks[err.arg]
        names = [p.name for p in params]
        if err.arg in names and names.index(err.arg) < len(arg_toks):
            return arg_toks[names.index(err.arg)]
        if err.arg == "arguments" and len(arg_toks) > len(params):
            return arg_toks[len(params)]
        return call_tok

    def attr_value(self, op: Op, spec: AttrSpec) -> ir.AttrValue:
        what = f"attribute '{spec.name}' of {op.text}"
        kind = spec.kind
        if isinstance(kind, type) and issubclass(kind, enum.IntEnum):
            return self.enum_word(kind, what)
        tok = self.peek()
        if kind is DType:
            if tok.kind == STRING:
                self.advance()
                assert isinstance(tok.value, str)
                try:
                    return DType.parse(tok.value)
                except ValueError as err:
                    raise self.error(f"{what}: {err}", tok) from None
            return self.dtype()
        if kind is bool:
            if not tok.is_name("true", "false"):
                raise self.error(f"{what} must be true or false, got {tok.describe()}", tok)
            self.advance()
            return tok.text == "true"
        if kind is int:
            return self.int_literal(f"{what} (attributes are compile-time constants)")
        if kind is float:
            neg = self.peek().is_op("-")
            nxt = self.peek(1) if neg else tok
            if not (nxt.kind in (INT, FLOAT) or nxt.is_name("inf", "nan")):
                raise self.error(f"{what} must be a number literal, got {nxt.describe()}", nxt)
            if neg:
                self.advance()
            return float(self.literal(negate=neg).value)
        if kind is str:
            if tok.kind != STRING:
                raise self.error(f'{what} must be a "string", got {tok.describe()}', tok)
            self.advance()
            assert isinstance(tok.value, str)
            return tok.value
        raise self.error(f"{what} has an attribute kind the parser does not know: {kind!r}", tok)


def parse_program(text: str, filename: str = "<string>") -> ir.Program:
    """Parse the ``.pld`` text of one program. Raises :class:`ParseError` with the source position."""
    return _Parser(text, filename).program()


def parse_file(path: str | os.PathLike[str]) -> ir.Program:
    """Read and parse a ``.pld`` file (UTF-8); errors name the file."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    return parse_program(text, os.fspath(path))


__all__ = ["KEYWORDS", "ParseError", "parse_file", "parse_program", "suggest_op", "tokenize"]
