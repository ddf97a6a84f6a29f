"""Rendered manifests validate against the real CRDs (Kueue v1beta2, NFD NodeFeature v1alpha1).

The CRDs are test data shared outside the repository (``../shared/crds/`` relative to the repo
root, see its README); they are never copied into the project. When that folder is absent the
tests here are skipped; when it is present, every CRD they need must be in it.

What is checked, for the demo snapshot under several settings:

* **schema** — every Kueue object (Topology, AdmissionCheck, ResourceFlavor, ClusterQueue,
  LocalQueue) against the ``openAPIV3Schema`` of the CRD's ``v1beta2`` version, every NodeFeature
  against NFD's ``v1alpha1``, with a JSON Schema (Draft 2020-12) validator. Kubernetes extensions
  (``x-kubernetes-*``) are ignored by this check, except that ``x-kubernetes-int-or-string``
  without an explicit ``anyOf`` is given one and ``nullable: true`` admits ``null``.
* **strict schema** — the same with ``additionalProperties: false`` on every object schema that
  lists ``properties`` and neither sets ``additionalProperties`` nor preserves unknown fields, so a
  misspelled or invented field fails (the API server would silently prune it).
* **Kubernetes extensions** — ``x-kubernetes-list-type: set|map`` uniqueness and the CRDs' CEL
  rules (``x-kubernetes-validations``), ported to Python one by one. Transition rules (those that
  use ``oldSelf``) cannot apply to a create and are skipped; a CEL rule that is neither ported nor
  a transition rule fails the test, so a CRD upgrade cannot silently weaken it. The ports are also
  the oracle for ``validate``'s own CEL evaluation (cel-python): both must find the same failures.
* **metadata** — names (DNS-1123 subdomain), namespaces (DNS-1123 label), label keys and values
  and annotation keys (Kubernetes qualified-name grammar), also for the label maps that end up on
  Nodes or in node selectors (NodeFeature ``spec.labels``, ResourceFlavor ``spec.nodeLabels``).

Negative tests prove the validators are not vacuous.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from cli_invoke import invoke
import yaml
from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from jsonschema.validators import extend

REPO = Path(__file__).resolve().parents[1]
CRDS = Path(__file__).resolve().parents[1].parent / "shared" / "crds"

KUEUE_VERSION = "v1beta2"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_KINDS = ("Topology", "AdmissionCheck", "ResourceFlavor", "ClusterQueue", "LocalQueue")
NFD_GROUP = "nfd.k8s-sigs.io"
NFD_VERSION = "v1alpha1"

# (kind) -> (CRD file relative to CRDS, group, version to validate against)
CRD_FILES: dict[str, tuple[str, str, str]] = {
    "Topology": ("kueue/kueue.x-k8s.io_topologies.yaml", KUEUE_GROUP, KUEUE_VERSION),
    "AdmissionCheck": ("kueue/kueue.x-k8s.io_admissionchecks.yaml", KUEUE_GROUP, KUEUE_VERSION),
    "ResourceFlavor": ("kueue/kueue.x-k8s.io_resourceflavors.yaml", KUEUE_GROUP, KUEUE_VERSION),
    "ClusterQueue": ("kueue/kueue.x-k8s.io_clusterqueues.yaml", KUEUE_GROUP, KUEUE_VERSION),
    "LocalQueue": ("kueue/kueue.x-k8s.io_localqueues.yaml", KUEUE_GROUP, KUEUE_VERSION),
    "NodeFeature": ("nfd/nfd-api-crds.yaml", NFD_GROUP, NFD_VERSION),
}

VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (),
    "aware-cpu": ("--set", "instance-type-aware-cpu-manufacturer=true"),
    "not-mixed": ("--set", "instance-type-mixed-on-node=false"),
    "aware-cpu+not-mixed": (
        "--set",
        "instance-type-aware-cpu-manufacturer=true",
        "--set",
        "instance-type-mixed-on-node=false",
    ),
}


# --------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def render_items(variant: str) -> tuple[dict[str, Any], ...]:
    args = ["render", "fixtures/demo", "--format", "json", *VARIANTS[variant]]
    proc = invoke(*args)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc.get("kind") == "List" and isinstance(doc.get("items"), list), doc.keys()
    return tuple(doc["items"])


def objects_of(variant: str, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    return [o for o in render_items(variant) if o.get("kind") in kinds]


def ident(obj: dict[str, Any]) -> str:
    md = obj.get("metadata", {})
    ns = f"{md['namespace']}/" if md.get("namespace") else ""
    return f"{obj.get('kind')} {ns}{md.get('name')}"


# --------------------------------------------------------------------------------------------
# CRDs -> JSON Schema
# --------------------------------------------------------------------------------------------

_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_KEYS = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SCHEMA_LIST_KEYS = ("anyOf", "allOf", "oneOf", "prefixItems")


def _map_schema(node: Any, fn: Callable[[dict[str, Any]], None]) -> None:
    """Call ``fn`` on every (sub)schema of ``node``, outermost first, in place. Written apart from
    ``validate``'s own walker on purpose: a test built on that walker would miss what it misses."""
    if not isinstance(node, dict):
        return
    fn(node)
    for key in _SCHEMA_MAP_KEYS:
        for sub in (node.get(key) or {}).values():
            _map_schema(sub, fn)
    for key in _SCHEMA_KEYS:
        if isinstance(node.get(key), dict):
            _map_schema(node[key], fn)
    for key in _SCHEMA_LIST_KEYS:
        for sub in node.get(key) or ():
            _map_schema(sub, fn)


