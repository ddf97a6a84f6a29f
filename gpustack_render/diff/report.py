"""``diff`` output: a unified YAML diff per object (text), RFC 6902 patches (json), or a PR comment
(markdown: the pools before → after, a diagram of the changed ones, a summary table plus collapsible
YAML diffs, each part cut to its own budget to fit GitHub's comment size limit). Every format carries
the same summary (:class:`~gpustack_render.diff.Summary`)."""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from gpustack_render.diff import Change, summarise
from gpustack_render.tables import markdown_cell
from gpustack_render.yamlio import dump_json, dump_yaml

if TYPE_CHECKING:  # only named here: a diff without a markdown pool table never imports them
    from gpustack_render.diff.pools import PoolComparison, PoolRow, PoolSide

# GitHub rejects comments over 65,536 characters; keep a margin for the surrounding text. Each part
# has its own budget (pools 10k + diagram 12k + objects table 30k, the diffs fill the rest), so a huge
# pool table can never push the object table out, and the total stays under MARKDOWN_BUDGET.
MARKDOWN_BUDGET = 60_000
MARKDOWN_TABLE_BUDGET = 30_000
MARKDOWN_POOL_BUDGET = 10_000
MARKDOWN_DIAGRAM_BUDGET = 12_000
MARKDOWN_ADMISSION_BUDGET = 5_000  # ``--admission``: the admit compare view (the diffs give way to it)
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


@dataclass
class ReportExtras:
    """What the markdown comment shows besides the changes: the pools, their diagram, warnings."""

    pools: PoolComparison | None = None
    diagram: Callable[[Sequence[str]], str] | None = None  # pool names → their Mermaid source
    warnings: list[str] = field(default_factory=list)
    admission: Callable[[int], str] | None = None  # ``--admission``: its markdown section within a budget


def text_report(changes: Sequence[Change]) -> str:
    """The unified diffs, then one summary line (also when nothing differs)."""
    return "".join(unified(c) for c in changes) + summarise(changes).text() + "\n"


def json_report(changes: Sequence[Change]) -> str:
    """``{"summary": {...}, "changes": [...]}``: the summary as data (see :meth:`Summary.data`) and
    one entry per differing object: action, identity, changed fields, and the patch (see
    :meth:`Change.patch`). ``changes`` is empty when nothing differs."""
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
    return dump_json({"summary": summarise(changes).data(), "changes": entries})


