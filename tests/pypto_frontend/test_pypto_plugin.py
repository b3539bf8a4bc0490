"""The pytest plugin ``-p pldemu.pypto``: pypto's options and fixtures, the conftest cut, the layer, the
``--pldemu-*`` flags reaching compiled calls, and how a failed job is reported. Each case runs an inner
pytest in a temporary folder, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pldemu.pypto.plugin import conftest_cut, parse_devices, suite_paths
from pldemu.pypto.session import FrontendOptions


def inner_pytest(where: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "pldemu.pypto", "-p", "no:cacheprovider", *args],
                          cwd=where, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
                          stdin=subprocess.DEVNULL)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def show(res: subprocess.CompletedProcess[str]) -> str:
    return f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"


FIXTURES_TEST = """
    import json, os
    import torch  # the stand-in (or real torch), importable at collection: the layer is already active

    def test_fixtures(test_config, device_ids):
        with open(os.environ["OUT"], "w") as out:
            json.dump({"devices": device_ids, "platform": test_config.platform,
                       "codegen_only": test_config.codegen_only, "device_id": test_config.device_id,
                       "torch": torch.zeros(1).dtype == torch.float32}, out)
"""


@pytest.mark.parametrize(("args", "want"), [
    ((), {"devices": [0, 1, 2, 3], "platform": "a2a3sim", "codegen_only": False, "device_id": 0}),
    (("--device", "2,0-1,2", "--platform", "a5sim", "--codegen-only"),
     {"devices": [2, 0, 1], "platform": "a5sim", "codegen_only": True, "device_id": 2}),
])
def test_pypto_options_and_fixtures(tmp_path: Path, args: tuple[str, ...], want: dict[str, object]) -> None:
    write(tmp_path / "test_fixtures.py", FIXTURES_TEST)
    res = inner_pytest(tmp_path, *args, "test_fixtures.py", env={"OUT": str(tmp_path / "out.json")})
    assert res.returncode == 0, show(res)
    assert json.loads((tmp_path / "out.json").read_text()) == {**want, "torch": True}


OPTIONS_TEST = """
    import dataclasses, json, os
    from pldemu.pypto.session import current_options

    def test_options():
        opts = current_options()
        with open(os.environ["OUT"], "w") as out:
            json.dump({**{k: v for k, v in dataclasses.asdict(opts.runtime).items() if not isinstance(v, tuple)},
                       "job_timeout": opts.timeout, "codegen_only": opts.codegen_only}, out)