_GO_LEADING_FLAGS = re.compile(r"^\^\(\?([imsU]+)\)")


def _go_regex_to_python(pattern: str) -> str:
    """CRD patterns are Go RE2. Python's ``re`` only takes inline flags at the very start, so
    ``^(?i)x`` (RE2: anchor, then case-insensitive) becomes the equivalent ``(?i)^x``; and RE2's
    ``$`` (without ``m``) matches only at the very end, which is Python's ``\\Z`` (Python's ``$``
    would also match before a trailing newline)."""
    m = _GO_LEADING_FLAGS.match(pattern)
    if m and "U" not in m.group(1):
        pattern = f"(?{m.group(1)})^" + pattern[m.end():]
    if pattern.endswith("$") and not pattern.endswith("\\$") and "m" not in (m.group(1) if m else ""):
        pattern = pattern[:-1] + "\\Z"
    return pattern


def k8s_to_jsonschema(schema: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a CRD structural schema that a JSON Schema validator evaluates as the API
    server would (apart from the x-kubernetes-* extensions, which it ignores)."""
    out = copy.deepcopy(schema)

    def fix(node: dict[str, Any]) -> None:
        if node.get("x-kubernetes-int-or-string") and "anyOf" not in node and "type" not in node:
            node["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if node.get("nullable") is True and isinstance(node.get("type"), str):
            node["type"] = [node["type"], "null"]
        if isinstance(node.get("pattern"), str):
            node["pattern"] = _go_regex_to_python(node["pattern"])

    _map_schema(out, fix)
    return out


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``schema`` that rejects unknown fields: ``additionalProperties: false`` on
    every object schema with ``properties`` and no ``additionalProperties`` /
    ``x-kubernetes-preserve-unknown-fields``."""
    out = copy.deepcopy(schema)

    def close(node: dict[str, Any]) -> None:
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False

    _map_schema(out, close)
    return out


FORMATS = FormatChecker(formats=())


@FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**31) <= value < 2**31


@FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**63) <= value < 2**63


def validator_for(schema: dict[str, Any], *, strict: bool = False,
                  cls: type = Draft202012Validator) -> Any:
    prepared = k8s_to_jsonschema(schema)
    if strict:
        prepared = strict_schema(prepared)
    return cls(prepared, format_checker=FORMATS)


def schema_errors(validator: Any, obj: dict[str, Any]) -> list[str]:
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [f"  at {'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message[:300]}"
            for e in errors]


@pytest.fixture(scope="session")
def crds() -> dict[str, dict[str, Any]]:
    """kind -> {"crd": the CRD, "schema": openAPIV3Schema of the version to validate against}."""
    if not CRDS.is_dir():
        pytest.skip(f"CRD test data not found at {CRDS} (expected ../shared/crds next to the repo); "
                    "skipping CRD schema validation")
    found: dict[str, dict[str, Any]] = {}
    for kind, (rel, group, version) in CRD_FILES.items():
        path = CRDS / rel
        assert path.is_file(), f"{path} is missing from the CRD test data"
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            if doc["spec"]["names"]["kind"] != kind or doc["spec"]["group"] != group:
                continue
            versions = {v["name"]: v for v in doc["spec"]["versions"]}
            assert version in versions, f"{path}: {kind} has no {version} (has {sorted(versions)})"
            assert versions[version].get("served"), f"{path}: {kind} {version} is not served"
            schema = versions[version]["schema"]["openAPIV3Schema"]
            Draft202012Validator.check_schema(k8s_to_jsonschema(schema))
            found[kind] = {"crd": doc, "schema": schema, "group": group, "version": version}
        assert kind in found, f"{path} holds no CRD for {group} {kind}"
    return found


