"""The pytest plugin that runs pypto's system tests on pldemu: ``pytest -p pldemu.pypto PATH``.

(``pldemu pytest PATH`` is the same run.) For the whole session it

* activates the pypto layer (``import pypto`` / ``torch`` resolve to pldemu; :mod:`pldemu.pypto.finder`)
  before the first conftest or test module is imported, and deactivates it at the end;
* adds pypto's system-test options, ``--device`` (default ``0-3``, so that multi-rank tests run rather
  than skip), ``--platform`` and ``--codegen-only``, and its fixtures ``test_config`` (``.platform``,
  ``.codegen_only``, ``.device_id``) and ``device_ids`` (the ``--device`` list);
* registers pypto's ``platforms(*ids)`` marker (a test for other platforms than ``--platform`` skips),
  and keeps running the other files when one fails to import (a pypto name the layer lacks);
* loads no conftest.py above the given paths (pypto's ``tests/st/conftest.py`` imports compiler
  internals): unless ``--confcutdir`` is given, it is set to the deepest folder holding every path;
* hands pldemu's ``--pldemu-*`` flags (those of :mod:`pldemu.pytest_plugin`, defined once there) to every
  compiled call through :class:`~pldemu.pypto.session.FrontendOptions`; the race detector is on
  unless ``--no-pldemu-races``;
* reports a failed compiled call (:data:`CLEAN_FAILURES`: the job's ``ProgramRunError`` or a
  :class:`pldemu.JobError`, or a ``FrontendError`` of unsupported input) as a plain failure: the test
  line that made the call, then pldemu's report (the program's file:line, races, the deadlock's
  wait-for graph, every rank's output) without pldemu's own traceback;
* reports a read of a file pldemu does not write into ``compiled.output_dir`` (pypto's generated host
  or orchestration sources, ``orchestration/host_orch.py``), or a failed assertion that names such a
  missing path (a generated sub-build, simpler's DFX files under ``dfx_outputs/``), as one line at the
  test's line saying why it is out of scope, not a bare ``FileNotFoundError`` or assertion traceback;
* reports a test that imports a pypto name the layer lacks, or simpler's own API (``simpler.*``,
  ``pypto.runtime.device_runner``), as one line at the test's line.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import pldemu.pytest_plugin as pldemu_plugin
from pldemu.job.launch import Interrupted
from pldemu.pool.client import JobPool, use_pool
from pldemu.pypto.artifacts import output_dir_of
from pldemu.pypto.dfx import DFX_FOLDER, TRACE_PREFIX
from pldemu.pypto.errors import FrontendError, call_site, missing_pypto_name, not_provided
from pldemu.pypto.finder import activate, deactivate
from pldemu.pypto.script import CLEAN_FAILURES
from pldemu.pypto.session import FrontendOptions, use_options

DEFAULT_DEVICES = "0-3"
"""pypto's own default is ``0`` (one NPU), which skips every multi-rank test."""
DEFAULT_PLATFORM = "a2a3sim"
PLATFORMS_MARKER = "platforms"
"""pypto's marker restricting a test to some platforms."""
PLATFORM_PARAM = "platform"
"""The parameter name pypto's tests parametrize over platforms with."""
HARNESS_RUNNER = "harness.core.test_runner"
"""pypto's test harness module (in its ``tests/st`` folder) that defines ``TestRunner``."""

_OPTIONS = pytest.StashKey[FrontendOptions]()


def parse_devices(text: str) -> list[int]:
    """``--device``: ``0``, ``0-3``, ``0,1,12`` or a mix (``0-3,8``), in the order given, each id once."""
    devices: list[int] = []
    for token in (t.strip() for t in str(text).split(",")):
        if not token:
            continue
        first, dash, last = token.partition("-")
        try:
            low, high = int(first), int(last if dash else first)
        except ValueError:
            raise pytest.UsageError(f"--device {text}: {token!r} is not a device id or a range A-B") from None
        if low < 0 or high < low:
            raise pytest.UsageError(f"--device {text}: {token!r} is not a non-decreasing range of ids >= 0")
        devices.extend(range(low, high + 1))
    if not devices:
        raise pytest.UsageError(f"--device {text!r}: no device ids")
    return list(dict.fromkeys(devices))


