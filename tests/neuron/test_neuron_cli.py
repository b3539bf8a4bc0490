"""``pldemu casts``: the report, and bad input as one clear line with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from neuron_helpers import CORPUS

from pldemu.cli import main


def test_report_with_run_and_stats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["casts", str(CORPUS / "ap_multi_store.nki"), "--run", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "# before NeuronEliminateCasts" in out and "# after NeuronEliminateCasts" in out
    assert "%c: eliminated; mutated %left, %right; 512 bytes" in out
    assert "Number of bytes of casts eliminated: 512 bytes" in out
    assert out.rstrip().endswith("| yes")


def test_kept_casts_name_their_gate_and_gate3_reading(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["casts", str(CORPUS / "canonical.nki")]) == 0
    assert "%c: kept by gate 3: the producer's src dtype already equals the target (%p)" in capsys.readouterr().out
    assert main(["casts", str(CORPUS / "canonical.nki"), "--gate3", "docstring", "--stats"]) == 0
    assert "Number of bytes of casts eliminated: 256 bytes" in capsys.readouterr().out


BAD = {
    "unknown instruction": ("kernel k\n%c = Frobnicate(%p) dtype=fp32\n", "bad.nki:2:6: unknown instruction 'Frobnicate'"),
    "dtype mismatch": ("kernel k\nsbuf t[4, 4] bf16\n%c = TensorCopyOp(t[[4,4],[1,4]]+0:fp32) dtype=fp32\n",
                       "bad.nki:3: %c: access pattern over t: dtype mismatch"),
    "AP out of bounds": ("kernel k\nsbuf t[4, 4] bf16\n%c = TensorCopyOp(t[[4,4],[1,4]]+4:bf16) dtype=fp32\n",
                         "bad.nki:3: %c: access pattern over t: out of bounds"),
    "more than 128 partitions": ("kernel k\nsbuf t[256, 4] bf16\n", "bad.nki:2: tensor t has 256 partitions"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exit_2_one_line(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    text, message = BAD[case]
    (tmp_path / "bad.nki").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["casts", "bad.nki", "--run"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    first = captured.err.splitlines()[0]
    assert first.startswith(f"pldemu casts: error: {message}"), first
    assert "Traceback" not in captured.err


def test_missing_file_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["casts", "/no/such/file.nki"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_false_can_mutate_flag_is_caught_after_the_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """%p is flagged canMutateDstTy but a DMACopy also stores it to a bf16 output: after re-typing %p to
    fp32 that byte copy no longer verifies; the command says so and exits 1."""
    full = "[[4,4],[1,4]]+0"
    (tmp_path / "lie.nki").write_text(
        f"kernel lie\nsbuf xs[4, 4] bf16 input\nhbm o[4, 4] bf16 output\n"
        f"%p = ActivationOp(xs{full}:bf16) func=exp dtype=bf16 canMutateDstTy\n"
        f"%c = TensorCopyOp(%p) dtype=fp32\n%u = ActivationOp(%c) func=tanh dtype=fp32\n"
        f"%d = DMACopy(%p) dst=o{full}:bf16 dtype=bf16\n")
    assert main(["casts", str(tmp_path / "lie.nki")]) == 1
    err = capsys.readouterr().err
    assert "after the pass:" in err and "lie.nki:7: %d (DMACopy) copies bytes: dtype mismatch" in err