# --------------------------------------------------------------------------------------------
# schema validation of the rendered objects
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_render_contains_every_validated_kind(variant):
    """Guard against a vacuous pass: each variant renders every kind the tests validate."""
    kinds = {o["kind"] for o in render_items(variant)}
    missing = set(CRD_FILES) - kinds
    assert not missing, f"{variant}: no {sorted(missing)} rendered; the CRD checks would be vacuous"


@pytest.mark.parametrize("variant", VARIANTS)
def test_api_versions_match_crds(crds, variant):
    bad = []
    for obj in objects_of(variant, tuple(crds)):
        want = f"{crds[obj['kind']]['group']}/{crds[obj['kind']]['version']}"
        if obj.get("apiVersion") != want:
            bad.append(f"{ident(obj)}: apiVersion {obj.get('apiVersion')!r}, want {want!r}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("variant", VARIANTS)
def test_scope_matches_crds(crds, variant):
    """Namespaced kinds carry metadata.namespace, cluster-scoped kinds do not."""
    bad = []
    for obj in objects_of(variant, tuple(crds)):
        namespaced = crds[obj["kind"]]["crd"]["spec"]["scope"] == "Namespaced"
        has_ns = bool(obj.get("metadata", {}).get("namespace"))
        if namespaced != has_ns:
            bad.append(f"{ident(obj)}: scope {crds[obj['kind']]['crd']['spec']['scope']}, "
                       f"namespace {obj.get('metadata', {}).get('namespace')!r}")
    assert not bad, "\n".join(bad)


def _validate_all(crds, variant: str, kinds: tuple[str, ...], strict: bool) -> None:
    validators = {k: validator_for(crds[k]["schema"], strict=strict) for k in kinds}
    objects = objects_of(variant, kinds)
    assert objects, f"{variant}: nothing of {kinds} rendered"
    failures = []
    for obj in objects:
        errs = schema_errors(validators[obj["kind"]], obj)
        if errs:
            failures.append(f"{ident(obj)} ({'strict' if strict else 'normal'} schema):\n" + "\n".join(errs))
    assert not failures, f"{variant}:\n" + "\n".join(failures)


@pytest.mark.parametrize("strict", [False, True], ids=["normal", "strict"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_kueue_objects_match_v1beta2_schema(crds, variant, strict):
    _validate_all(crds, variant, KUEUE_KINDS, strict)


@pytest.mark.parametrize("strict", [False, True], ids=["normal", "strict"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_nodefeatures_match_nfd_schema(crds, variant, strict):
    _validate_all(crds, variant, ("NodeFeature",), strict)


# --------------------------------------------------------------------------------------------
# Kubernetes extensions: list types and CEL rules
# --------------------------------------------------------------------------------------------


def _list_type(validator, value, instance, schema):
    if not isinstance(instance, list):
        return
    if value == "set":
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                yield ValidationError(f"duplicate entry {item!r} in a list of type set")
            seen.append(item)
    elif value == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: set[str] = set()
        for item in instance:
            if not isinstance(item, dict):
                continue
            key = json.dumps([item.get(k) for k in keys])
            if key in seen_keys:
                yield ValidationError(f"duplicate entry for list-map keys {keys} = {key}")
            seen_keys.add(key)


def _has(obj: Any, key: str) -> bool:
    return isinstance(obj, dict) and key in obj


# CEL rules of the CRDs, ported to Python. Key: the rule text exactly as in the CRD.
PORTED_CEL: dict[str, Callable[[Any], bool]] = {
    # ClusterQueue
    "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && "
    "self.whenCanPreempt == 'TryNextFlavor')":
        lambda s: not _has(s, "preference")
        or (s.get("whenCanBorrow") == "TryNextFlavor" and s.get("whenCanPreempt") == "TryNextFlavor"),
    "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) &&  "
    "self.borrowWithinCohort.policy != 'Never')":
        lambda s: not (s.get("reclaimWithinCohort") == "Never" and _has(s, "borrowWithinCohort")
                       and s["borrowWithinCohort"].get("policy") != "Never"),
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))":
        lambda s: all(len(f.get("resources", [])) == len(s.get("coveredResources", []))
                      for f in s.get("flavors", [])),
    "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
    "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true":
        lambda s: not (not _has(s, "cohortName") and _has(s, "resourceGroups"))
        or all(not _has(r, "borrowingLimit") for rg in s["resourceGroups"]
               for f in rg.get("flavors", []) for r in f.get("resources", [])),
    # ResourceFlavor
    "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])":
        lambda s: all(x.get("effect") in ("NoSchedule", "PreferNoSchedule", "NoExecute") for x in s),
    "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)":
        lambda s: all(_has(x, "key") or x.get("operator") == "Exists" for x in s),
    "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)":
        lambda s: all(not _has(x, "tolerationSeconds") or x.get("effect") == "NoExecute" for x in s),
    "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])":
        lambda s: all(not _has(x, "operator") or x["operator"] in ("Equal", "Exists") for x in s),
    "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)":
        lambda s: all(not (x.get("operator") == "Exists") or not _has(x, "value") for x in s),
    "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])":
        lambda s: all(not _has(x, "effect") or x["effect"] in ("NoSchedule", "PreferNoSchedule", "NoExecute")
                      for x in s),
    "!has(self.topologyName) || self.nodeLabels.size() >= 1":
        lambda s: not _has(s, "topologyName") or len(s.get("nodeLabels") or {}) >= 1,
    # Topology
    "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0":
        lambda s: all(s.count(i) == 1 for i in s),
    "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || "
    "self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'":
        lambda s: not any(i.get("nodeLabel") == "kubernetes.io/hostname" for i in s)
        or s[-1].get("nodeLabel") == "kubernetes.io/hostname",
}


def _is_transition_rule(rule: dict[str, Any]) -> bool:
    return "oldSelf" in rule["rule"]


def _cel(validator, rules, instance, schema):
    for rule in rules:
        if _is_transition_rule(rule):
            continue  # update-only rule: nothing to check on a create
        fn = PORTED_CEL.get(rule["rule"])
        if fn is None:
            yield ValidationError(f"CEL rule not ported to this test (port it): {rule['rule']!r}")
        elif not fn(instance):
            yield ValidationError(f"CEL rule fails: {rule['rule']!r}: {rule.get('message', '')}")


K8sValidator = extend(Draft202012Validator, {
    "x-kubernetes-list-type": _list_type,
    "x-kubernetes-validations": _cel,
})


def crd_cel_rules(schema: dict[str, Any]) -> list[str]:
    rules: list[str] = []
    _map_schema(schema, lambda n: rules.extend(r["rule"] for r in n.get("x-kubernetes-validations", ())))
    return rules


def test_every_non_transition_cel_rule_is_ported(crds):
    missing = [f"{kind}: {rule}" for kind, c in crds.items() for rule in crd_cel_rules(c["schema"])
               if "oldSelf" not in rule and rule not in PORTED_CEL]
    assert not missing, "CEL rules without a Python port:\n" + "\n".join(missing)


@pytest.mark.parametrize("variant", VARIANTS)
def test_kubernetes_extensions_list_types_and_cel(crds, variant):
    validators = {k: validator_for(c["schema"], cls=K8sValidator) for k, c in crds.items()}
    failures = []
    for obj in objects_of(variant, tuple(crds)):
        errs = schema_errors(validators[obj["kind"]], obj)
        if errs:
            failures.append(f"{ident(obj)}:\n" + "\n".join(errs))
    assert not failures, f"{variant}:\n" + "\n".join(failures)


# --------------------------------------------------------------------------------------------
# the validators are not vacuous
# --------------------------------------------------------------------------------------------


def _first(variant: str, kind: str) -> dict[str, Any]:
    for obj in render_items(variant):
        if obj["kind"] == kind:
            return copy.deepcopy(obj)
    raise AssertionError(f"no {kind} rendered")


def _cq_with_quota() -> dict[str, Any]:
    for obj in render_items("default"):
        if obj["kind"] == "ClusterQueue" and obj["spec"].get("resourceGroups"):
            return copy.deepcopy(obj)
    raise AssertionError("no ClusterQueue with resourceGroups rendered")


def test_strict_mode_catches_unknown_fields(crds):
    normal = validator_for(crds["ClusterQueue"]["schema"])
    strict = validator_for(crds["ClusterQueue"]["schema"], strict=True)
    cq = _cq_with_quota()
    assert not schema_errors(strict, cq)

    top = copy.deepcopy(cq)
    top["spec"]["bogus"] = 1
    assert not schema_errors(normal, top), "normal mode ignores unknown fields, as the API server"
    errs = schema_errors(strict, top)
    assert errs and any("bogus" in e for e in errs), errs

    nested = copy.deepcopy(cq)
    nested["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQouta"] = "1"
    errs = schema_errors(strict, nested)
    assert any("nominalQouta" in e for e in errs), errs

    top_level = copy.deepcopy(cq)
    top_level["status"] = {"bogus": True}
    assert any("bogus" in e for e in schema_errors(strict, top_level))

    nf_strict = validator_for(crds["NodeFeature"]["schema"], strict=True)
    nf = _first("default", "NodeFeature")
    assert not schema_errors(nf_strict, nf)
    nf["spec"]["bogus"] = {}
    assert any("bogus" in e for e in schema_errors(nf_strict, nf))


def test_strict_schema_leaves_open_maps_open():
    schema = {
        "type": "object",
        "properties": {
            "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "properties": {"a": {"type": "string"}},
                     "x-kubernetes-preserve-unknown-fields": True},
            "meta": {"type": "object"},
        },
    }
    original = copy.deepcopy(schema)
    v = Draft202012Validator(strict_schema(schema))
    assert schema == original, "strict_schema must not modify its argument"
    assert v.is_valid({"map": {"x": "y"}, "free": {"b": 1}, "meta": {"anything": 1}, "closed": {"a": "x"}})
    assert not v.is_valid({"closed": {"b": "x"}})
    assert not v.is_valid({"other": 1})


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda cq: cq["spec"].__setitem__("stopPolicy", 5), "stopPolicy"),
        (lambda cq: cq["spec"].__setitem__("stopPolicy", "Bogus"), "stopPolicy"),
        (lambda cq: cq["spec"].__setitem__("namespaceSelector", "all"), "namespaceSelector"),
        (lambda cq: cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
         .__setitem__("nominalQuota", ["4"]), "nominalQuota"),
        (lambda cq: cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
         .__setitem__("nominalQuota", "lots"), "nominalQuota"),
        (lambda cq: cq["spec"]["resourceGroups"][0]["flavors"][0].__setitem__("name", "Not_A_Name"),
         "name"),
        (lambda cq: cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].pop("name"), "name"),
    ],
    ids=["int-enum", "bad-enum", "object-as-string", "quantity-as-list", "quantity-garbage",
         "flavor-name-pattern", "required-missing"],
)
def test_normal_mode_catches_wrong_types(crds, mutate, needle):
    normal = validator_for(crds["ClusterQueue"]["schema"])
    cq = _cq_with_quota()
    assert not schema_errors(normal, cq)
    mutate(cq)
    errs = schema_errors(normal, cq)
    assert errs, "the mutation went unnoticed: the validator is vacuous"
    assert any(needle in e for e in errs), errs


