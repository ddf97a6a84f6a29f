"""`gpustack-render pin` (cli-contract.md, fit-pin.md) against the demo snapshot's rendered chain.

Fixtures: fixtures/pin/ (see its README). Expected patches are derived by hand from fit-pin.md and
the demo's rendered queues and fit labels (fixtures/pin/README.md); the derivation is next to each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
import cli_invoke
from cli_invoke import CliResult

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
PIN = REPO / "fixtures" / "pin"
SHAPES = PIN / "workloads" / "shapes.yaml"
LIST = PIN / "workloads" / "list.json"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
SL = "sliced-max-free-units.fit.gpustack.ai/"
SH = "shared-free-cards.fit.gpustack.ai/"
T4, A10G = "nvidia-tesla-t4", "nvidia-a10g"
NOTE = "gpustack-render: note: "


def run(*args: str, stdin: str | None = None) -> CliResult:
    """``pin ARGS`` in process."""
    return cli_invoke.invoke("pin", *args, input=stdin)


def ok(*args: str, stdin: str | None = None) -> CliResult:
    proc = run(*args, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def notes(stderr: str) -> dict[str, str]:
    return dict(line[len(NOTE):].split(": ", 1) for line in stderr.splitlines() if line.startswith(NOTE))


def gt(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "Gt", "values": [value]}


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


P0 = "/spec/podSets/0/template/spec/affinity"
P1 = "/spec/podSets/1/template/spec/affinity"

# fixtures/pin/workloads/shapes.yaml against fixtures/demo, in input order.
SHAPES_EXPECTED: list[dict[str, Any]] = [
    # slice-half: team-a, T4 queue; U = 800000 (sliced 1) → sliced > 799999; no affinity → one term.
    {"namespace": "team-a", "name": "slice-half", "patch": [
        add(P0, {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [gt(SL + T4, "799999")]}]}}})]},
    # multi: podSet 0 (driver) has no demand; podSet 1: requests 400k win over limits 1600000 → U = 400000;
    # N = max(init 3, app 2) = 3 → shared > 2. nodeAffinity exists (preferred only) → required added.
    {"namespace": "default", "name": "multi", "patch": [
        add(P1 + "/nodeAffinity/" + REQ, {"nodeSelectorTerms": [{"matchExpressions": [
            gt(SL + A10G, "399999"), gt(SH + A10G, "2")]}]})]},
    # terms: N = 2 → shared > 1. term 0 appended, term 1 (matchFields only) gains matchExpressions,
    # term 2 empty stays, term 3 already holds the identical requirement (and a stricter one).
    {"namespace": "team-a", "name": "terms", "patch": [
        add(P0 + f"/nodeAffinity/{REQ}/nodeSelectorTerms/0/matchExpressions/-", gt(SH + T4, "1")),
        add(P0 + f"/nodeAffinity/{REQ}/nodeSelectorTerms/1/matchExpressions", [gt(SH + T4, "1")])]},
    {"namespace": "team-a", "name": "foreign", "patch": []},
    {"namespace": "default", "name": "cpu-queue", "patch": []},
    {"namespace": "default", "name": "no-demand", "patch": []},
    {"namespace": "team-b", "name": "no-local-queue", "patch": []},
    {"namespace": "team-a", "name": "zero-terms", "patch": []},
]

SHAPES_NOTES = {
    "team-a/foreign": "queue research is not an operator queue",
    "default/cpu-queue": "InstanceType gpustack--generic-linux-amd64 has no spec.acceleratorGroup (a CPU queue)",
    "default/no-demand": "no PodSet has a demand (sliced units U > 0 or shared cards N >= 2)",
    "team-b/no-local-queue": "LocalQueue team-b/gpustack-fnv64-6b371caa2da0b799 does not exist (neither rendered "
                             "nor in the snapshot): the snapshot has no live Namespace team-b, and LocalQueues are "
                             "rendered only in the snapshot's Namespaces",
    "team-a/zero-terms": "the required node selector has no non-empty term to take the pin; nothing to add",
}


def test_patch_format_on_the_demo() -> None:
    proc = ok(str(SHAPES), "--snapshot", str(DEMO), "--format", "patch")
    assert json.loads(proc.stdout) == SHAPES_EXPECTED
    assert notes(proc.stderr) == SHAPES_NOTES


def test_patches_reproduce_the_pinned_workloads() -> None:
    """Applied with jsonpatch, each patch turns the input Workload into the json/yaml output."""
    inputs = [d for d in yaml.safe_load_all(SHAPES.read_text())]
    patches = json.loads(ok(str(SHAPES), "--snapshot", str(DEMO), "--format", "patch").stdout)
    listing = json.loads(ok(str(SHAPES), "--snapshot", str(DEMO), "--format", "json").stdout)
    stream = list(yaml.safe_load_all(ok(str(SHAPES), "--snapshot", str(DEMO)).stdout))
    assert listing["apiVersion"] == "v1" and listing["kind"] == "List"
    assert listing["items"] == stream
    assert [jsonpatch.apply_patch(i, p["patch"]) for i, p in zip(inputs, patches)] == stream
    for entry in patches:
        for op in entry["patch"]:
            assert op["path"].split("/affinity")[0] in ("/spec/podSets/0/template/spec", "/spec/podSets/1/template/spec")


def test_multi_podset_keeps_other_affinity_parts() -> None:
    items = json.loads(ok(str(SHAPES), "--snapshot", str(DEMO), "--format", "json").stdout)["items"]
    multi = items[1]
    driver, workers = (p["template"]["spec"] for p in multi["spec"]["podSets"])
    assert "affinity" not in driver
    assert workers["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 10
    assert workers["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 1
    terms = items[2]["spec"]["podSets"][0]["template"]["spec"]["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]
    assert terms[2] == {}
    assert terms[3]["matchExpressions"] == [gt(SH + T4, "5"), gt(SH + T4, "1")]


def test_input_order_across_files_and_lists() -> None:
    """Files in the order given, a directory sorted, List items in order; WorkloadList items (API
    style, no kind) are printed as Workloads. count 0 is pinned like any count; U = ceil(0.5) = 1."""
    proc = ok(str(LIST), str(SHAPES), "--snapshot", str(DEMO), "--format", "patch")
    entries = json.loads(proc.stdout)
    assert [e["name"] for e in entries] == ["from-list"] + [e["name"] for e in SHAPES_EXPECTED]
    assert entries[0]["patch"] == [add(P0 + "/nodeAffinity/" + REQ, {"nodeSelectorTerms": [
        {"matchExpressions": [gt(SL + A10G, "0")]}]})]
    items = json.loads(ok(str(PIN / "workloads"), "--snapshot", str(DEMO), "--format", "json").stdout)["items"]
    assert items[0]["kind"] == "Workload" and items[0]["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert [i["metadata"]["name"] for i in items][:2] == ["from-list", "slice-half"]  # list.json < shapes.yaml


def test_idempotent_on_the_demo() -> None:
    """Pinning the output again changes nothing: every patch empty, the same stream."""
    first = ok(str(PIN / "workloads"), "--snapshot", str(DEMO)).stdout
    second = ok("-", "--snapshot", str(DEMO), stdin=first)
    assert second.stdout == first
    again = json.loads(ok("-", "--snapshot", str(DEMO), "--format", "patch", stdin=first).stdout)
    assert all(e["patch"] == [] for e in again)
    pinned_before = {"default/from-list", "team-a/slice-half", "default/multi", "team-a/terms"}
    assert {k for k, v in notes(second.stderr).items() if v == "already pinned; nothing to add"} == pinned_before


def test_setting_off() -> None:
    """--set workload-fit-affinity=false: nothing changes; the note names the setting for Workloads
    that pass steps 1 and 2 and the earlier step for the others."""
    proc = ok(str(SHAPES), "--snapshot", str(DEMO), "--format", "patch", "--set", "workload-fit-affinity=false")
    assert all(e["patch"] == [] for e in json.loads(proc.stdout))
    got = notes(proc.stderr)
    for ref in ("team-a/slice-half", "default/multi", "team-a/terms", "default/cpu-queue", "team-b/no-local-queue",
                "team-a/zero-terms"):
        assert got[ref] == "setting workload-fit-affinity is false"
    assert got["team-a/foreign"] == "queue research is not an operator queue"
    assert got["default/no-demand"].startswith("no PodSet has a demand")


def test_setting_off_from_the_snapshot(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpustack-settings, namespace: gpustack-system}\n"
                        "data: {workload-fit-affinity: \"false\"}\n")
    proc = ok(str(SHAPES), "--snapshot", str(DEMO), "--snapshot", str(settings), "--format", "patch")
    assert all(e["patch"] == [] for e in json.loads(proc.stdout))
    proc = ok(str(SHAPES), "--snapshot", str(DEMO), "--snapshot", str(settings), "--format", "patch",
              "--set", "workload-fit-affinity=true")
    assert json.loads(proc.stdout) == SHAPES_EXPECTED


def test_chain_from_the_snapshot() -> None:
    """LocalQueues only in the snapshot (namespace ml); the spec example: group nvidia-l4, a 50 % slice."""
    proc = ok(str(PIN / "extra-workloads.yaml"), "--snapshot", str(DEMO), "--snapshot", str(PIN / "snapshot-extra"),
              "--format", "patch")
    entries = {e["name"]: e["patch"] for e in json.loads(proc.stdout)}
    assert entries["l4"] == [add(P0, {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [gt(SL + "nvidia-l4", "799999")]}]}}})]
    assert all(not entries[n] for n in ("legacy", "bad-group", "orphan", "no-instance-type"))
    assert notes(proc.stderr) == {
        "ml/legacy": "ClusterQueue legacy is not labelled resource.gpustack.ai/type=instancetypes",
        "ml/bad-group": "accelerator group 'Bad Group' gives the invalid label key "
                        "'sliced-max-free-units.fit.gpustack.ai/Bad Group': its name part must be alphanumerics, "
                        "'-', '_' or '.', alphanumeric at both ends",
        "ml/orphan": "ClusterQueue gone (of LocalQueue ml/gpustack-fnv64-orphan) does not exist",
        "ml/no-instance-type": "InstanceType no-it (of ClusterQueue no-it) does not exist",
    }


def test_explain_nodes() -> None:
    """Fit labels as node-patches sets them on the demo: t4-a sliced 1200000 shared 0, t4-b 1600000 / 2,
    a10g 1600000 / 1. slice-half (> 799999 on T4) fits t4-a and t4-b; terms (shared > 1 on T4) only t4-b;
    multi (a10g shared > 2) fits nothing; zero-terms holds no pin and is not listed."""
    proc = ok(str(SHAPES), "--snapshot", str(DEMO), "--explain-nodes", "--format", "patch")
    err = proc.stderr
    assert (f"gpustack-render: nodes: team-a/slice-half podSets[0] (main): {SL}{T4} Gt 799999: 2 of 4 snapshot "
            f"nodes fit: node-t4-a, node-t4-b") in err
    assert f"  node-t4-a: fits ({SL}{T4}=1200000)" in err
    assert f"  node-a10g: does not fit ({SL}{T4} absent)" in err
    assert f"team-a/terms podSets[0] (main): {SH}{T4} Gt 1: 1 of 4 snapshot nodes fit: node-t4-b" in err
    assert f"  node-t4-a: does not fit ({SH}{T4}=0)" in err
    assert "default/multi podSets[1] (workers)" in err and "0 of 4 snapshot nodes fit\n" in err
    assert "zero-terms podSets" not in err
    assert json.loads(proc.stdout) == SHAPES_EXPECTED  # stdout unchanged by --explain-nodes


def test_explain_nodes_uses_desired_fit_labels(tmp_path: Path) -> None:
    """A stale fit label on a Node is judged after the node-patches fit-label patch: removed/replaced."""
    nodes = yaml.safe_load_all((DEMO / "nodes.yaml").read_text())
    docs = []
    for doc in nodes:
        for item in doc.get("items", [doc]):
            if item["metadata"]["name"] == "node-t4-a":
                item["metadata"]["labels"][SL + T4] = "9999999"      # stale: desired is 1200000
            if item["metadata"]["name"] == "node-cpu":
                item["metadata"]["labels"][SL + T4] = "9999999"      # stale, owned, not desired: removed
            docs.append(item)
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "nodes.yaml").write_text(yaml.safe_dump_all(docs))
    for name in ("devices.yaml", "namespaces.json"):
        (snap / name).write_text((DEMO / name).read_text())
    err = ok(str(SHAPES), "--snapshot", str(snap), "--explain-nodes", "--format", "patch").stderr
    assert f"  node-t4-a: fits ({SL}{T4}=1200000)" in err
    assert f"  node-cpu: does not fit ({SL}{T4} absent)" in err


def test_yaml_aliases_are_not_shared(tmp_path: Path) -> None:
    """Two PodSets sharing an affinity through a YAML anchor: pinning one leaves the other as it was."""
    path = tmp_path / "alias.yaml"
    path.write_text("""apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: alias, namespace: team-a}
