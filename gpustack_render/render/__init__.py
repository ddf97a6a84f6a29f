"""Plan → manifests through ``templates/<Kind>.yaml.j2``.

Templates are admin input too, so they run in jinja2's sandbox with ``StrictUndefined``. Every
value goes through the ``q`` filter (JSON encoding, which YAML reads back unchanged), so no label
value can change the document structure. A kind with many objects is rendered through slots
(slots.py): each distinct text shape is read once and every object is built from its values'
readings, exactly as reading its text would build it; otherwise (few objects, or anything the
slots do not vouch for) each rendered text is read back, by the fast block reader or, for a kind
one of whose texts it declines, by libyaml.
"""

from __future__ import annotations

import dataclasses

import json
import operator
from pathlib import Path
from types import CodeType
from typing import Any, Iterable, Sequence

import yaml

from jinja2 import BytecodeCache, FileSystemLoader, StrictUndefined, Template, TemplateError, TemplateSyntaxError
from jinja2.bccache import Bucket

from gpustack_render.emit import Manifests
from gpustack_render.errors import Problem, UserError
from gpustack_render.evaluate.plan import Plan
from gpustack_render.k8s import identity, mapping_field
from gpustack_render.memo import Bounded
from gpustack_render.rules.schema import RENDER_KINDS
from gpustack_render.render import slots
from gpustack_render.render.locate import locate
from gpustack_render.render.sandbox import BoundedSandbox, TimeBudgetExceeded, time_budget
from gpustack_render.yamlio import NotSimple, has_float, load_simple_block, load_yaml_text

CATALOG_KIND = "InstanceTypeFlavor"
# A template pass may take this long (seconds, plus a share per object) before it is stopped.
TIME_BUDGET_S = 10.0
TIME_PER_OBJECT_S = 0.002
# One rendered object may be this large (characters): a template that multiplies strings or loops
# into a huge manifest fails here instead of in kubectl.
MAX_OBJECT_CHARS = 1_000_000
# Kinds with this many objects are rendered through slots (slots.py); a few objects are not worth
# compiling the template a second time.
SLOT_MIN_ITEMS = 16
_DATA_MAPS = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "labels"), ("spec", "nodeLabels"))
_DATA_MAPS_BY_PARENT = tuple((outer, tuple(i for o, i in _DATA_MAPS if o == outer))
                             for outer in dict.fromkeys(o for o, _ in _DATA_MAPS))


_quote = slots._quote


class _CompiledTemplates(BytecodeCache):
    """Templates compiled once per process, keyed by name/file and source checksum: a Renderer is
    made per render and per explained object, and compiling its templates dominated a process that
    makes many (the test suite). Every Renderer configures its environment identically (sandbox,
    options, the slots extension), which is all compiled code depends on besides the source; an
    edited template has a new checksum. Only the Renderer's environment uses it."""

    def __init__(self) -> None:
        self._code: Bounded[tuple[str, str], CodeType] = Bounded(256)

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self._code.get((bucket.key, bucket.checksum))
        if code is not None:
            bucket.code = code

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is not None:
            self._code[(bucket.key, bucket.checksum)] = bucket.code


_COMPILED = _CompiledTemplates()


