"""The report every ``explain`` target builds, and what the builders share: rule origins, setting
sources, the evaluator's decision records and field provenance of a rendered object. Pure: no
printing here, and no evaluation: conditions, selections and derivations are read from the records
the evaluator made while it computed them (gpustack_render/evaluate/record.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol

from gpustack_render.evaluate.build import Evaluation
from gpustack_render.evaluate.record import Decision, Records
from gpustack_render.k8s import field_path
from gpustack_render.rules import Rules
from gpustack_render.rules.expressions import Verdict, describe_condition as describe
from gpustack_render.snapshot import Snapshot

Path_ = tuple[str | int, ...]


class Context(Protocol):
    """What explain reads of a prepared run (``pipeline.Context`` fits): declared here so a
    feature never imports the pipeline that composes it."""

    rules: Rules
    snapshot: Snapshot
    settings: dict[str, bool]

    @property
    def evaluation(self) -> Evaluation: ...

    @property
    def records(self) -> Records: ...


def show_path(text: str) -> str:
    """A file path (optionally ``:line``) relative to the working directory when it lies below it."""
    file, sep, line = text.rpartition(":")
    if not sep or not line.isdigit():
        file, sep, line = text, "", ""
    try:
        resolved = Path(file).resolve()
        rel = resolved.relative_to(Path.cwd().resolve())
        file = str(rel)
    except (ValueError, OSError):
        pass
    return f"{file}{sep}{line}"


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def show_quantity(value: Any) -> str:
    """A parsed quantity (``Fraction``) as a plain number: ``16``, ``0.5``."""
    from fractions import Fraction
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else format(float(value), "g")
    return str(value)


@dataclass
class Line:
    text: str
    origins: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text}
        if self.origins:
            out["from"] = self.origins
        return out


@dataclass
class Section:
    title: str
    lines: list[Line] = field(default_factory=list)

    def add(self, text: str, *origins: str | None) -> "Section":
        self.lines.append(Line(text, [o for o in origins if o]))
        return self


@dataclass
class Report:
    """What ``explain`` prints: the object, each field with its sources, sections of reasoning."""

    kind: str
    name: str
    namespace: str = ""
    rendered: bool = True
    template: str = ""
    source_file: str = ""
    object: dict[str, Any] | None = None
    fields: list[tuple[str, Any, list[str]]] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    settings: list[tuple[str, bool, str, str]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        kind = "node" if self.kind == "Node" else self.kind
        return f"{kind}/{self.namespace}/{self.name}" if self.namespace else f"{kind}/{self.name}"

    def section(self, title: str) -> Section:
        section = Section(title)
        self.sections.append(section)
        return section

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target, "kind": self.kind, "name": self.name, "namespace": self.namespace or None,
            "rendered": self.rendered, "template": self.template or None, "sourceFile": self.source_file or None,
            "object": self.object,
            "fields": [{"path": p, "value": v, "from": o} for p, v, o in self.fields],
            "sections": [{"title": s.title, "lines": [line.as_json() for line in s.lines]} for s in self.sections],
            "settings": [{"name": n, "value": v, "source": s, "detail": d} for n, v, s, d in self.settings],
            "facts": self.facts,
        }


class Explainer:
    """Shared helpers bound to one context."""

    def __init__(self, ctx: Context, setting_sources: Mapping[str, tuple[str, str]],
                 templates_dir: Path | None) -> None:
        from gpustack_render.rules.resources import default_templates_dir
        self.ctx, self.rules, self.snapshot, self.settings = ctx, ctx.rules, ctx.snapshot, ctx.settings
        self.records = ctx.records  # first: the evaluation that explain reads is the recording one
        self.plan = ctx.evaluation.plan
        self.facts = {f.name: f for f in ctx.evaluation.node_facts}
        self.sources = setting_sources
        self.templates_dir = templates_dir or default_templates_dir()
        self.akey_prefix = ctx.rules.normalisation.aKey.labelPrefix
        assert ctx.rules.vocabulary is not None
        self.vocab = ctx.rules.vocabulary  # label keys and values, from rules/vocabulary.yaml

    # --- the evaluator's records ------------------------------------------------------------------
    def decision(self, subject: str, what: str) -> Decision | None:
        return self.records.first(subject, what)

    def decisions(self, subject: str, what: str) -> list[Decision]:
        return self.records.of(subject, what)

    # --- where things come from ------------------------------------------------------------------
    def rule(self, kind: str, *path: str | int, value: Any = None) -> str:
        """``rules/naming.yaml:8: resourceFlavor.cpu "gpustack--{gKey}-…"`` for a rule location."""
        dotted = ".".join(map(str, path))
        where = self.rules.origins.get(f"{kind}:{dotted}") if dotted else None
        if where is None:
            doc_file = next((o.rsplit(":", 1)[0] for k, o in self.rules.origins.items()
                             if k.startswith(kind + ":")), kind)
            where = doc_file
        text = f"{show_path(where)}: {dotted or kind}"
        if value is not None:
            text += f" {show(value)}"
        return text

    def format_rule(self, kind: str, path: tuple[str | int, ...], source: str, values: dict[str, Any]) -> str:
        """A name-format rule's origin with the values of the ``{placeholders}`` its source uses."""
        used = re.findall(r"\{([^{}|]+)", source)
        shown = ", ".join(f"{name.strip()}={show(values.get(name.strip(), ''))}" for name in dict.fromkeys(used))
        return self.rule(kind, *path, value=source) + (f" with {shown}" if shown else "")

    def manufacturer(self, name: str) -> str:
        """The origin of one manufacturer's entry in the Manufacturers rules."""
        index = next((i for i, m in enumerate(self.rules.manufacturers.by_name) if m == name), None)
        return self.rule("Manufacturers", "items", index, "name", value=name) if index is not None \
            else self.rule("Manufacturers", "items")

    def setting(self, name: str) -> str:
        value = self.settings.get(name)
        source, detail = self.sources.get(name, ("default", ""))
        if source == "default":
            detail = show_path(self.rules.origins.get(f"Settings:defaults.{name}", "")) or "rules"
        elif source == "--set":
            detail = ""
        return f"setting {name}={show(value)} ({source}{': ' + detail if detail else ''})"

    def named(self, *entries: str) -> tuple[str, ...]:
        """The settings the conditions of these rule entries name (``"Grouping:aware"``; a trailing
        ``*`` takes every entry under the prefix), in order: explain names no setting itself."""
        names: dict[str, None] = {}
        for entry in entries:
            keys = [k for k in self.rules.setting_refs if k.startswith(entry[:-1])] if entry.endswith("*") else [entry]
            for key in keys:
                names.update(dict.fromkeys(self.rules.settings_of(key)))
        return tuple(names)

    def named_one(self, entry: str) -> str:
        """The setting of a rule entry, for a sentence (its names joined when it has several)."""
        return ", ".join(self.named(entry)) or entry

    def settings_of(self, *entries: str) -> list[str]:
        """:meth:`setting` of every setting the rule entries name."""
        return [self.setting(name) for name in self.named(*entries)]

    def settings_report(self, report: Report, names: Iterable[str]) -> None:
        for name in names:
            if name not in self.settings:
                continue
            source, detail = self.sources.get(name, ("default", ""))
            if source == "default":
                detail = show_path(self.rules.origins.get(f"Settings:defaults.{name}", ""))
            report.settings.append((name, self.settings[name], source, detail))

    def template(self, kind: str) -> str:
        from gpustack_render.render.locate import template_file
        return f"template {show_path(str(template_file(self.templates_dir, kind)))}"

    def file_of(self, kind: str, name: str) -> str:
        files = getattr(self.snapshot, "files", None) or {}
        file = files.get((kind, name), "")
        if not file and kind == "Node":
            file = (getattr(self.snapshot, "node_files", None) or {}).get(name, "")
        return show_path(file) if file else ""

    def snap_ref(self, kind: str, name: str, detail: str = "") -> str:
        """``snapshot Node/node-a (fixtures/demo/nodes.yaml): label x="y"``."""
        file = self.file_of(kind, name)
        text = f"snapshot {kind}/{name}" + (f" ({file})" if file else "")
        return f"{text}: {detail}" if detail else text

    def node_ref(self, name: str, detail: str = "") -> str:
        return self.snap_ref("Node", name, detail)

    # --- rendering the target object ---------------------------------------------------------------
    def render(self, kind: str, item: Any) -> dict[str, Any]:
        from gpustack_render.render import Renderer
        return Renderer(self.templates_dir).render_kind(kind, [item])[0]

    def attach_fields(self, report: Report, obj: dict[str, Any], provenance: Mapping[Path_, list[str]]) -> None:
        """Every leaf of ``obj`` with the sources of its longest provenance prefix (else: the template)."""
        report.object = obj
        fallback = [self.template(report.kind) + " (fixed text)"]
        for path, value in _leaves(obj, ()):
            origins = None
            for cut in range(len(path), 0, -1):
                if path[:cut] in provenance:
                    origins = provenance[path[:cut]]
                    break
            report.fields.append((field_path(path, "json"), value, list(origins) if origins else fallback))


def _leaves(value: Any, path: Path_) -> Iterable[tuple[Path_, Any]]:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            yield from _leaves(sub, path + (key,))
    elif isinstance(value, list) and value:
        for i, sub in enumerate(value):
            yield from _leaves(sub, path + (i,))
    else:
        yield path, value


# --- conditions --------------------------------------------------------------------------------

def why_not(verdict: Verdict | None) -> str:
    """The reason a recorded verdict gives (its deciding leaves in words)."""
    return verdict.reason if verdict is not None else ""