def test_go_patterns_translate_to_python():
    assert _go_regex_to_python("^(?i)[a-z]+$") == "(?i)^[a-z]+\\Z"
    assert _go_regex_to_python("^a\\$") == "^a\\$"
    v = validator_for({"type": "string", "pattern": "^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$"})
    assert v.is_valid("Abc-1") and not v.is_valid("abc\n") and not v.is_valid("-a")


def test_int_or_string_accepts_both_forms(crds):
    normal = validator_for(crds["ClusterQueue"]["schema"])
    cq = _cq_with_quota()
    res = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    for value in (4, "4", "1600k", "6400k", "16M", "1.5Gi"):
        res["nominalQuota"] = value
        assert not schema_errors(normal, cq), value
    # a bare int-or-string marker (no anyOf) gets one: integers and strings only
    v = validator_for({"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": True}}})
    assert v.is_valid({"q": 1}) and v.is_valid({"q": "1"})
    assert not v.is_valid({"q": 1.5}) and not v.is_valid({"q": [1]}) and not v.is_valid({"q": None})


def test_extension_checks_catch_violations(crds):
    cq_v = validator_for(crds["ClusterQueue"]["schema"], cls=K8sValidator)
    cq = _cq_with_quota()
    assert not schema_errors(cq_v, cq)
    dup = copy.deepcopy(cq)
    flavors = dup["spec"]["resourceGroups"][0]["flavors"]
    flavors.append(copy.deepcopy(flavors[0]))
    assert any("duplicate" in e for e in schema_errors(cq_v, dup)), "list-map uniqueness unchecked"
    cel = copy.deepcopy(cq)
    cel["spec"]["resourceGroups"][0]["coveredResources"].append("memory")
    assert any("CEL rule fails" in e for e in schema_errors(cq_v, cel)), "CEL port unchecked"

    topo_v = validator_for(crds["Topology"]["schema"], cls=K8sValidator)
    topo = _first("default", "Topology")
    assert not schema_errors(topo_v, topo)
    topo["spec"]["levels"].append({"nodeLabel": "topology.kubernetes.io/zone"})
    assert any("CEL rule fails" in e for e in schema_errors(topo_v, topo)), "hostname-last unchecked"


