"""docker/ without a container engine: the scripts parse, refuse bad usage, and the Dockerfile copies
only files that exist and that docker/build.sh puts in its build context. The real multi-container run
is opt-in (``PLDEMU_CONTAINER_TEST=1`` with a built image, see docker/README.md); CI does not run it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from mpi_launch import REPO_ROOT

DOCKER = Path(REPO_ROOT) / "docker"
SCRIPTS = sorted(DOCKER.glob("*.sh"))


def copy_sources(dockerfile: str) -> list[str]:
    """Every source path of the COPY / ADD instructions (``--from=`` stages and flags excluded)."""
    text = re.sub(r"\\\n", " ", dockerfile)
    sources: list[str] = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) < 3 or words[0].upper() not in ("COPY", "ADD"):
            continue
        if any(w.startswith("--from") for w in words):
            continue
        sources += [w for w in words[1:-1] if not w.startswith("--")]
    return sources


def missing_sources(dockerfile: str, root: Path, context: list[str]) -> list[str]:
    """The COPY / ADD sources that do not exist under ``root`` or lie outside the build context."""
    return [src for src in copy_sources(dockerfile)
            if not (root / src).exists() or Path(src).parts[0] not in context]


def build_context() -> list[str]:
    """The top-level paths docker/build.sh ships as the build context (its CONTEXT array)."""
    found = re.search(r"^CONTEXT=\(([^)]*)\)", (DOCKER / "build.sh").read_text(), re.MULTILINE)
    assert found, "docker/build.sh has no CONTEXT=(...) line"
    return found.group(1).split()


def test_every_script_parses() -> None:
    assert {p.name for p in SCRIPTS} >= {"build.sh", "run-job.sh", "lib.sh", "node.sh"}
    for script in SCRIPTS:
        res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert res.returncode == 0, f"{script.name}: {res.stderr}"


def test_bash_n_catches_a_broken_script(tmp_path: Path) -> None:
    broken = tmp_path / "broken.sh"
    broken.write_text("if true; then\n  echo unterminated\n")
    assert subprocess.run(["bash", "-n", str(broken)], capture_output=True, check=False).returncode != 0


def test_dockerfile_copies_only_existing_files_of_the_context() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    context = build_context()
    assert all((Path(REPO_ROOT) / name).exists() for name in context)
    assert {"pyproject.toml", "pldemu", "docker/node.sh"} <= set(copy_sources(dockerfile))
    assert missing_sources(dockerfile, Path(REPO_ROOT), context) == []


def test_missing_copy_source_is_reported(tmp_path: Path) -> None:
    (tmp_path / "here").write_text("x")
    (tmp_path / "elsewhere").write_text("x")
    dockerfile = "FROM scratch\nCOPY here /a\nCOPY --chown=0:0 gone \\\n    /b\nCOPY elsewhere /c\n"
    assert missing_sources(dockerfile, tmp_path, ["here", "gone"]) == ["gone", "elsewhere"]


def test_containers_conf_has_the_settings_podman_needs_as_root() -> None:
    conf = tomllib.loads((DOCKER / "containers.conf").read_text())
    assert conf["engine"] == {"runtime": "runc", "cgroup_manager": "cgroupfs"}
    assert "nofile=1024:1024" in conf["containers"]["default_ulimits"]


@pytest.mark.parametrize("argv", [[], ["2"], ["2", "pldemu"], ["0", "--", "pldemu", "check"],
                                  ["x", "--", "pldemu"], ["-r", "0", "2", "--", "pldemu"],
                                  ["-q", "2", "--", "pldemu"]])
def test_run_job_refuses_bad_usage_before_touching_an_engine(argv: list[str]) -> None:
    env = {**os.environ, "PLDEMU_ENGINE": "/nonexistent/engine"}
    res = subprocess.run(["bash", str(DOCKER / "run-job.sh"), *argv], capture_output=True, text=True,
                         env=env, check=False, stdin=subprocess.DEVNULL, timeout=30)
    assert res.returncode == 2, res.stderr
    assert "usage: " in res.stderr and res.stderr.count("\n") == 1, res.stderr


def _engine() -> str | None:
    return os.environ.get("PLDEMU_ENGINE") or shutil.which("podman") or shutil.which("docker")


@pytest.mark.skipif(os.environ.get("PLDEMU_CONTAINER_TEST") != "1" or _engine() is None,
                    reason="opt-in: PLDEMU_CONTAINER_TEST=1, podman or docker, and an image from docker/build.sh")
def test_two_containers_run_one_job() -> None:
    res = subprocess.run(["bash", str(DOCKER / "run-job.sh"), "2", "--", "pldemu", "check", "allreduce", "-n", "2"],
                         capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    hosts = set(re.findall(r"^# rank \d+: processor (\S+), 1 rank\(s\)", res.stdout, re.MULTILINE))
    assert len(hosts) == 2, res.stdout
    assert ": PASS" in res.stdout
    moved = [int(b) for b in re.findall(r"eth0 during the job: (\d+) bytes in", res.stdout)]
    assert len(moved) == 2 and min(moved) > 20 * 4096, res.stdout
    engine = _engine()
    assert engine is not None
    network = re.search(r"on network (\S+),", res.stdout)
    assert network, res.stdout
    for kind, name in [("network", network.group(1)), *(("container", h) for h in hosts)]:
        left = subprocess.run([engine, kind, "inspect", name], capture_output=True, check=False)
        assert left.returncode != 0, f"{kind} {name} left behind"
