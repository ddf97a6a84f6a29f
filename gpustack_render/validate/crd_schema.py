"""CustomResourceDefinitions → JSON Schema validators, and their errors → one readable line each.

A CRD's ``openAPIV3Schema`` is almost JSON Schema; the differences that matter for validating
manifests are bridged here: ``x-kubernetes-int-or-string`` becomes ``anyOf: [integer, string]``,
``nullable`` admits ``null``, Go RE2 patterns become Python ones. The CEL rules
(``x-kubernetes-validations``) of each CRD version are compiled once by
:mod:`gpustack_render.validate.cel_rules` (:meth:`Crds.cel_plan`) and evaluated per object.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from gpustack_render.errors import Problem, UserError
from gpustack_render.memo import Bounded, ContentKey, content_key
from gpustack_render.diff.manifests import MANIFEST_SUFFIXES
from gpustack_render.snapshot.yamlread import parse_documents
from gpustack_render.yamlio import read_text

CRD_GROUP = "apiextensions.k8s.io"
_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions")
_SUB_KEYS = ("items", "additionalProperties", "not", "contains", "propertyNames")
_LIST_KEYS = ("anyOf", "allOf", "oneOf", "prefixItems")
_GO_FLAGS = re.compile(r"^\^\(\?([imsU]+)\)")
# Schema errors after which the API server does not run a CRD's CEL rules (apiextensions
# strategy.go hasBlockingErr: NotSupported, Required, TooLong, TooMany, TypeInvalid): the object
# lacks the shape the rules were written for. In JSON Schema words:
BLOCKING_VALIDATORS = frozenset({"enum", "required", "maxLength", "maxItems", "maxProperties", "type"})


@dataclass
class CrdVersion:
    served: bool
    schema: dict[str, Any] | None


@dataclass
class Crds:
    """(group, kind) → version name → schema; where they came from, for messages."""

    kinds: dict[tuple[str, str], dict[str, CrdVersion]] = field(default_factory=dict)
    source: str = ""
    _validators: dict[tuple[str, str, str, bool], Any] = field(default_factory=dict)
    _cel_plans: dict[tuple[str, str, str], Any] = field(default_factory=dict)

    def add(self, crd: dict[str, Any], where: str) -> None:
        spec = crd.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict) \
                or not isinstance(spec.get("versions"), list):
            raise UserError.single("not a CustomResourceDefinition (spec.names/spec.versions missing)", file=where,
                                   obj=f"CustomResourceDefinition/{(crd.get('metadata') or {}).get('name', '')}")
        versions = {}
        for version in spec["versions"]:
            if isinstance(version, dict) and isinstance(version.get("name"), str):
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                versions[version["name"]] = CrdVersion(bool(version.get("served", True)),
                                                       schema if isinstance(schema, dict) else None)
        self.kinds[(str(spec.get("group") or ""), str(spec["names"].get("kind") or ""))] = versions

    def validator(self, group: str, kind: str, version: str, strict: bool) -> Any:
        key = (group, kind, version, strict)
        if key not in self._validators:
            from jsonschema import Draft202012Validator
            schema = self.kinds[(group, kind)][version].schema or {}
            self._validators[key] = Draft202012Validator(to_jsonschema(schema, strict), format_checker=_formats())
        return self._validators[key]


    def cel_plan(self, group: str, kind: str, version: str) -> Any:
        """The version's CEL rules compiled once (a render holds thousands of objects of a kind)."""
        key = (group, kind, version)
        if key not in self._cel_plans:
            from gpustack_render.validate.cel_rules import compile_schema
            schema = self.kinds[(group, kind)][version].schema or {}
            self._cel_plans[key] = compile_schema(schema, f"CRD {kind}{'.' + group if group else ''} {version}")
        return self._cel_plans[key]


def _walk(node: Any, fn: Callable[[dict[str, Any]], None]) -> None:
    if not isinstance(node, dict):
        return
    fn(node)
    for key in _MAP_KEYS:
        for sub in (node.get(key) or {}).values():
            _walk(sub, fn)
    for key in _SUB_KEYS:
        if isinstance(node.get(key), dict):
            _walk(node[key], fn)
    for key in _LIST_KEYS:
        for sub in node.get(key) or ():
            _walk(sub, fn)


def go_regex(pattern: str) -> str:
    """RE2 → Python: leading inline flags move before the anchor; a final ``$`` is end of text."""
    m = _GO_FLAGS.match(pattern)
    if m and "U" not in m.group(1):
        pattern = f"(?{m.group(1)})^" + pattern[m.end():]
    if pattern.endswith("$") and not pattern.endswith("\\$") and "m" not in (m.group(1) if m else ""):
        pattern = pattern[:-1] + "\\Z"
    return pattern


