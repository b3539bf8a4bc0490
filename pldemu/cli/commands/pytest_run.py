"""``pldemu pytest [PYTEST ARGS] PATH...``: pytest with the pypto layer active (``pytest -p pldemu.pypto``).

Every argument goes to pytest verbatim (pytest's own options, pypto's ``--device`` / ``--platform`` /
``--codegen-only`` and pldemu's ``--pldemu-*`` flags alike; ``pldemu pytest --help`` lists them all).
pytest runs in this process; each compiled pypto call starts its own isolated ``mpiexec`` job. pytest's
exit status becomes pldemu's: 0 every test passed (or was skipped), 1 a test failed, 2 bad input (a
usage error, or no test collected), 3 an internal error, 130 interrupted (Ctrl-C), 128 + N when
signal N (SIGTERM, SIGHUP) ended the session: the running job is killed and no further test starts.
"""

from __future__ import annotations

import argparse
from types import MappingProxyType

from pldemu.job.exits import EXIT_ERROR, EXIT_FAIL, EXIT_OK, EXIT_USAGE

PLUGIN = "pldemu.pypto"
EXIT_INTERRUPTED = 130

_EXIT_CODES = MappingProxyType({0: EXIT_OK, 1: EXIT_FAIL, 2: EXIT_INTERRUPTED, 3: EXIT_ERROR, 4: EXIT_USAGE,
                                5: EXIT_USAGE})
"""pytest.ExitCode -> pldemu's exit code (README's table): OK, TESTS_FAILED, INTERRUPTED, INTERNAL_ERROR,
USAGE_ERROR, NO_TESTS_COLLECTED."""

VERBATIM = "pytest_args"
"""``pldemu.cli.main`` puts every word after ``pytest`` here unparsed: argparse would misread pytest's options."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="[PYTEST ARGS] PATH",
                        help="pytest's arguments and the test paths, e.g. --device 0-3 --pldemu-jitter 50 "
                             "tests/st/distributed (see pldemu pytest --help: pytest's help with these options)")


def pytest_argv(args: argparse.Namespace) -> list[str]:
    """pytest's command line: the plugin, then the user's arguments as given."""
    return ["-p", PLUGIN, *args.pytest_args]


def run(args: argparse.Namespace) -> int:
    import pytest

    code = int(pytest.main(pytest_argv(args)))
    return code if code > 128 else _EXIT_CODES.get(code, EXIT_ERROR)  # 128 + N: a signal ended the session
