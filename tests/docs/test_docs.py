"""The docs stay true: links and anchors resolve, every command's flags are on its reference page (and no
flag it lacks), and every command line of every page's ``bash`` blocks (the README's and the
getting-started page's among them) and of the README's "I want to" table parses with the real parser.
Nothing here runs a job: fast, no MPI."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path

import pytest

from pldemu.cli import SUBCOMMANDS, build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference"
PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *DOCS.rglob("*.md")])
COMMAND_PAGES = PAGES
"""Every page's ``bash`` blocks are checked (the README's and getting-started's at least, as promised)."""

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
FENCE = re.compile(r"^\s*```")
SHELL_OPERATORS = {">", ">>", "<", "|", "&&", "||", ";", "&", "2>", "2>&1"}
"""Where a shown command line's own words end (a redirection, a pipe, the next command)."""

PYTEST_OWN_FLAGS = {"--junitxml", "--confcutdir", "--durations", "--lf", "--co", "--collect-only"}
"""pytest's own flags named on the ``pldemu pytest`` page (``pldemu pytest`` passes them through)."""


@dataclass(frozen=True)
class Line:
    """One line of a Markdown page, with whether it sits in a fenced block and that block's language."""

    number: int
    text: str
    fence: str | None


def lines_of(page: Path) -> Iterator[Line]:
    fence: str | None = None
    for number, text in enumerate(page.read_text().splitlines(), 1):
        if FENCE.match(text):
            fence = None if fence is not None else (text.strip()[3:].strip() or "text")
            continue
        yield Line(number, text, fence)


def prose(page: Path) -> Iterator[Line]:
    """The page outside fenced blocks, with inline code spans blanked (a link inside them is text)."""
    for line in lines_of(page):
        if line.fence is None:
            yield Line(line.number, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line.text), None)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: links to their text, lowercase, punctuation but '-' and '_' dropped
    (backticks too), spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets GitHub's -1, -2 suffixes."""
    seen: dict[str, int] = {}
    out = set()
    for line in lines_of(page):
        match = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line.text)
        if line.fence is None and match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file is missing or whose #anchor names no heading there."""
    broken = []
    for line in prose(page):
        for match in LINK.finditer(line.text):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}:{line.number}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no heading with anchor #{anchor} in {dest.relative_to(REPO)})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_slug_follows_githubs_rules() -> None:
    assert slug("Races: `--races`, `--trace`, `pldemu trace-plot`") == "races---races---trace-pldemu-trace-plot"
    assert slug("Running pypto's distributed tests") == "running-pyptos-distributed-tests"
    assert slug("Running pypto scripts and `pl.jit` programs") == "running-pypto-scripts-and-pljit-programs"


def subparser(command: str) -> argparse.ArgumentParser:
    """The parser of one subcommand, as ``pldemu COMMAND --help`` shows it."""
    parser = build_parser([command])
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return actions[0].choices[command]


def command_flags(command: str) -> set[str]:
    return {option for action in subparser(command)._actions for option in action.option_strings}


@dataclass(frozen=True)
class _Registered:
    """The plugin manager the pypto plugin asks: pldemu's own plugin is registered (its options are added
    from pldemu.pytest_plugin below, once)."""

    def is_registered(self, plugin: object) -> bool:
        return True


def plugin_flags() -> set[str]:
    """The options ``pldemu pytest`` adds to pytest's: pypto's (pldemu.pypto.plugin) and pldemu's
    (pldemu.pytest_plugin), read from the plugins' own pytest_addoption."""
    from _pytest.config.argparsing import Parser

    from pldemu import pytest_plugin
    from pldemu.pypto import plugin

    parser = Parser(_ispytest=True)
    plugin.pytest_addoption(parser, _Registered())  # type: ignore[arg-type]
    pytest_plugin.pytest_addoption(parser)
    return {name for group in parser._groups for option in group.options for name in option.names()}


def flags_of(command: str) -> set[str]:
    return plugin_flags() if command == "pytest" else command_flags(command) - {"-h", "--help"}


def named_flags(page: Path) -> set[str]:
    """Every --flag the page names (prose, code spans and code blocks alike)."""
    return {flag for line in lines_of(page) for flag in FLAG.findall(line.text)}


FOREIGN = {"lower": {"--visibility"}}
"""--flags a reference page names that its command lacks, on purpose: ``pldemu lower --fences``'s help
says it prints what ``--visibility fenced`` (of run, check, stress) runs."""


