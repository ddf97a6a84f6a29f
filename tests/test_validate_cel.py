"""`validate` runs the CRDs' CEL rules (``x-kubernetes-validations``) as the API server does on a create.

The Kueue CRDs are the real ones in ../shared/crds (see its README; never copied into the project):
the tests that need them are skipped, saying where they looked, when the folder is absent. Each
mutation of the demo render breaks exactly one CRD rule and must be reported, on one line, with that
rule's own message at that rule's field path. Small hand-written CRDs cover what the Kueue CRDs do
not exercise: messageExpression, fieldPath, rules that cannot be compiled, the Kubernetes library
functions added to cel-python. Everything runs in-process through ``gpustack_render.cli.main``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from cli_invoke import CliResult, invoke
import yaml
from click.testing import Result

from gpustack_render.validate import cel_rules
from gpustack_render.validate import crd_schema
from gpustack_render.validate.cel_rules import compile_rule, compile_schema

REPO = Path(__file__).resolve().parents[1]
CRDS = REPO.parent / "shared" / "crds"
DEMO = REPO / "fixtures" / "demo"
TRANSITION_NOTE = "CEL transition rule(s) skipped: they compare with oldSelf"

needs_crds = pytest.mark.skipif(not (CRDS / "kueue").is_dir(),
                                reason=f"Kueue CRD test data not found at {CRDS} (../shared/crds next to the repo)")


def cli(*args: str, stdin: str | None = None) -> CliResult:
    result = invoke(*args, input=stdin)
    # an exception the CLI lets through is raised by invoke (never mistaken for an exit code)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture(scope="module")
def demo() -> list[dict[str, Any]]:
    result = cli("render", str(DEMO), "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["items"]


def first(items: list[dict[str, Any]], kind: str, where: Callable[[dict[str, Any]], bool] = lambda o: True
          ) -> dict[str, Any]:
    return copy.deepcopy(next(o for o in items if o["kind"] == kind and where(o)))


def write_list(tmp_path: Path, items: list[dict[str, Any]], name: str = "manifests.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    return path


def validate(tmp_path: Path, items: list[dict[str, Any]], crds: Path = CRDS, *extra: str) -> Result:
    return cli("validate", "--manifests", str(write_list(tmp_path, items)), "--crds", str(crds), *extra)


def ref(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']}/{meta['namespace']}/{meta['name']}" if meta.get("namespace") else \
        f"{obj['kind']}/{meta['name']}"


# --- the real Kueue rules, one broken at a time -----------------------------------------------------

def _with_quota(o: dict[str, Any]) -> bool:
    return bool(o["spec"].get("resourceGroups"))


def _toleration_exists_with_value(items: list[dict[str, Any]]) -> dict[str, Any]:
    rf = first(items, "ResourceFlavor")
    rf["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists", "value": "gpu", "effect": "NoSchedule"}]
    return rf


def _toleration_bad_operator(items: list[dict[str, Any]]) -> dict[str, Any]:
    rf = first(items, "ResourceFlavor")
    rf["spec"]["tolerations"] = [{"key": "dedicated", "operator": "In", "value": "gpu"}]
    return rf


def _duplicate_levels(items: list[dict[str, Any]]) -> dict[str, Any]:
    topo = first(items, "Topology")
    levels = topo["spec"]["levels"]
    topo["spec"]["levels"] = [{"nodeLabel": "topology.kubernetes.io/zone"},
                              {"nodeLabel": "topology.kubernetes.io/zone"}, *levels]
    return topo


def _hostname_not_last(items: list[dict[str, Any]]) -> dict[str, Any]:
    topo = first(items, "Topology")
    assert topo["spec"]["levels"][-1] == {"nodeLabel": "kubernetes.io/hostname"}, topo["spec"]
    topo["spec"]["levels"].append({"nodeLabel": "topology.kubernetes.io/zone"})
    return topo


def _flavor_resources_differ(items: list[dict[str, Any]]) -> dict[str, Any]:
    cq = first(items, "ClusterQueue", _with_quota)
    group = cq["spec"]["resourceGroups"][0]
    group["coveredResources"].append("example.com/extra")  # the flavors still quote one resource fewer
    return cq


def _borrowing_limit_without_cohort(items: list[dict[str, Any]]) -> dict[str, Any]:
    cq = first(items, "ClusterQueue", _with_quota)
    assert "cohortName" not in cq["spec"], "the demo queues have no cohort"
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    return cq


def _topology_without_node_labels(items: list[dict[str, Any]]) -> dict[str, Any]:
    rf = first(items, "ResourceFlavor", lambda o: "topologyName" in o["spec"])
    rf["spec"].pop("nodeLabels", None)
    return rf


CEL_CASES = [
    ("toleration-exists-with-value", _toleration_exists_with_value,
     "spec.tolerations: a value must be empty when 'operator' is 'Exists'"),
    ("toleration-operator", _toleration_bad_operator,
     "spec.tolerations: supported toleration values: 'Equal'(default), 'Exists'"),
    ("duplicate-topology-levels", _duplicate_levels, "spec.levels: must be unique"),
    ("hostname-not-last", _hostname_not_last,
     "spec.levels: the kubernetes.io/hostname label can only be used at the lowest level of topology"),
    ("flavor-resources-differ", _flavor_resources_differ,
     "spec.resourceGroups[0]: flavors must have the same number of resources as the coveredResources"),
    ("borrowing-limit-without-cohort", _borrowing_limit_without_cohort,
     "spec: borrowingLimit must be nil when cohort is empty"),
    # An unset field the rule reads is an evaluation error, reported as the API server words it.
    ("topology-without-node-labels", _topology_without_node_labels,
     "spec: no such key: nodeLabels evaluating rule: at least one nodeLabel is required when topology is set"),
]


@needs_crds
@pytest.mark.parametrize("name, mutate, expected", CEL_CASES, ids=[c[0] for c in CEL_CASES])
def test_each_broken_cel_rule_is_one_line_with_the_crd_message(
        tmp_path: Path, demo: list[dict[str, Any]], name: str,
        mutate: Callable[[list[dict[str, Any]]], dict[str, Any]], expected: str) -> None:
    obj = mutate(demo)
    result = validate(tmp_path, [obj], CRDS, "--strict")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"{ref(obj)}: {expected}"]
    assert "validate: 1 problem(s)" in result.stderr


@needs_crds
def test_the_demo_render_breaks_no_cel_rule(demo: list[dict[str, Any]], tmp_path: Path) -> None:
    rendered = {o["kind"] for o in demo}
    assert {"Topology", "ResourceFlavor", "ClusterQueue"} <= rendered, "the rules would not be exercised"
    assert any(o["kind"] == "ResourceFlavor" and "topologyName" in o["spec"] for o in demo)
    for args in (("validate", str(DEMO), "--crds", str(CRDS)),
                 ("validate", "--manifests", str(write_list(tmp_path, demo)), "--crds", str(CRDS))):
        result = cli(*args)
        assert result.exit_code == 0, result.stdout + result.stderr
        assert result.stdout == ""
        # transition rules (oldSelf) are skipped, said once for the whole run
        assert result.stderr.count(TRANSITION_NOTE) == 1, result.stderr
        assert "note: 6 CEL transition rule(s)" in result.stderr  # AdmissionCheck, LocalQueue, RF x3, Topology


@needs_crds
def test_problems_of_many_objects_are_each_reported(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    broken = [_duplicate_levels(demo), _toleration_exists_with_value(demo), _borrowing_limit_without_cohort(demo)]
    result = validate(tmp_path, demo + broken)
    assert result.exit_code == 1
    assert len(result.stdout.splitlines()) == 3, result.stdout


@needs_crds
def test_schema_errors_that_block_cel_are_said_once(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    """As the API server: an enum/type/required/size error means the rules cannot be trusted to run."""
    cq = _borrowing_limit_without_cohort(demo)
    cq["spec"]["stopPolicy"] = "Maybe"
    result = validate(tmp_path, [cq])
    assert result.stdout.splitlines() == [f"{ref(cq)}: spec.stopPolicy: 'Maybe' is not one of None, Hold, HoldAndDrain"]
    assert "note: CEL rules not evaluated for 1 object(s) with type, required, enum or size errors" in result.stderr
    # a pattern error does not block: the broken rule is still reported
    cq["spec"]["stopPolicy"] = "Hold"
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "Not_A_Name"
    lines = validate(tmp_path, [cq]).stdout.splitlines()
    assert f"{ref(cq)}: spec: borrowingLimit must be nil when cohort is empty" in lines, lines


# --- warnings: once per kind, one summary; --skip-schema -------------------------------------------

@needs_crds
def test_a_kind_without_crd_is_one_warning_plus_a_summary(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    node_features = [o for o in demo if o["kind"] == "NodeFeature"]
    many = demo + [dict(copy.deepcopy(node_features[0]), metadata=dict(node_features[0]["metadata"], name=f"nf-{i}"))
                   for i in range(50)]
    result = validate(tmp_path, many, CRDS / "kueue")
    assert result.exit_code == 0, result.stdout + result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning:" in line]
    assert warnings == [
        "gpustack-render: warning: no CRD for NodeFeature.nfd.k8s-sigs.io: its schema was not checked",
        "gpustack-render: warning: no CRD for InstanceType.worker.gpustack.ai: its schema was not checked",
        "gpustack-render: warning: schema checked for 5 of 7 kinds; no CRD for: InstanceType, NodeFeature",
    ]
    quiet = cli("-q", "validate", "--manifests", str(tmp_path / "manifests.json"), "--crds", str(CRDS / "kueue"))
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_skip_schema_checks_metadata_only_and_says_nothing(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    result = cli("validate", str(DEMO), "--skip-schema")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout == "" and "warning" not in result.stderr and "note" not in result.stderr
    # a schema/CEL problem is not looked for, a metadata problem still is
    cq = _borrowing_limit_without_cohort(demo)
    cq["spec"]["stopPolicy"] = "Maybe"
    cq["metadata"]["labels"] = {"bad key": "v"}
    result = cli("validate", "--manifests", str(write_list(tmp_path, [cq])), "--skip-schema")
    assert result.exit_code == 1
    assert [line.split(": ")[1] for line in result.stdout.splitlines()] == ['metadata.labels["bad key"]']
    assert "warning" not in result.stderr
    # without the flag the missing CRDs are a warning
    assert "warning: schema validation skipped: no CRDs" in cli("validate", str(DEMO)).stderr


@pytest.mark.parametrize("extra", [["--crds", str(REPO)], ["--strict"]])
def test_skip_schema_refuses_schema_options(extra: list[str]) -> None:
    result = cli("validate", str(DEMO), "--skip-schema", *extra)
    assert result.exit_code == 2
    assert "not with --skip-schema" in result.stderr


# --- --manifests - ---------------------------------------------------------------------------------

def test_manifests_from_stdin(demo: list[dict[str, Any]]) -> None:
    cq = _borrowing_limit_without_cohort(demo)
    cq["metadata"]["labels"] = {"bad key": "v"}
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [cq]})
    result = cli("validate", "--manifests", "-", "--skip-schema", stdin=text)
    assert result.exit_code == 1, result.stdout + result.stderr
    assert result.stdout.startswith(f'{ref(cq)}: metadata.labels["bad key"]: '), result.stdout
    yaml_text = yaml.safe_dump_all([o for o in demo if o["kind"] != "ClusterQueue"])
    result = cli("validate", "--manifests", "-", "--skip-schema", stdin=yaml_text)
    assert result.exit_code == 0, result.stdout + result.stderr


# --- rules the Kueue CRDs do not show: messageExpression, fieldPath, broken rules -----------------

def crd(rules: dict[str, list[dict[str, Any]]], *, root: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A CRD ``example.com/v1 Widget`` whose spec properties carry the given rules."""
    props: dict[str, Any] = {
        "size": {"type": "integer"},
        "name": {"type": "string"},
        "parts": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
    }
    for key, value in rules.items():
        if key == "spec":
            continue
        # parts: each item; tags: each value of the map; others: the field itself
        target = props[key]["items"] if key == "parts" else \
            props[key]["additionalProperties"] if key == "tags" else props[key]
        target["x-kubernetes-validations"] = value
    spec: dict[str, Any] = {"type": "object", "properties": props}
    if "spec" in rules:
        spec["x-kubernetes-validations"] = rules["spec"]
    schema: dict[str, Any] = {"type": "object", "properties": {"spec": spec}}
    if root:
        schema["x-kubernetes-validations"] = root
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Cluster",
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def widget(obj_name: str = "w", /, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": obj_name}, "spec": spec}


def run_widgets(tmp_path: Path, definition: dict[str, Any], objects: list[dict[str, Any]]) -> Result:
    crds = tmp_path / "crds"
    crds.mkdir(exist_ok=True)
    (crds / "widget.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")
    return cli("validate", "--manifests", str(write_list(tmp_path, objects)), "--crds", str(crds))


def test_message_expression_field_path_and_default_message(tmp_path: Path) -> None:
    definition = crd({
        "spec": [
            {"rule": "self.size <= 3", "messageExpression": "'size ' + string(self.size) + ' is over 3'",
             "message": "too big", "fieldPath": ".size"},
            {"rule": "!has(self.name) || self.name.lowerAscii() == self.name"},
            {"rule": "self.size != 7", "messageExpression": "self.nope", "message": "seven is not allowed"},
        ],
        "parts": [{"rule": "self.id.startsWith('p-')", "message": "ids start with p-"}],
        "tags": [{"rule": "self.matches('^[a-z]+$')", "message": "lower-case tags only"}],
    })
    objects = [widget("a", size=5, name="Big", parts=[{"id": "p-1"}, {"id": "x"}], tags={"t1": "ok", "t2": "NO"}),
               widget("b", size=7)]
    result = run_widgets(tmp_path, definition, objects)
    assert result.exit_code == 1, result.stderr
    assert result.stdout.splitlines() == [
        "Widget/a: spec.size: size 5 is over 3",
        "Widget/a: spec: failed rule: !has(self.name) || self.name.lowerAscii() == self.name",
        "Widget/a: spec.parts[1]: ids start with p-",
        "Widget/a: spec.tags.t2: lower-case tags only",
        "Widget/b: spec.size: size 7 is over 3",
        "Widget/b: spec: seven is not allowed",  # messageExpression failed: the message stands in
    ]


def test_a_rule_that_cannot_be_compiled_is_one_note_and_the_others_still_run(tmp_path: Path) -> None:
    definition = crd({"spec": [
        {"rule": "self.size >", "message": "syntax"},
        {"rule": "quantity(self.name).isGreaterThan(quantity('1'))", "message": "unknown function"},
        {"rule": "self.size == oldSelf.size", "message": "immutable"},
        {"rule": "self.size < 10", "message": "size under 10"},
    ]})
    result = run_widgets(tmp_path, definition, [widget(f"w{i}", size=10 + i, name="1") for i in range(20)])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"Widget/w{i}: spec: size under 10" for i in range(20)]
    notes = [line for line in result.stderr.splitlines() if "note:" in line]
    assert notes == [
        "gpustack-render: note: CRD Widget.example.com v1: .spec: CEL rule 'self.size >' cannot be parsed "
        "(syntax error at column 11); not evaluated",
        "gpustack-render: note: CRD Widget.example.com v1: .spec: CEL rule "
        "\"quantity(self.name).isGreaterThan(quantity('1'))\" calls isGreaterThan(), quantity(), which this "
        "tool does not provide; not evaluated",
        "gpustack-render: note: 1 CEL transition rule(s) skipped: they compare with oldSelf (the object before "
        "an update) and the manifests are checked as creates",
    ]


