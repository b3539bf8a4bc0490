"""Start-up: a command imports only its own subcommand module, and ``pldemu --help`` none of them
(nor numpy nor ml_dtypes), so that a job's launcher and its ranks pay for what they run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pldemu.cli import SUBCOMMANDS, build_parser

PROBE = """\
import contextlib, io, sys
from pldemu.cli import main
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(" ".join(sorted(m for m in sys.modules if m.startswith(("pldemu.cli.", "numpy", "ml_dtypes")))))
"""


def _imported(*argv: str) -> set[str]:
    res = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120,
                         check=True, stdin=subprocess.DEVNULL)
    return set(res.stdout.split())


def test_help_imports_no_subcommand_nor_numpy() -> None:
    loaded = _imported("--help")
    assert not loaded & {module for module, _ in SUBCOMMANDS.values()}
    assert not any(m.startswith(("numpy", "ml_dtypes")) for m in loaded), loaded


@pytest.mark.parametrize("command", ["mutants", "lower"])
def test_a_command_imports_its_module_only(command: str) -> None:
    loaded = _imported(command, "--help")
    others = {module for name, (module, _) in SUBCOMMANDS.items() if name != command}
    assert SUBCOMMANDS[command][0] in loaded
    assert not loaded & others, loaded & others


def test_the_top_level_help_still_lists_every_command() -> None:
    text = build_parser([]).format_help()
    assert all(name in text for name in SUBCOMMANDS)


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_commands_help_is_formatted(command: str) -> None:
    # argparse formats a help text with %: a stray % in one flag's help breaks `--help` of every command with it
    text = build_parser([command])._subparsers._group_actions[0].choices[command].format_help()  # type: ignore[union-attr]
    assert "usage:" in text
