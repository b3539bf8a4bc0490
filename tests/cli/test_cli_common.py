"""The runtime-flag table (``pldemu.job.flags``): one definition of every runtime flag, forwarded faithfully."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from pldemu.cli import build_parser
from pldemu.harness import injob
from pldemu.job import exits, flags
from pldemu.runtime.options import RuntimeOptions

# A value other than the default for every runtime flag that takes one (switches are just given).
SET = {"--seed": "7", "--jitter": "12.5", "--straggler": "1:250", "--skew": "30", "--visibility": "deferred",
       "--fence-policy": "random", "--task-order": "fifo", "--cores": "3",
       "--windows": "rma", "--timeout": "4.5", "--trace": "t.json"}
POSITIONAL = {"run": ["x.pld"], "check": ["allreduce"], "stress": ["allreduce"], "demo": [], "bench": []}


def _flags(command: str) -> list[flags.RuntimeFlag]:
    return [f for f in flags.RUNTIME_FLAGS.values() if command in f.commands]


def _argv(command: str) -> list[str]:
    words = [command, *POSITIONAL[command]]
    for f in _flags(command):
        words += [f.option] if f.option not in SET else [f.option, SET[f.option]]
    return words


@pytest.mark.parametrize("command", sorted(POSITIONAL))
def test_every_flag_reaches_the_options_and_survives_forwarding(command: str) -> None:
    args = build_parser().parse_args(_argv(command))
    options = flags.runtime_options(args)
    forwarded = flags.runtime_argv(args)
    again = build_parser().parse_args([command, *POSITIONAL[command], *forwarded])
    assert flags.runtime_options(again) == options
    plain = flags.runtime_options(build_parser().parse_args([command, *POSITIONAL[command]]))
    for f in _flags(command):  # every flag changed its field from the command's default
        assert getattr(options, f.field) != getattr(plain, f.field), f.option


@pytest.mark.parametrize("command", sorted(POSITIONAL))
def test_defaults_forward_only_what_a_replay_names(command: str) -> None:
    args = build_parser().parse_args([command, *POSITIONAL[command]])
    forwarded = flags.runtime_argv(args)
    named = {w for w in forwarded if w.startswith("--")}
    assert named == {f.option for f in _flags(command) if f.always}
    assert flags.runtime_options(build_parser().parse_args([command, *POSITIONAL[command], *forwarded])) == \
        flags.runtime_options(args)


def test_a_replacement_value_is_forwarded_instead() -> None:
    args = build_parser().parse_args(["stress", "allreduce", "--seed", "3"])
    argv = flags.runtime_argv(args, seed=9)
    assert argv[argv.index("--seed") + 1] == "9"


def test_each_option_is_defined_once_and_every_field_exists() -> None:
    fields = {f.name for f in dataclasses.fields(RuntimeOptions)}
    assert len(flags.RUNTIME_FLAGS) == len({f.option for f in flags.RUNTIME_FLAGS.values()})
    assert {f.field for f in flags.RUNTIME_FLAGS.values()} <= fields


def test_a_value_runtime_options_refuses_is_a_usage_error() -> None:
    args = argparse.Namespace(timeout=-1.0)
    with pytest.raises(exits.UsageError, match="timeout"):
        flags.runtime_options(args)


def test_the_job_size_check_and_the_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    injob.check_job_size(None, 3)
    injob.check_job_size(3, 3)
    with pytest.raises(exits.UsageError, match="-n 4 but this MPI job has 3 ranks"):
        injob.check_job_size(4, 3)
    assert exits.usage_error("run", "bad") == exits.EXIT_USAGE == 2
    assert capsys.readouterr().err == "pldemu run: error: bad\n"
