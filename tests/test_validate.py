"""`gpustack-render validate` (in-process): CRD schemas (the real Kueue and NFD CRDs in ../shared/crds), object
metadata, Kueue limits and refused queue plans; one line per problem, exit 0 / 1 / 2."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from cli_invoke import CliResult, invoke
import yaml

REPO = Path(__file__).resolve().parents[1]
CRDS = Path(__file__).resolve().parents[1].parent / "shared" / "crds"
DEMO = REPO / "fixtures" / "demo"
CQ_T4 = "gpustack--nvidia-tesla-t4-linux-amd64"
REFUSED = REPO / "fixtures" / "cases" / "overlapping-selectors"

needs_crds = pytest.mark.skipif(not (CRDS / "kueue").is_dir(),
                                reason=f"CRD test data not found at {CRDS} (../shared/crds next to the repo)")


def run_cli(*args: str) -> CliResult:
    """The CLI in-process (``gpustack_render.cli.main``), shaped like a finished child process."""
    result = invoke(*args)
    # an exception the CLI lets through is raised by invoke (never mistaken for an exit code)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture(scope="module")
def demo() -> list[dict[str, Any]]:
    proc = run_cli("render", str(DEMO), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["items"]


def find(items: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    return next(o for o in items if o["kind"] == kind and (name is None or o["metadata"]["name"] == name))


def write(tmp_path: Path, items: list[dict[str, Any]]) -> Path:
    path = tmp_path / "manifests.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    return path


# --- clean renders ------------------------------------------------------------------------------

@needs_crds
@pytest.mark.parametrize("sets", [[], ["--set", "instance-type-aware-cpu-manufacturer=true"],
                                  ["--set", "instance-type-mixed-on-node=false"]])
@pytest.mark.parametrize("strict", [[], ["--strict"]])
def test_demo_render_is_valid_against_the_real_crds(sets: list[str], strict: list[str]) -> None:
    proc = run_cli("validate", str(DEMO), *sets, "--crds", str(CRDS), *strict)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert "schema validation skipped" not in proc.stderr
    # InstanceType has no CRD in the test data: said once, not silently passed, and summed up.
    assert proc.stderr.count("no CRD for InstanceType.worker.gpustack.ai") == 1
    assert "warning: schema checked for 6 of 7 kinds; no CRD for: InstanceType\n" in proc.stderr


def test_without_crds_schema_validation_is_skipped_with_a_warning() -> None:
    proc = run_cli("validate", str(DEMO))
    assert proc.returncode == 0
    assert proc.stdout == ""
    assert "warning: schema validation skipped" in proc.stderr


# --- problems: one line each --------------------------------------------------------------------

def _flavors(n: int) -> Callable[[dict[str, Any]], None]:
    def edit(cq: dict[str, Any]) -> None:
        group = cq["spec"]["resourceGroups"][0]
        group["flavors"] = [dict(copy.deepcopy(group["flavors"][0]), name=f"f{i}") for i in range(n)]
    return edit


def _groups(n: int) -> Callable[[dict[str, Any]], None]:
    def edit(cq: dict[str, Any]) -> None:
        group = cq["spec"]["resourceGroups"][0]
        cq["spec"]["resourceGroups"] = [
            {"coveredResources": [f"r{i}"], "flavors": [{"name": f"f{i}", "resources": [
                {"name": f"r{i}", "nominalQuota": "1"}]}]} for i in range(n)] if n else [group]
    return edit


def _covered(n: int) -> Callable[[dict[str, Any]], None]:
    """``n`` covered resources, the flavor quoting the first 64 (its own limit)."""
    def edit(cq: dict[str, Any]) -> None:
        names = [f"example.com/r{i}" for i in range(n)]
        cq["spec"]["resourceGroups"] = [{"coveredResources": names, "flavors": [
            {"name": "f", "resources": [{"name": r, "nominalQuota": "1"} for r in names[:64]]}]}]
    return edit


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(obj: dict[str, Any]) -> None:
        node = obj
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
        node[path[-1]] = value
    return edit


LQ = "LocalQueue"
RF = "ResourceFlavor"
CQ = "ClusterQueue"
# (kind, object name or None for the first of its kind, edit, strict, expected line with {label})
CASES = [
    ("strict-unknown-field", CQ, CQ_T4, _set(["spec", "stopPolicyy"], "Hold"), True,
     "{label}: spec.stopPolicyy: unknown field"),
    ("enum", CQ, CQ_T4, _set(["spec", "stopPolicy"], "Maybe"), False,
     "{label}: spec.stopPolicy: 'Maybe' is not one of None, Hold, HoldAndDrain"),
    ("type", CQ, CQ_T4, _set(["spec", "namespaceSelector"], "all"), False,
     "{label}: spec.namespaceSelector: expected object, got 'all'"),
    ("flavor-resources", CQ, CQ_T4, _set(["spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "name"], "cpu"),
     False, "{label}: spec.resourceGroups[0].flavors[0].resources[0].name: 'cpu' must match the name in "
            "coveredResources ("),
    # Kueue's limits come from the CRD (v1beta2: 64 covered resources, not v1beta1's 16).
    ("65-flavors", CQ, CQ_T4, _flavors(65), False,
     "{label}: spec.resourceGroups[0].flavors: has 65 items, at most 64 allowed"),
    ("17-groups", CQ, CQ_T4, _groups(17), False,
     "{label}: spec.resourceGroups: has 17 items, at most 16 allowed"),
    ("65-covered", CQ, CQ_T4, _covered(65), False,
     "{label}: spec.resourceGroups[0].coveredResources: has 65 items, at most 64 allowed"),
    ("9-node-labels", RF, None, lambda o: o["spec"]["nodeLabels"].update({f"x/k{i}": "v" for i in range(3)}),
     False, "{label}: spec.nodeLabels: has 9 entries, at most 8 allowed"),
    ("localqueue-name-label", LQ, None, _set(["metadata", "name"], "q." + "a" * 70), False,
     "{label}: metadata.name: 'q.aaa"),
    ("label-key", "Topology", None, lambda o: o["metadata"]["labels"].update({"bad key": "v"}), False,
     '{label}: metadata.labels["bad key"]: key \'bad key\': name part must be'),
    ("label-value", "Topology", None, lambda o: o["metadata"]["labels"].update({"team": "x" * 64}), False,
     "{label}: metadata.labels.team: value 'xxx"),
    ("label-value-type", "Topology", None, lambda o: o["metadata"]["labels"].update({"team": True}), False,
     "{label}: metadata.labels.team: value must be a string, got True"),
    ("annotations-size", "Topology", None, _set(["metadata", "annotations"], {"big": "x" * (256 * 1024)}), False,
     "{label}: metadata.annotations: total size 262147 bytes exceeds 262144 (256 KiB)"),
    ("node-feature-labels", "NodeFeature", None, lambda o: o["spec"]["labels"].update({"a/b": "not ok!"}), False,
     '{label}: spec.labels["a/b"]: value \'not ok!\' must be'),
    ("unserved-version", CQ, CQ_T4, _set(["apiVersion"], "kueue.x-k8s.io/v1beta9"), False,
     "{label}: apiVersion: kueue.x-k8s.io/v1beta9 is not served by the CRD (served: v1beta1, v1beta2)"),
]


@needs_crds
@pytest.mark.parametrize("name, kind, obj_name, edit, strict, expected", CASES, ids=[c[0] for c in CASES])
def test_each_problem_is_one_line(tmp_path: Path, demo: list[dict[str, Any]], name: str, kind: str,
                                  obj_name: str | None, edit: Callable[[dict[str, Any]], None], strict: bool,
                                  expected: str) -> None:
    items = copy.deepcopy(demo)
    obj = find(items, kind, obj_name)
    edit(obj)
    meta = obj["metadata"]
    label = f"{kind}/{meta['namespace']}/{meta['name']}" if meta.get("namespace") else f"{kind}/{meta['name']}"
    args = ["validate", "--manifests", str(write(tmp_path, items)), "--crds", str(CRDS)]
    proc = run_cli(*args, *(["--strict"] if strict else []))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(expected.format(label=label)), lines
    if strict:  # the same object is clean when unknown fields are allowed
        assert run_cli(*args).returncode == 0


@needs_crds
def test_the_crd_version_matching_the_api_version_is_used(tmp_path: Path, demo: list[dict[str, Any]]) -> None:
    """`spec.cohort` exists in Kueue v1beta1 only (v1beta2 renamed it cohortName)."""
    cq = copy.deepcopy(find(demo, CQ, CQ_T4))
    cq["spec"]["cohort"] = "team"
    for version, expect in (("v1beta1", []), ("v1beta2", [f"ClusterQueue/{CQ_T4}: spec.cohort: unknown field"])):
        cq["apiVersion"] = f"kueue.x-k8s.io/{version}"
        proc = run_cli("validate", "--manifests", str(write(tmp_path, [cq])), "--crds", str(CRDS), "--strict")
        assert proc.stdout.splitlines() == expect, (version, proc.stdout)
        assert proc.returncode == (1 if expect else 0)


@needs_crds
def test_crds_from_the_snapshot_are_used(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(DEMO, snap)
    crd = yaml.safe_load((CRDS / "kueue" / "kueue.x-k8s.io_clusterqueues.yaml").read_text(encoding="utf-8"))
    (snap / "crd.json").write_text(json.dumps(crd), encoding="utf-8")
    proc = run_cli("validate", str(snap), "--strict")
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr
    assert "schema validation skipped" not in proc.stderr
    assert "no CRD for ResourceFlavor.kueue.x-k8s.io" in proc.stderr  # only ClusterQueue's CRD was given
    # Narrow the snapshot's CRD: the rendered stopPolicy None is no longer allowed, so it is used.
    v1beta2 = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    v1beta2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["stopPolicy"]["enum"] = ["Hold"]
    (snap / "crd.json").write_text(json.dumps(crd), encoding="utf-8")
    proc = run_cli("validate", str(snap))
    assert proc.returncode == 1
    assert f"ClusterQueue/{CQ_T4}: spec.stopPolicy: 'None' is not one of Hold" in proc.stdout.splitlines()


@pytest.mark.parametrize("skip", [[], ["--skip-schema"]])
def test_a_refused_queue_plan_fails_validation(skip: list[str]) -> None:
    proc = run_cli("validate", str(REFUSED / "nodes.yaml"), str(DEMO / "namespaces.json"), *skip)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "ClusterQueue/gpustack--nvidia-l4-linux-amd64: plan refused (OverlappingSelectors: Node node-l4-xeon "
        "matches flavors gpustack--intel--nvidia-l4-linux-amd64-1d-fnv64-87bf574bea2a4f23 and "
        "gpustack--intel-6-143--nvidia-l4-linux-amd64-1d-fnv64-87bf574bea2a4f23)"]


# --- unusable input: exit 2 ----------------------------------------------------------------------

def test_unusable_input_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", encoding="utf-8")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "crd.yaml").write_text("kind: CustomResourceDefinition\nspec: [\n", encoding="utf-8")
    cases = [
        ([], "give SNAPSHOT... or --manifests PATH"),
        ([str(DEMO), "--manifests", str(DEMO)], "give SNAPSHOT... or --manifests PATH"),
        (["--manifests", str(tmp_path / "missing")], "no such file or directory"),
        ([str(DEMO), "--crds", str(empty)], "no CustomResourceDefinition found"),
        ([str(DEMO), "--crds", str(broken)], "invalid YAML"),
        (["--manifests", str(DEMO), "--set", "workload-fit-affinity=false"], "not with --manifests"),
    ]
    for args, words in cases:
        proc = run_cli("validate", *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert words in proc.stderr, (args, proc.stderr)
        assert proc.stdout == ""
