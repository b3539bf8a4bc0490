"""The per-file table of a ``pldemu pytest`` run of pypto's suite, from pytest's JUnit XML reports.

    pldemu pytest --junitxml=base.xml tests/st/distributed
    pldemu pytest --junitxml=jitter.xml --pldemu-jitter 50 tests/st/distributed
    python scripts/pypto_suite_table.py base.xml jitter.xml ...   # base.xml,more.xml: one run in two parts

One row per test file: passed / failed / skipped / errors of each run (the columns, in the order
given; ``-``: the run did not reach the file), the seconds the file took in the first, and the
reasons of its failures and skips (first line, once each).
"""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class FileRow:
    counts: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)


_TELLING = re.compile(r"exited \d+|not supported|out of scope|Error|error:|assert|needs \d+")


def _reason(text: str) -> str:
    """The line of a failure / error / skip text that says why (pldemu's verdict, the exception), with
    paths cut to what follows ``distributed/`` and temporary folders to ``TMP``."""
    return re.sub(r"/tmp/\S*?(?=/next_levels|\s|$)", "TMP", re.sub(r"\S*/distributed/", "", _line(text)))[:120]


def _line(text: str) -> str:
    lines = [line.strip().removeprefix("E").strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in text.splitlines() if line.startswith("E   ")]
    if errors:  # a collection error: pytest's E-lines end with the exception
        return errors[-1][4:].strip()
    return next((line for line in lines if _TELLING.search(line)), lines[0] if lines else "")


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        found = case.find(tag)
        if found is not None:
            message = found.get("message") or ""
            text = found.text or "" if message in ("", "collection failure") else message
            return name, _reason(text)
    return "passed", ""


def _file_of(case: ET.Element) -> str:
    name = case.get("classname") or case.get("name", "")
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):  # classname is module[.Class]: the module path is a prefix
        if parts[cut - 1].startswith("test_"):
            return "/".join(parts[:cut]).split("distributed/")[-1] + ".py"
    return name or "?"


def read(report: Path) -> dict[str, FileRow]:
    """One run's rows; ``a.xml,b.xml`` is one run split over several reports (a test's first report wins)."""
    rows: dict[str, FileRow] = defaultdict(FileRow)
    seen: set[tuple[str, str]] = set()
    cases = [c for part in str(report).split(",") for c in ET.parse(part).getroot().iter("testcase")]
    for case in cases:
        key = (case.get("classname", ""), case.get("name", ""))
        if not key[1] or key in seen:  # no name: the test a stopping signal interrupted
            continue
        seen.add(key)
        row = rows[_file_of(case)]
        outcome, reason = _outcome(case)
        row.counts[outcome] += 1
        row.seconds += float(case.get("time") or 0.0)
        if reason and reason not in row.reasons:
            row.reasons.append(reason)
    return rows


def table(reports: list[Path]) -> str:
    runs = [read(r) for r in reports]
    files = sorted(set().union(*runs))
    head = "| file | " + " | ".join(f"{r.name.split(',')[0].removesuffix('.xml')}: pass/fail/skip/err"
                                    for r in reports) + " | s | reasons |"
    lines = [head, "|" + "---|" * (len(reports) + 3)]
    for name in files:
        cells = [f"{c['passed']}/{c['failed']}/{c['skipped']}/{c['error']}" if name in run else "-"
                 for c, run in ((run[name].counts if name in run else Counter(), run) for run in runs)]
        first = runs[0].get(name, FileRow())
        reasons = "; ".join(r.replace("|", "\\|") for r in first.reasons[:2])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {first.seconds:.0f} | {reasons} |")
    totals = [sum((run[f].counts for f in run), Counter()) for run in runs]
    lines.append("| **total** | " + " | ".join(f"{t['passed']}/{t['failed']}/{t['skipped']}/{t['error']}"
                                               for t in totals) + f" | {sum(r.seconds for r in runs[0].values()):.0f} | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="JUnit XML files of pldemu pytest runs")
    print(table(parser.parse_args().reports))


if __name__ == "__main__":
    main()
