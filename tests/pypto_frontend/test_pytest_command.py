"""``pldemu pytest``: every argument reaches pytest verbatim, the layer is on, exit codes are pldemu's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pldemu.cli import build_parser, parse_command_line
from pldemu.cli.commands.pytest_run import pytest_argv


def pldemu_pytest(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pldemu", "pytest", "-p", "no:cacheprovider", *args], cwd=where,
                          capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def test_arguments_go_to_pytest_verbatim() -> None:
    words = ["pytest", "-k", "a or b", "-q", "--device", "0-1", "--pldemu-jitter", "50", "-h", "tests/x"]
    args = parse_command_line(build_parser(), words)
    assert args.command == "pytest" and args.pytest_args == words[1:]
    assert pytest_argv(args) == ["-p", "pldemu.pypto", *words[1:]]
    other = parse_command_line(build_parser(), ["mutants"])
    assert other.command == "mutants" and not hasattr(other, "pytest_args")


@pytest.mark.parametrize(("body", "args", "code"), [
    ("import pypto\nimport torch\n\ndef test_ok(device_ids):\n    assert len(device_ids) == 2\n",
     ("--device", "0-1", "-k", "ok or nothing"), 0),
    ("def test_bad():\n    assert False\n", (), 1),
    ("def helper():\n    pass\n", (), 2),  # no test collected
    ("def test_ok():\n    pass\n", ("--no-such-option",), 2),
])
def test_exit_codes(tmp_path: Path, body: str, args: tuple[str, ...], code: int) -> None:
    (tmp_path / "test_case.py").write_text(body)
    res = pldemu_pytest(tmp_path, *args, "test_case.py")
    assert res.returncode == code, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"


def test_help_is_pytests_with_the_layers_options(tmp_path: Path) -> None:
    res = pldemu_pytest(tmp_path, "--help")
    assert res.returncode == 0
    for option in ("--device=IDS", "--codegen-only", "--pldemu-jitter", "--no-pldemu-races", "--confcutdir"):
        assert option in res.stdout, option


def test_a_signal_ends_the_session(tmp_path: Path) -> None:
    (tmp_path / "test_case.py").write_text(
        "import os, signal, time\n\n"
        "def test_first():\n    os.kill(os.getpid(), signal.SIGTERM)\n    time.sleep(5)\n\n"
        "def test_second():\n    open('second-ran', 'w').close()\n")
    res = pldemu_pytest(tmp_path, "test_case.py")
    assert res.returncode == 128 + 15, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert "interrupted by SIGTERM" in res.stdout + res.stderr and not (tmp_path / "second-ran").exists()
