"""A :class:`Report` as text for people: the object's fields with their sources, then the reasoning."""

from __future__ import annotations

from gpustack_render.explain.base import Report, show

_FIXED = " (fixed text)"


def format_text(report: Report) -> str:
    out: list[str] = [report.target]
    if report.source_file:
        out.append(f"  from the snapshot: {report.source_file}")
    if report.template:
        out.append(f"  rendered through the {report.template}")
    elif not report.rendered and report.kind not in ("Node", "Workload"):
        out.append("  not rendered")
    if report.fields:
        out += ["", "Fields"]
        fixed: list[str] = []
        for path, value, origins in report.fields:
            if len(origins) == 1 and origins[0].endswith(_FIXED):
                fixed.append(f"{path}={show(value)}")
                continue
            out.append(f"  {path} = {show(value)}")
            out += [f"      <- {origin}" for origin in origins]
        if fixed:
            out += ["", "Fixed by the template"]
            out += [f"  {item}" for item in fixed]
    for section in report.sections:
        out += ["", section.title]
        for line in section.lines:
            out.append(f"  {line.text}")
            out += [f"      <- {origin}" for origin in line.origins]
    if report.settings:
        out += ["", "Settings"]
        for name, value, source, detail in report.settings:
            out.append(f"  {name} = {show(value)} ({source}{': ' + detail if detail else ''})")
    return "\n".join(out) + "\n"
