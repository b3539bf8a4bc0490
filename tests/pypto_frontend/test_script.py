"""``pldemu python [FLAGS] SCRIPT [ARGS]`` and ``python -m pldemu.pypto``: a user's script run as ``python``
runs it, with the pypto layer on; pldemu's flags before the script reach every compiled call, the words
after it reach the script verbatim; the exit code is the script's own, or pldemu's for a failed call
(reported once at the script's line). The scripts in ``scripts/`` are written here in the style of
pypto's distributed tutorials (an argparse ``-d`` naming the devices)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from mpi_launch import IN_JOB_ENV, REPO_ROOT, MpiResult, job_env, run_tracked

from pldemu.api import JobError, RunResult
from pldemu.cli import build_parser, parse_command_line
from pldemu.cli.commands.python_run import options, script_words
from pldemu.job.exits import EXIT_ERROR, EXIT_FAIL, EXIT_JOB_TIMEOUT, EXIT_RACES, EXIT_USAGE
from pldemu.job.flags import RUNTIME_FLAGS
from pldemu.pypto.errors import FrontendError
from pldemu.pypto.execute import ProgramRunError
from pldemu.pypto.script import failure_exit
from pldemu.pypto.session import FrontendOptions

pytestmark = pytest.mark.launcher

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def pldemu_python(*argv: str, cwd: Path = REPO_ROOT, module: bool = False) -> MpiResult:
    """``pldemu python ARGV`` (``module``: ``python -m pldemu.pypto ARGV``) as a user runs it, its whole
    process tree killed if it outlives the timeout."""
    env = job_env({"PYTHONDONTWRITEBYTECODE": "1"})
    env.pop(IN_JOB_ENV, None)
    command = [sys.executable, "-m", "pldemu.pypto"] if module else [sys.executable, "-m", "pldemu", "python"]
    return run_tracked([*command, *argv], 180.0, env, cwd)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def line_of(script: Path, text: str) -> str:
    """``SCRIPT:N: code`` of the first line of ``script`` holding ``text`` (the code stripped)."""
    lines = script.read_text().splitlines()
    number, code = next((i, line) for i, line in enumerate(lines, 1) if text in line)
    return f"{script}:{number}: {code.strip()}"


def parse(*words: str) -> argparse.Namespace:
    return parse_command_line(build_parser(["python"]), ["python", *words])


# --- the command line --------------------------------------------------------------------------------

VALUES = {"--seed": "7", "--jitter": "12.5", "--straggler": "1:250", "--skew": "30", "--visibility": "deferred",
          "--fence-policy": "random", "--windows": "rma", "--timeout": "4.5", "--task-order": "fifo", "--cores": "3"}
"""A value other than the default for every value-taking runtime flag of the command."""


def test_flags_before_the_script_are_pldemus_and_every_word_after_it_the_scripts() -> None:
    flags = [f for f in RUNTIME_FLAGS.values() if "python" in f.commands]
    assert {"--jitter", "--straggler", "--skew", "--visibility", "--no-races", "--seed", "--timeout",
            "--invariants", "--windows", "--fence-policy", "--no-insert-fences"} <= {f.option for f in flags}
    words = [w for f in flags for w in ([f.option, VALUES[f.option]] if f.option in VALUES else [f.option])]
    after = ["run.py", "-d", "0,1", "--jitter", "3", "--", "-h", "--mode", "get"]
    args = parse(*words, "--job-timeout", "60", "--codegen-only", *after)
    assert script_words(args) == after
    opts, plain = options(args), options(parse("run.py"))
    for f in flags:  # every flag moved its field off the command's default
        assert getattr(opts.runtime, f.field) != getattr(plain.runtime, f.field), f.option
    assert (opts.timeout, opts.codegen_only, opts.runtime.jitter_us) == (60.0, True, 12.5)
    assert script_words(parse("--", "run.py", "--")) == ["run.py", "--"]


def test_the_defaults_are_the_pypto_layers_and_a_wait_gives_up_before_the_job() -> None:
    plain = options(parse("run.py"))
    assert plain == FrontendOptions() and plain.runtime.race_detect
    short = options(parse("--job-timeout", "30", "run.py"))
    assert (short.timeout, short.runtime.timeout) == (30.0, 10.0)
    given = options(parse("--job-timeout", "30", "--timeout", "25", "run.py"))
    assert given.runtime.timeout == 25.0
    with pytest.raises(ValueError, match="straggler"):
        FrontendOptions.from_flags({"straggler": (-1, 5.0)})


@pytest.mark.parametrize(("argv", "message"), [
    ((), "no script given"),
    (("--jitter", "50"), "no script given"),
    (("no_such_script.py", "-d", "0,1"), "no_such_script.py: no such script"),
    (("--jitter", "soon", "x.py"), "argument --jitter: expected microseconds"),
    (("--timeout", "0", "x.py"), "argument --timeout: expected a positive number"),
    (("--job-timeout", "-1", "x.py"), "argument --job-timeout: expected a positive number"),
    (("--straggler", "9", "x.py"), "argument --straggler"),
])
def test_a_bad_invocation_is_one_usage_line(argv: tuple[str, ...], message: str) -> None:
    res = pldemu_python(*argv)
    assert res.returncode == EXIT_USAGE and message in res.stderr, res.report()
    assert len(res.stderr.strip().splitlines()) == 1 and res.stdout == "", res.report()


# --- the script as python runs it (no compiled call) --------------------------------------------------

WHERE = """
    import json, os, sys
    import beside  # a module next to the script: its folder is sys.path[0]
    import pypto, torch
    print(json.dumps({"name": __name__, "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(),
                      "file": __file__, "beside": beside.VALUE, "pypto": pypto.__name__}))