def test_root_rules_see_the_whole_object(tmp_path: Path) -> None:
    definition = crd({}, root=[{"rule": "self.metadata.name.startsWith('w-')", "message": "names start with w-"}])
    result = run_widgets(tmp_path, definition, [widget("w-ok"), widget("bad")])
    assert result.stdout.splitlines() == ["Widget/bad: names start with w-"]


def test_each_crd_version_is_compiled_once(tmp_path: Path, demo: list[dict[str, Any]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10,000-node render has thousands of objects of a kind: rules compile per CRD, not per object."""
    calls: list[str] = []
    real = cel_rules.compile_schema

    def counting(schema: dict[str, Any], where: str) -> Any:
        calls.append(where)
        return real(schema, where)

    monkeypatch.setattr(cel_rules, "compile_schema", counting)
    definition = crd({"spec": [{"rule": "self.size < 10", "message": "size under 10"}]})
    result = run_widgets(tmp_path, definition, [widget(f"w{i}", size=i) for i in range(200)])
    assert result.stdout.splitlines() == [f"Widget/w{i}: spec: size under 10" for i in range(10, 200)]
    assert calls == ["CRD Widget.example.com v1"]


# --- the Kubernetes CEL library functions added to cel-python -------------------------------------

def evaluate(rule: str, value: Any) -> Any:
    compiled = compile_rule(rule)
    assert compiled.program is not None, compiled.problem
    return compiled.program.evaluate({"self": cel_rules.json_to_cel(value)})


@pytest.mark.parametrize("rule, value", [
    ("self.split('/') == ['a', 'b', 'c']", "a/b/c"),
    ("self.split('/', 2) == ['a', 'b/c']", "a/b/c"),
    ("self.split('/', 0) == []", "a/b/c"),
    ("self.lowerAscii() == 'abc-é' && self.upperAscii() == 'ABC-é'", "aBc-é"),
    ("self.trim() == 'x y'", "  x y\t"),
    ("self.replace('-', '.') == 'a.b.c' && self.replace('-', '.', 1) == 'a.b-c'", "a-b-c"),
    ("self.indexOf('b') == 1 && self.indexOf('z') == -1 && self.lastIndexOf('a') == 2", "aba"),
    ("self.substring(1) == 'bc' && self.substring(0, 2) == 'ab' && self.charAt(2) == 'c'", "abc"),
    ("self.join('-') == 'a-b' && self.join() == 'ab'", ["a", "b"]),
    ("self.isSorted() && self.sum() == 6 && self.max() == 3 && self.min() == 1", [1, 2, 3]),
    ("!self.isSorted() && self.indexOf(2) == 0 && self.lastIndexOf(2) == 2", [2, 1, 2]),
    ("self.find('[0-9]+') == '42' && self.findAll('[0-9]') == ['4', '2', '7']", "ab42c7"),
    ("self.matches('^[a-z]+$') && !self.matches('[0-9]')", "abc"),
    ("self.exists(x, x.k == 'b') && self.all(x, has(x.k)) && self.exists_one(x, x.k == 'a')",
     [{"k": "a"}, {"k": "b"}]),
    ("self.map(x, x.k).filter(k, k != 'a') == ['b']", [{"k": "a"}, {"k": "b"}]),
    ("self.all(k, k.startsWith('x/')) && size(self) == 2 && self.size() == 2", {"x/a": "1", "x/b": "2"}),
])
def test_kubernetes_library_functions(rule: str, value: Any) -> None:
    assert evaluate(rule, value) is not None and bool(evaluate(rule, value)) is True


@pytest.mark.parametrize("rule, value", [
    ("self.substring(2, 1) == ''", "abc"),
    ("self.charAt(9) == ''", "abc"),
    ("self.max() == 0", []),
])
def test_library_functions_out_of_range_are_evaluation_errors(rule: str, value: Any) -> None:
    with pytest.raises(cel_rules.CELEvalError):
        result = evaluate(rule, value)
        if isinstance(result, cel_rules.CELEvalError):
            raise result


@needs_crds
def test_every_kueue_and_nfd_rule_compiles_or_is_a_transition_rule() -> None:
    """A CRD upgrade that brings a rule this tool cannot run shows up here, not as a silent gap."""
    files = sorted((CRDS / "kueue").glob("*.yaml")) + sorted((CRDS / "nfd").glob("*.yaml"))
    assert files, f"no CRD files under {CRDS}"
    evaluable = 0
    for path in files:
        # libyaml (the same documents as yaml.safe_load_all, 15x faster on the 1.4 MB Workload CRD)
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            for version in doc["spec"]["versions"]:
                plan = compile_schema(version["schema"]["openAPIV3Schema"], f"{path.name} {version['name']}")
                assert plan.notes == [], plan.notes
                evaluable += plan.root is not None
    assert evaluable >= 8  # ClusterQueue, ResourceFlavor, Topology, Workload in v1beta1 and v1beta2


def test_crd_schema_caches_the_plan() -> None:
    crds = crd_schema.Crds()
    crds.add(crd({"spec": [{"rule": "self.size < 10"}]}), "test")
    plan = crds.cel_plan("example.com", "Widget", "v1")
    assert crds.cel_plan("example.com", "Widget", "v1") is plan
    assert [issue for issue in plan.issues(widget(size=11))] == [(["spec"], "failed rule: self.size < 10")]


def test_a_failure_inside_cel_python_is_a_note_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Any, value: Any, path: list[Any]) -> Any:
        raise RecursionError("deep")

    monkeypatch.setattr(cel_rules.Rule, "check", broken)
    definition = crd({"spec": [{"rule": "self.size < 10", "message": "size under 10"}]})
    result = run_widgets(tmp_path, definition, [widget("a", size=11), widget("b", size=12)])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.count("could not be evaluated by cel-python (RecursionError); skipped") == 1
