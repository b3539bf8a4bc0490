"""``pypto.runtime.golden_writer``: the names pypto's test harness writes a build folder's golden with
(:mod:`pldemu.pypto.golden` does the work; the files are pldemu's own format, read by its runner)."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pldemu.pypto import golden


def _data_dir_has_files(data_dir: Path, tensor_specs: list[Any]) -> bool:
    """``data_dir`` already holds every input (``in/``) and golden output (``out/``) of ``tensor_specs``."""
    return golden.has_files(Path(data_dir), tensor_specs)


def _materialize_tensors(tensor_specs: list[Any]) -> dict[str, Any]:
    """Each spec's tensor, by name."""
    return {spec.name: spec.create_tensor() for spec in tensor_specs}


def _save_data_files(data_files: dict[str, Any], data_dir: Path) -> None:
    """One data file per tensor in ``data_dir``."""
    golden.save_tensors(data_files, Path(data_dir))


def _extract_compute_golden(golden_fn: Callable[..., Any]) -> str:
    """The source of a test's expected computation, for the record (RuntimeError when it has none, as
    pypto raises: its harness then records a placeholder)."""
    try:
        return textwrap.dedent(inspect.getsource(golden_fn))
    except (OSError, TypeError) as err:
        raise RuntimeError(f"cannot read the source of {golden_fn!r}: {err}") from None


def generate_golden_source(tensor_specs: list[Any], generate_inputs: Any = None, rtol: float = 1e-5,
                           atol: float = 1e-5, *, compute_golden_src: str = "", scalar_specs: list[Any] | None = None,
                           use_data_files: bool = True, **_options: Any) -> str:
    """The text of ``golden.py``: tolerances, tensors, scalars, outputs. pldemu's runner always reads the
    inputs and golden outputs from the data files (``use_data_files``), so ``generate_inputs`` is unused."""
    if not use_data_files:
        raise ValueError("generate_golden_source: pldemu's runner reads data files only (use_data_files=True)")
    return golden.golden_source(tensor_specs, rtol, atol, list(scalar_specs or []), compute_golden_src)


__all__ = ["_data_dir_has_files", "_extract_compute_golden", "_materialize_tensors", "_save_data_files",
           "generate_golden_source"]
