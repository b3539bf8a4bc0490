"""``pldemu lower``: before/after printing, summary lines, error handling (stderr, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pldemu.cli import main
from pldemu.collectives import CollectiveSpec, collective_program
from pldemu.ir import format_program, parse_program
from pldemu.lowering import lower_composite_ops


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse refused a flag's value (it prints "pldemu lower: error: ...")
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_collective_before_and_after(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "lower", "--collective", "allreduce", "--mode", "ring", "--dtype", "fp16",
                         "--size", "17", "--ranks", "4", "--reduce", "max")
    assert code == 0 and err == ""
    assert out.startswith("# before LowerCompositeOps\nprogram allreduce_ring nranks=4 {")
    assert "# after LowerCompositeOps" in out and "tile.maximum(left, own)" in out
    summary = [line for line in out.splitlines() if line.startswith("# pld.tensor")]
    assert len(summary) == 1
    line = summary[0]
    assert "[op=Max mode=ring lanes=1]" in line and "pld.tile.put x2" in line and "stage [1, 32]" in line
    assert "barriers/cell 2 on each of 2 * (NR - 1) (= 6 at NR=4) rows" in line and "chunks 1" in line


def test_after_only_is_parseable(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lower", "--collective", "all_to_all_v", "--size", "16", "--max-recv", "2",
                       "--after-only")
    assert code == 0 and "# before" not in out
    program = parse_program(out)  # the summary lines are comments
    want = lower_composite_ops(collective_program(CollectiveSpec("all_to_all_v", size=16, max_recv=2)).program)
    assert format_program(program) == format_program(want)


def test_program_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "p.pld"
    src.write_text(format_program(collective_program(CollectiveSpec("barrier")).program))
    code, out, _ = run(capsys, "lower", str(src), "--ranks", "3")
    assert code == 0
    assert "program barrier nranks=3 {" in out and "# pld.tensor.barrier at func main > stmt 1" in out


def test_program_without_collectives(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "p.pld"
    src.write_text("program p {\n  signal s: int32[NR, 1]\n\n  func main() {\n  }\n}\n")
    code, out, _ = run(capsys, "lower", str(src), "--after-only")
    assert code == 0 and out.endswith("# no collectives: the program is unchanged\n")


@pytest.mark.parametrize("argv,fragment", [
    (["--collective", "allgather", "--size", "7"], "one alignment unit"),
    (["--collective", "broadcast", "--root", "4", "--ranks", "4"], "below the pinned NR = 4"),
    (["--collective", "barrier", "--root", "1"], "--root applies to broadcast, not barrier"),
    (["--collective", "allreduce", "--dtype", "int32"], "FP16 or FP32, got INT32"),
    (["--collective", "allreduce", "--dtype", "fp64"], "invalid choice: 'fp64'"),
    (["--collective", "allreduce", "--size", "0"], "expected a positive integer, got '0'"),
    (["/nonexistent/x.pld"], "/nonexistent/x.pld: no such file"),
    ([], "give either PROGRAM (.pld or .py) or --collective NAME"),
])
def test_errors_exit_2_without_traceback(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    code, out, err = run(capsys, "lower", *argv)
    assert code == 2 and out == ""
    assert "pldemu lower: error: " in err and fragment in err and "Traceback" not in err


def test_parse_error_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    src = tmp_path / "bad.pld"
    src.write_text("program p {\n  func main() {\n    x = nope(\n  }\n}\n")
    code, _, err = run(capsys, "lower", str(src))
    assert code == 2 and "bad.pld" in err


def test_fences_runs_insert_comm_fence_last(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lower", "--collective", "allgather", "--size", "16", "--fences")
    head = "# after LowerCompositeOps and InsertCommFence, with the toolchain's drains\n"
    assert code == 0 and head in out
    after = out.split(head, 1)[1]
    assert "system.fence()" in after and "system.cacheinvalid()" in after
    code, plain, _ = run(capsys, "lower", "--collective", "allgather", "--size", "16")
    assert "system." not in plain.replace("pld.system.", "")


def test_fences_shows_both_kinds_of_marker_with_where_each_came_from(capsys: pytest.CaptureFixture[str]) -> None:
    """Every marker line of ``lower --fences`` names the pass that placed it and the user's line: the
    fence after the put (InsertCommFence) and the drain before each notify (PTOAS's own, PTOAS#718)."""
    litmus = Path(__file__).resolve().parents[1] / "races" / "fences" / "mp.pld"
    code, out, _ = run(capsys, "lower", str(litmus), "--fences", "--after-only")
    lines = [line.strip() for line in out.splitlines()]
    assert code == 0
    assert "system.fence()  # mp.pld:14, placed by InsertCommFence" in lines
    assert "system.bar_all()  # mp.pld:15, placed by PTOAS (its drain before tnotify, PTOAS#718)" in lines
    assert "system.cacheinvalid()  # mp.pld:18, placed by InsertCommFence" in lines
    drains = [i for i, line in enumerate(lines) if line.startswith("system.bar_all()")]
    assert len(drains) == 2 and all(lines[i + 1].startswith("pld.system.notify") for i in drains)
    marked = [line for line in lines if line.startswith("system.")]
    assert all("placed by" in line for line in marked), marked
