"""``pldemu check`` argument validation on the launching process: exit 2 with a message, no traceback,
and no MPI job started.  Plus the plan (which cases a command line runs) and the child command line."""

from __future__ import annotations

import argparse

import pytest

from pldemu.cli import build_parser, main
from pldemu.cli.commands import check as cli_check
from pldemu.ir import AllreduceMode, DType, ReduceOp


@pytest.fixture(autouse=True)
def _never_spawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation must fail before any job is launched; a spawn here is a test failure."""
    import pldemu.job.launch as launch

    def fail(*args: object, **kwargs: object) -> int:
        raise AssertionError(f"spawn called: {args}")

    monkeypatch.setattr(launch, "spawn", fail)
    monkeypatch.setattr(launch, "in_mpi_job", lambda: False)


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["check", *argv])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["allscatter"], "invalid choice"),
        (["allreduce", "--size", "0"], "positive integer"),
        (["allreduce", "--size", "x"], "positive integer"),
        (["allreduce", "--shape", "2x"], "RxC"),
        (["allreduce", "--size", "4", "--shape", "2x2"], "not allowed with"),
        (["allreduce", "--mode", "tree"], "invalid choice"),
        (["allreduce", "--dtype", "bf16"], "invalid choice"),
        (["allreduce", "--reduce", "avg"], "invalid choice"),
        (["allreduce", "-n", "0"], "positive integer"),
        (["allreduce", "--iters", "0"], "positive integer"),
        (["allreduce", "--timeout", "0"], "positive number"),
        (["broadcast", "--root", "-1"], "integer >= 0"),
        (["allreduce", "--windows", "nvlink"], "invalid choice"),
    ],
)
def test_argparse_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["allgather", "--mode", "ring"], "--mode applies to allreduce"),
        (["allgather", "--reduce", "max"], "--reduce applies to allreduce and reduce_scatter"),
        (["allreduce", "--root", "1"], "--root applies to broadcast"),
        (["allreduce", "--max-recv", "2"], "--max-recv applies to all_to_all_v"),
        (["reduce_scatter", "--shape", "2x8"], "--shape applies to allreduce and broadcast"),
        (["broadcast", "--valid-shape", "1x8"], "--valid-shape applies to allreduce"),
        (["broadcast", "--root", "4", "-n", "4"], "--root 4 is not a rank of 4"),
        (["allreduce", "--shape", "2x8", "--valid-shape", "3x8"], "must fit the target shape"),
        (["allreduce", "--size", "8", "--valid-shape", "1x9"], "must fit the target shape"),
        (["allreduce", "--shape", "2x2x2"], "2-D"),
        (["allgather", "--size", "1", "--dtype", "fp16"], "alignment unit"),
        (["all_to_all_v", "--size", "4"], "alignment unit"),
        (["allreduce", "--dtype", "fp16", "-n", "200"], "exact for at most 135 ranks"),
    ],
)
def test_semantic_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pldemu check: error: ")
    assert message in err
    assert "Traceback" not in err


def test_help_explains_the_consume_fence(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "consume fence" in out and "pypto #2175" in out and "cells!=0" in out


def test_plan_single_and_all() -> None:
    one = cli_check.plan(_args("allreduce", "--mode", "ring", "--dtype", "fp16", "--reduce", "prod"), 4)
    assert [p.kwargs() for p in one] == [
        {
            "name": "allreduce",
            "dtype": DType.FP16,
            "size": cli_check.DEFAULT_SIZE,
            "nranks": 4,
            "mode": AllreduceMode.ring,
            "reduce": ReduceOp.Prod,
        }
    ]
    roots = cli_check.plan(_args("broadcast", "--root", "all", "--size", "64"), 3)
    assert [p.kwargs()["root"] for p in roots] == [0, 1, 2]
    everything = cli_check.plan(_args("all", "--size", "64"), 2)
    labels = [(p.kwargs()["name"], p.kwargs().get("mode")) for p in everything]
    assert labels == [
        ("allreduce", AllreduceMode.mesh),
        ("allreduce", AllreduceMode.ring),
        ("allgather", None),
        ("reduce_scatter", None),
        ("broadcast", None),
        ("barrier", None),
        ("all_to_all", None),
        ("all_to_all_v", None),
    ]
    shape = cli_check.plan(_args("allreduce", "--shape", "4x16", "--valid-shape", "2x8"), 2)[0].kwargs()
    assert shape["shape"] == (4, 16) and shape["valid_shape"] == (2, 8)


def test_validate_builds_and_lowers() -> None:
    cases = cli_check.validate(_args("all", "--size", "64", "--root", "all"), 3)
    assert len(cases) == 2 + 1 + 1 + 3 + 1 + 1 + 1


def test_child_argv_round_trips() -> None:
    args = _args(
        "allreduce",
        "--mode",
        "ring",
        "--dtype",
        "fp16",
        "--shape",
        "2x64",
        "--valid-shape",
        "1x64",
        "--reduce",
        "max",
        "--iters",
        "7",
        "--block",
        "2",
        "--windows",
        "rma",
        "--seed",
        "5",
        "--timeout",
        "12.5",
        "--stage-pieces",
        "--jitter",
        "40",
        "--straggler",
        "2:300",
        "--skew",
        "75",
        "--visibility",
        "deferred",
        "-n",
        "3",
    )
    again = build_parser().parse_args(cli_check.child_argv(args))
    for key in vars(args):
        if not key.startswith("_"):
            assert getattr(again, key) == getattr(args, key), key
