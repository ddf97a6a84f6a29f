"""Plan → manifests through ``templates/<Kind>.yaml.j2``.

Templates are admin input too, so they run in jinja2's sandbox with ``StrictUndefined``. Every
value goes through the ``q`` filter (JSON encoding, which YAML reads back unchanged), so no label
value can change the document structure. All objects of a kind are rendered into one stream and
parsed once by libyaml.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import yaml
from jinja2 import FileSystemLoader, StrictUndefined, Template, TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from gpustack_render.errors import Problem, UserError
from gpustack_render.evaluate.plan import Plan
from gpustack_render.resources import default_templates_dir
from gpustack_render.yamlio import load_yaml_text

RENDER_KINDS = ("NodeFeature", "Topology", "AdmissionCheck", "ResourceFlavor", "InstanceType", "ClusterQueue",
                "LocalQueue")
CATALOG_KIND = "InstanceTypeFlavor"
_DATA_MAPS = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "labels"), ("spec", "nodeLabels"))


def _quote(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=isinstance(value, dict))


class Renderer:
    def __init__(self, templates_dir: Path | None = None) -> None:
        self.dir = templates_dir or default_templates_dir()
        if not self.dir.is_dir():
            raise UserError.single("templates directory not found", file=str(self.dir))
        self.env = SandboxedEnvironment(loader=FileSystemLoader(str(self.dir)), undefined=StrictUndefined,
                                        autoescape=False, keep_trailing_newline=True)
        self.env.filters["q"] = _quote
        self._templates: dict[str, Template] = {}
        problems = []
        for kind in RENDER_KINDS + (CATALOG_KIND,):
            try:
                self._templates[kind] = self.env.get_template(f"{kind}.yaml.j2")
            except TemplateSyntaxError as err:
                problems.append(Problem(f"template syntax error: {err.message}",
                                        file=str(self.dir / f"{kind}.yaml.j2"), line=err.lineno))
            except TemplateError as err:
                problems.append(Problem(f"cannot load template: {err}", file=str(self.dir / f"{kind}.yaml.j2")))
        if problems:
            raise UserError(problems)

    def render_kind(self, kind: str, items: Sequence[Any]) -> list[dict[str, Any]]:
        if not items:
            return []
        template, path = self._templates[kind], str(self.dir / f"{kind}.yaml.j2")
        try:
            text = "".join("---\n" + template.render(obj=item) + "\n" for item in items)
        except TemplateError as err:
            raise UserError([Problem(f"template failed: {err}", file=path, line=getattr(err, "lineno", None))]) \
                from None
        try:
            objects = [o for o in load_yaml_text(text) if o is not None]
        except yaml.YAMLError as err:
            raise UserError([Problem(f"template does not produce valid YAML: {str(err).splitlines()[0]}",
                                     file=path)]) from None
        if len(objects) != len(items) or not all(isinstance(o, dict) for o in objects):
            raise UserError([Problem("template must produce exactly one mapping per object", file=path)])
        for obj in objects:
            _tidy(obj)
        return objects

    def render_plan(self, plan: Plan) -> list[dict[str, Any]]:
        """Every rendered object, ordered by kind, then namespace, then name."""
        sources = {"NodeFeature": plan.node_features, "Topology": plan.topologies,
                   "AdmissionCheck": plan.admission_checks, "ResourceFlavor": plan.flavors,
                   "InstanceType": plan.instance_types, "ClusterQueue": plan.cluster_queues,
                   "LocalQueue": plan.local_queues}
        out: list[dict[str, Any]] = []
        for kind in RENDER_KINDS:
            objects = self.render_kind(kind, sources[kind])
            objects.sort(key=_order_key)
            out.extend(objects)
        return out

    def render_catalog(self, plan: Plan) -> dict[str, Any]:
        items = sorted(self.render_kind(CATALOG_KIND, plan.catalog), key=_order_key)
        return {"apiVersion": "v1", "kind": "List", "items": items}


def _order_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _tidy(obj: dict[str, Any]) -> None:
    """Data maps sorted by key; label and annotation values as strings."""
    for outer, inner in _DATA_MAPS:
        parent = obj.get(outer)
        if isinstance(parent, dict) and isinstance(parent.get(inner), dict):
            parent[inner] = {str(k): v if isinstance(v, str) else json.dumps(v)
                             for k, v in sorted(parent[inner].items())}
