"""The argument helpers every ``pldemu`` launcher shares: the job size and where its ranks run
(``-n``, ``--sim-hosts``, ``--hosts``, ``--hostfile``) and ``--job-timeout``.

The exit codes and the usage error are :mod:`pldemu.job.exits`, every runtime flag is one row of
:mod:`pldemu.job.flags`, and what a rank does with a refusal or a failure is :mod:`pldemu.harness.injob`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pldemu.job.argtypes import format_number, host_list, host_shape, positive_float, positive_int
from pldemu.job.exits import UsageError
from pldemu.job.launch import HOSTS_SCRIPT, LOCAL, Placement


def add_ranks_argument(parser: argparse.ArgumentParser, default: int, *, what: str = "") -> None:
    """``-n/--ranks N``: the job's size (None when not given; inside an MPI job: the job's size), and
    where the ranks run (``--sim-hosts``, ``--hosts``, ``--hostfile``; see :func:`settle_placement`)."""
    parser.add_argument("-n", "--ranks", type=positive_int, default=None, metavar="N",
                        help=f"number of MPI ranks (default {default}{what}, or what the hosts below "
                             "imply; inside an MPI job: its size)")
    group = parser.add_argument_group("hosts (default: every rank on this machine; see docs/multihost.md)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--sim-hosts", type=host_shape, default=None, metavar="HxR",
                       help="H simulated hosts of R ranks each: network namespaces on a private bridge, "
                            "TCP between them (root; scripts/hosts.sh); -n defaults to H*R")
    where.add_argument("--hosts", type=host_list, default=None, metavar="HOST:N,...",
                       help="run on these hosts with N ranks each (mpiexec -hosts); -n defaults to the sum")
    where.add_argument("--hostfile", default=None, metavar="FILE", help="mpiexec's host file (mpiexec -f FILE)")


def settle_placement(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with ``placement`` (a :class:`~pldemu.job.launch.Placement`) and ``ranks`` filled
    in from the host flags of :func:`add_ranks_argument`; a ``-n`` the hosts contradict, or a hostfile
    that cannot be read, is a UsageError. Commands without those flags get ``LOCAL``."""
    if "sim_hosts" not in vars(args):
        return args
    hostfile = args.hostfile
    if hostfile is not None:
        if not Path(hostfile).is_file():
            raise UsageError(f"--hostfile {hostfile}: no such file")
        hostfile = str(Path(hostfile).resolve())
    if args.sim_hosts is not None and not HOSTS_SCRIPT.is_file():
        raise UsageError(f"--sim-hosts needs {HOSTS_SCRIPT} (the scripts/ folder of a pldemu checkout)")
    where = Placement(sim_hosts=args.sim_hosts, hosts=args.hosts or (), hostfile=hostfile)
    implied = where.ranks
    if implied is not None and args.ranks is not None and args.ranks != implied:
        raise UsageError(f"-n {args.ranks} but {where.describe()} run {implied} ranks")
    return argparse.Namespace(**{**vars(args), "placement": where, "ranks": args.ranks or implied})


def placement(args: argparse.Namespace) -> Placement:
    """Where the job of the parsed command line runs (:func:`settle_placement`)."""
    where: Placement = getattr(args, "placement", LOCAL)
    return where


def add_job_timeout_argument(parser: argparse.ArgumentParser, default: float | None, *, text: str = "") -> None:
    """``--job-timeout S``: seconds the whole mpiexec job may take (the launcher's, not a rank's)."""
    parser.add_argument("--job-timeout", type=positive_float, default=default, metavar="S",
                        help=f"seconds the whole mpiexec job may take (default {text or format_number(default or 0)})")


__all__ = ["add_job_timeout_argument", "add_ranks_argument", "placement", "settle_placement"]