"""


@pytest.mark.parametrize("autoload", ["", "1"], ids=["autoload", "no-autoload"])
def test_pldemu_flags_reach_compiled_calls(tmp_path: Path, autoload: str) -> None:
    write(tmp_path / "test_options.py", OPTIONS_TEST)
    out = tmp_path / "out.json"
    env = {"OUT": str(out), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": autoload}
    res = inner_pytest(tmp_path, "test_options.py", env=env)
    assert res.returncode == 0, show(res)
    default = json.loads(out.read_text())
    pypto = FrontendOptions().runtime  # the layer's own defaults, races on
    assert (default["race_detect"], default["poison"], default["cell_check"], default["jitter_us"],
            default["truncation_warn"]) == (True, pypto.poison, pypto.cell_check, 0.0, False)
    res = inner_pytest(tmp_path, "--pldemu-jitter", "50", "--pldemu-visibility", "deferred", "--pldemu-seed", "7",
                       "--no-pldemu-races", "--pldemu-timeout", "60", "--pldemu-truncation-warn", "test_options.py",
                       env=env)
    assert res.returncode == 0, show(res)
    got = json.loads(out.read_text())
    assert (got["jitter_us"], got["visibility"], got["seed"], got["race_detect"], got["truncation_warn"]) == (
        50.0, "deferred", 7, False, True)
    assert (got["job_timeout"], got["timeout"], got["poison"]) == (60.0, 20.0, pypto.poison)


def test_conftests_above_the_paths_are_not_loaded(tmp_path: Path) -> None:
    write(tmp_path / "st" / "conftest.py", "raise ImportError('compiler internals')\n")
    write(tmp_path / "st" / "dist" / "conftest.py", """
        import pytest

        @pytest.fixture
        def from_here(request):
            return request.config.getoption("--codegen-only")  # pypto's distributed conftest reads it
    """)
    write(tmp_path / "st" / "dist" / "sub" / "test_a.py", "def test_a(from_here):\n    assert from_here is False\n")
    res = inner_pytest(tmp_path, "st/dist")
    assert res.returncode == 0 and "1 passed" in res.stdout, show(res)
    res = inner_pytest(tmp_path, "st/dist/sub/test_a.py::test_a", "st/dist")
    assert res.returncode == 0, show(res)
    res = inner_pytest(tmp_path, "--confcutdir", str(tmp_path), "st/dist")  # an explicit cut is respected
    assert res.returncode != 0 and "compiler internals" in res.stdout + res.stderr, show(res)


def test_suite_paths_are_what_pypto_s_st_conftest_puts_on_sys_path(tmp_path: Path) -> None:
    (tmp_path / "pypto" / "tests" / "st" / "distributed").mkdir(parents=True)
    st = tmp_path / "pypto" / "tests" / "st"
    assert suite_paths(["pypto/tests/st/distributed/test_x.py::t", "pypto/tests/st"], tmp_path) == [st, tmp_path / "pypto"]
    assert suite_paths(["elsewhere/test_y.py"], tmp_path) == []


def test_conftest_cut_is_the_deepest_common_folder(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "c").mkdir()
    (tmp_path / "a" / "b" / "t.py").write_text("")
    assert conftest_cut(["a/b/t.py::test_x"], tmp_path) == tmp_path / "a" / "b"
    assert conftest_cut(["a/b", "a/c"], tmp_path) == tmp_path / "a"
    assert conftest_cut(["-k", "nothing"], tmp_path) is None


def test_device_option_forms() -> None:
    assert parse_devices("0") == [0] and parse_devices("0-3,8") == [0, 1, 2, 3, 8]
    for bad in ("", "3-1", "x", "-1"):
        with pytest.raises(pytest.UsageError):
            parse_devices(bad)


def test_a_bad_device_option_is_a_usage_error(tmp_path: Path) -> None:
    write(tmp_path / "test_x.py", "def test_x():\n    pass\n")
    res = inner_pytest(tmp_path, "--device", "3-1", "test_x.py")
    assert res.returncode == 4 and "--device 3-1" in res.stderr and "Traceback" not in res.stderr, show(res)


FAILING_JOB_TEST = """
    from pldemu.api import JobError, RunResult

    def compiled(*tensors):
        result = RunResult(ranks=2, exit_code=4, output="rank 0: done", wall_seconds=0.1,
                           races=("data race on window data[0:8]: put at prog.py:41 vs remote_load at prog.py:57",))
        raise JobError(result)

    def test_racy():
        compiled(1, 2)
"""


def test_a_failed_job_is_reported_at_the_test_line_without_pldemu_internals(tmp_path: Path) -> None:
    write(tmp_path / "test_job.py", FAILING_JOB_TEST)
    res = inner_pytest(tmp_path, "test_job.py")
    assert res.returncode == 1, show(res)
    assert "test_job.py:10: compiled(1, 2)" in res.stdout, show(res)
    assert "put at prog.py:41 vs remote_load at prog.py:57" in res.stdout and "exited 4: races found" in res.stdout
    assert "pldemu/api.py" not in res.stdout and "def test_racy" not in res.stdout, show(res)


def test_importing_the_plugin_package_imports_neither_mpi_nor_pytest() -> None:
    code = "import sys, pldemu.pypto; print('mpi4py' in sys.modules, 'pytest' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert res.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(("source", "name", "line"), [
    ("from pypto.runtime import NoSuchWorker\n", "pypto.runtime.NoSuchWorker", 2),
    ("import pypto.runtime.no_such_runner\n", "pypto.runtime.no_such_runner", 2),
    ("import pypto.language.distributed as pld\nX = pld.no_such_op\n", "pypto.language.distributed.no_such_op", 3),
    ("import pypto.language as pl\n\nclass P:\n    role = pl.Role.NoSuchRole\n", "pypto.language.Role.NoSuchRole", 5),
])
def test_a_pypto_name_the_layer_lacks_is_one_collection_line(tmp_path: Path, source: str, name: str,
                                                             line: int) -> None:
    write(tmp_path / "test_missing.py", "import pytest\n" + source + "\ndef test_never():\n    pass\n")
    write(tmp_path / "test_other.py", "def test_other():\n    pass\n")
    res = inner_pytest(tmp_path, "-q", "test_missing.py", "test_other.py")
    assert res.returncode == 1 and "1 passed, 1 error" in res.stdout, show(res)  # the other file still runs
    want = f"test_missing.py:{line}: {name} is not provided by pldemu's pypto layer"
    assert want in res.stdout and "Traceback" not in res.stdout and "ImportError" not in res.stdout, show(res)


BAD_PROGRAMS = """
    import pypto.language as pl

    {module_level}
    def test_bad_annotation():
        @pl.program
        class Bad:
            @pl.function(type=pl.FunctionType.InCore)
            def k(self, x: pl.Tensor[8, pl.FP32]) -> pl.Tensor[[1, 8], pl.FP32]:
                return x
