"""Plan → manifests through ``templates/<Kind>.yaml`` (tree.py: the template language).

Templates are admin input too: their expressions run in jinja2's sandbox with ``StrictUndefined``
(sandbox.py, bounded in time and size), compiled once per template text into the builder of its
kind's object (tree.py, expr.py). Every object is built by that one function: there is no other
path, and no text is rendered and read back.
"""

from __future__ import annotations

import dataclasses
import operator
from pathlib import Path
from typing import Any, Sequence

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes

from gpustack_render.errors import Problem, UserError
from gpustack_render.evaluate.plan import Plan
from gpustack_render.k8s import identity, mapping_field
from gpustack_render.memo import Bounded
from gpustack_render.rules.schema import RENDER_KINDS
from gpustack_render.render.locate import Templates, locate
from gpustack_render.sandbox import BoundedSandbox, TimeBudgetExceeded, time_budget
from gpustack_render.render.tree import (Builder, build_all, compile_template, is_template_text, new_template_context,
                                         object_label, whole_expression)
from gpustack_render import rulesyaml
from gpustack_render.yamlio import Manifests, read_text

CATALOG_KIND = "InstanceTypeFlavor"
TEMPLATE_KINDS = RENDER_KINDS + (CATALOG_KIND,)
# A template pass may take this long (seconds, plus a share per object) before it is stopped.
TIME_BUDGET_S = 10.0
TIME_PER_OBJECT_S = 0.002

# One sandbox for every template (its configuration is all a compiled builder depends on besides
# the template's text), and the builders compiled per (file, text): a Renderer is made per render
# and per explained object.
_ENV = BoundedSandbox(undefined=StrictUndefined, autoescape=False)
_CONTEXT = new_template_context(_ENV, "template")
_BUILDERS: Bounded[tuple[str, str], Builder] = Bounded(256)


def load_template(path: Path) -> Builder:
    """The compiled builder of one template file (UserError naming every mistake in it)."""
    display = str(path)
    text = read_text(path, display)
    builder = _BUILDERS.get((display, text))
    if builder is None:
        data = rulesyaml.parse(text, display)
        builder = _BUILDERS[(display, text)] = compile_template(data, display, _ENV, _CONTEXT)
    return builder


def takes_native_value(text: Any) -> bool:
    """Whether a template's string scalar is one whole expression, and so takes the expression's own
    value of any type, as the compiler reads it (jinja2's parse, comments and all)."""
    if not is_template_text(text):
        return False
    try:
        body = _ENV.parse(text).body
    except TemplateSyntaxError:
        return False
    outputs = [node for node in body if isinstance(node, nodes.Output)]
    if len(outputs) != len(body):  # a statement: the compiler refuses it
        return False
    return whole_expression([part for node in outputs for part in node.nodes]) is not None


class Renderer:
    def __init__(self, templates_dir: Path | None = None) -> None:
        self.templates: Templates = locate(templates_dir, TEMPLATE_KINDS)  # an overlay over the built-in
        self.dir = self.templates.dir
        self._builders: dict[str, Builder] = {}
        problems: list[Problem] = []
        for kind in TEMPLATE_KINDS:
            try:
                self._builders[kind] = load_template(self.templates.file(kind))
            except UserError as err:
                problems.extend(err.problems)
        if problems:
            raise UserError(problems)

    def path(self, kind: str) -> str:
        return str(self.templates.file(kind))

    @property
    def floats(self) -> bool:
        """Whether a float may be among the values built (JSON output then looks for them)."""
        return any(builder.values.floats.seen for builder in self._builders.values())

    def render_kind(self, kind: str, items: Sequence[Any]) -> list[dict[str, Any]]:
        return self._render_kind(kind, items)[0]

    def _render_kind(self, kind: str, items: Sequence[Any]) -> tuple[list[dict[str, Any]], bool]:
        """The kind's objects, and whether they are well formed in the way :func:`_well_formed`
        checks (then their order and identity keys are read without the general checks)."""
        if not items:
            return [], True
        path = self.path(kind)
        try:
            with time_budget(TIME_BUDGET_S + TIME_PER_OBJECT_S * len(items)):
                objects = build_all(self._builders[kind], items, path, kind)
        except TimeBudgetExceeded as err:  # between two objects, outside the template's code
            raise UserError([Problem(f"template failed: {err}", file=path)]) from None
        well_formed = _well_formed(objects, items, kind)
        if not well_formed:
            _raise_shape_problems(objects, items, kind, path)
        return objects, well_formed

    def render_plan(self, plan: Plan) -> Manifests:
        """Every rendered object, ordered by kind, then namespace, then name."""
        sources: dict[str, Sequence[Any]] = {"NodeFeature": plan.node_features, "Topology": plan.topologies,
                   "AdmissionCheck": plan.admission_checks, "ResourceFlavor": plan.flavors,
                   "InstanceType": plan.instance_types, "ClusterQueue": plan.cluster_queues,
                   "LocalQueue": plan.local_queues}
        out: list[dict[str, Any]] = []
        problems: list[Problem] = []  # each template's mistakes, all of them in one pass
        for kind in RENDER_KINDS:
            try:
                objects, well_formed = self._render_kind(kind, sources[kind])
            except UserError as err:
                problems.extend(err.problems)
                continue
            path = self.path(kind)
            out.extend(_sorted_unique(objects, sources[kind], path) if well_formed
                       else _checked_sorted(objects, sources[kind], path))
        if problems:
            raise UserError(problems)
        return Manifests(out, self.floats)

    def render_catalog(self, plan: Plan) -> dict[str, Any]:
        items = sorted(self.render_kind(CATALOG_KIND, plan.catalog), key=_order_key)
        return {"apiVersion": "v1", "kind": "List", "items": items}


