"""The verifier refuses what the machine cannot do, with the line."""

from __future__ import annotations

import pytest
from neuron_helpers import FULL, kernel

from pldemu.neuron.text import parse_function
from pldemu.neuron.verifier import VerifyError, verify


@pytest.mark.parametrize("body, tensors, fragment", [
    (f"%c = TensorCopyOp(xs{FULL}:fp32) dtype=fp32\n", "", "dtype mismatch: the AP says fp32, the tensor is bf16"),
    ("%c = TensorCopyOp(xs[[4,8],[1,4]]+1:bf16) dtype=fp32\n", "", "out of bounds"),
    ("%c = TensorCopyOp(xs[[4,8],[1,5]]+0:bf16) dtype=fp32\n", "", "out of bounds"),
    ("%c = TensorCopyOp(xs[[4,9],[1,4]]+0:bf16) dtype=fp32\n", "", "the first pair must be [4, <= 8]"),
    ("%c = TensorCopyOp(%nope) dtype=fp32\n", "", "%nope is not defined"),
    (f"%c = TensorCopyOp(x{FULL}:bf16) dtype=fp32\n", "", "bring HBM data in with DMACopy"),
    (f"%d = DMACopy(xs{FULL}:bf16) dst=o{FULL}:fp32 dtype=fp32\n", "hbm o[8, 4] fp32 output\n", "dtype mismatch"),
    (f"%m = MatMultOp(xs{FULL}:bf16, xs{FULL}:bf16) dst=t{FULL}:fp32 dtype=fp32\n", "sbuf t[8, 4] fp32\n",
     "writes an fp32 PSUM tensor"),
    ("", "psum acc[8, 4] bf16\n", "PSUM tensor acc must be plain fp32"),
    (f"%m = MatMultOp(x{FULL}:bf16, xs{FULL}:bf16) dst=acc[[4,4],[1,4]]+0:fp32 dtype=fp32\n", "psum acc[4, 4] fp32\n",
     "reads its operands from SBUF"),
    (f"%w = ActivationOp(xfs{FULL}:fp32) dst=xin{FULL}:fp32 func=exp dtype=fp32\n", "sbuf xin[8, 4] fp32 input\n",
     "stores into graph input xin"),
    (f"%w = ActivationOp(xfs{FULL}:fp32) dtype=fp32\n", "", "needs func= one of"),
    (f"%w = TensorScalarPtrOp(xfs{FULL}:fp32) func=bitwise_and scalar=1.0 dtype=fp32\n", "", "needs integer dtypes"),
    (f"%p = ActivationOp(xs{FULL}:bf16) dst=t{FULL}:bf16 func=exp dtype=bf16\n%c = TensorCopyOp(%p) dtype=fp32\n",
     "sbuf t[8, 4] bf16\n", "read it through an access pattern"),
])
def test_refused(body: str, tensors: str, fragment: str) -> None:
    with pytest.raises(VerifyError) as info:
        kernel(body, tensors)
    assert fragment in info.value.message and info.value.line > 0


def test_more_than_128_partitions() -> None:
    with pytest.raises(VerifyError, match=r"line 2: tensor big has 129 partitions; 1\.\.128 allowed"):
        verify(parse_function("kernel k\nsbuf big[129, 4] fp32\n"))
    verify(parse_function("kernel k\nsbuf ok[128, 4] fp32\n"))