"""

MODULE_LEVEL = """
    @pl.program
    class Top:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.InOut[[8], pl.FP32]) -> pl.Tensor[[1, 8], pl.FP32]:
            return x
"""


@pytest.mark.parametrize("module_level", [False, True])
def test_a_bad_program_is_one_line_at_its_line_without_pldemu_internals(tmp_path: Path, module_level: bool) -> None:
    """A bad annotation in a test fails the test, one in a module-level program fails its collection:
    either way one line at the user's file:line, no frame of pldemu."""
    source = textwrap.dedent(BAD_PROGRAMS).format(module_level=textwrap.dedent(MODULE_LEVEL) if module_level else "")
    write(tmp_path / "test_bad.py", source)
    res = inner_pytest(tmp_path, "-q", "test_bad.py")
    assert res.returncode in (1, 2), show(res)
    if module_level:
        assert "test_bad.py:8: pl.InOut[...] takes a tensor type, got ([8], pl.FP32)" in res.stdout, show(res)
    else:
        assert "test_bad.py:9: pl.Tensor[[dims], dtype] expected" in res.stdout, show(res)
    assert "pldemu/pypto" not in res.stdout and "Traceback" not in res.stdout, show(res)


GENERATED_CODE_TEST = """
    import pypto.language as pl
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedConfig

    @pl.program
    class Copy:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]) -> pl.Tensor[[1, 8], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, 8]), [0, 0], y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]) -> None:
            self.k(x, y)

    def test_reads_generated_host_code(device_ids):
        compiled = ir.compile(Copy, distributed_config=DistributedConfig(device_ids=device_ids[:1]))
        (compiled.output_dir / "orchestration" / "host_orch.py").read_text()

    def test_reads_its_own_missing_file(tmp_path):
        (tmp_path / "absent.txt").read_text()
"""


def test_a_read_of_pyptos_generated_code_is_one_line(tmp_path: Path) -> None:
    write(tmp_path / "test_codegen.py", GENERATED_CODE_TEST)
    res = inner_pytest(tmp_path, "-q", "test_codegen.py")
    assert res.returncode == 1 and "2 failed" in res.stdout, show(res)
    want = ("test_codegen.py:18: compiled.output_dir/orchestration/host_orch.py does not exist: pldemu runs the "
            "program and writes no pypto-generated code")
    assert want in res.stdout, show(res)
    generated = res.stdout.split("test_reads_generated_host_code __")[1].split("test_reads_its_own_missing_file __")[0]
    assert "FileNotFoundError" not in generated and "Traceback" not in generated, show(res)
    # Any other missing file is the test's own error, as it is.
    assert "test_reads_its_own_missing_file - FileNotFoundError" in res.stdout, show(res)