def _well_formed(objects: Sequence[dict[str, Any]], items: Sequence[Any], kind: str) -> bool:
    """Whether no object has a shape problem (:func:`_shape_problems`), in the stricter form the
    fast order and identity keys rely on: ``metadata`` a dict, ``apiVersion`` and the name non-empty
    ``str``, the namespace a non-empty ``str`` exactly when the item has one, else absent or None.
    ``False`` also when only the stricter form fails: the general checks then decide."""
    for obj, item in zip(objects, items):
        meta = obj.get("metadata")
        if type(meta) is not dict or obj.get("kind") != kind:
            return False
        api, name, namespace = obj.get("apiVersion"), meta.get("name"), meta.get("namespace")
        if type(api) is not str or not api or type(name) is not str or not name:
            return False
        if hasattr(item, "namespace"):
            if type(namespace) is not str or not namespace:
                return False
        elif namespace is not None:
            return False
    return True


def _raise_shape_problems(objects: Sequence[dict[str, Any]], items: Sequence[Any], kind: str, path: str) -> None:
    problems = [p for obj, item in zip(objects, items) for p in _shape_problems(obj, item, kind, path)]
    if problems:  # a template mistake repeats for every object: one line says it
        first = problems[0]
        more = f" (and {len(problems) - 1} more {kind} objects)" if len(problems) > 1 else ""
        raise UserError([Problem(first.message + more, file=first.file, obj=first.obj, path=first.path)])


def _checked_sorted(objects: list[dict[str, Any]], items: Sequence[Any], path: str) -> list[dict[str, Any]]:
    """A kind's objects checked for twins and sorted by namespace and name, for any objects."""
    _check_unique(objects, items, path)
    objects.sort(key=_order_key)
    return objects


def _sorted_unique(objects: list[dict[str, Any]], items: Sequence[Any], path: str) -> list[dict[str, Any]]:
    """:func:`_checked_sorted` for well-formed objects (:func:`_well_formed`): there the identity
    of :func:`identity` is (API group, kind, namespace or "", name) with one kind, and the order key
    of :func:`_order_key` is (namespace or "", name); so when every object has one API group and
    those pairs are distinct, nothing is rendered twice and they sort by the pairs alone. Any
    twin is found and worded by the general check."""
    keys = [(meta.get("namespace") or "", meta["name"]) for meta in map(_METADATA, objects)]
    if len(set(keys)) != len(keys) or len({obj["apiVersion"].rpartition("/")[0] for obj in objects}) > 1:
        return _checked_sorted(objects, items, path)
    return [obj for _key, obj in sorted(zip(keys, objects), key=_FIRST)]


_METADATA = operator.itemgetter("metadata")
_FIRST = operator.itemgetter(0)


def _shape_problems(obj: dict[str, Any], item: Any, kind: str, path: str) -> list[Problem]:
    """A rendered object keeps its kind, has an apiVersion and a name, and carries a namespace
    exactly when its plan item has one (namespaced kinds): a cluster-scoped object with a namespace,
    or a namespaced one without, is applied somewhere else than the render means."""
    meta = mapping_field(obj, "metadata")
    name = meta.get("name")
    label = object_label(kind, item)
    if obj.get("kind") != kind:
        return [Problem(f"the template renders kind {obj.get('kind')!r}; it must render {kind}", file=path,
                        obj=label, path="kind")]
    if not isinstance(obj.get("apiVersion"), str) or not obj["apiVersion"]:
        return [Problem("the template renders no apiVersion", file=path, obj=label, path="apiVersion")]
    if not isinstance(name, str) or not name:
        return [Problem("the template renders no metadata.name", file=path, obj=label, path="metadata.name")]
    namespace = meta.get("namespace")
    if hasattr(item, "namespace") and not (isinstance(namespace, str) and namespace):
        return [Problem(f"{kind} is namespaced; the template renders no metadata.namespace", file=path,
                        obj=label, path="metadata.namespace")]
    if not hasattr(item, "namespace") and namespace is not None:
        return [Problem(f"{kind} is cluster-scoped; the template renders metadata.namespace {namespace!r}",
                        file=path, obj=label, path="metadata.namespace")]
    return []


def _check_unique(objects: Sequence[dict[str, Any]], items: Sequence[Any], path: str) -> None:
    """Two objects of one identity would be applied as one (the last wins): the other is silently
    dropped, and a pruning GitOps tool deletes it from the cluster."""
    seen: dict[tuple[str, str, str, str], Any] = {}
    problems: list[Problem] = []
    for obj, item in zip(objects, items):
        key = identity(obj)
        if key in seen:
            where = f"{key[2]}/{key[3]}" if key[2] else key[3]
            problems.append(Problem(f"rendered twice: from {_describe(seen[key])} and from {_describe(item)}; "
                                    f"the template or the naming rules must keep them apart", file=path,
                                    obj=f"{key[1]}/{where}"))
        else:
            seen[key] = item
    if problems:
        more = f" ({len(problems) - 1} more such pairs)" if len(problems) > 1 else ""
        raise UserError([Problem(problems[0].message + more, file=path, obj=problems[0].obj)])


def _describe(item: Any) -> str:
    """A plan item in a few words: its type and its identifying fields (a slotted plan, as
    NodeFeaturePlan, has no ``__dict__``: its dataclass fields, in the same order)."""
    attributes = vars(item) if hasattr(item, "__dict__") else \
        {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    fields = {k: v for k, v in attributes.items() if isinstance(v, (str, int, bool)) and v not in ("", None)}
    shown = ", ".join(f"{k}={v}" for k, v in list(fields.items())[:6])
    return f"{type(item).__name__}({shown})"


def _order_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
