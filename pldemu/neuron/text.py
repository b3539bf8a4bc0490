"""The text form of a Neuron kernel: :func:`parse_function` and its inverse :func:`format_function`.

One statement per line, ``#`` starts a comment::

    kernel canonical
    hbm  x[128, 64] fp32 input          # MEMORY NAME[PARTITIONS, FREE] DTYPE FLAG...
    sbuf xs[128, 64] fp32
    %ld = DMACopy(x[[64,128],[1,64]]+0:fp32) dst=xs[[64,128],[1,64]]+0:fp32 dtype=fp32
    %p = ActivationOp(xs[[64,128],[1,64]]+0:fp32) func=tanh dtype=bf16 canMutateDstTy
    %c = TensorCopyOp(%p) dtype=fp32 trips=4

An operand is ``%name`` (a producer's result) or an access pattern ``TENSOR[[step,num],...]+OFFSET:DTYPE``.
Attributes: ``dtype=`` (required), ``dst=AP``, ``func=NAME``, ``scalar=NUMBER``, ``trips=N``, and the flags
``acc`` and ``canMutateDstTy``. ``parse_function(format_function(f)) == f``. Every syntax problem is a
:class:`~pldemu.ir.parser.ParseError` at ``file:line:col``; meaning (shapes, dtypes, bounds) is the verifier's.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pldemu.ir.parser import ParseError
from pldemu.neuron.dtypes import NDType
from pldemu.neuron.ir import AP, Function, Inst, Kind, Memory, Operand, Tensor, TensorFlag, ValueRef

_TOKEN = re.compile(r"\s*(?:(%[A-Za-z_]\w*)|([A-Za-z_]\w*)|(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|-?inf|nan)|(\S))")
E = TypeVar("E", bound=enum.Enum)
_FLAGS = ("acc", "canMutateDstTy")
_VALUED = ("dtype", "dst", "func", "scalar", "trips")


@dataclass(frozen=True)
class _Tok:
    text: str
    col: int


class _Line:
    """A cursor over the tokens of one source line."""

    def __init__(self, text: str, lineno: int, filename: str) -> None:
        self.text, self.lineno, self.filename = text, lineno, filename
        self.toks = [_Tok(m.group().strip(), m.start() + len(m.group()) - len(m.group().lstrip()) + 1)
                     for m in _TOKEN.finditer(text.split("#", 1)[0]) if m.group().strip()]
        self.pos = 0

    def error(self, message: str, tok: _Tok | None = None) -> ParseError:
        col = tok.col if tok else (self.toks[self.pos].col if self.pos < len(self.toks) else len(self.text.rstrip()) + 1)
        return ParseError(message, self.filename, self.lineno, col, self.text, len(tok.text) if tok else 1)

    def peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def next(self, what: str) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.error(f"expected {what}, got end of line")
        self.pos += 1
        return tok

    def expect(self, text: str) -> _Tok:
        tok = self.next(repr(text))
        if tok.text != text:
            raise self.error(f"expected {text!r}, got {tok.text!r}", tok)
        return tok

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.text == text:
            self.pos += 1
            return True
        return False

    def int_(self, what: str) -> int:
        tok = self.next(what)
        try:
            return int(tok.text)
        except ValueError:
            raise self.error(f"expected {what} (an integer), got {tok.text!r}", tok) from None

    def ident(self, what: str) -> _Tok:
        tok = self.next(what)
        if not re.fullmatch(r"[A-Za-z_]\w*", tok.text):
            raise self.error(f"expected {what}, got {tok.text!r}", tok)
        return tok

    def enum(self, cls: type[E], what: str) -> E:
        tok = self.ident(what)
        try:
            return cls(tok.text)
        except ValueError:
            names = ", ".join(str(m.value) for m in cls)
            raise self.error(f"unknown {what} {tok.text!r}; expected one of {names}", tok) from None

    def end(self) -> None:
        tok = self.peek()
        if tok is not None:
            raise self.error(f"unexpected {tok.text!r}", tok)


def _tensor(line: _Line, memory: Memory) -> Tensor:
    name = line.ident("a tensor name").text
    line.expect("[")
    p = line.int_("the partition count")
    line.expect(",")
    free = line.int_("the free size")
    line.expect("]")
    dtype = line.enum(NDType, "dtype")
    flags = []
    while line.peek() is not None:
        flags.append(line.enum(TensorFlag, "tensor flag"))
    return Tensor(name, memory, (p, free), dtype, frozenset(flags), line=line.lineno)


def _ap(line: _Line, tensor: str) -> AP:
    line.expect("[")
    pairs = []
    while True:
        line.expect("[")
        step = line.int_("a step")
        line.expect(",")
        num = line.int_("a count")
        line.expect("]")
        pairs.append((step, num))
        if not line.accept(","):
            break
    line.expect("]")
    line.expect("+")
    offset = line.int_("an offset")
    line.expect(":")
    return AP(tensor, tuple(pairs), offset, line.enum(NDType, "dtype"))


def _operand(line: _Line) -> Operand:
    tok = line.next("an operand (%value or an access pattern)")
    if tok.text.startswith("%"):
        return ValueRef(tok.text[1:])
    if not re.fullmatch(r"[A-Za-z_]\w*", tok.text):
        raise line.error(f"expected an operand (%value or TENSOR[[step,num],...]+OFFSET:DTYPE), got {tok.text!r}", tok)
    return _ap(line, tok.text)


def _attr_value(line: _Line, key: str, tok: _Tok) -> object:
    if key == "dtype":
        return line.enum(NDType, "dtype")
    if key == "dst":
        return _ap(line, line.ident("a tensor name").text)
    if key == "func":
        return line.ident("a function name").text
    if key == "trips":
        return line.int_("a trip count")
    num = line.next("a number")
    try:
        return float(num.text)
    except ValueError:
        raise line.error(f"expected a number, got {num.text!r}", num) from None


def _inst(line: _Line) -> Inst:
    name = line.next("%name").text[1:]
    line.expect("=")
    kind = line.enum(Kind, "instruction")
    line.expect("(")
    srcs = [_operand(line)]
    while line.accept(","):
        srcs.append(_operand(line))
    line.expect(")")
    attrs: dict[str, object] = {}
    while (tok := line.peek()) is not None:
        key = line.ident("an attribute").text
        if key in attrs:
            raise line.error(f"attribute {key!r} given twice", tok)
        if key in _FLAGS:
            attrs[key] = True
        elif key in _VALUED:
            line.expect("=")
            attrs[key] = _attr_value(line, key, tok)
        else:
            raise line.error(f"unknown attribute {key!r}; expected one of {', '.join(_VALUED + _FLAGS)}", tok)
    if "dtype" not in attrs:
        raise line.error("missing dtype=DTYPE (the destination dtype)")
    return Inst(name, kind, tuple(srcs), line=line.lineno, **attrs)  # type: ignore[arg-type]


def parse_function(text: str, filename: str = "<text>") -> Function:
    """The kernel in ``text`` (ParseError at ``filename:line:col`` on a syntax problem or a reused name)."""
    name: str | None = None
    tensors: list[Tensor] = []
    insts: list[Inst] = []
    seen: set[str] = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _Line(raw, lineno, filename)
        head = line.peek()
        if head is None:
            continue
        if head.text.startswith("%"):
            inst = _inst(line)
            if inst.name in seen:
                raise line.error(f"%{inst.name} is defined twice", head)
            seen.add(inst.name)
            insts.append(inst)
        elif head.text == "kernel":
            line.next("kernel")
            if name is not None:
                raise line.error("a second 'kernel' line", head)
            name = line.ident("the kernel name").text
        else:
            memory = line.enum(Memory, "statement (kernel, sbuf, psum, hbm or %name = ...)")
            tensor = _tensor(line, memory)
            if tensor.name in {t.name for t in tensors}:
                raise line.error(f"tensor {tensor.name!r} is declared twice", line.toks[1])
            tensors.append(tensor)
        line.end()
    if name is None:
        raise ParseError("missing 'kernel NAME' line", filename, 1, 1)
    return Function(name, tuple(tensors), tuple(insts))


def parse_file(path: str | Path) -> Function:
    """The kernel in the file ``path``."""
    return parse_function(Path(path).read_text(encoding="utf-8"), str(path))


def format_ap(ap: AP) -> str:
    pattern = ",".join(f"[{step},{num}]" for step, num in ap.pattern)
    return f"{ap.tensor}[{pattern}]+{ap.offset}:{ap.dtype.value}"


def format_operand(op: Operand) -> str:
    return f"%{op.name}" if isinstance(op, ValueRef) else format_ap(op)


def format_inst(inst: Inst) -> str:
    parts = [f"%{inst.name} = {inst.kind.value}({', '.join(format_operand(s) for s in inst.srcs)})"]
    if inst.dst is not None:
        parts.append(f"dst={format_ap(inst.dst)}")
    if inst.func is not None:
        parts.append(f"func={inst.func}")
    if inst.scalar is not None:
        parts.append(f"scalar={inst.scalar!r}")
    parts.append(f"dtype={inst.dtype.value}")
    parts += [flag for flag in _FLAGS if getattr(inst, flag)]
    if inst.trips != 1:
        parts.append(f"trips={inst.trips}")
    return " ".join(parts)


def format_tensor(t: Tensor) -> str:
    flags = "".join(f" {f.value}" for f in TensorFlag if f in t.flags)
    return f"{t.memory.value} {t.name}[{t.shape[0]}, {t.shape[1]}] {t.dtype.value}{flags}"


def format_function(f: Function) -> str:
    """The text form of ``f`` (parses back to an equal Function)."""
    lines = [f"kernel {f.name}", ""] + [format_tensor(t) for t in f.tensors] + [""]
    lines += [format_inst(i) for i in f.insts]
    return "\n".join(lines) + "\n"


__all__ = ["ParseError", "format_function", "format_inst", "format_operand", "parse_file", "parse_function"]