OUT_OF_SCOPE_TEST = """
    import pypto.language as pl
    import pypto.language.distributed as pld
    import torch
    from pypto import ir
    from pypto.ir.distributed_compiled_program import DistributedConfig
    from pypto.runtime import RunConfig

    @pl.program
    class AddOne:
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]) -> pl.Tensor[[1, 8], pl.FP32]:
            return pl.store(pl.add(pl.load(x, [0, 0], [1, 8]), 1.0), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def child(self, x: pl.Tensor[[1, 8], pl.FP32], y: pl.Out[pl.Tensor[[1, 8], pl.FP32]]) -> pl.Tensor[[1, 8], pl.FP32]:
            return self.k(x, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(self, x: pl.Tensor[[2, 1, 8], pl.FP32], y: pl.Out[pl.Tensor[[2, 1, 8], pl.FP32]]):
            for r in pl.range(pld.world_size()):
                self.child(x[r], y[r], device=r)

    def _run(device_ids, **dfx):
        compiled = ir.compile(AddOne, distributed_config=DistributedConfig(device_ids=device_ids[:2]))
        x, y = torch.ones((2, 1, 8)), torch.zeros((2, 1, 8))
        compiled(x, y, config=RunConfig(**dfx))
        assert torch.allclose(y, x + 1)
        return compiled.output_dir / "dfx_outputs"

    def test_dep_gen_files(device_ids):
        dfx = _run(device_ids, enable_dep_gen=True, enable_scope_stats=True)
        assert dfx.is_dir(), f"no DFX folder: {dfx}"

    def test_swimlane_records(device_ids):
        dfx = _run(device_ids, enable_chip_swimlane=True)
        assert (dfx / "pldemu_trace_call0.json").is_file()
        records = dfx / "rank0" / "d0" / "chip_swimlane_records.json"
        assert records.is_file(), f"missing {records}"

    def test_generated_sub_build(tmp_path, device_ids):
        ir.compile(AddOne, output_dir=str(tmp_path), distributed_config=DistributedConfig(device_ids=device_ids[:2]))
        assert (tmp_path / "next_levels" / "child").is_dir(), f"no {tmp_path / 'next_levels'}"

    def test_simpler_api():
        from simpler.worker import Worker

    def test_own_assertion(tmp_path):
        assert (tmp_path / "mine.txt").exists(), f"missing {tmp_path / 'mine.txt'}"

    def test_bad_ring_size():
        RunConfig(ring_heap=1000)
"""


def test_out_of_scope_checks_are_one_line_each(tmp_path: Path) -> None:
    """Simpler's DFX files, pypto's generated sub-builds and simpler's API: one line each at the test's
    line, saying why; a test's own failed assertion and a bad RunConfig stay the test's."""
    write(tmp_path / "test_scope.py", OUT_OF_SCOPE_TEST)
    res = inner_pytest(tmp_path, "-q", "test_scope.py")
    assert res.returncode == 1 and "6 failed" in res.stdout, show(res)
    sections = {name: res.stdout.split(f"_ {name} _")[1].lstrip("_").split("\n_")[0].split("\n=")[0] for name in
                ("test_dep_gen_files", "test_swimlane_records", "test_generated_sub_build", "test_simpler_api",
                 "test_own_assertion", "test_bad_ring_size")}
    dfx = "are simpler's formats, out of scope; pldemu answers enable_chip_swimlane with its own Chrome/Perfetto trace"
    assert "test_scope.py:33: compiled.output_dir/dfx_outputs does not exist: simpler's DFX files" in res.stdout
    assert "test_scope.py:39: compiled.output_dir/dfx_outputs/rank0/d0/chip_swimlane_records.json does not " \
           "exist" in res.stdout, show(res)
    assert "test_scope.py:43: compiled.output_dir/next_levels does not exist: pldemu runs the program and " \
           "writes no pypto-generated code" in res.stdout, show(res)
    assert "test_scope.py:46: simpler is not provided by pldemu's pypto layer (out of scope, simpler's own " \
           "runtime API" in res.stdout, show(res)
    assert "test_scope.py:52: " in sections["test_bad_ring_size"] and "ring_heap must be a power of 2 >= 1024" in \
        sections["test_bad_ring_size"], show(res)
    for name in ("test_dep_gen_files", "test_swimlane_records", "test_generated_sub_build", "test_simpler_api",
                 "test_bad_ring_size"):
        assert sections[name].strip().count("\n") <= 1 and "Traceback" not in sections[name], (name, show(res))
    assert dfx in sections["test_dep_gen_files"] and dfx in sections["test_swimlane_records"], show(res)
    assert "AssertionError: missing" in sections["test_own_assertion"], show(res)  # the test's own, as it is
