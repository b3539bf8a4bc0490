"""``pldemu stress --all-mutants --visibility fenced``, bounded: every catalogue entry that a check
catches (not the deadlocks, which end their job) runs through the command's own in-job path
(``pldemu stress --mutant NAME --visibility fenced``, inside this MPI job: no mpiexec per entry) with
a budget of 40 calls. Each mutant is caught by a kind it declares, and the control passes
(the outcome of the job's result file). The entries of the fenced model run with their marker dropped and the runtime's pass off
(``with_mutant_schedule``); the others get InsertCommFence from the runtime, so the weak order must
not hide their bugs nor break the control. The full command is measured in docs/races.md."""

from __future__ import annotations

import pytest
from helpers import agree
from mpi4py import MPI

from pldemu.cli import main
from pldemu.job.outcome import read_outcome
from pldemu.mutants import MUTANTS

pytestmark = [
    pytest.mark.mpi(min_size=4),
    pytest.mark.skipif(MPI.COMM_WORLD.Get_size() != 4, reason="the catalogue's entries run on 4 ranks"),
]

CHECKED = [name for name, m in MUTANTS.items() if "deadlock" not in m.expected]


@pytest.mark.parametrize("name", CHECKED)
def test_catalogue_entry_in_fenced_visibility(comm: MPI.Intracomm, name: str,
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    m = MUTANTS[name]
    path = comm.bcast(str(tmp_path_factory.mktemp("fenced") / "outcome.json") if comm.Get_rank() == 0 else None)
    code = main(["stress", "--mutant", name, "--visibility", "fenced", "--iters", "40", "--timeout", "20",
                 "--result-file", path])
    comm.Barrier()  # rank 0 has written the outcome
    outcome = read_outcome(path)
    kind = None if outcome is None else outcome.kind
    ok = code == 0 and outcome is not None and (kind is None if m.must_pass else kind in m.expected)
    agree(comm, ok, f"{name}: exit {code}, outcome {None if outcome is None else outcome.describe()}")