def to_jsonschema(schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    """A copy of a structural schema a JSON Schema validator reads as the API server would;
    ``strict`` closes every object schema that lists properties (unknown fields would be pruned
    silently by the API server, so a misspelt field is an error here)."""
    out = copy.deepcopy(schema)

    def fix(node: dict[str, Any]) -> None:
        if node.get("x-kubernetes-int-or-string") and "anyOf" not in node and "type" not in node:
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if node.get("nullable") is True and isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
        if isinstance(node.get("pattern"), str):
            node["pattern"] = go_regex(node["pattern"])
        if strict and "properties" in node and "additionalProperties" not in node \
                and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False

    _walk(out, fix)
    return out


def _formats() -> Any:
    from jsonschema import FormatChecker
    checker = FormatChecker(formats=())
    checker.checks("int32")(lambda v: not isinstance(v, int) or isinstance(v, bool) or -(2**31) <= v < 2**31)
    checker.checks("int64")(lambda v: not isinstance(v, int) or isinstance(v, bool) or -(2**63) <= v < 2**63)
    return checker


def crds_from_objects(objects: Iterable[dict[str, Any]], source: str) -> Crds:
    crds = Crds(source=source)
    for obj in objects:
        if obj.get("kind") == "CustomResourceDefinition" and str(obj.get("apiVersion", "")).startswith(CRD_GROUP):
            crds.add(obj, source)
    return crds


# Loaded CRD directories by path and the bytes of their manifests: validate runs in a process that
# validates again (the test suite; a CI job checking several renders) parse the 1.4 MB Workload CRD
# and compile its validators once. A Crds is only added to while it is loaded.
_LOADED: Bounded[ContentKey, Crds] = Bounded(8)


def load_crd_dir(path: Path) -> Crds:
    """Every CustomResourceDefinition under ``path`` (read recursively); none at all is an error."""
    if not path.is_dir():
        raise UserError.single("CRD directory not found", file=str(path))
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
    key = content_key(path, files)
    if key is not None and key in _LOADED:
        return _LOADED[key]
    crds = _load_files(path, files)
    if key is not None:
        _LOADED[key] = crds
    return crds


def _load_files(path: Path, files: list[Path]) -> Crds:
    crds = Crds(source=str(path))
    problems: list[Problem] = []
    for file in files:
        try:
            docs = parse_documents(read_text(file, str(file)), str(file))
        except UserError as err:
            problems.extend(err.problems)
            continue
        for doc in docs:
            listed = doc.get("items") if isinstance(doc, dict) else None
            items = listed if isinstance(listed, list) else [doc]
            for item in items:
                if isinstance(item, dict) and item.get("kind") == "CustomResourceDefinition":
                    try:
                        crds.add(item, str(file))
                    except UserError as err:
                        problems.extend(err.problems)
    if problems:
        raise UserError(problems)
    if not crds.kinds:
        raise UserError.single("no CustomResourceDefinition found", file=str(path))
    return crds


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe(error: Any) -> Iterator[tuple[list[Any], str]]:
    """(field path, message) for one jsonschema error, in the tool's words."""
    path, what, value, instance = list(error.absolute_path), error.validator, error.validator_value, error.instance
    if what == "additionalProperties" and isinstance(instance, dict):
        known = set((error.schema.get("properties") or {}))
        patterns = [re.compile(p) for p in (error.schema.get("patternProperties") or {})]
        for key in sorted(k for k in instance if k not in known and not any(p.search(k) for p in patterns)):
            yield path + [key], "unknown field"
        return
    if what == "required":
        m = re.match(r"'(.*)' is a required property", error.message)
        yield (path + [m.group(1)], "required field is missing") if m else (path, error.message)
        return
    messages = {
        "type": lambda: f"expected {value if isinstance(value, str) else ' or '.join(value)}, got {_shown(instance)}",
        "enum": lambda: f"{_shown(instance)} is not one of {', '.join(map(str, value))}",
        "maxItems": lambda: f"has {len(instance)} items, at most {value} allowed",
        "minItems": lambda: f"has {len(instance)} items, at least {value} required",
        "maxProperties": lambda: f"has {len(instance)} entries, at most {value} allowed",
        "maxLength": lambda: f"{_shown(instance)} is longer than {value} characters",
        "minLength": lambda: f"{_shown(instance)} is shorter than {value} characters",
        "pattern": lambda: f"{_shown(instance)} does not match {value.replace(chr(92) + 'Z', '$')}",
        "maximum": lambda: f"{_shown(instance)} is more than {value}",
        "minimum": lambda: f"{_shown(instance)} is less than {value}",
    }
    make = messages.get(what)
    message = make() if make else error.message
    yield path, message if len(message) <= 300 else message[:297] + "..."
