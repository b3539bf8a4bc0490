"""One-line messages for bad input, before any job (issue 9 items 7, 12, 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import pldemu

EXAMPLE = Path(__file__).resolve().parents[2] / "pldemu" / "examples" / "sum_inputs.pld"


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    path = tmp_path / "ar.pld"
    path.write_text(EXAMPLE.read_text())
    return path


def test_usage_errors_are_one_line():
    out = pldemu("run")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "pldemu run: error: the following arguments are required: program (see pldemu run --help)"]
    out = pldemu("run", "x.pld", "--jitter", "abc")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "usage:" not in out.stderr


@pytest.mark.parametrize(
    ("target", "message"),
    [("dir", "is a directory, not a program file"), ("/dev/stdin", "not a regular file (a pipe or device)"),
     ("missing.pld", "no such file")],
)
def test_program_that_is_not_a_file(tmp_path: Path, target: str, message: str):
    path = str(tmp_path) if target == "dir" else target if target.startswith("/") else str(tmp_path / target)
    out = pldemu("run", path, "-n", "2")
    assert out.returncode == 2 and message in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--dump", "{file}", "exists and is not a directory"),
        ("--dump", "{file}/sub", "is a file, not a directory"),
        ("--trace", "{dir}", "is a directory; give a file name"),
        ("--trace", "{file}/t.json", "is a file, not a directory"),
        ("--report", "/proc/pldemu-report.json", "cannot write in /proc"),
    ],
    ids=["dump-on-file", "dump-under-file", "trace-on-dir", "trace-under-file", "report-unwritable"],
)
def test_unwritable_outputs_refused_before_the_job(tmp_path: Path, prog: Path, flag: str, value: str, message: str):
    afile = tmp_path / "afile"
    afile.write_text("")
    path = value.format(file=afile, dir=tmp_path)
    out = pldemu("run", str(prog), "-n", "2", flag, path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and out.stdout == "" and "Traceback" not in out.stderr
    assert not list(tmp_path.glob("*.tmp*"))


def test_trace_plot_without_matplotlib_says_what_to_install(tmp_path: Path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from pldemu.cli import main\n"
            f"sys.exit(main(['trace-plot', {str(tmp_path / 't.json')!r}, '-o', {str(tmp_path / 't.png')!r}]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and "pip install 'pldemu[plot]'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


OOB = """\
program oob {
  window x: fp32[2, 8]
  func main() {
    t = tile.full([1, 8], 1.0, dtype=fp32)
    tile.store(t, [5, 0], x)
  }
}
"""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "allreduce", "--size", "268435456", "-n", "4"], "the job needs about 64.5 GiB"),
        (["check", "allreduce", "-n", "4", "--straggler", "9:100"], "no rank 9"),
        (["check", "allreduce", "-n", "4", "--trace", "{dir}"], "is a directory; give a file name"),
        (["stress", "allreduce", "--size", "268435456", "-n", "4"], "the job needs about 64.5 GiB"),
        (["stress", "allreduce", "-n", "4", "--straggler", "9:100"], "no rank 9"),
        (["stress", "{oob}", "-n", "2"], "dim 0 covers [5, 6) outside [0, 2)"),
        (["run", "{ok}", "-n", "1000"], "the job needs about 117.2 GiB (1000 ranks"),
        (["bench", "signals", "--json", "{dir}"], "is a directory; give a file name"),
    ],
    ids=["check-memory", "check-straggler", "check-trace", "stress-memory", "stress-straggler", "stress-oob",
         "run-1000-ranks", "bench-json"],
)
def test_every_launcher_refuses_before_the_job(tmp_path: Path, argv: list[str], message: str):
    oob = tmp_path / "oob.pld"
    oob.write_text(OOB)
    out = pldemu(*(a.format(dir=tmp_path, oob=oob, ok=EXAMPLE) for a in argv))
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