class Renderer:
    def __init__(self, templates_dir: Path | None = None) -> None:
        self.templates = locate(templates_dir, RENDER_KINDS + (CATALOG_KIND,))  # an overlay over the built-in
        self.dir = self.templates.dir
        loader = FileSystemLoader([str(d) for d in self.templates.search])
        self.env = BoundedSandbox(loader=loader, bytecode_cache=_COMPILED,
                                  undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
        self.env.filters["q"] = _quote
        self._recorder = slots.install(self.env)
        self._shapes = slots.ShapeCache(_DATA_MAPS)
        self._templates: dict[str, Template] = {}
        self.floats = False  # whether an object read from its text held a float (see render_plan)
        self._slotted: dict[str, slots.Slotted | None] = {}
        problems = []
        for kind in RENDER_KINDS + (CATALOG_KIND,):
            try:
                self._templates[kind] = self.env.get_template(f"{kind}.yaml.j2")
            except TemplateSyntaxError as err:
                problems.append(Problem(f"template syntax error: {err.message}",
                                        file=str(self.templates.file(kind)), line=err.lineno))
            except TemplateError as err:
                problems.append(Problem(f"cannot load template: {err}", file=str(self.templates.file(kind))))
        if problems:
            raise UserError(problems)

    def render_kind(self, kind: str, items: Sequence[Any]) -> list[dict[str, Any]]:
        return self._render_kind(kind, items)[0]

    def _render_kind(self, kind: str, items: Sequence[Any]) -> tuple[list[dict[str, Any]], bool]:
        """The kind's objects, and whether they are well formed in the way :func:`_well_formed`
        checks (then their order and identity keys are read without the general checks)."""
        if not items:
            return [], True
        template, path = self._templates[kind], str(self.templates.file(kind))
        slotted = self._slotted_template(kind) if len(items) >= SLOT_MIN_ITEMS else None
        untidy: Iterable[int] | None = None  # the objects that still need _tidy (None: all)
        if slotted is None:
            objects = _parse_rendered(_render_texts(template, items, path, kind), items, template, kind)
        else:
            try:
                with time_budget(TIME_BUDGET_S + TIME_PER_OBJECT_S * len(items)):
                    rendered = slots.render_all(self.env, slotted, items, self._recorder,
                                                lambda length: _check_size(length, path))
            except UserError:
                raise
            except Exception as err:  # a template mistake (or a bug of ours, raised again as it is)
                raise _slots_failed(err, template, items, path, kind) from None
            built = self._shapes.build(rendered)
            if built is None:  # read from the real texts, exactly as before
                objects = _parse_rendered(self._real_texts(rendered, template, items, path, kind), items,
                                          template, kind)
            else:
                objects, untidy = built
        if len(objects) != len(items) or not (set(map(type, objects)) <= _DICT
                                              or all(isinstance(o, dict) for o in objects)):
            raise UserError([Problem("template must produce exactly one mapping per object", file=path)])
        well_formed = _well_formed(objects, items, kind)
        if not well_formed:
            _raise_shape_problems(objects, items, kind, path)
        for index in range(len(objects)) if untidy is None else untidy:
            _tidy(objects[index])
        if untidy is None and not self.floats:  # read from texts: any value may be a float
            self.floats = has_float(objects)
        return objects, well_formed

    def _slotted_template(self, kind: str) -> slots.Slotted | None:
        """The kind's slotted template (slots.py), compiled on first use."""
        if kind not in self._slotted:
            self._slotted[kind] = slots.slotted_template(self.env, f"{kind}.yaml.j2")
        return self._slotted[kind]

    def _real_texts(self, rendered: Iterable[slots.Rendered], template: Template, items: Sequence[Any],
                    path: str, kind: str) -> list[str]:
        try:
            return [one.real_text() for one in rendered]
        except NotSimple:  # cannot happen for straight outputs; render the real texts again
            return _render_texts(template, items, path, kind)

    def render_plan(self, plan: Plan) -> Manifests:
        """Every rendered object, ordered by kind, then namespace, then name; whether a float may
        be among their values is known from where each value came from (slots, shapes, texts)."""
        sources: dict[str, Sequence[Any]] = {"NodeFeature": plan.node_features, "Topology": plan.topologies,
                   "AdmissionCheck": plan.admission_checks, "ResourceFlavor": plan.flavors,
                   "InstanceType": plan.instance_types, "ClusterQueue": plan.cluster_queues,
                   "LocalQueue": plan.local_queues}
        out: list[dict[str, Any]] = []
        documents = self._shapes.documents = {}  # objects built from batches, with their YAML writers
        problems: list[Problem] = []  # each template's mistake, all of them in one pass
        try:
            for kind in RENDER_KINDS:
                try:
                    objects, well_formed = self._render_kind(kind, sources[kind])
                except UserError as err:
                    problems.extend(err.problems)
                    continue
                path = str(self.templates.file(kind))
                out.extend(_sorted_unique(objects, sources[kind], path) if well_formed
                           else _checked_sorted(objects, sources[kind], path))
        finally:
            self._shapes.documents = None
        if problems:
            raise UserError(problems)
        return Manifests(out, self.floats or self._recorder.floats or self._shapes.floats, documents)

    def render_catalog(self, plan: Plan) -> dict[str, Any]:
        items = sorted(self.render_kind(CATALOG_KIND, plan.catalog), key=_order_key)
        return {"apiVersion": "v1", "kind": "List", "items": items}


def _parse_rendered(texts: list[str], items: Sequence[Any], template: Template, kind: str) -> list[Any]:
    """The rendered documents as data. The block subset templates write is read by the fast
    reader; one document outside it sends the whole kind through libyaml, as before (which also
    words every error)."""
    try:
        return [load_simple_block(text) for text in texts]
    except NotSimple:
        pass
    try:
        return [o for o in load_yaml_text("".join("---\n" + text + "\n" for text in texts)) if o is not None]
    except yaml.YAMLError:
        raise _invalid_yaml(texts, items, template, kind) from None


def _render_texts(template: Template, items: Sequence[Any], path: str, kind: str) -> list[str]:
    """Each item's rendered text, within the pass's time budget and each object's size limit; a
    template mistake is worded at its line, with the first object it failed on."""
    texts = []
    with time_budget(TIME_BUDGET_S + TIME_PER_OBJECT_S * len(items)):
        for item in items:
            try:
                texts.append(_sized(template.render(obj=item), path))
            except TemplateError as err:
                raise _template_failed(err, path, kind, item) from None
            except UserError:
                raise
            except Exception as err:  # raised by the template's own code (1 // 0, "a" + 1): its mistake
                if not _raised_by_template(err, path):
                    raise
                raise _template_failed(err, path, kind, item) from None
    return texts


def _slots_failed(err: Exception, template: Template, items: Sequence[Any], path: str, kind: str) -> UserError:
    """A mistake met by the slotted rendering, worded as the real template meets it (its line, its
    first object): the items are rendered again the plain way, which raises it. A pass out of time
    is not run a second time; an error the plain way does not meet is ours (raised as it is)."""
    if isinstance(err, TimeBudgetExceeded):
        return _template_failed(err, path, kind, None)
    _render_texts(template, items, path, kind)
    if not isinstance(err, TemplateError):
        raise err
    return _template_failed(err, path, kind, None)  # the plain way passed: the slotted error as it is


def _template_failed(err: Exception, path: str, kind: str, item: Any) -> UserError:
    line = getattr(err, "lineno", None)
    if line is None:  # a runtime error: the template's innermost line in the traceback
        line = _template_line(err, path)
    cause = str(err) if isinstance(err, TemplateError) else f"{type(err).__name__}: {err}"
    return UserError([Problem(f"template failed: {cause}", file=path, line=line,
                              obj=_object_label(kind, item) if item is not None else "")])


def _raised_by_template(err: Exception, path: str) -> bool:
    """Whether an error that is no TemplateError came from the template's own code (its expression,
    or a jinja filter or Python builtin it called) rather than from this package's code (a bug)."""
    tb = err.__traceback__
    if tb is None or _template_line(err, path) is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    innermost = tb.tb_frame.f_code.co_filename
    return innermost == path or not innermost.startswith(_PACKAGE_DIR)


_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent) + "/"