def parse_platforms(text: str) -> tuple[str, ...]:
    """``--platform``: one id or several, comma-separated (pypto's allowlist), in order, each once."""
    platforms = tuple(dict.fromkeys(p.strip() for p in str(text).split(",") if p.strip()))
    if not platforms:
        raise pytest.UsageError(f"--platform {text!r}: no platform ids")
    return platforms


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.is_registered(pldemu_plugin):
        # `-p pldemu.pypto` registers before the entry-point plugins load (they then skip the name);
        # with plugin autoload off, this is what brings the --pldemu-* flags.
        pluginmanager.register(pldemu_plugin, "pldemu")
    group = parser.getgroup("pypto", "pypto's system-test options (pldemu's pypto layer)")
    group.addoption("--device", default=DEFAULT_DEVICES, metavar="IDS",
                    help="device ids, e.g. 0-3 or 0,1,12: their count is the ranks a test may use "
                         f"(default {DEFAULT_DEVICES}; pypto's own default is 0)")
    group.addoption("--platform", default=DEFAULT_PLATFORM,
                    help="the platforms tests run for, comma-separated as pypto's (e.g. a2a3sim,a2a3; the first is "
                         f"test_config's; recorded, pldemu computes the same on each; default {DEFAULT_PLATFORM})")
    group.addoption("--codegen-only", action="store_true", default=False,
                    help="compile and write the artifacts, but run nothing")
    group.addoption("--pldemu-force", action="store_true", default=False, dest="pldemu_force",
                    help="run a compiled call even when its estimated memory exceeds what the machine has")


def _explicit_confcutdir(args: Sequence[str]) -> bool:
    return any(a == "--confcutdir" or a.startswith("--confcutdir=") for a in args)


def conftest_cut(paths: Sequence[str], invocation_dir: Path) -> Path | None:
    """The deepest folder holding every given test path (a file's folder; ``::`` node ids stripped),
    or None when no path names an existing file or folder."""
    folders = []
    for raw in paths:
        path = (invocation_dir / raw.split("::", 1)[0]).resolve()
        if path.exists():
            folders.append(str(path if path.is_dir() else path.parent))
    return Path(os.path.commonpath(folders)) if folders else None


def suite_paths(paths: Sequence[str], invocation_dir: Path) -> list[Path]:
    """What pypto's ``tests/st/conftest.py`` (not loaded: see ``conftest_cut``) puts on ``sys.path`` for a
    test under a ``tests/st`` folder: that folder (pypto's ``harness``) and the project root above
    ``tests`` (pypto's ``examples`` package, which ``test_l3_explicit_dispatch_onboard`` imports)."""
    out: list[Path] = []
    for raw in paths:
        path = (invocation_dir / raw.split("::", 1)[0]).resolve()
        st = next((p for p in (path, *path.parents) if p.name == "st" and p.parent.name == "tests"), None)
        if st is not None:
            out += [p for p in (st, st.parent.parent) if p not in out]
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Before any conftest is imported: cut the conftest search at the given paths, put pypto's suite folders
    on ``sys.path`` as its conftest would, activate the layer."""
    namespace = early_config.known_args_namespace
    if not _explicit_confcutdir(args):
        cut = conftest_cut(namespace.file_or_dir or [], early_config.invocation_params.dir)
        if cut is not None:
            namespace.confcutdir = str(cut)
    for folder in suite_paths(namespace.file_or_dir or [], early_config.invocation_params.dir):
        if str(folder) not in sys.path:
            sys.path.append(str(folder))  # after the test's own folders, as a lookup of last resort
    activate()


def frontend_options(config: pytest.Config) -> FrontendOptions:
    """The options every compiled call of the session runs with (the ``--pldemu-*`` flags applied)."""
    try:
        return FrontendOptions.from_flags(pldemu_plugin.runtime_overrides(config), config.getoption("pldemu_timeout"),
                                          codegen_only=config.getoption("codegen_only"),
                                          platform=parse_platforms(config.getoption("platform"))[0],
                                          force=config.getoption("pldemu_force"))
    except ValueError as err:
        raise pytest.UsageError(f"pldemu: {err}") from None


def pytest_configure(config: pytest.Config) -> None:
    activate()  # a no-op after pytest_load_initial_conftests; needed when registered later
    parse_devices(config.getoption("device"))
    parse_platforms(config.getoption("platform"))
    config.stash[_OPTIONS] = frontend_options(config)
    config.addinivalue_line("markers", f"{PLATFORMS_MARKER}(*ids): run the test only when --platform is one of ids")
    # A file using pypto beyond the layer fails to import with its one reason; the other files still run.
    config.option.continue_on_collection_errors = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    platforms = parse_platforms(config.getoption("platform"))
    _deselect_other_platforms(config, items, platforms)
    for item in items:
        marker = item.get_closest_marker(PLATFORMS_MARKER)
        if marker is not None and not set(platforms) & set(marker.args):
            item.add_marker(pytest.mark.skip(reason=f"for platforms {', '.join(marker.args)}, not --platform "
                                                    f"{','.join(platforms)}"))


def _deselect_other_platforms(config: pytest.Config, items: list[pytest.Item], platforms: tuple[str, ...]) -> None:
    """A variant of a test parametrized by ``platform`` (pypto's ``PLATFORMS`` lists) runs for the
    ``--platform`` ids only; the others are deselected, as pypto's conftest does."""
    other = [item for item in items if getattr(getattr(item, "callspec", None), "params", {}).get(
        PLATFORM_PARAM, platforms[0]) not in platforms]
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]