def _cel_mutations() -> list[tuple[str, dict[str, Any]]]:
    """Rendered objects, each broken against one CEL rule (or left valid), for the comparison below."""
    cases: list[tuple[str, dict[str, Any]]] = []

    def add(name: str, kind: str, edit: Callable[[dict[str, Any]], None]) -> None:
        obj = _cq_with_quota() if kind == "ClusterQueue" else _first("default", kind)
        edit(obj)
        cases.append((name, obj))

    add("cq-valid", "ClusterQueue", lambda o: None)
    add("cq-covered", "ClusterQueue", lambda o: o["spec"]["resourceGroups"][0]["coveredResources"].append("memory"))
    add("cq-borrowing", "ClusterQueue",
        lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].__setitem__("borrowingLimit", "1"))
    add("cq-borrowing-cohort", "ClusterQueue", lambda o: (
        o["spec"].__setitem__("cohortName", "team"),
        o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].__setitem__("borrowingLimit", "1")))
    add("cq-preference", "ClusterQueue", lambda o: o["spec"].__setitem__(
        "flavorFungibility", {"preference": "BorrowingOverPreemption", "whenCanBorrow": "MayStopSearch",
                              "whenCanPreempt": "TryNextFlavor"}))
    add("cq-preemption", "ClusterQueue", lambda o: o["spec"].__setitem__(
        "preemption", {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}))
    for name, tolerations in {
        "no-key-equal": [{"operator": "Equal", "value": "x"}],
        "no-key-no-operator": [{"value": "x"}],
        "seconds-noschedule": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}],
        "operator-in": [{"key": "k", "operator": "In"}],
        "exists-value": [{"key": "k", "operator": "Exists", "value": "v"}],
        "effect-bad": [{"key": "k", "operator": "Exists", "effect": "Sometimes"}],
        "valid": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 5}],
    }.items():
        add(f"rf-tolerations-{name}", "ResourceFlavor",
            lambda o, t=tolerations: o["spec"].__setitem__("tolerations", copy.deepcopy(t)))
    add("rf-taint-effect", "ResourceFlavor",
        lambda o: o["spec"].__setitem__("nodeTaints", [{"key": "k", "value": "v", "effect": "Sometimes"}]))
    add("rf-topology-empty-labels", "ResourceFlavor",
        lambda o: (o["spec"].__setitem__("topologyName", "t"), o["spec"].__setitem__("nodeLabels", {})))
    add("topology-duplicate", "Topology", lambda o: o["spec"]["levels"].insert(0, {"nodeLabel": "a/b"})
        or o["spec"]["levels"].insert(0, {"nodeLabel": "a/b"}))
    add("topology-hostname-first", "Topology", lambda o: o["spec"]["levels"].append({"nodeLabel": "a/b"}))
    return cases


