"""``pldemu.launch``: inputs in, buffers and reports out, typed failures, no MPI in the caller."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from library_helpers import ALLREDUCE_PLD, SHAPE, rank_data, summed, write_program

import pldemu
from pldemu.ir import parse_program
from pldemu.job.flags import options_argv

pytestmark = pytest.mark.launcher

PROGRAM = parse_program(ALLREDUCE_PLD)

DEADLOCK_PLD = """\
program dl {
  signal sig: int32[NR, 1]
  func main() {
    ctx = pld.system.get_comm_ctx(sig)
    me = pld.system.rank(ctx)
    pld.system.wait(sig, [me, 0], 1:int32, cmp=Ge)
  }
}
"""


@pytest.mark.parametrize(
    "inputs",
    [
        {"x": rank_data},
        {"x": [rank_data(r) for r in range(3)]},
        [{"x": rank_data(r)} for r in range(3)],
        lambda r: {"x": rank_data(r)},
    ],
    ids=["function-per-buffer", "list-per-buffer", "list-of-dicts", "function-of-rank"],
)
def test_inputs_every_form_and_buffers_back(inputs):
    result = pldemu.launch(PROGRAM, 3, inputs=inputs, timeout=120)
    assert result.ok and result.exit_code == 0 and len(result.buffers) == 3
    for r in range(3):
        np.testing.assert_array_equal(result.buffers[r]["x"], summed(3))
        assert result.buffers[r]["sig"].sum() == 0 and result.buffers[r]["y"].shape == (1, 3)
    assert result.ops["pld.system.wait"] > 0 and len(result.seconds) == 3
    assert "pld.tile.remote_load" in result.program_text
    result.expect({"x": summed(3)})


def test_same_array_for_every_rank_from_a_file(tmp_path: Path):
    result = pldemu.launch(write_program(tmp_path), 2, inputs={"x": np.ones(SHAPE, np.float32)}, timeout=120)
    result.expect({"x": np.full(SHAPE, 2, np.float32)})
    with pytest.raises(AssertionError, match=r"rank 0 x: #wrong 128/128, first at \[0, 0\]: got 2.0, expected 3.0"):
        result.expect({"x": np.full(SHAPE, 3, np.float32)})
    result.expect({"x": np.full(SHAPE, 2.01, np.float32)}, atol=0.02)


def test_bad_inputs_are_refused_before_the_job():
    with pytest.raises(ValueError, match="dtype float64, the buffer is float32"):
        pldemu.launch(PROGRAM, 2, inputs={"x": np.zeros(SHAPE)})
    with pytest.raises(ValueError, match=r"shape \[2, 3\], the buffer is \[2, 64\]"):
        pldemu.launch(PROGRAM, 2, inputs={"x": np.zeros((2, 3), np.float32)})
    with pytest.raises(ValueError, match="no buffer 'q'"):
        pldemu.launch(PROGRAM, 2, inputs={"q": 1})
    with pytest.raises(ValueError, match="ranks must be a positive integer"):
        pldemu.launch(PROGRAM, 0)


def test_deadlock_raises_job_error_with_the_wait_for_graph():
    with pytest.raises(pldemu.JobError) as err:
        pldemu.launch(parse_program(DEADLOCK_PLD), 2, timeout=12)
    result = err.value.result
    assert result.exit_code == 3 and not result.buffers
    assert result.deadlock is not None and "wait-for graph" in result.deadlock
    assert "exited 3: the job failed" in str(err.value)


def test_check_false_returns_the_failed_result():
    # An explicit 2 s wait timeout (the test above covers the one derived from the job's timeout).
    result = pldemu.launch(parse_program(DEADLOCK_PLD), 2, options=pldemu.RuntimeOptions(timeout=2.0), timeout=60,
                           check=False)
    assert result.exit_code == 3 and set(result.failures) == {0, 1}


def test_options_reach_the_job():
    opts = pldemu.RuntimeOptions(jitter_us=10, straggler=(1, 50.0), race_detect=True, invariants=True, seed=7)
    argv = options_argv(opts)
    assert argv[argv.index("--straggler") + 1].startswith("1:50") and "--races" in argv and "--invariants" in argv
    with pytest.raises(ValueError, match=r"RuntimeOptions\.poison has no flag"):
        options_argv(pldemu.RuntimeOptions(poison=False))
    result = pldemu.launch(PROGRAM, 2, inputs={"x": rank_data}, options=opts, timeout=120)
    assert result.ok and result.races == () and result.invariants == ()
    assert "seed 7" in result.output


def test_no_mpi_in_the_calling_process(tmp_path: Path):
    code = (f"import sys, pldemu\nr = pldemu.launch({str(write_program(tmp_path))!r}, 2, timeout=120)\n"
            "assert r.ok\nprint('mpi4py' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


PAIR = parse_program("program pair {\n  local a: bf16[2, 4]\n  window b: bf16[2, 4]\n  local c: fp32[2, 4]\n"
                     "  func main() {\n    k = 1\n  }\n}\n")


def test_expect_buffers_is_run_expect_buffer():
    import ml_dtypes

    same = np.arange(8).reshape(2, 4).astype(ml_dtypes.bfloat16)
    other = same.copy()
    other[1, 3] = 100
    ok = pldemu.launch(PAIR, 2, inputs={"a": same, "b": same}, expect_buffers={"a": "b"}, timeout=120)
    assert ok.ok and ok.mismatches == ()
    bad = pldemu.launch(PAIR, 2, inputs={"a": same, "b": [same, other]}, expect_buffers=[("a", "b")], timeout=120,
                        check=False)
    assert bad.exit_code == 1
    assert any("rank 1 a (vs b): #wrong 1/8, first at [1, 3]: got 7.0, expected 100.0" in m for m in bad.mismatches)
    close = pldemu.launch(PAIR, 2, inputs={"a": same, "b": [same, other]}, expect_buffers={"a": "b"}, atol=100,
                          timeout=120)
    assert close.ok


@pytest.mark.parametrize(("pairs", "message"), [
    ({"a": "z"}, "the program has no buffer 'z'"),
    ({"a": "c"}, "a is bfloat16[2, 4] but c is float32[2, 4]"),
    ({"a": "a"}, "a buffer compared with itself always matches"),
])
def test_expect_buffers_refused_before_the_job(pairs: dict[str, str], message: str):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        pldemu.launch(PAIR, 2, expect_buffers=pairs, timeout=120)
