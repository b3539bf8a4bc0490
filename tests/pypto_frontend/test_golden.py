"""The golden of a harness build folder (``pldemu.pypto.golden``): the record read back, the data files
round-tripping every dtype by its raw bytes, and the comparison's report."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pldemu.torchlite as torch
from pldemu.pypto.finder import active
from pldemu.pypto.golden import compare, golden_source, load_tensor, read_golden, run_arguments, save_tensors
from pldemu.pypto.surface.runtime.tensor_spec import ScalarSpec, TensorSpec


@pytest.fixture(autouse=True)
def _layer() -> Iterator[None]:
    """``import torch`` is the layer's torch (the stand-in here), as under ``pldemu pytest``."""
    with active():
        yield


def test_record_and_data_files_round_trip(tmp_path: Path) -> None:
    specs = [TensorSpec("a", [2, 3], torch.bfloat16, init_value=1.5),
             TensorSpec("o", [2, 3], torch.float32, is_output=True)]
    (tmp_path / "golden.py").write_text(golden_source(specs, 1e-3, 2e-3, [ScalarSpec("n", 7, "int32")], "x = '''"))
    record = read_golden(tmp_path / "golden.py")
    assert (record.rtol, record.atol, record.outputs, record.scalars) == (1e-3, 2e-3, ["o"], (("n", 7, "int32"),))
    save_tensors({"a": specs[0].create_tensor()}, tmp_path / "data" / "in")
    tensors, args = run_arguments(record, tmp_path / "data")
    assert tensors["a"].dtype == torch.bfloat16 and bool((tensors["a"] == 1.5).all())
    assert bool((tensors["o"] == 0).all()) and args[2] == 7
    assert load_tensor(tmp_path / "data" / "in", record.tensors[0]).shape == (2, 3)


def test_compare_reports_mismatches_and_skips_nan_goldens() -> None:
    got = torch.tensor([1.0, 2.0, 3.0, 4.0])
    compare({"o": got}, {"o": torch.tensor([1.0, float("nan"), 3.0, 4.0])}, 1e-5, 1e-5)
    with pytest.raises(AssertionError, match=r"Output 'o' does not match golden.\nMismatched elements: 1/4 "
                                             r"\(1 don't-care skipped\)[\s\S]*\[3\] actual=4.0, expected=5.0"):
        compare({"o": got}, {"o": torch.tensor([1.0, float("nan"), 3.0, 5.0])}, 1e-5, 1e-5)
