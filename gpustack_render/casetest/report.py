"""Reporting a suite run (``gpustack-render test``): the table, JSON and JUnit XML."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from gpustack_render.casetest.run import CaseOutcome


@dataclass
class SuiteEntry:
    outcome: CaseOutcome
    seconds: float
    label: str


def summary_line(entries: Sequence[SuiteEntry]) -> str:
    failed = sum(not e.outcome.ok for e in entries)
    return f"{len(entries) - failed} passed, {failed} failed"


def format_table(entries: Sequence[SuiteEntry]) -> str:
    """The result table, the report of every failure, then exactly one final ``N passed, M failed``."""
    width = max([len("CASE")] + [len(e.label) for e in entries])
    lines = [f"{'CASE':<{width}}  {'COMMAND':<12}  {'RESULT':<7}  {'TIME':<6}  RULES"]
    for e in entries:
        result = "FAIL" if not e.outcome.ok else ("updated" if e.outcome.updated else "pass")
        lines.append(f"{e.label:<{width}}  {e.outcome.case.command:<12}  {result:<7}  {e.seconds:>5.2f}s  "
                     f"{e.outcome.rules}")
    failures = [e for e in entries if not e.outcome.ok]
    for e in failures:
        lines += ["", "FAIL " + e.outcome.report().removeprefix("case ")]
    updated = sum(e.outcome.updated for e in entries)
    if updated:
        lines += ["", f"updated {updated} golden file(s): review `git diff` before committing"]
    lines += ["", summary_line(entries)]
    return "\n".join(lines) + "\n"


def _entry_json(e: SuiteEntry) -> dict[str, Any]:
    run = e.outcome.run
    return {
        "name": e.label, "path": str(e.outcome.case.path), "description": e.outcome.case.description,
        "command": e.outcome.case.command, "result": "pass" if e.outcome.ok else "fail",
        "updated": e.outcome.updated, "seconds": round(e.seconds, 3), "failures": list(e.outcome.failures),
        "exitCode": run.exit_code if run else None, "expectedExitCode": e.outcome.case.expect_exit_code,
        "argv": run.argv if run else None, "stderr": run.stderr if run else None, "rules": e.outcome.rules,
    }


def format_json(entries: Sequence[SuiteEntry]) -> str:
    failed = sum(not e.outcome.ok for e in entries)
    return json.dumps({"cases": [_entry_json(e) for e in entries], "passed": len(entries) - failed,
                       "failed": failed}, indent=2, ensure_ascii=False) + "\n"


def format_junit(entries: Sequence[SuiteEntry], suite: str = "gpustack-render") -> str:
    """JUnit XML (one testsuite) for CI systems that show test reports."""
    import xml.etree.ElementTree as ET
    failed = sum(not e.outcome.ok for e in entries)
    total = sum(e.seconds for e in entries)
    root = ET.Element("testsuites", name=suite, tests=str(len(entries)), failures=str(failed),
                      time=f"{total:.3f}")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(entries)), failures=str(failed),
                         errors="0", skipped="0", time=f"{total:.3f}")
    for e in entries:
        case = ET.SubElement(node, "testcase", classname=f"{suite}.{e.outcome.case.command}", name=e.label,
                             time=f"{e.seconds:.3f}")
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="rules", value=e.outcome.rules)
        if not e.outcome.ok:
            first = e.outcome.failures[0].splitlines()[0] if e.outcome.failures else "failed"
            failure = ET.SubElement(case, "failure", message=first, type="CaseFailure")
            failure.text = e.outcome.report()
        if e.outcome.run is not None and e.outcome.run.stderr:
            ET.SubElement(case, "system-err").text = e.outcome.run.stderr
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