def test_the_tools_cel_evaluation_agrees_with_the_python_ports(crds):
    """validate evaluates the CRD rules with a CEL library (gpustack_render.validate.cel_rules); the Python
    ports above are an independent oracle: on every case both find the same (path, message) pairs."""
    from gpustack_render.validate.cel_rules import compile_schema

    broken = 0
    for name, obj in _cel_mutations():
        schema = crds[obj["kind"]]["schema"]
        ported = validator_for(schema, cls=K8sValidator)
        expected = set()
        for error in ported.iter_errors(obj):
            for rule in error.schema.get("x-kubernetes-validations", ()):
                prefix = f"CEL rule fails: {rule['rule']!r}: "
                if error.message.startswith(prefix):
                    expected.add((".".join(str(p) for p in error.absolute_path), error.message[len(prefix):]))
        got = {(".".join(str(p) for p in path), message.rpartition("evaluating rule: ")[2])
               for path, message in compile_schema(schema, obj["kind"]).issues(obj)}
        assert got == expected, name
        broken += bool(expected)
    assert broken == 14, "the cases do not break the rules they are meant to"


# --------------------------------------------------------------------------------------------
# metadata: names, namespaces, label and annotation grammar
# --------------------------------------------------------------------------------------------

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_RE = re.compile(rf"^{_DNS1123_LABEL}\Z")
DNS1123_SUBDOMAIN_RE = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*\Z")
_QUALIFIED_NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_PART_RE = re.compile(rf"^{_QUALIFIED_NAME_PART}\Z")
LABEL_VALUE_RE = re.compile(rf"^({_QUALIFIED_NAME_PART})?\Z")