def pytest_unconfigure(config: pytest.Config) -> None:
    deactivate()


def pytest_report_header(config: pytest.Config) -> str:
    opts = config.stash[_OPTIONS]
    r = opts.runtime
    return (f"pldemu pypto layer: devices {config.getoption('device')}, races {'on' if r.race_detect else 'off'}, "
            f"jitter {r.jitter_us:g} us, visibility {r.visibility}, seed {r.seed}, job timeout {opts.timeout:g} s")


@pytest.fixture(scope="session")
def device_ids(request: pytest.FixtureRequest) -> list[int]:
    """The ``--device`` ids: a test with P ranks uses ``device_ids[:P]`` and skips with fewer."""
    return parse_devices(request.config.getoption("device"))


@pytest.fixture(scope="session")
def test_config(request: pytest.FixtureRequest, device_ids: list[int]) -> Any:
    """pypto's session configuration, a ``pypto.runtime.RunConfig`` as in pypto's conftest (``.platform``
    goes to ``ir.compile``; tests pass it to calls as ``config=``)."""
    from pldemu.pypto.surface.runtime import RunConfig

    return RunConfig(platform=parse_platforms(request.config.getoption("platform"))[0], device_id=device_ids[0],
                     codegen_only=request.config.getoption("codegen_only"))


@pytest.fixture(scope="session")
def test_runner(test_config: Any) -> Any:
    """pypto's ``TestRunner`` (its harness, from the suite's ``tests/st`` folder) over ``test_config``, as in
    pypto's conftest: ``test_runner.run(case)`` compiles the case's program with pldemu's ``ir.compile`` and
    runs it on pldemu (:mod:`pldemu.pypto.harness_build`)."""
    import importlib

    return importlib.import_module(HARNESS_RUNNER).TestRunner(test_config)


@pytest.fixture(autouse=True)
def _pldemu_pypto_options(request: pytest.FixtureRequest, pldemu_job_pool: JobPool | None) -> Iterator[FrontendOptions]:
    """Every test's compiled calls read the session's options (:func:`pldemu.pypto.session.current_options`)
    and run in the session's warm jobs (:mod:`pldemu.pool`; ``--no-pldemu-warm-jobs``: a job per call)."""
    with use_options(request.config.stash[_OPTIONS]) as opts, use_pool(pldemu_job_pool):
        yield opts


