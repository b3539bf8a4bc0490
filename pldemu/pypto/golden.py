"""The golden of a build folder of pypto's test harness: its record (``golden.py``), its data files
(``data/in``, ``data/out``, ``data/actual``) and the comparison of a run's outputs against it.

pypto's harness (``tests/st/harness``) writes a folder per test case through ``pypto.runtime``'s
``golden_writer`` and runs it through ``runner._execute_on_device``; under pldemu's layer both are
this module's. The record is a Python file of literals (``RTOL``, ``ATOL``, ``TENSORS``, ``SCALARS``,
``__outputs__``, and the test's ``compute_expected`` source kept as text, for the reader: pldemu
compares against the outputs the harness computed into ``data/out``, it never runs that source).
A data file is ``<name>.npy``: the tensor's raw bytes as unsigned integers of its element size (numpy
has no bfloat16 or FP8 of its own), read back with the dtype the record names.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path
from typing import Any

import numpy as np

_RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
"""Element size in bytes -> the unsigned type a data file stores the raw bytes as."""
MAX_SHOWN = 20
"""Mismatched elements listed in a failed comparison (pypto's harness shows as many)."""


def _torch() -> Any:
    return importlib.import_module("torch")  # pypto's torch: the real one or pldemu's stand-in (the layer's choice)


@dataclasses.dataclass(frozen=True)
class TensorEntry:
    """One tensor of the record: its name, shape, dtype name (``float32``), whether it is an output and
    whether it has an initial value (a ``data/in`` file)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    is_output: bool
    has_input: bool


@dataclasses.dataclass(frozen=True)
class GoldenRecord:
    """What ``golden.py`` records: tolerances, the tensors (the Orchestration's parameters, in order) and
    the scalars after them (name, value, ctype)."""

    rtol: float
    atol: float
    tensors: tuple[TensorEntry, ...]
    scalars: tuple[tuple[str, int | float, str], ...]

    @property
    def outputs(self) -> list[str]:
        return [t.name for t in self.tensors if t.is_output]


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` -> ``float32``."""
    return str(dtype).removeprefix("torch.")


def has_input(spec: Any) -> bool:
    """A tensor the run reads from ``data/in``: every input, and an output with an initial value."""
    return not spec.is_output or spec.init_value is not None


def golden_source(specs: list[Any], rtol: float, atol: float, scalars: list[Any], compute_src: str) -> str:
    """The text of ``golden.py`` for ``specs`` (pypto's runtime ``TensorSpec``) and ``scalars``
    (``ScalarSpec``)."""
    tensors = [(s.name, list(s.shape), dtype_name(s.dtype), bool(s.is_output), has_input(s)) for s in specs]
    lines = [
        '"""golden.py of pldemu\'s pypto layer: what a harness build folder holds (data/in, data/out), read by',
        "pldemu's runner. COMPUTE_GOLDEN_SOURCE is the test's expected computation, kept as text only: the",
        'outputs it computed are data/out."""',
        f"RTOL = {float(rtol)!r}",
        f"ATOL = {float(atol)!r}",
        f"TENSORS = {tensors!r}",
        f"SCALARS = {[(s.name, s.value, s.ctype) for s in scalars]!r}",
        f"__outputs__ = {[t[0] for t in tensors if t[3]]!r}",
        f"COMPUTE_GOLDEN_SOURCE = {compute_src!r}",
    ]
    return "\n".join(lines) + "\n"


def read_golden(path: Path) -> GoldenRecord:
    """The record in ``golden.py`` (its literals only: nothing of it is executed)."""
    values: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(target := node.targets[0], ast.Name):
            values[target.id] = ast.literal_eval(node.value)
    tensors = tuple(TensorEntry(n, tuple(shape), d, out, inp) for n, shape, d, out, inp in values["TENSORS"])
    return GoldenRecord(values["RTOL"], values["ATOL"], tensors, tuple(tuple(s) for s in values["SCALARS"]))


def save_tensors(tensors: dict[str, Any], folder: Path) -> None:
    """``folder/<name>.npy`` for each tensor (its raw bytes)."""
    if not tensors:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name, tensor in tensors.items():
        array = np.ascontiguousarray(tensor.numpy())
        np.save(folder / f"{name}.npy", array.view(_RAW[array.dtype.itemsize]))


def data_file(folder: Path, name: str) -> Path:
    return folder / f"{name}.npy"


def load_tensor(folder: Path, entry: TensorEntry) -> Any:
    """The tensor ``entry`` saved in ``folder``."""
    torch = _torch()
    numpy_dtype = torch.zeros([0], dtype=getattr(torch, entry.dtype)).numpy().dtype
    raw = np.load(data_file(folder, entry.name))
    return torch.from_numpy(np.ascontiguousarray(raw.view(numpy_dtype).reshape(entry.shape)))


def has_files(data_dir: Path, specs: list[Any]) -> bool:
    """``data_dir`` holds every file a run of ``specs`` reads: ``in/`` its inputs, ``out/`` its outputs."""
    return all((not s.is_output or data_file(data_dir / "out", s.name).is_file())
               and (not has_input(s) or data_file(data_dir / "in", s.name).is_file()) for s in specs)


def run_arguments(record: GoldenRecord, data_dir: Path) -> tuple[dict[str, Any], list[Any]]:
    """The tensors by name (``data/in``, or zeros for an output without an initial value) and the call's
    arguments: those tensors in order, then the scalars' values."""
    torch = _torch()
    tensors = {t.name: load_tensor(data_dir / "in", t) if t.has_input
               else torch.zeros(list(t.shape), dtype=getattr(torch, t.dtype)) for t in record.tensors}
    return tensors, [*tensors.values(), *(value for _, value, _ in record.scalars)]


def compare(actual: dict[str, Any], expected: dict[str, Any], rtol: float, atol: float) -> None:
    """AssertionError for the first output not within ``rtol`` / ``atol`` of its golden, as pypto's harness
    words it; a NaN in the golden is a don't-care element (pypto's convention for undefined regions)."""
    torch = _torch()
    for name, got in actual.items():
        want = expected[name]
        care = ~torch.isnan(want.float())
        close = torch.isclose(got.float(), want.float(), rtol=rtol, atol=atol) | ~care
        if bool(close.all()):
            continue
        bad = np.flatnonzero(~close.numpy().reshape(-1))
        flat_got, flat_want = got.float().numpy().reshape(-1), want.float().numpy().reshape(-1)
        shown = [f"    [{i}] actual={flat_got[i]}, expected={flat_want[i]}" for i in bad[:MAX_SHOWN]]
        dont_care = int((~care).numpy().sum())
        skipped = f" ({dont_care} don't-care skipped)" if dont_care else ""
        raise AssertionError(f"Output '{name}' does not match golden.\nMismatched elements: {bad.size}/"
                             f"{flat_got.size}{skipped}\nrtol={rtol}, atol={atol}\nFirst {len(shown)} mismatches:\n"
                             + "\n".join(shown))


__all__ = ["GoldenRecord", "TensorEntry", "compare", "data_file", "dtype_name", "golden_source", "has_files",
           "has_input", "load_tensor", "read_golden", "run_arguments", "save_tensors"]