ALLOWED_TOP_LEVEL = {"apiVersion", "kind", "metadata", "spec"}
ALLOWED_METADATA = {"name", "namespace", "labels", "annotations"}


def dns1123_subdomain_errors(value: object) -> list[str]:
    if not isinstance(value, str) or not value:
        return [f"{value!r} is not a non-empty string"]
    errs = []
    if len(value) > 253:
        errs.append(f"{value!r} is longer than 253 characters")
    if not DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(f"{value!r} is not a DNS-1123 subdomain")
    return errs


def dns1123_label_errors(value: object) -> list[str]:
    if not isinstance(value, str) or not value:
        return [f"{value!r} is not a non-empty string"]
    errs = []
    if len(value) > 63:
        errs.append(f"{value!r} is longer than 63 characters")
    if not DNS1123_LABEL_RE.match(value):
        errs.append(f"{value!r} is not a DNS-1123 label")
    return errs


def qualified_name_errors(key: object) -> list[str]:
    """Kubernetes IsQualifiedName: ``[prefix/]name``, prefix a DNS-1123 subdomain, name ≤ 63."""
    if not isinstance(key, str):
        return [f"key {key!r} is not a string"]
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return [f"key {key!r}: empty prefix"]
        errs = dns1123_subdomain_errors(prefix)
        if errs:
            return [f"key {key!r}: prefix: " + "; ".join(errs)]
    else:
        return [f"key {key!r}: more than one '/'"]
    if not name:
        return [f"key {key!r}: empty name part"]
    if len(name) > 63:
        return [f"key {key!r}: name part longer than 63 characters"]
    if not QUALIFIED_NAME_PART_RE.match(name):
        return [f"key {key!r}: name part is not a qualified name"]
    return []


def label_value_errors(value: object) -> list[str]:
    if not isinstance(value, str):
        return [f"value {value!r} is a {type(value).__name__}, not a string"]
    if len(value) > 63:
        return [f"value {value!r} is longer than 63 characters"]
    if not LABEL_VALUE_RE.match(value):
        return [f"value {value!r} is not a valid label value"]
    return []


def label_map_errors(where: str, labels: object) -> list[str]:
    if not isinstance(labels, dict):
        return [f"{where}: not a map"]
    errs = []
    for key, value in labels.items():
        errs += [f"{where}: {e}" for e in qualified_name_errors(key)]
        errs += [f"{where}[{key}]: {e}" for e in label_value_errors(value)]
    return errs


def object_metadata_errors(obj: dict[str, Any]) -> list[str]:
    errs = []
    extra = set(obj) - ALLOWED_TOP_LEVEL
    if extra:
        errs.append(f"unexpected top-level fields {sorted(extra)} (spec: apiVersion, kind, metadata, spec)")
    md = obj.get("metadata")
    if not isinstance(md, dict):
        return errs + ["metadata is not a map"]
    extra = set(md) - ALLOWED_METADATA
    if extra:
        errs.append(f"unexpected metadata fields {sorted(extra)}")
    errs += [f"metadata.name: {e}" for e in dns1123_subdomain_errors(md.get("name"))]
    if "namespace" in md:
        errs += [f"metadata.namespace: {e}" for e in dns1123_label_errors(md["namespace"])]
    if "labels" in md:
        errs += label_map_errors("metadata.labels", md["labels"])
    annotations = md.get("annotations", {})
    if not isinstance(annotations, dict):
        errs.append("metadata.annotations: not a map")
    else:
        for key, value in annotations.items():
            errs += [f"metadata.annotations: {e}" for e in qualified_name_errors(key)]
            if not isinstance(value, str):
                errs.append(f"metadata.annotations[{key}]: {value!r} is not a string")
        size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
        if size > 256 * 1024:
            errs.append(f"metadata.annotations: total size {size} exceeds 256 KiB")
    # label maps that become Node labels or node selectors
    spec = obj.get("spec") or {}
    if obj.get("kind") == "NodeFeature" and "labels" in spec:
        errs += label_map_errors("spec.labels", spec["labels"])
    if obj.get("kind") == "ResourceFlavor" and "nodeLabels" in spec:
        errs += label_map_errors("spec.nodeLabels", spec["nodeLabels"])
    return errs


@pytest.mark.parametrize("variant", VARIANTS)
def test_metadata_names_and_labels(variant):
    items = render_items(variant)
    assert items
    failures = []
    for obj in items:
        errs = object_metadata_errors(obj)
        if errs:
            failures.append(f"{ident(obj)}:\n  " + "\n  ".join(errs))
    assert not failures, f"{variant}:\n" + "\n".join(failures)