def paragraphs(page: Path) -> Iterator[str]:
    """The page's paragraphs (table rows and code blocks included), as text."""
    block: list[str] = []
    for line in lines_of(page):
        if line.text.strip():
            block.append(line.text)
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def foreign(command: str, page: Path) -> set[str]:
    """The --flags a reference page may name that its command lacks: another command's, in a paragraph
    that names that command (``pldemu check --size``), pytest's own on the pytest page, ``--help``."""
    allowed = {"--help"} | FOREIGN.get(command, set()) | (PYTEST_OWN_FLAGS if command == "pytest" else set())
    for text in paragraphs(page):
        for other in set(re.findall(r"pldemu ([a-z-]+)", text)) & set(SUBCOMMANDS) - {command}:
            allowed |= set(FLAG.findall(text)) & flags_of(other)
    return allowed


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_every_flag_is_on_its_reference_page(command: str) -> None:
    """In the page's "## Flags" table, not just somewhere in its prose."""
    page = REFERENCE / f"{command}.md"
    text = page.read_text().split("\n## Flags\n", 1)[1].split("\n## ", 1)[0]
    missing = sorted(flag for flag in flags_of(command) if f"`{flag}`" not in text)
    assert missing == [], f"{page.relative_to(REPO)} does not list {missing}"


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_reference_page_names_no_flag_its_command_lacks(command: str) -> None:
    page = REFERENCE / f"{command}.md"
    unknown = named_flags(page) - flags_of(command) - foreign(command, page)
    assert sorted(unknown) == [], f"{page.relative_to(REPO)} names flags pldemu {command} lacks"


def test_every_command_has_a_reference_page_in_the_index() -> None:
    index = (REFERENCE / "README.md").read_text()
    assert [c for c in SUBCOMMANDS if f"]({c}.md)" not in index] == []


def shell_lines(page: Path) -> Iterator[tuple[int, list[str]]]:
    """The command lines of the page's ``bash`` blocks as words (comments dropped, continuations joined,
    leading VAR=value assignments dropped, cut at a redirection or pipe)."""
    pending = ""
    for line in lines_of(page):
        if line.fence != "bash":
            continue
        pending += line.text
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        words = list(takewhile(lambda word: word not in SHELL_OPERATORS, shlex.split(pending, comments=True)))
        pending = ""
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words = words[1:]
        if words:
            yield line.number, words


def table_commands(page: Path) -> Iterator[tuple[int, list[str]]]:
    """The ``pldemu ...`` code spans of the rows of a table under an "I want to ..." heading (the README's)."""
    heading = ""
    for line in lines_of(page):
        if line.fence is None and line.text.startswith("#"):
            heading = line.text.lstrip("#").strip()
        if line.fence is None and line.text.startswith("|") and heading.startswith("I want to"):
            for span in re.findall(r"`(pldemu [^`]*)`", line.text):
                yield line.number, shlex.split(span)


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M))


def command_problem(words: list[str]) -> str | None:
    """Why this command line would not parse, or None. Nothing is run: a ``pldemu`` line goes through the
    real parser (its usage error becomes the problem), a ``make`` line must name a Makefile target."""
    if words[0] == "make":
        unknown = [w for w in words[1:] if not w.startswith("-") and "=" not in w and w not in makefile_targets()]
        return f"no Makefile target {unknown}" if unknown else None
    if words[0] != "pldemu":
        return None
    if len(words) > 1 and words[1] == "pytest":
        unknown = [w.split("=")[0] for w in words[2:] if re.match(r"^--(no-)?pldemu-", w)]
        unknown = [w for w in unknown if w not in plugin_flags()]
        return f"pldemu pytest has no {unknown}" if unknown else None
    try:
        build_parser([words[1]] if len(words) > 1 else []).parse_args(words[1:])
    except SystemExit as stop:
        return None if stop.code == 0 else f"pldemu refuses it (exit {stop.code})"
    return None


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shown_command_line_parses(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = []
    for number, words in [*shell_lines(page), *table_commands(page)]:
        problem = command_problem(words)
        if problem is not None:
            problems.append(f"{page.relative_to(REPO)}:{number}: {shlex.join(words)}: {problem}")
    assert problems == [], "\n".join([*problems, capsys.readouterr().err])


def test_a_command_line_check_can_fail() -> None:
    assert command_problem(["pldemu", "check", "allreduce", "--no-such-flag"]) is not None
    assert command_problem(["pldemu", "frobnicate"]) is not None
    assert command_problem(["pldemu", "pytest", "--pldemu-no-such", "tests"]) is not None
    assert command_problem(["make", "no-such-target"]) is not None
    assert command_problem(["pldemu", "check", "allreduce", "--mode", "ring", "-n", "4"]) is None


def test_the_readmes_exit_codes_are_the_launchers() -> None:
    """The README's exit-code table lists exactly the codes a job returns, and 128+N for a signal."""
    from pldemu.job.launch import DOCUMENTED_EXITS

    text = (REPO / "README.md").read_text()
    table = text[text.index("## Exit codes"):].split("\n## ", 1)[0]
    codes = re.findall(r"^\|\s*(\d+\+N|\d+)\s*\|", table, re.M)
    assert codes == [*map(str, DOCUMENTED_EXITS), "128+N"]