spec:
  queueName: gpustack-fnv64-6b371caa2da0b799
  podSets:
    - name: a
      template:
        spec:
          affinity: &aff
            nodeAffinity: {}
          containers: [{name: c, resources: {limits: {nvidia.com/gpu.shared: 2}}}]
    - name: b
      template:
        spec:
          affinity: *aff
          containers: [{name: c}]
""")
    proc = ok(str(path), "--snapshot", str(DEMO))
    assert "&" not in proc.stdout and "*" not in proc.stdout
    (doc,) = yaml.safe_load_all(proc.stdout)
    assert doc["spec"]["podSets"][1]["template"]["spec"]["affinity"] == {"nodeAffinity": {}}
    assert REQ in doc["spec"]["podSets"][0]["template"]["spec"]["affinity"]["nodeAffinity"]


@pytest.mark.parametrize("name, fragments", [
    ("not-a-workload.yaml", ["fixtures/pin/bad/not-a-workload.yaml", "Pod/team-a/p", "not a Kueue Workload"]),
    ("no-template.yaml", ["no-template.yaml:13", "Workload/team-a/no-template", "spec.podSets[1].template"]),
    ("bad-quantity.yaml", ["bad-quantity.yaml:16", "Workload/team-a/bad-quantity",
                           "spec.podSets[0].template.spec.initContainers[0].resources.requests."
                           "nvidia.com/gpu.sliced.units", '"half" is not a valid quantity']),
])
def test_bad_input_exits_2(name: str, fragments: list[str]) -> None:
    proc = run(f"fixtures/pin/bad/{name}", "--snapshot", "fixtures/demo")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("gpustack-render: error: ") and all(f in line for f in fragments), line


@pytest.mark.parametrize("args", [
    ["fixtures/pin/workloads"],                                              # --snapshot is required
    ["--snapshot", "fixtures/demo"],                                         # WORKLOAD is required
    ["fixtures/pin/workloads", "--snapshot", "fixtures/demo", "--set", "workload-fit=false"],
    ["fixtures/pin/workloads", "--snapshot", "fixtures/demo", "--format", "xml"],
    ["-", "--snapshot", "-"],
    ["fixtures/pin/missing.yaml", "--snapshot", "fixtures/demo"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    proc = run(*args, stdin="")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_listed_in_help() -> None:
    proc = cli_invoke.invoke("--help")
    assert " pin " in proc.stdout


# ------------------------------------------------------------------------------------------------
# `--snapshot SNAPSHOT...` (cli-contract.md): every path after --snapshot up to the next option is a
# snapshot path; a snapshot file given as WORKLOAD is one error that says where it goes. In process.
# ------------------------------------------------------------------------------------------------

def invoke(*args: str) -> CliResult:
    return run(*args)


@pytest.mark.parametrize("args, expected", [
    (["w", "--snapshot", "a", "b"], ["w", "--snapshot", "a", "--snapshot", "b"]),
    (["w", "--snapshot", "a", "b", "--format", "json", "v"], ["w", "--snapshot", "a", "--snapshot", "b", "--format", "json", "v"]),
    (["w", "--snapshot=a", "b", "--explain-nodes", "v"], ["w", "--snapshot=a", "--snapshot", "b", "--explain-nodes", "v"]),
    (["w", "--snapshot", "a", "-", "--set", "x=y"], ["w", "--snapshot", "a", "--snapshot", "-", "--set", "x=y"]),
    (["w", "--snapshot", "a", "--", "b"], ["w", "--snapshot", "a", "--", "b"]),
    (["--format", "yaml", "w", "v"], ["--format", "yaml", "w", "v"]),
])
def test_spread_snapshot_paths(args: list[str], expected: list[str]) -> None:
    from gpustack_render.cli.pin_cmd import spread_snapshot_paths
    assert spread_snapshot_paths(args) == expected


def test_several_paths_after_one_snapshot_option() -> None:
    """`--snapshot A B` is `--snapshot A --snapshot B`; a WORKLOAD after another option stays a WORKLOAD."""
    extra, shapes = str(PIN / "extra-workloads.yaml"), str(SHAPES)
    repeated = invoke(extra, shapes, "--snapshot", str(DEMO), "--snapshot", str(PIN / "snapshot-extra"), "--format", "patch")
    assert repeated.exit_code == 0, repeated.output
    spread = invoke(extra, "--snapshot", str(DEMO), str(PIN / "snapshot-extra"), "--format", "patch", shapes)
    assert spread.exit_code == 0, spread.output
    assert json.loads(spread.stdout) == json.loads(repeated.stdout)
    entries = {e["name"]: e["patch"] for e in json.loads(spread.stdout)}
    assert entries["l4"] and entries["slice-half"]  # the chain of snapshot-extra and of the demo resolved


def test_snapshot_path_given_as_workload() -> None:
    """The demo's files before --snapshot: one error per file saying it goes after --snapshot, no
    "not a Kueue Workload" per object; nothing on stdout."""
    result = invoke(str(SHAPES), str(DEMO), "--snapshot", str(DEMO))
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    files = sorted(p for p in DEMO.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    assert len(lines) == len(files) and "not a Kueue Workload" not in result.stderr
    assert all(line.startswith("gpustack-render: error: ") and "holds no Kueue Workload, only snapshot objects (" in line
               and "a snapshot path goes after --snapshot" in line for line in lines), lines