def _fence(text: str) -> str:
    """A code fence longer than any backtick run inside ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _code(text: str) -> str:
    return f"`{markdown_cell(text).replace('`', chr(39))}`"


def _pair(before: str | None, after: str | None) -> str:
    """``before → after``, or the one value when it stays; ``—`` for a side without the pool."""
    if before is not None and before == after:
        return markdown_cell(before)
    return markdown_cell(f"{before or '—'} → {after or '—'}")


def _flavors_cell(before: PoolSide | None, after: PoolSide | None) -> str:
    """Flavor counts, plus how many came and went when the set changed at equal count too."""
    cell = _pair(str(len(before.flavors)) if before else None, str(len(after.flavors)) if after else None)
    if before and after and before.flavors != after.flavors:
        came, went = len(set(after.flavors) - set(before.flavors)), len(set(before.flavors) - set(after.flavors))
        cell += " (" + " ".join(p for p in (f"+{came}" if came else "", f"−{went}" if went else "") if p) + ")"
    return cell


def _quota_cell(before: PoolSide | None, after: PoolSide | None) -> str:
    old, new = dict(before.quota) if before else {}, dict(after.quota) if after else {}
    resources = list(new) + [r for r in old if r not in new]
    return "<br>".join(f"{_code(r)} {_pair(old.get(r), new.get(r))}" for r in resources) or "—"


def _pool_row(row: PoolRow) -> str:
    before, after = row.before, row.after
    nodes = _pair(str(before.nodes) if before else None, str(after.nodes) if after else None)
    stop = _pair(before.stop_policy if before else None, after.stop_policy if after else None)
    return (f"| {_code(row.name)} | {row.change or '—'} | {nodes} | {_flavors_cell(before, after)} | "
            f"{_quota_cell(before, after)} | {stop or '—'} |\n")


def _pool_section(pools: PoolComparison) -> tuple[str, int]:
    """The pool table (changed rows first) within its budget, and how many rows were cut."""
    out = ["#### Pools (before → after)\n\n", "| ClusterQueue | Change | Nodes | Flavors | Quota | Stop policy |\n",
           "| --- | --- | --- | --- | --- | --- |\n"]
    size = sum(map(len, out))
    for i, row in enumerate(pools.rows):
        line = _pool_row(row)
        if size + len(line) > MARKDOWN_POOL_BUDGET:
            cut = len(pools.rows) - i
            unchanged = sum(not r.change for r in pools.rows[i:])
            out.append(f"| … | {cut} more pool(s), {unchanged} of them unchanged | | | | |\n")
            return "".join(out) + "\n", cut
        out.append(line)
        size += len(line)
    return "".join(out) + "\n", 0


def _diagram_section(pools: Sequence[str], draw: Callable[[Sequence[str]], str]) -> str:
    """The Mermaid diagram of as many of ``pools`` (in table order) as fit its budget, inside a
    collapsible block; a note says how many were left out. Whole pools are dropped, never lines: a
    cut diagram would not parse."""
    def block(count: int) -> str:
        source = draw(pools[:count]).rstrip()
        fence = _fence(source)
        left = len(pools) - count
        note = f"_{left} more changed pool(s) left out of the diagram to fit a comment._\n\n" if left else ""
        return (f"<details>\n<summary>Diagram of the changed pools</summary>\n\n{fence}mermaid\n{source}\n"
                f"{fence}\n\n{note}</details>\n\n")
    low, high = 0, len(pools)  # the largest count that fits: the diagram grows with every pool
    while low < high:
        mid = (low + high + 1) // 2
        if len(block(mid)) <= MARKDOWN_DIAGRAM_BUDGET:
            low = mid
        else:
            high = mid - 1
    if low == 0:
        return "_Diagram of the changed pools left out: too large for a comment (see `gpustack-render graph`)._\n\n"
    return block(low)


def _row(change: Change) -> str:
    _, kind, namespace, name = change.key
    shown = [_code(f) for f in change.fields[:MARKDOWN_FIELDS_SHOWN]]
    if len(change.fields) > MARKDOWN_FIELDS_SHOWN:
        shown.append(f"… {len(change.fields) - MARKDOWN_FIELDS_SHOWN} more")
    where = f"{namespace}/{name}" if namespace else name
    if change.subresource == "status":
        where += " (status)"
    return f"| {kind} | {_code(where)} | {change.action} | {'<br>'.join(shown) or '—'} |\n"


def markdown_report(changes: Sequence[Change], extras: ReportExtras | None = None) -> str:
    """Ready to post as a pull-request comment; cut (with a note) to stay under the size limit."""
    extras = extras or ReportExtras()
    if not changes:
        tail = extras.admission(MARKDOWN_ADMISSION_BUDGET) if extras.admission is not None else ""
        return f"{HEADING}\n\nNo differences.\n" + ("\n" + tail if tail else "")
    out = [f"{HEADING}\n\n**{summarise(changes).text()}**\n\n"]
    if extras.warnings:
        out.append("> " + "\n>\n> ".join(f"**Warning:** {markdown_cell(w)}" for w in extras.warnings) + "\n\n")
    pools_cut = 0
    if extras.pools is not None and any(row.change for row in extras.pools.rows):
        section, pools_cut = _pool_section(extras.pools)
        out.append(section)
        changed = extras.pools.changed_desired()
        if extras.diagram is not None and changed:
            out.append(_diagram_section(changed, extras.diagram))
    if extras.admission is not None:
        out.append(extras.admission(MARKDOWN_ADMISSION_BUDGET) + "\n")
    table = ["#### Objects\n\n", "| Kind | Name | Change | Changed fields |\n", "| --- | --- | --- | --- |\n"]
    out += table
    table_size = sum(map(len, table))
    rows_cut = 0
    for i, change in enumerate(changes):
        row = _row(change)
        if table_size + len(row) > MARKDOWN_TABLE_BUDGET:
            rows_cut = len(changes) - i
            out.append(f"| … | {rows_cut} more | | |\n")
            break
        out.append(row)
        table_size += len(row)
    out.append("\n")
    size = sum(map(len, out))
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
    if rows_cut or details_cut or pools_cut:
        pools = f", {pools_cut} pool row(s)" if pools_cut else ""
        out.append(f"\n_Cut to fit a comment ({details_cut} diff(s) not shown{pools}): run `gpustack-render diff` "
                   f"for the full output._\n")
    return "".join(out)


def report(changes: Sequence[Change], fmt: str, extras: ReportExtras | None = None) -> str:
    if fmt == "json":
        return json_report(changes)
    if fmt == "markdown":
        return markdown_report(changes, extras)
    return text_report(changes)
