"""Problems a static look at the job's rank count can see are refused before launch (issue 9, 13)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pldemu.ir import parse_program
from pldemu.job.precheck import PrecheckError, precheck, static_buffers
from pldemu.lowering import lower_composite_ops
from pldemu.runtime.options import RuntimeOptions


def program(buffers: str, body: str) -> str:
    return "program p {\n" + buffers + "\n  func main() {\n" + body + "\n  }\n}\n"


STORE = "    t = tile.full([1, 8], 1.0, dtype=fp32)\n    tile.store(t, [{row}, 0], x)"
CASES = {
    "store-out-of-bounds": ("  window x: fp32[2, 8]", STORE.format(row=5), 4,
                            "tile.store(t, [5, 0], x): region offsets [5, 0] shape [1, 8] leaves buffer x [2, 8]: "
                            "dim 0 covers [5, 6) outside [0, 2)"),
    "remote-load-out-of-bounds": ("  window x: fp32[2, 8]", "    t = pld.tile.remote_load(x, 1, [0, 4], [1, 8])", 4,
                                  "dim 1 covers [4, 12) outside [0, 8)"),
    "get-out-of-bounds": ("  window x: fp32[2, 8]\n  local d: fp32[2, 8]",
                          "    st = tile.create([1, 8], dtype=fp32, mem=Vec)\n"
                          "    pld.tile.get(d, 0, x, st, [0, 0], [1, 4], [1, 8])", 4,
                          "region offsets [1, 4] shape [1, 8] leaves buffer x [2, 8]: dim 1 covers [4, 12) outside [0, 8)"),
    "literal-peer": ("  signal s: int32[NR, 1]", "    pld.system.notify(s, 9, [0, 0], 1, op=AtomicAdd)", 4,
                     "peer 9 is not a rank of a 4-rank job (0..3)"),
    "zero-step": ("  signal s: int32[NR, 1]", "    for i in range(0, 10, 0) {\n      k = 1\n    }", 4,
                  "for i in range(0, 10, 0): the step must not be 0"),
    "negative-extent": ("  window x: fp32[1, -4]", "    k = 1", 4, "shape entry -4 is -4 with NR=4"),
    "nr-minus-2-at-1": ("  window x: fp32[1, NR - 2]", "    k = 1", 1, "shape entry NR - 2 is -1 with NR=1"),
    "division-by-zero": ("  window x: fp32[1, 16 // (NR - NR)]", "    k = 1", 4, "division or modulo by zero"),
    "broadcast-root": ("  window x: fp32[1, 64]\n  signal s: int32[NR, 1]", "    x = pld.tensor.broadcast(x, s, root=7)",
                       4, "argument 'root' must be a rank below the pinned NR = 4, got 7"),
    "fp16-atomic-put": ("  window x: fp16[1, 16]",
                        "    t = tile.full([1, 16], 1.0, dtype=fp16)\n    st = tile.create([1, 16], dtype=fp16, mem=Vec)\n"
                        "    pld.tile.put(x, 0, t, st, atomic=Add)", 2, "atomic=Add on a fp16 window"),
}


def without_origins(text: str) -> str:
    """A report with the statements' origins (`` [file:line]``) taken out."""
    return re.sub(r" \[[^\]\s]+:\d+\]", "", text)


def check(buffers: str, body: str, nranks: int, options: RuntimeOptions | None = None) -> None:
    source = parse_program(program(buffers, body))
    precheck(lower_composite_ops(source), nranks, options, source=source)


@pytest.mark.parametrize("case", list(CASES))
def test_refused(case: str):
    buffers, body, nranks, message = CASES[case]
    with pytest.raises(PrecheckError) as err:
        check(buffers, body, nranks)
    assert message in without_origins(str(err.value))


@pytest.mark.parametrize(
    ("buffers", "body", "nranks"),
    [
        ("  window x: fp32[2, 8]", STORE.format(row=1), 4),  # the last row: inside
        ("  signal s: int32[NR, 1]", "    pld.system.notify(s, 3, [0, 0], 1, op=AtomicAdd)", 4),
        ("  window x: fp32[2, 8]", "    t = tile.full([1, 8], 1.0, dtype=fp32)\n    me = pld.system.rank("
         "pld.system.get_comm_ctx(x))\n    tile.store(t, [me * 5, 0], x)", 4),  # run-time offset: the run decides
        ("  window x: fp32[1, NR - 2]", "    k = 1", 3),
        ("  window x: fp32[1, 64]\n  signal s: int32[NR, 1]", "    x = pld.tensor.broadcast(x, s, root=3)", 4),
    ],
    ids=["last-row", "peer-in-range", "runtime-offset", "nr-minus-2-at-3", "root-in-range"],
)
def test_accepted(buffers: str, body: str, nranks: int):
    check(buffers, body, nranks)


def test_straggler_beyond_the_job():
    with pytest.raises(PrecheckError, match=r"--straggler 9:...: the job has 4 ranks \(0..3\), no rank 9"):
        check("  window x: fp32[2, 8]", "    k = 1", 4, RuntimeOptions(straggler=(9, 100.0)))


def test_static_buffers_bind_nr():
    p = parse_program(program("  window x: fp32[2, NR * 4]\n  signal s: int32[NR, 1]", "    k = 1"))
    b = static_buffers(p, 3)
    assert b["x"].shape == (2, 12) and b["s"].shape == (3, 1)


@pytest.mark.launcher
@pytest.mark.parametrize("case", ["store-out-of-bounds", "get-out-of-bounds", "literal-peer", "broadcast-root", "nr-minus-2-at-1"])
def test_run_refuses_before_launch_in_one_message(tmp_path: Path, case: str):
    buffers, body, nranks, message = CASES[case]
    path = tmp_path / "p.pld"
    path.write_text(program(buffers, body))
    out = subprocess.run([sys.executable, "-m", "pldemu", "run", str(path), "-n", str(nranks)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    assert message in without_origins(out.stderr) and out.stderr.count("pldemu run: error:") == 1
    assert "MPI_Abort" not in out.stderr and out.stdout == ""


def test_a_refused_statement_names_its_line_of_the_users_file():
    with pytest.raises(PrecheckError) as err:
        check(*CASES["store-out-of-bounds"][:3])
    assert "tile.store(t, [5, 0], x) [<string>:5]: region offsets [5, 0]" in str(err.value)
