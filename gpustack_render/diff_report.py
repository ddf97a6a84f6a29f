"""``diff`` output: a unified YAML diff per object (text), RFC 6902 patches (json), or a PR comment
(markdown: a summary table plus collapsible YAML diffs, cut to fit GitHub's comment size limit)."""

from __future__ import annotations

import difflib
import html
import re
from typing import Any, Sequence

from gpustack_render.diff import Change
from gpustack_render.yamlio import dump_json, dump_yaml

# GitHub rejects comments over 65,536 characters; keep a margin for the surrounding text.
MARKDOWN_BUDGET = 60_000
MARKDOWN_TABLE_BUDGET = 30_000
MARKDOWN_FIELDS_SHOWN = 6
HEADING = "### gpustack-render diff"


def _lines(obj: dict[str, Any] | None) -> list[str]:
    return dump_yaml(obj).splitlines(keepends=True) if obj is not None else []


def unified(change: Change) -> str:
    """One object's YAML diff, headed like ``kubectl diff`` / git so diff viewers colour it."""
    name = change.label
    old = "/dev/null" if change.current is None else f"a/{name}"
    new = "/dev/null" if change.desired is None else f"b/{name}"
    body = "".join(difflib.unified_diff(_lines(change.current), _lines(change.desired), old, new, n=3))
    return f"diff -u a/{name} b/{name}\n{body}" + ("" if body.endswith("\n") else "\n")


def text_report(changes: Sequence[Change]) -> str:
    return "".join(unified(c) for c in changes)


def json_report(changes: Sequence[Change]) -> str:
    """A JSON array, one entry per differing object: action, identity, changed fields, and the
    patch (see :meth:`Change.patch`). Empty array when nothing differs."""
    entries = []
    for change in changes:
        group, kind, namespace, name = change.key
        entry: dict[str, Any] = {"action": change.action, "apiVersion": change.api_version, "kind": kind,
                                 "namespace": namespace, "name": name}
        if change.subresource is not None:
            entry["subresource"] = change.subresource
        entry["fields"] = change.fields
        entry["patch"] = change.patch()
        entries.append(entry)
    return dump_json(entries)


def summary(changes: Sequence[Change]) -> str:
    counts = {action: sum(c.action == action for c in changes) for action in ("added", "changed", "removed")}
    return ", ".join(f"{n} {action}" for action, n in counts.items())


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _code(text: str) -> str:
    return f"`{text.replace('`', chr(39))}`"


def _row(change: Change) -> str:
    _, kind, namespace, name = change.key
    shown = [_code(f) for f in change.fields[:MARKDOWN_FIELDS_SHOWN]]
    if len(change.fields) > MARKDOWN_FIELDS_SHOWN:
        shown.append(f"… {len(change.fields) - MARKDOWN_FIELDS_SHOWN} more")
    where = f"{namespace}/{name}" if namespace else name
    if change.subresource == "status":
        where += " (status)"
    return f"| {kind} | {_code(where)} | {change.action} | {'<br>'.join(shown) or '—'} |\n"


def markdown_report(changes: Sequence[Change]) -> str:
    """Ready to post as a pull-request comment; cut (with a note) to stay under the size limit."""
    if not changes:
        return f"{HEADING}\n\nNo differences.\n"
    out = [f"{HEADING}\n\n**{summary(changes)}**\n\n", "| Kind | Name | Change | Changed fields |\n",
           "| --- | --- | --- | --- |\n"]
    size = sum(map(len, out))
    rows_cut = 0
    for i, change in enumerate(changes):
        row = _row(change)
        if size + len(row) > MARKDOWN_TABLE_BUDGET:
            rows_cut = len(changes) - i
            out.append(f"| … | {rows_cut} more | | |\n")
            break
        out.append(row)
        size += len(row)
    out.append("\n")
    details_cut = 0
    for i, change in enumerate(changes):
        diff = unified(change)
        fence = _fence(diff)
        block = (f"<details>\n<summary>{html.escape(change.label)} — {change.action}</summary>\n\n"
                 f"{fence}diff\n{diff}{fence}\n\n</details>\n\n")
        if size + len(block) > MARKDOWN_BUDGET:
            details_cut = len(changes) - i
            break
        out.append(block)
        size += len(block)
    if rows_cut or details_cut:
        out.append(f"\n_Cut to fit a comment ({details_cut} diff(s) not shown): run `gpustack-render diff` "
                   f"for the full output._\n")
    return "".join(out)


def report(changes: Sequence[Change], fmt: str) -> str:
    if fmt == "json":
        return json_report(changes)
    if fmt == "markdown":
        return markdown_report(changes)
    return text_report(changes)