def _template_line(err: Exception, path: str) -> int | None:
    """The innermost line of the template ``path`` in the error's traceback (jinja rewrites the
    traceback of any error raised while a template renders into template lines)."""
    line, tb = None, err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _invalid_yaml(texts: list[str], items: Sequence[Any], template: Template, kind: str) -> UserError:
    """The first rendered object libyaml refuses, at the template line that wrote the text it
    stopped at, with the cause (only an error pays for finding them)."""
    path = template.filename or template.name or ""
    for text, item in zip(texts, items):
        try:
            list(load_yaml_text(text))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
            cause = "; ".join(str(p) for p in (getattr(err, "context", None), getattr(err, "problem", None)) if p)
            line = None
            if mark is not None:
                cause += f" (line {mark.line + 1}, column {mark.column + 1} of the rendered object)"
                lines = text.splitlines(keepends=True)
                line = _written_at(template, item, sum(map(len, lines[:mark.line])) + mark.column)
            return UserError([Problem(f"template does not produce valid YAML: {cause or err}", file=path,
                                      line=line, obj=_object_label(kind, item))])
    return UserError([Problem("template does not produce valid YAML (the objects are valid one by one: "
                              "one must not end a document)", file=path, obj=kind)])


def _written_at(template: Template, item: Any, offset: int) -> int | None:
    """The template line that wrote character ``offset`` of ``item``'s text. The template's code is
    run chunk by chunk; a value stands at the line the code is at when it yields it, a run of the
    template's own text (which may follow a tag on a later line) starts at the line the parser
    found it on, nearest that one, and ``offset`` is as many lines below as newlines precede it."""
    generator = template.root_render_func(template.new_context({"obj": item}))
    texts = _text_lines(template)
    written = 0
    with time_budget(TIME_BUDGET_S):
        for chunk in generator:
            frame, inner = generator.gi_frame, generator.gi_yieldfrom  # type: ignore[attr-defined]
            while inner is not None and getattr(inner, "gi_frame", None) is not None:
                if inner.gi_frame.f_code.co_filename == frame.f_code.co_filename:
                    frame = inner.gi_frame
                inner = getattr(inner, "gi_yieldfrom", None)
            line = template.get_corresponding_lineno(frame.f_lineno)
            if written + len(chunk) > offset:
                starts = [start for start in texts.get(chunk, ()) if start >= line]
                return min(starts) + chunk.count("\n", 0, offset - written) if starts else line
            written += len(chunk)
    return None


