"""``pldemu python [PLDEMU FLAGS] SCRIPT [SCRIPT ARGS...]``: a user's Python script with the pypto layer
active, as ``python SCRIPT ARGS`` runs it against pypto (``python -m pldemu.pypto`` is the same command).

    pldemu python examples/distributed/04_barrier.py -d 0,1
    pldemu python --jitter 50 --seed 3 my_allreduce.py -d 0,1,2,3 --mode ring
    pldemu python --no-races --visibility deferred my_script.py

The flags before SCRIPT are pldemu's; every word after it goes to the script verbatim (``-d 0,1``,
``--help``, even a flag pldemu has). The runner is :mod:`pldemu.pypto.script`: the script runs as
``__main__`` in this process, every compiled call in this run's warm ``mpiexec`` job of its rank count,
with the race detector on unless ``--no-races``. Exit codes: the script's own when nothing failed; a
failed compiled call that escapes the script prints the script's line and pldemu's report once and
exits with the job's code (1 a check failed, 3 deadlock or a failing rank, 4 races, 124 the job
outlived ``--job-timeout``), 2 for unsupported or bad pypto input or a bad command line; any other
exception of the script is its traceback and 1; 128 + N when signal N ended the run.
"""

from __future__ import annotations

import argparse

from pldemu.cli.common import add_job_timeout_argument
from pldemu.job.argtypes import format_number
from pldemu.job.exits import UsageError, usage_error
from pldemu.job.flags import add_runtime_arguments, runtime_fields
from pldemu.job.prelaunch import add_force_argument
from pldemu.pypto.session import FrontendOptions

_DEFAULTS = FrontendOptions()

EPILOG = """\
examples:
  pldemu python examples/distributed/04_barrier.py -d 0,1
  pldemu python --jitter 50 --seed 3 my_allreduce.py -d 0,1,2,3
  python -m pldemu.pypto --no-races my_script.py      # the same command
  pldemu python --estimate l3_decode_fwd model.py      # will a call of it fit this machine?

Exit codes: the script's own when every compiled call succeeded; else pldemu's (1 a check failed,
2 bad input, 3 deadlock or a failing rank, 4 races, 124 a call's job timed out); another exception
of the script: its traceback and 1."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "%(prog)s [PLDEMU FLAGS] SCRIPT [SCRIPT ARGS...]"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    waits = (f"seconds one wait may block before it is a deadlock and the wait-for report is printed "
             f"(default: a third of --job-timeout, at least 1, at most {format_number(_DEFAULTS.runtime.timeout)})")
    add_runtime_arguments(parser, "python", helps={"--timeout": waits})
    parser.set_defaults(timeout=None)  # derived from --job-timeout unless given (FrontendOptions.from_flags)
    add_job_timeout_argument(parser, _DEFAULTS.timeout,
                             text=f"{format_number(_DEFAULTS.timeout)}, for each compiled call's run; a prepared "
                                  "worker's job: for each dispatch, from when the job serves it")
    parser.add_argument("--codegen-only", action="store_true",
                        help="compile every call and write compiled.output_dir, but run nothing (the tensors "
                             "stay as they were: a script that checks its results fails its checks)")
    parser.add_argument("--estimate", metavar="FUNCTION",
                        help="run nothing: import SCRIPT (its __main__ block does not run) and estimate the memory a "
                             "call of FUNCTION (a pl.jit function, a @pl.program or Program.function) needs from its "
                             "parameters' annotated shapes; exit 0 when it fits this machine, else 2 with the estimate "
                             "(what a model script that builds its inputs first cannot reach)")
    add_force_argument(parser)
    # One REMAINDER from the script's name on: a positional SCRIPT would take a "--" after it as its own.
    parser.add_argument("script_argv", nargs=argparse.REMAINDER, metavar="SCRIPT [SCRIPT ARGS...]",
                        help="the Python script (it runs as __main__) and its own arguments, verbatim "
                             "(sys.argv[1:])")


def options(args: argparse.Namespace) -> FrontendOptions:
    """The options every compiled call of the script runs with; a value pldemu refuses is a UsageError."""
    try:
        return FrontendOptions.from_flags(runtime_fields(args), args.job_timeout, codegen_only=args.codegen_only,
                                         force=args.force)
    except ValueError as err:
        raise UsageError(str(err)) from None


def script_words(args: argparse.Namespace) -> list[str]:
    """SCRIPT and its arguments as given (a leading ``--``, the end of pldemu's flags, left out); none
    is a UsageError."""
    words = list(args.script_argv)
    words = words[1:] if words[:1] == ["--"] else words
    if not words:
        raise UsageError("no script given: pldemu python [PLDEMU FLAGS] SCRIPT [SCRIPT ARGS...]")
    return words


def run(args: argparse.Namespace) -> int:
    from pldemu.pypto.script import Script, estimate_memory, run_script

    try:
        script, *script_args = script_words(args)
        opts = options(args)
        script_run = Script.at(script, script_args)
    except UsageError as err:
        return usage_error(args.command, str(err))
    if args.estimate is not None:
        return estimate_memory(script_run, args.estimate)
    return run_script(script_run, opts)