@pytest.mark.parametrize("variant", VARIANTS)
def test_local_queue_names_fit_the_queue_name_label(variant):
    """Workloads select a LocalQueue with label ``kueue.x-k8s.io/queue-name: <name>``."""
    bad = []
    for obj in objects_of(variant, ("LocalQueue",)):
        bad += [f"{ident(obj)}: {e}" for e in label_value_errors(obj["metadata"]["name"])]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("variant", VARIANTS)
def test_references_resolve_within_the_render(variant):
    """Every name a rendered object points to is rendered too (a dangling reference leaves a
    queue inactive in Kueue)."""
    items = render_items(variant)
    names = {kind: {o["metadata"]["name"] for o in items if o["kind"] == kind} for kind in KUEUE_KINDS}
    bad = []
    for obj in items:
        spec = obj.get("spec") or {}
        if obj["kind"] == "ResourceFlavor" and "topologyName" in spec:
            if spec["topologyName"] not in names["Topology"]:
                bad.append(f"{ident(obj)}: topologyName {spec['topologyName']} not rendered")
        if obj["kind"] == "ClusterQueue":
            for rg in spec.get("resourceGroups", []):
                for fl in rg.get("flavors", []):
                    if fl["name"] not in names["ResourceFlavor"]:
                        bad.append(f"{ident(obj)}: flavor {fl['name']} not rendered")
            for ac in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks", []):
                if ac["name"] not in names["AdmissionCheck"]:
                    bad.append(f"{ident(obj)}: admission check {ac['name']} not rendered")
        if obj["kind"] == "LocalQueue" and spec.get("clusterQueue") not in names["ClusterQueue"]:
            bad.append(f"{ident(obj)}: clusterQueue {spec.get('clusterQueue')} not rendered")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "value, ok",
    [("", True), ("true", True), ("a", True), ("A.b_c-D", True), ("4", True), ("x" * 63, True),
     ("x" * 64, False), ("-a", False), ("a-", False), ("a b", False), ("a/b", False), ("é", False),
     ("a\n", False)],
)
def test_label_value_grammar(value, ok):
    assert (not label_value_errors(value)) is ok


def test_label_value_must_be_a_string():
    assert label_value_errors(True) and label_value_errors(4)


@pytest.mark.parametrize(
    "key, ok",
    [("app", True), ("kubernetes.io/arch", True), ("general.feature.gpustack.ai/amd-epyc-7r13.count", True),
     ("a/" + "x" * 63, True), ("a/" + "x" * 64, False), ("/x", False), ("a/b/c", False),
     ("Upper.Case/x", False), ("x.io/", False), ("x.io/-a", False), ("_x", False),
     ("x\n", False)],
)
def test_qualified_name_grammar(key, ok):
    assert (not qualified_name_errors(key)) is ok


@pytest.mark.parametrize(
    "name, ok",
    [("gpustack--generic-linux-amd64", True), ("a.b-c", True), ("x" * 253, True), ("x" * 254, False),
     ("Upper", False), ("a_b", False), ("-a", False), ("a.", False), ("", False),
     ("a\n", False)],
)
def test_dns1123_subdomain_grammar(name, ok):
    assert (not dns1123_subdomain_errors(name)) is ok


def test_metadata_check_catches_problems():
    obj = _first("default", "ResourceFlavor")
    assert not object_metadata_errors(obj)
    obj["metadata"]["labels"]["x"] = "bad value"
    obj["metadata"]["annotations"]["bad key!"] = "v"
    obj["spec"]["nodeLabels"]["y"] = 4
    obj["metadata"]["uid"] = "1"
    obj["status"] = {}
    text = "\n".join(object_metadata_errors(obj))
    for needle in ("bad value", "bad key!", "spec.nodeLabels[y]", "uid", "status"):
        assert needle in text, text


def _iter_strings(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _iter_strings(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _iter_strings(v, f"{path}[{i}]")
    else:
        yield path, node


@pytest.mark.parametrize("variant", VARIANTS)
def test_quantities_are_strings(variant):
    """README output conventions: quantities are always strings (the CRD would also take ints)."""
    bad = []
    for obj in objects_of(variant, ("ClusterQueue",)):
        for path, value in _iter_strings(obj.get("spec", {})):
            is_quantity = path.endswith((".nominalQuota", ".borrowingLimit", ".lendingLimit"))
            if is_quantity and not isinstance(value, str):
                bad.append(f"{ident(obj)}: {path} = {value!r}")
    assert not bad, "\n".join(bad)
