"""A build folder of pypto's test harness (``tests/st/harness``), compiled and run by pldemu.

pypto's ``TestRunner`` (its inline path: the one it takes without pypto's own ``tests/st/conftest.py``,
which pldemu does not load) compiles a test case's program into a folder with
``pypto.runtime.compile_program`` (:mod:`pldemu.pypto.surface.runtime.build`), writes the golden there (:mod:`pldemu.pypto.golden`), gets a callable
with ``device_runner.compile_and_assemble`` and runs it with ``runner._execute_on_device``, which
validates the outputs. Under pldemu's layer those four are this module's: the program is pldemu's
``ir.compile`` of it, kept in this process (:func:`pldemu.pypto.finder.compiled_at`), and the run is
pldemu's one-device run of it. Nothing runs in a child process.

The harness refuses a folder without ``orchestration/*.cpp`` and ``kernels/**/*.cpp`` (it checks pypto's
code generation happened); pldemu generates no C++, so :func:`write_placeholders` writes one comment-only
file at each place saying so (:data:`PLACEHOLDER`), and nothing else pretends to be pypto's output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pldemu.pypto.golden import compare, load_tensor, read_golden, run_arguments, save_tensors

RUNTIME_NAME = "pldemu"
"""What ``compile_and_assemble`` names the runtime (pypto: simpler's runtime the build targets)."""
PLACEHOLDER = """// pldemu: no C++ is generated. pldemu's pypto layer runs program {name} ({file}:{line}) itself;
// this file exists only because pypto's test harness checks for {where}/*.cpp in a build folder.
"""


def write_placeholders(program: Any, work_dir: Path) -> None:
    """The comment-only C++ files pypto's harness checks a build folder for (``orchestration/*.cpp``,
    ``kernels/**/*.cpp``): pldemu generates no C++; each names the program pldemu runs itself."""
    for where in ("orchestration", "kernels"):
        (work_dir / where).mkdir(parents=True, exist_ok=True)
        text = PLACEHOLDER.format(name=program.name, file=program.file, line=program.line, where=where)
        (work_dir / where / f"{program.name}.cpp").write_text(text)


def compile_and_assemble(work_dir: Path, platform: str) -> tuple[Any, str, dict[str, Any]]:
    """pypto's ``device_runner.compile_and_assemble``: the program compiled into ``work_dir`` (by this
    process: pldemu holds the compiled program, it builds no binaries), pldemu's runtime name and an
    empty runtime configuration."""
    from pldemu.pypto.finder import compiled_at

    compiled = compiled_at(Path(work_dir))
    if compiled is None:
        raise FileNotFoundError(f"compile_and_assemble: {work_dir} is not a program pypto.ir.compile built in this "
                                "process among its latest builds (pldemu runs the compiled program it holds, not a build on disk)")
    return compiled, RUNTIME_NAME, {}


def execute_on_device(work_dir: Path, golden_path: Path, chip_callable: Any, *, validate: bool = True,
                      actual_out_dir: Path | None = None) -> None:
    """Run ``chip_callable`` on the folder's inputs (``golden.py``'s tensors in order, then its scalars),
    save the outputs to ``actual_out_dir`` when given, and compare them with ``data/out`` at the record's
    tolerances when ``validate`` (AssertionError on a mismatch)."""
    record = read_golden(Path(golden_path))
    data_dir = Path(golden_path).parent / "data"
    tensors, args = run_arguments(record, data_dir)
    chip_callable(*args)
    outputs = {name: tensors[name] for name in record.outputs}
    if actual_out_dir is not None:
        save_tensors(outputs, Path(actual_out_dir))
    if validate:
        compare(outputs, expected_outputs(record, data_dir / "out"), record.rtol, record.atol)


def expected_outputs(record: Any, folder: Path) -> dict[str, Any]:
    return {t.name: load_tensor(folder, t) for t in record.tensors if t.is_output}


def validate_persisted_outputs(work_dir: Path, rtol: float, atol: float) -> None:
    """pypto's ``runner.validate_persisted_outputs``: ``data/actual`` against ``data/out`` at ``rtol`` /
    ``atol``."""
    data_dir = Path(work_dir) / "data"
    record = read_golden(Path(work_dir) / "golden.py")
    compare(expected_outputs(record, data_dir / "actual"), expected_outputs(record, data_dir / "out"), rtol, atol)


__all__ = ["PLACEHOLDER", "RUNTIME_NAME", "compile_and_assemble", "execute_on_device",
           "validate_persisted_outputs"]