def _text_lines(template: Template) -> dict[str, list[int]]:
    """The template's runs of text, each with the lines it starts on."""
    from jinja2 import nodes
    environment, name = template.environment, template.name or ""
    assert environment.loader is not None
    source = environment.loader.get_source(environment, name)[0]
    lines: dict[str, list[int]] = {}
    for node in environment.parse(source, name, template.filename).find_all(nodes.TemplateData):
        lines.setdefault(node.data, []).append(node.lineno)
    return lines


def _object_label(kind: str, item: Any) -> str:
    """``Kind/name``, or ``Kind/namespace/name`` for a namespaced plan item."""
    namespace = getattr(item, "namespace", "")
    return f"{kind}/{namespace}/{getattr(item, 'name', '?')}" if namespace else f"{kind}/{getattr(item, 'name', '?')}"


def _sized(text: str, path: str) -> str:
    _check_size(len(text), path)
    return text


def _check_size(length: int, path: str) -> None:
    if length > MAX_OBJECT_CHARS:
        raise UserError.single(f"the template renders an object of {length:,} characters, over the limit "
                               f"of {MAX_OBJECT_CHARS:,}", file=path)


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
_DICT = frozenset({dict})


def _shape_problems(obj: dict[str, Any], item: Any, kind: str, path: str) -> list[Problem]:
    """A rendered object keeps its kind, has an apiVersion and a name, and carries a namespace
    exactly when its plan item has one (namespaced kinds): a cluster-scoped object with a namespace,
    or a namespaced one without, is applied somewhere else than the render means."""
    meta = mapping_field(obj, "metadata")
    name = meta.get("name")
    label = _object_label(kind, item)
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


def _tidy(obj: dict[str, Any]) -> None:
    """Data maps sorted by key; label and annotation values as strings."""
    for outer, inners in _DATA_MAPS_BY_PARENT:
        parent = obj.get(outer)
        if isinstance(parent, dict):
            for inner in inners:
                if isinstance(parent.get(inner), dict):
                    parent[inner] = _tidy_map(parent[inner])


def _tidy_map(data: dict[Any, Any]) -> dict[str, str]:
    if slots.is_text_map(data):
        return dict(sorted(data.items()))  # what the line below makes of str keys and values, in C
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in sorted(data.items())}