"""


@pytest.mark.parametrize("module", [False, True], ids=["pldemu-python", "python-m-pldemu.pypto"])
def test_the_script_runs_as_main_with_its_own_argv_and_folder(tmp_path: Path, module: bool) -> None:
    script = write(tmp_path / "examples" / "where.py", WHERE)
    write(tmp_path / "examples" / "beside.py", "VALUE = 5\n")
    args = ["-d", "0,1", "--use-builtin", "--mode", "get", "--jitter", "3", "--", "-h"]
    res = pldemu_python("--seed", "2", "examples/where.py", *args, cwd=tmp_path, module=module)
    assert res.returncode == 0, res.report()
    seen = json.loads(res.stdout)
    assert seen == {"name": "__main__", "argv": [str(script), *args], "path0": str(script.parent),
                    "cwd": str(tmp_path), "file": str(script), "beside": 5, "pypto": "pldemu.pypto.surface"}


@pytest.mark.parametrize(("body", "code", "stderr"), [
    ("print('out')\nraise SystemExit(3)\n", 3, ""),
    ("import sys\nprint('out')\nsys.exit()\n", 0, ""),
    ("print('out')\n", 0, ""),
    ("print('out')\nraise SystemExit('need exactly 2 devices, got [0]')\n", 1, "need exactly 2 devices, got [0]\n"),
])
def test_the_exit_code_is_the_scripts_own(tmp_path: Path, body: str, code: int, stderr: str) -> None:
    write(tmp_path / "exits.py", body)
    res = pldemu_python("exits.py", cwd=tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (code, "out\n", stderr), res.report()


def test_any_other_exception_is_pythons_traceback_and_1(tmp_path: Path) -> None:
    script = write(tmp_path / "boom.py", """
        def lookup():
            return {}["key"]

        lookup()
    """)
    res = pldemu_python("boom.py", cwd=tmp_path)
    assert res.returncode == 1, res.report()
    want = (f'Traceback (most recent call last):\n  File "{script}", line 5, in <module>\n    lookup()\n'
            f'  File "{script}", line 3, in lookup\n')
    assert res.stderr.startswith(want) and res.stderr.endswith("KeyError: 'key'\n"), res.report()
    assert "runpy" not in res.stderr and "pldemu" not in res.stderr, res.report()


@pytest.mark.parametrize(("body", "want"), [
    ("import pypto\nfrom pypto.runtime import NoSuchWorker\n",
     "missing.py:2: pypto.runtime.NoSuchWorker is not provided by pldemu's pypto layer"),
    ("import pypto.language as pl\n\n\n@pl.program\nclass Bad:\n    @pl.function(type=pl.FunctionType.InCore)\n"
     "    def k(self, x: pl.Tensor[8, pl.FP32]) -> pl.Tensor[[1, 8], pl.FP32]:\n        return x\n",
     "missing.py:7: pl.Tensor[[dims], dtype] expected"),
])
def test_unsupported_or_bad_pypto_input_is_one_line_and_2(tmp_path: Path, body: str, want: str) -> None:
    write(tmp_path / "missing.py", body)
    res = pldemu_python("missing.py", cwd=tmp_path)
    assert res.returncode == EXIT_USAGE and res.stderr.startswith(f"{tmp_path}/{want}"), res.report()
    assert len(res.stderr.splitlines()) == 1, res.report()


def test_codegen_only_compiles_every_call_and_runs_nothing() -> None:
    res = pldemu_python("--codegen-only", str(SCRIPTS / "ring_shift.py"), "-d", "0,1,2", "--no-check", module=True)
    assert res.returncode == 0 and res.stdout == "untouched=True translated=True\n", res.report()


def test_a_signal_ends_the_run(tmp_path: Path) -> None:
    write(tmp_path / "term.py", """
        import os, signal, time
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
        open("after", "w").close()
    """)
    res = pldemu_python("term.py", cwd=tmp_path)
    assert res.returncode == 128 + signal.SIGTERM and "interrupted by SIGTERM" in res.stderr, res.report()
    assert not (tmp_path / "after").exists()


# --- compiled calls on MPI ranks ----------------------------------------------------------------------

def test_a_passing_script_exits_0_with_its_output() -> None:
    res = pldemu_python(str(SCRIPTS / "ring_shift.py"), "-d", "0,1,2", "--tag=--jitter 50")
    assert res.returncode == 0, res.report()
    assert res.stdout == "ring shift on 3 devices: OK --jitter 50\n" and res.stderr == "", res.report()


def test_a_race_exits_4_with_the_report_once_at_the_scripts_line() -> None:
    script = SCRIPTS / "reuse_race.py"
    res = pldemu_python("--seed", "3", "--timeout", "7", str(script), "-d", "0,1")
    assert res.returncode == EXIT_RACES and "done" not in res.stdout, res.report()
    first, _, rest = res.stderr.partition("\n")
    assert first == line_of(script, "compiled(rows, gots)"), res.report()
    assert rest.startswith("EarlyReuse on 2 devices: pldemu job on 2 ranks exited 4: races found"), res.report()
    read, write_ = (line_of(script, text).rsplit(":", 1)[0].rsplit("/", 1)[1]
                    for text in ("pld.tile.remote_load", "second, [0, 0]"))
    assert "read at" in rest and f"[{read}]" in rest and f"[{write_}]" in rest, res.report()
    assert "wait timeout 7s, seed 3" in rest, res.report()  # the flags before the script reached the job
    assert res.stderr.count("EarlyReuse on 2 devices") == 1 and "Traceback" not in res.stderr, res.report()
    # No frame of pldemu's own code (the scripts' folder may sit in a checkout called pldemu: not a frame).
    assert "pldemu/" not in res.stderr.replace(str(SCRIPTS), "").replace("pldemu-pypto-", ""), res.report()


def test_no_races_turns_the_detector_off() -> None:
    res = pldemu_python("--no-races", "--jitter", "50", str(SCRIPTS / "reuse_race.py"), "-d", "0,1")
    assert res.returncode == 0 and res.stdout == "done\n", res.report()


def test_a_deadlock_exits_3_with_the_wait_for_graph_at_the_programs_line() -> None:
    script = SCRIPTS / "missing_notify.py"
    res = pldemu_python("--timeout", "2", str(script), "-d", "0,1", module=True)
    assert res.returncode == EXIT_ERROR and "never printed" not in res.stdout, res.report()
    assert res.stderr.startswith(line_of(script, "compiled(torch.zeros") + "\n"), res.report()
    wait = line_of(script, "pld.system.wait").rsplit(":", 1)[0].rsplit("/", 1)[1]
    assert "wait-for graph" in res.stderr and f"[{wait}]" in res.stderr, res.report()
    assert "a wait gives up after 2s" in res.stderr and "Traceback" not in res.stderr, res.report()


# --- the exit code of a failed call -------------------------------------------------------------------

def _job(code: int) -> RunResult:
    return RunResult(ranks=2, exit_code=code, output="", wall_seconds=0.1)


@pytest.mark.parametrize(("err", "code"), [
    (FrontendError("pl.frobnicate is not supported", "p.py", 3), EXIT_USAGE),
    (ProgramRunError("p on 2 devices: ...", _job(EXIT_RACES)), EXIT_RACES),
    (ProgramRunError("p on 2 devices: ...", _job(EXIT_FAIL)), EXIT_FAIL),
    (ProgramRunError("p on 2 devices: ...", _job(EXIT_JOB_TIMEOUT)), EXIT_JOB_TIMEOUT),
    (JobError(_job(EXIT_ERROR)), EXIT_ERROR),
    (JobError(_job(EXIT_USAGE)), EXIT_USAGE),
    (JobError(_job(137)), EXIT_ERROR),
    (ProgramRunError("no result"), EXIT_ERROR),
])
def test_a_failed_call_exits_with_its_jobs_code(err: BaseException, code: int) -> None:
    assert failure_exit(err) == code


@pytest.mark.parametrize(("devices", "mode"), [("0,1", "put"), ("4,5,6", "get"), ("0", "get")])
def test_a_jit_script_runs_at_its_device_count(tmp_path: Path, devices: str, mode: str) -> None:
    res = pldemu_python("--jitter", "20", str(SCRIPTS / "jit_exchange.py"), "-d", devices, "--mode", mode,
                        cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"OK {mode} on {len(devices.split(','))} devices" in res.stdout


def test_a_jit_scripts_compile_only_folder_is_named_as_pyptos(tmp_path: Path) -> None:
    res = pldemu_python(str(SCRIPTS / "jit_exchange.py"), "--compile-only", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    folder = res.stdout.strip().rsplit(" ", 1)[1]
    assert folder.startswith("build_output/_jit_ring_") and (tmp_path / folder / "PLDEMU.txt").is_file()
