"""Comparing: the command's stdout parsed as its contract promises, the golden read, checked
against the case's selection and compared with the output; and the golden written back
(``--update``) under a header naming the command that wrote it."""

from __future__ import annotations

import json
import os
import shlex
import textwrap
from pathlib import Path
from typing import Any


from gpustack_render.casetest import admission
from gpustack_render.snapshot import yamlread
from gpustack_render.yamlio import dump_yaml
from gpustack_render.casetest.case import ADMIT, LIST_COMMANDS, Case, CaseDefinitionError
from gpustack_render.casetest.run import command_argv
from gpustack_render.casetest.semantic import compare_objects, compare_patches, show as _show

UPDATE_ENV = "GPUSTACK_RENDER_UPDATE_GOLDENS"
TEST_UPDATE_WRITER = "gpustack-render test --update"
_WRITTEN_BY = "# Written by "


def update_requested() -> bool:
    """``GPUSTACK_RENDER_UPDATE_GOLDENS`` set to anything but empty or ``0``: rewrite goldens (the
    one switch shared by ``gpustack-render test`` and pytest, which also maps ``--update-goldens``
    onto it)."""
    return os.environ.get(UPDATE_ENV, "") not in ("", "0")


class OutputError(Exception):
    """stdout is not what the command contract promises."""


def parse_stdout(command: str, stdout: str, chain: str = "rendered") -> Any:
    """The objects (render/catalog) or entries (node-patches) printed with ``--format json``; for
    ``admit`` the one document of admission.md §9 for ``chain``, checked for its shape."""
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as err:
        raise OutputError(f"stdout is not JSON: {err}") from err
    if command == ADMIT:
        try:
            return admission.check_output(data, chain)
        except admission.ShapeError as err:
            raise OutputError(str(err)) from err
    if command in LIST_COMMANDS:
        if not isinstance(data, dict):
            raise OutputError(f"stdout is not a List object but a {type(data).__name__}")
        problems = []
        if data.get("apiVersion") != "v1":
            problems.append(f"apiVersion is {data.get('apiVersion')!r}, expected 'v1'")
        if data.get("kind") != "List":
            problems.append(f"kind is {data.get('kind')!r}, expected 'List'")
        if not isinstance(data.get("items"), list):
            problems.append("items is not a list")
        extra = sorted(set(data) - {"apiVersion", "kind", "items"})
        if extra:
            problems.append(f"unexpected top-level field(s) {', '.join(extra)}")
        if problems:
            raise OutputError("stdout List wrapper: " + "; ".join(problems))
        items: list[Any] = data["items"]  # a list: checked above
        return items
    if not isinstance(data, list):
        raise OutputError(f"stdout is not a JSON array but a {type(data).__name__}")
    return data


def load_expected(case: Case) -> Any:
    path = case.expected_path
    if not path.exists():
        raise CaseDefinitionError(f"{path}: missing (write it by hand or run `gpustack-render test --update`)")
    try:
        docs = yamlread.documents(path.read_text(encoding="utf-8"))
    except yamlread.Invalid as err:
        raise CaseDefinitionError(f"{path}: invalid YAML: {err}") from err
    if case.command == ADMIT:
        return _admit_golden(case, docs)
    if case.command in LIST_COMMANDS:
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise CaseDefinitionError(f"{path}: document {i + 1} is not an object")
        return _only_selected(case, docs)
    if not docs:
        return []
    if len(docs) != 1 or not isinstance(docs[0], list):
        raise CaseDefinitionError(f"{path}: node-patches golden must be one document holding a list")
    return _only_selected(case, docs[0])


def _admit_golden(case: Case, docs: list[Any]) -> Any:
    """An admit golden: one document (admission.md §9's, with only what the case is about), or none
    for a case that expects exit 2."""
    if case.expect_exit_code not in case.output_exit_codes:
        return docs
    if len(docs) != 1:
        raise CaseDefinitionError(f"{case.expected_path}: an admit golden is one document, not {len(docs)}")
    try:
        return admission.check_golden(docs[0], case.chain, str(case.expected_path))
    except admission.ShapeError as err:
        raise CaseDefinitionError(str(err)) from err


def _only_selected(case: Case, items: list[Any]) -> list[Any]:
    """A golden holding an object its ``expect:`` does not select could never be compared: an error."""
    for pos, item in enumerate(items):
        if not case.expect.selects(case.command, item):
            raise CaseDefinitionError(f"{case.expected_path}: item {pos + 1} ({_show(item)[:80]}) is outside the "
                                      f"case's expect selection ({case.expect.describe()})")
    return items


def select(case: Case, actual: Any) -> Any:
    """The output items the case is about (all of them without ``expect:``), in output order; an
    admit document whole."""
    if case.command == ADMIT:
        return actual
    return [item for item in actual if case.expect.selects(case.command, item)]


def _header(case: Case, cwd: Path, default_rules: Path | None = None, writer: str = TEST_UPDATE_WRITER) -> str:
    """The golden's comment header: the case, its command, and ``writer``, the command that wrote it."""
    argv = command_argv(case, cwd, python="python", default_rules=default_rules)
    shown = " ".join(shlex.quote(a) for a in argv[:-2])  # without --format json
    lines = ["# " + line for line in textwrap.wrap(f"Golden for fixtures case {case.name!r}: {case.description}", 98)]
    lines += [
        f"# Command: {shown}",
        f"{_WRITTEN_BY}`{writer}`; review every change against the spec before committing.",
        "# Compared semantically (gpustack_render.casetest).",
    ]
    if not case.expect.everything:
        lines.append(f"# Only the selected objects are compared ({case.expect.describe()}); others are ignored.")
    if case.expect_exit_code not in case.output_exit_codes:
        lines.append(f"# The case expects exit code {case.expect_exit_code}: nothing on stdout.")
    return "\n".join(lines) + "\n"


def render_golden(case: Case, actual: list[Any], cwd: Path, default_rules: Path | None = None,
                  writer: str = TEST_UPDATE_WRITER) -> str:
    """The golden text for ``actual`` (only the selected items), headed by :func:`_header`."""
    text = _header(case, cwd, default_rules, writer)
    if case.expect_exit_code not in case.output_exit_codes:
        return text
    chosen = select(case, actual)
    if case.command in LIST_COMMANDS:
        return text + "".join("---\n" + dump_yaml(obj) for obj in chosen)
    return text + "---\n" + dump_yaml(chosen)


def _without_writer(text: str) -> str:
    """A golden without its ``Written by`` line: who wrote it is no reason to rewrite it."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(_WRITTEN_BY))


def write_golden(case: Case, text: str) -> bool:
    """Write ``text`` unless the golden already says the same (apart from its writer); True when written."""
    path = case.expected_path
    if path.exists() and _without_writer(path.read_text(encoding="utf-8")) == _without_writer(text):
        return False
    path.write_text(text, encoding="utf-8")
    return True


def compare(case: Case, expected: Any, actual: Any) -> list[str]:
    """The golden against the (selected) output, as the case's command prints it; empty: equal."""
    if case.command == ADMIT:
        return admission.compare(expected, actual, case.chain)
    if case.command in LIST_COMMANDS:
        return compare_objects(expected, actual)
    return compare_patches(expected, actual)
