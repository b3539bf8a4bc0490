"""``pldemu --version``: the version has one home, ``pldemu.__version__``, which pyproject.toml reads."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import pldemu
from pldemu.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_version_prints_the_packages_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"pldemu {pldemu.__version__}\n"


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "pldemu.__version__"}


def test_the_changelog_names_the_version() -> None:
    assert f"## {pldemu.__version__}" in (REPO / "CHANGELOG.md").read_text()
