"""``pldemu mutants``: the table, the TSV listing, one mutant's details and its diff, errors."""

from __future__ import annotations

import pytest

from pldemu.cli import SUBCOMMANDS, main
from pldemu.mutants import MUTANTS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["mutants", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_registered() -> None:
    assert SUBCOMMANDS["mutants"] == ("pldemu.cli.commands.mutants", "list the catalogue of known-broken recipe variants")


def test_table_lists_every_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "COLLECTIVE", "EXPECTED", "DESCRIPTION", "MODELS"]
    assert len(lines) == 1 + len(MUTANTS)
    for line, m in zip(lines[1:], MUTANTS.values(), strict=True):
        assert line.startswith(m.name + " ") and m.collective in line and m.description in line
        assert line.endswith(m.models)
    assert "must pass" in out


def test_tsv(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--tsv")
    rows = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and rows[0][0] == "name" and len(rows) == 1 + len(MUTANTS)
    assert all(len(r) == len(rows[0]) for r in rows)
    by_name = {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    assert by_name["wait-eq"]["variant"] == "wait_cmp=Eq" and by_name["wait-eq"]["expected"] == "deadlock"
    assert by_name["broadcast-rewrite-race"]["consume_fence"] == "false"


def test_show_is_a_unified_diff_against_the_correct_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "wait-eq", "--show")
    assert code == 0
    assert "# mutant wait-eq:" in out and "# variant:    wait_cmp=Eq" in out
    assert "--- allreduce (correct recipe)\n+++ allreduce (mutant wait-eq)\n" in out
    minus = [line for line in out.splitlines() if line.startswith("-  ")]
    plus = [line for line in out.splitlines() if line.startswith("+  ")]
    assert minus and all("cmp=Ge" in line for line in minus) and all("cmp=Eq" in line for line in plus)


def test_show_full_and_usage_mutant(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "broadcast-read-complete", "--show", "--full")
    assert code == 0 and "# control broadcast-read-complete" in out and "# expected:   must pass" in out
    assert "# lowered program of broadcast-read-complete\nprogram broadcast {" in out
    code, out, _ = run(capsys, "broadcast-rewrite-race", "--show")
    assert code == 0 and "identical to the correct recipe" in out and "consume fence: none" in out


@pytest.mark.parametrize("argv,fragment", [
    (["nope"], "unknown mutant 'nope'"),
    (["--show"], "--show needs a mutant NAME"),
    (["wait-eq", "--full"], "--full applies with --show"),
    (["wait-eq", "--tsv"], "--tsv lists the whole catalogue"),
])
def test_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith("pldemu mutants: error: ") and fragment in err
