"""Text form: every corpus program round-trips; syntax errors are located at file:line:col."""

from __future__ import annotations

import pytest
from neuron_helpers import CORPUS_FILES

from pldemu.ir.parser import ParseError
from pldemu.neuron.eliminate_casts import NeuronEliminateCasts
from pldemu.neuron.text import format_function, parse_file, parse_function


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.stem)
def test_corpus_round_trips_before_and_after_the_pass(path) -> None:  # type: ignore[no-untyped-def]
    f = parse_file(path)
    text = format_function(f)
    assert parse_function(text) == f
    assert format_function(parse_function(text)) == text
    after = NeuronEliminateCasts().transformStmts(f).after
    assert parse_function(format_function(after)) == after


HEAD = "kernel k\nsbuf t[4, 4] fp32\n"


@pytest.mark.parametrize("line, col, fragment", [
    ("%c = TensorCopy(%p) dtype=fp32", 6, "unknown instruction 'TensorCopy'"),
    ("%c = TensorCopyOp(t[[4,4],[1,4]]+0:fp31) dtype=fp32", 36, "unknown dtype 'fp31'"),
    ("%c = TensorCopyOp(t[[4,4],[1,4]]+0:fp32)", 41, "missing dtype="),
    ("%c = TensorCopyOp(t[[4,4],[1,4]]+0:fp32) dtype=fp32 colour=red", 53, "unknown attribute 'colour'"),
    ("%c = TensorCopyOp(t[[4,4],[1,4]]0:fp32) dtype=fp32", 33, "expected '+'"),
    ("%c = TensorCopyOp(t[[4,4],[1,4]]+0:fp32) dtype=fp32 dtype=bf16", 53, "given twice"),
    ("tile u[4, 4] fp32", 1, "unknown statement"),
])
def test_parse_errors_are_located(line: str, col: int, fragment: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_function(HEAD + line + "\n", "bad.nki")
    assert (info.value.line, info.value.col) == (3, col)
    assert str(info.value).startswith(f"bad.nki:3:{col}: ") and fragment in str(info.value)


def test_duplicate_names_and_missing_kernel() -> None:
    with pytest.raises(ParseError, match=r"bad\.nki:4:1: %c is defined twice"):
        parse_function(HEAD + "%c = TensorCopyOp(t[[4,4],[1,4]]+0:fp32) dtype=bf16\n" * 2, "bad.nki")
    with pytest.raises(ParseError, match="missing 'kernel NAME'"):
        parse_function("sbuf t[4, 4] fp32\n", "bad.nki")
