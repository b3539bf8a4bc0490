"""Reading a user's program from a file: .pld text or a Python builder file, with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pldemu.ir import format_program, parse_file
from pldemu.ir.source import SourceError, load_source

EXAMPLES = Path(__file__).resolve().parents[2] / "pldemu" / "examples"

BUILDER = '''
from pldemu.ir import ProgramBuilder

def build_program():
    pb = ProgramBuilder("tiny")
    sig = pb.signal("sig", [4, 1])
    fb = pb.function("main")
    fb.pld.tensor.barrier(sig)
    return pb.build()
'''


def test_the_python_example_builds_the_pld_example() -> None:
    built = format_program(load_source(EXAMPLES / "ring_demo.py"))
    assert built.replace("data_out = ", "out = ") == format_program(parse_file(EXAMPLES / "ring_demo.pld"))


def test_a_pld_file_is_parsed() -> None:
    assert load_source(EXAMPLES / "ring_demo.pld").name == "ring_demo"


def test_build_program_is_called_and_main_guard_skipped(tmp_path: Path) -> None:
    src = tmp_path / "p.py"
    src.write_text(BUILDER + "\nif __name__ == '__main__':\n    raise SystemExit('must not run')\n")
    assert load_source(src).name == "tiny"


@pytest.mark.parametrize("text, fragment", [
    ("x = 1\n", "defines neither `program`"),
    ("program = 42\n", "`program` is of type int, not a pldemu Program"),
    ("def build_program():\n    return 'p'\n", "build_program() returned a value of type str"),
    ("def build_program():\n    raise RuntimeError('boom')\n", "build_program() raised RuntimeError: boom"),
    ("a = 1\nb = 1 / 0\n", "(line 2): building the program raised ZeroDivisionError"),
    ("import sys\nsys.exit(3)\n", "called exit(3)"),
])
def test_python_file_errors_name_the_file(tmp_path: Path, text: str, fragment: str) -> None:
    src = tmp_path / "bad.py"
    src.write_text(text)
    with pytest.raises(SourceError) as err:
        load_source(src)
    assert str(src) in str(err.value) and fragment in str(err.value)


def test_missing_and_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        load_source(tmp_path / "nope.pld")
    bad = tmp_path / "bad.pld"
    bad.write_text("program p {\n  func main() {\n    x = nope(\n  }\n}\n")
    with pytest.raises(SourceError, match=r"bad\.pld:3"):
        load_source(bad)