class PyptoModule(pytest.Module):
    """A test module whose import stops at a pypto name the layer lacks, or at a bad program it defines
    (a :class:`FrontendError`), fails to collect with one line (``file:line: pypto.x.Y is not provided
    ...``, ``file:line: pl.Tensor[[dims], dtype] expected ...``), not pytest's import traceback."""

    def _getobj(self) -> Any:
        try:
            return super()._getobj()
        except (self.CollectError, AttributeError, FrontendError) as err:
            cause = err.__cause__ if isinstance(err, self.CollectError) else err
            if isinstance(cause, FrontendError):  # a program the module defines at import, at its line
                raise self.CollectError(str(cause)) from None
            name = missing_pypto_name(cause) if cause is not None else None
            if name is None or cause is None:
                raise
            where = call_site(cause, self.path.__eq__, innermost=True).split(": ", 1)[0]
            raise self.CollectError(f"{where + ': ' if where else ''}{not_provided(name)}") from None


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module:
    return PyptoModule.from_parent(parent, path=module_path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    except CLEAN_FAILURES as err:
        message = f"{call_site(err, item.path.__eq__)}{err}"
    except FileNotFoundError as err:
        message = _not_written(err, item.path)
    except ImportError as err:
        message = _not_importable(err, item.path)
    except AssertionError as err:
        message = _asserts_unwritten(err, item.path)
    except Interrupted as stop:
        # pytest records any other BaseException as the test's failure and carries on; a SIGTERM /
        # SIGHUP / Ctrl-C that killed the job must end the session (128 + the signal number).
        pytest.exit(f"pldemu: {stop}: the job and its processes were killed", returncode=stop.exit_code)
    pytest.fail(message, pytrace=False)  # outside the except: no "during handling" chain of pldemu frames


def _not_written(err: FileNotFoundError, test_file: Path) -> str:
    """One line for a file the test expects in ``compiled.output_dir`` and pldemu does not write; any
    other missing file is the test's own error, re-raised."""
    missing = Path(str(err.filename)) if err.filename is not None else None
    root = output_dir_of(missing) if missing is not None else None
    if missing is None or root is None:
        raise err
    return _at_test_line(err, test_file) + _unwritten_reason(missing, root)


_PATHS = re.compile(r"/[^\s'\"(),:]+")
"""Absolute paths in an assertion's message (pytest's explanation shows them as ``PosixPath('...')``)."""


def _asserts_unwritten(err: AssertionError, test_file: Path) -> str:
    """One line for a failed assertion whose message names a path in a ``compiled.output_dir`` that pldemu
    does not write (the test inspects pypto's generated files or simpler's DFX files); any other failed
    assertion is the test's own, re-raised as it is."""
    for text in _PATHS.findall(str(err)):
        path = Path(text)
        root = output_dir_of(path)
        if root is not None and path != root and not path.exists():
            return _at_test_line(err, test_file) + _unwritten_reason(path, root)
    raise err


def _not_importable(err: ImportError, test_file: Path) -> str:
    """One line for a test that imports a pypto name the layer lacks or simpler's own API; any other
    import error is the test's own, re-raised."""
    name = missing_pypto_name(err)
    if name is None:
        raise err
    return _at_test_line(err, test_file) + not_provided(name)


def _at_test_line(err: BaseException, test_file: Path) -> str:
    where = call_site(err, test_file.__eq__).split(": ", 1)[0]
    return f"{where}: " if where else ""


def _unwritten_reason(missing: Path, root: Path) -> str:
    """Why ``missing`` (under the output folder ``root``) is not there: simpler's DFX files under
    ``dfx_outputs/`` are out of scope (pldemu's own trace answers the swimlane switch); anything else would
    be pypto's generated code."""
    relative = missing.relative_to(root)
    if relative.parts[0] == DFX_FOLDER:
        return (f"compiled.output_dir/{relative} does not exist: simpler's DFX files (deps.json, scope_stats, "
                "chip swimlane records, per rank and dispatch) are simpler's formats, out of scope; pldemu answers "
                f"enable_chip_swimlane with its own Chrome/Perfetto trace ({DFX_FOLDER}/{TRACE_PREFIX}<k>.json) and "
                "the other DFX switches have no effect (see docs/pypto-frontend.md)")
    return (f"compiled.output_dir/{relative} does not exist: pldemu runs the program and writes no pypto-generated "
            "code (host or orchestration sources, kernels, per-orchestration sub-builds), only its own programs "
            "(out of scope: see docs/pypto-frontend.md)")


__all__ = [
    "CLEAN_FAILURES",
    "DEFAULT_DEVICES",
    "DEFAULT_PLATFORM",
    "PyptoModule",
    "conftest_cut",
    "device_ids",
    "frontend_options",
    "missing_pypto_name",
    "parse_devices",
    "parse_platforms",
    "test_config",
    "test_runner",
]
