"""The argument types and collective flags every subcommand shares: one spelling accepted everywhere,
the same refusal everywhere (argparse exit 2 before any MPI job)."""

from __future__ import annotations

import argparse

import pytest

from pldemu.cli import build_parser
from pldemu.cli.args import APPLIES_TO, check_applies, flag, given
from pldemu.job import argtypes


@pytest.mark.parametrize("fn, text, value", [
    (argtypes.positive_int, "3", 3), (argtypes.nonneg_int, "0", 0), (argtypes.any_int, "-4", -4),
    (argtypes.positive_float, "0.5", 0.5), (argtypes.microseconds, "0", 0.0),
    (argtypes.straggler, "2:150", (2, 150.0)), (argtypes.dims, "4x16", (4, 16)), (argtypes.dims, "7", (7,)),
])
def test_accepted(fn, text: str, value: object) -> None:  # type: ignore[no-untyped-def]
    assert fn(text) == value


@pytest.mark.parametrize("fn, text, fragment", [
    (argtypes.positive_int, "0", "a positive integer"), (argtypes.positive_int, "x", "a positive integer"),
    (argtypes.nonneg_int, "-1", "an integer >= 0"), (argtypes.any_int, "1.5", "an integer"),
    (argtypes.positive_float, "0", "a positive number"), (argtypes.positive_float, "nan", "a positive number"),
    (argtypes.positive_float, "inf", "a positive number"), (argtypes.microseconds, "-1", "microseconds >= 0"),
    (argtypes.straggler, "1", "R:US"), (argtypes.straggler, "1:0", "US > 0"), (argtypes.straggler, "-1:5", "R >= 0"),
    (argtypes.dims, "4x0", "positive integers"), (argtypes.dims, "axb", "positive integers"),
])
def test_refused(fn, text: str, fragment: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(argparse.ArgumentTypeError, match=fragment):
        fn(text)


def test_format_dims_inverts_dims() -> None:
    assert argtypes.format_dims(argtypes.dims("3x5x7")) == "3x5x7"


@pytest.mark.parametrize("command", [["lower", "--collective", "allreduce"], ["check", "allreduce"]])
def test_lower_and_check_parse_the_same_call_flags(command: list[str]) -> None:
    args = build_parser().parse_args([*command, "--mode", "ring", "--dtype", "fp16", "--size", "17", "--reduce", "max",
                                      "--valid-shape", "1x9", "--max-recv", "3", "--root", "2"])
    assert (args.mode, args.dtype, args.size, args.reduce, args.valid_shape, args.max_recv, args.root) == (
        "ring", "fp16", 17, "max", (1, 9), 3, 2)
    assert given(args) == ["mode", "size", "valid_shape", "reduce", "root", "max_recv"]


def test_a_flag_that_does_not_apply_is_named_with_where_it_applies() -> None:
    args = build_parser().parse_args(["check", "barrier", "--root", "1"])
    with pytest.raises(ValueError, match="--root applies to broadcast, not barrier"):
        check_applies("barrier", args)
    check_applies("broadcast", args)
    assert flag("max_recv") == "--max-recv" and set(APPLIES_TO) <= {"mode", "reduce", "root", "max_recv", "shape",
                                                                    "valid_shape"}
