"""The engine is declarative: changing a rule file changes the rendered output exactly as intended.

Every test copies the built-in ``rules/`` to a temporary directory, edits the copy (ruamel.yaml
round-trip, so comments and layout survive), renders the demo snapshot with
``render --rules COPY --format json`` through the real CLI, and compares against the output of the
default rules: the expected output is the default output with exactly the intended change applied
by hand, so nothing else may move.
"""

from __future__ import annotations

import copy
import json
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import pytest
from cli_invoke import invoke
import yaml
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
DEMO = REPO / "fixtures" / "demo"

KIND_ORDER = ["NodeFeature", "Topology", "AdmissionCheck", "ResourceFlavor", "InstanceType", "ClusterQueue",
              "LocalQueue"]
DEFAULT_PROFILE = "fnv64-87bf574bea2a4f23"  # FNV-1a 64 of "kubernetes.io/hostname" (stage3-node.md §7)
GENERAL = "general.feature.gpustack.ai/"
ACCEL = "acceleratable.feature.gpustack.ai/"
PROFILE_LABEL = "topology.gpustack.ai/profile"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def fnv1a64_hex(text: str) -> str:
    """FNV-1a 64 as stage3-node.md §7 describes it, written independently of the package."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


@lru_cache(maxsize=None)
def _render_cached(rules: str | None, snapshot: str, sets: tuple[str, ...]) -> tuple[str, str]:
    args = ["render", "--format", "json", snapshot]
    if rules is not None:
        args += ["--rules", rules]
    for s in sets:
        args += ["--set", s]
    proc = invoke(*args)
    assert proc.returncode == 0, f"exit {proc.returncode} for {args}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc.stdout, proc.stderr


def render_raw(rules: Path | None = None, snapshot: Path = DEMO, sets: tuple[str, ...] = ()) -> tuple[str, str]:
    """(stdout, stderr) of a successful ``render --format json``."""
    return _render_cached(str(rules) if rules else None, str(snapshot), tuple(sets))


def render(rules: Path | None = None, snapshot: Path = DEMO, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    out, _ = render_raw(rules, snapshot, sets)
    doc = json.loads(out)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    return doc["items"]


def default_items() -> list[dict[str, Any]]:
    return copy.deepcopy(render())


def copy_rules(tmp_path: Path) -> Path:
    dest = tmp_path / "rules"
    shutil.copytree(RULES, dest)
    return dest


def edit_rule(rules_dir: Path, name: str, change: Callable[[Any], None]) -> None:
    """Round-trip edit of one rule file (comments, order and quoting preserved)."""
    loader = YAML(typ="rt")
    loader.preserve_quotes = True
    path = rules_dir / name
    data = loader.load(path.read_text(encoding="utf-8"))
    change(data)
    with path.open("w", encoding="utf-8") as fh:
        loader.dump(data, fh)


def ident(obj: dict[str, Any]) -> tuple[str, str, str]:
    md = obj["metadata"]
    return obj["kind"], md.get("namespace", ""), md["name"]


def order_key(obj: dict[str, Any]) -> tuple[int, str, str]:
    kind, ns, name = ident(obj)
    return KIND_ORDER.index(kind), ns, name


def of_kind(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in items if o["kind"] == kind]


def by_ident(items: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {ident(o): o for o in items}
    assert len(out) == len(items), "duplicate objects in output"
    return out


def assert_same_items(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Equal lists, with a readable first difference."""
    assert [ident(o) for o in actual] == [ident(o) for o in expected], "object list/order differs"
    for a, e in zip(actual, expected):
        assert a == e, f"{ident(a)} differs:\nactual:   {json.dumps(a, sort_keys=True)}\n" \
                       f"expected: {json.dumps(e, sort_keys=True)}"


_SI = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def si_int(quantity: str) -> int:
    """A whole decimal-SI quantity ("1600k", "16M", "48") as an integer."""
    number, suffix = (quantity[:-1], quantity[-1]) if quantity[-1] in _SI else (quantity, "")
    return int(number) * _SI[suffix]


def flavor_is_accelerated(flavor: dict[str, Any]) -> bool:
    return flavor["metadata"]["labels"]["feature.gpustack.ai/acceleratable"] == "true"


def flavor_count(flavor: dict[str, Any]) -> int:
    labels = flavor["spec"]["nodeLabels"]
    counts = [v for k, v in labels.items() if k.endswith(".count")]
    assert len(counts) == 1, labels
    return int(counts[0])


# --------------------------------------------------------------------------------------------
# sanity of the baseline the other tests compare against
# --------------------------------------------------------------------------------------------


def test_unchanged_copy_renders_identically(tmp_path: Path) -> None:
    """A verbatim copy of rules/ passed with --rules gives byte-identical output to the defaults."""
    rules = copy_rules(tmp_path)
    assert render_raw(rules) == render_raw()
    # and the round-trip editor by itself changes nothing either
    for name in sorted(p.name for p in rules.iterdir()):
        edit_rule(rules, name, lambda data: None)
    assert render_raw(rules)[0] == render_raw()[0]


# --------------------------------------------------------------------------------------------
# (a) ResourceFlavor name format (naming.yaml)
# --------------------------------------------------------------------------------------------


def test_flavor_name_format_renames_flavors_and_queue_references_only(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    # every field of the grouping key stays (lint refuses a format that drops one); only the words move
    cpu_fmt = "rf-{gKey}-{count}c-{os}-{arch}-{profile}"
    acc_fmt = "rf-{gKey}--{aKey}-{count}d-{os}-{arch}-{profile}"

    def change(data: Any) -> None:
        data["resourceFlavor"]["cpu"] = cpu_fmt
        data["resourceFlavor"]["accelerated"] = acc_fmt

    edit_rule(rules, "naming.yaml", change)

    base = default_items()
    rename: dict[str, str] = {}
    counts: dict[str, int] = {}
    for flavor in of_kind(base, "ResourceFlavor"):
        notes, labels = flavor["metadata"]["annotations"], flavor["metadata"]["labels"]
        gkey, profile = notes["note.gpustack.ai/generalGroup"], labels[PROFILE_LABEL]
        os_, arch = labels["kubernetes.io/os"], labels["kubernetes.io/arch"]
        if flavor_is_accelerated(flavor):
            akey = notes["note.gpustack.ai/acceleratorGroup"]
            count = labels[f"{ACCEL}{akey}.count"]
            new = acc_fmt.format(gKey=gkey, aKey=akey, count=count, profile=profile, os=os_, arch=arch)
        else:
            count = labels[f"{GENERAL}{gkey}.count"]
            new = cpu_fmt.format(gKey=gkey, count=count, profile=profile, os=os_, arch=arch)
        rename[flavor["metadata"]["name"]] = new
        counts[new] = int(count)
    assert rename and len(set(rename.values())) == len(rename), "the new format must keep flavors apart"

    expected = copy.deepcopy(base)
    for obj in expected:
        if obj["kind"] == "ResourceFlavor":
            obj["metadata"]["name"] = rename[obj["metadata"]["name"]]
        elif obj["kind"] == "ClusterQueue":
            for group in obj["spec"].get("resourceGroups", []):
                for ref in group["flavors"]:
                    ref["name"] = rename[ref["name"]]
                group["flavors"].sort(key=lambda ref: (counts[ref["name"]], ref["name"]))
    expected.sort(key=order_key)

    actual = render(rules)
    assert_same_items(actual, expected)
    # every flavor name changed, every ClusterQueue reference points at a rendered flavor
    flavor_names = {o["metadata"]["name"] for o in of_kind(actual, "ResourceFlavor")}
    assert flavor_names == set(rename.values()) and not flavor_names & set(rename)
    refs = {ref["name"] for cq in of_kind(actual, "ClusterQueue") for g in cq["spec"].get("resourceGroups", [])
            for ref in g["flavors"]}
    assert refs and refs <= flavor_names
    # nothing else was renamed
    others = lambda items: sorted(ident(o) for o in items if o["kind"] != "ResourceFlavor")  # noqa: E731
    assert others(actual) == others(base)


# --------------------------------------------------------------------------------------------
# (b) a new manufacturer (manufacturers.yaml)
# --------------------------------------------------------------------------------------------

XPU_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "node-xpu",
        "annotations": {"feature.gpustack.ai/cpu-name": "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz"},
        "labels": {
            "acceleratable.feature.gpustack.ai/kunlunxin": "true",
            "acceleratable.feature.gpustack.ai/kunlunxin-p800": "true",
            "acceleratable.feature.gpustack.ai/kunlunxin-p800.count": "8",
            "acceleratable.feature.gpustack.ai/kunlunxin-p800.product": "P800",
            "acceleratable.feature.gpustack.ai/kunlunxin-p800.memory": "96Gi",
            "feature.gpustack.ai/acceleratable": "true",
            "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
            "gpustack.ai/managed": "true",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": "node-xpu",
            "kubernetes.io/os": "linux",
        },
    },
    "status": {"capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
}


def xpu_snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "snapshot"
    shutil.copytree(DEMO, snap)
    (snap / "node-xpu.yaml").write_text(yaml.safe_dump(XPU_NODE, sort_keys=False), encoding="utf-8")
    return snap


def test_new_manufacturer_yields_flavor_and_queue(tmp_path: Path) -> None:
    snap = xpu_snapshot(tmp_path)
    without = render(snapshot=snap)

    # default rules: kunlunxin is not a known manufacturer, so its labels are ignored
    names_without = {ident(o) for o in without}
    assert not any("kunlunxin" in name for _, _, name in names_without)
    assert not any(k.startswith(ACCEL + "kunlunxin") for f in of_kind(without, "ResourceFlavor")
                   for k in f["metadata"]["labels"])
    # ... but the node itself is there (it still feeds a CPU flavor)
    nf = by_ident(without)[("NodeFeature", "gpustack-system", "node-xpu-gpustack-worker")]
    gkey = next(k[len(GENERAL):-len(".count")] for k in nf["spec"]["labels"]
                if k.startswith(GENERAL) and k.endswith(".count"))
    assert any(f["metadata"]["name"] == f"gpustack--{gkey}-linux-amd64-32c-{DEFAULT_PROFILE}"
               for f in of_kind(without, "ResourceFlavor"))

    rules = copy_rules(tmp_path)
    edit_rule(rules, "manufacturers.yaml",
              lambda data: data["items"].append({"name": "kunlunxin", "resourceBase": "kunlunxin.com/xpu"}))
    with_rules = render(rules, snapshot=snap)

    flavor = f"gpustack--{gkey}--kunlunxin-p800-linux-amd64-8d-{DEFAULT_PROFILE}"
    pool = "gpustack--kunlunxin-p800-linux-amd64"
    lq = "gpustack-fnv64-" + fnv1a64_hex(pool)
    new_objects = {("ResourceFlavor", "", flavor), ("InstanceType", "", pool), ("ClusterQueue", "", pool),
                   ("LocalQueue", "default", lq), ("LocalQueue", "team-a", lq)}
    before, after = by_ident(without), by_ident(with_rules)
    assert set(after) - set(before) == new_objects
    assert set(before) - set(after) == set()
    for key in before:
        assert after[key] == before[key], f"{key} changed"
    assert [ident(o) for o in with_rules] == sorted((ident(o) for o in with_rules),
                                                   key=lambda i: (KIND_ORDER.index(i[0]), i[1], i[2]))

    rf = after[("ResourceFlavor", "", flavor)]
    assert rf["metadata"]["labels"][ACCEL + "kunlunxin-p800"] == "true"
    assert rf["metadata"]["labels"][ACCEL + "kunlunxin-p800.capacity"] == "8"
    assert rf["metadata"]["annotations"]["note.gpustack.ai/manufacturer"] == "kunlunxin"
    assert rf["spec"]["nodeLabels"][ACCEL + "kunlunxin-p800.count"] == "8"

    cq = after[("ClusterQueue", "", pool)]
    assert cq["metadata"]["labels"][ACCEL + "kunlunxin-p800"] == "true"
    assert cq["spec"]["resourceGroups"] == [{
        "coveredResources": ["credits.gpustack.ai/kunlunxin"],
        "flavors": [{"name": flavor, "resources": [{"name": "credits.gpustack.ai/kunlunxin",
                                                    "nominalQuota": "12800k"}]}],
    }]
    assert cq["spec"]["stopPolicy"] == "None"

    it = after[("InstanceType", "", pool)]
    assert it["spec"]["acceleratorGroup"] == "kunlunxin-p800" and it["spec"]["acceleratable"] is True
    assert it["spec"]["displayName"] == "P800"
    assert it["spec"]["unitResources"] == {"cpu": "4", "ram": "16Gi"}  # no preset table: the fallback
    for ns in ("default", "team-a"):
        assert after[("LocalQueue", ns, lq)]["spec"]["clusterQueue"] == pool


# --------------------------------------------------------------------------------------------
# (c) unit-resource presets (presets.yaml)
# --------------------------------------------------------------------------------------------

T4 = "gpustack--nvidia-tesla-t4-linux-amd64"
A10G = "gpustack--nvidia-a10g-linux-amd64"


def _t4_large(data: Any) -> None:
    rows = [row for row in data["manufacturers"]["nvidia"] if list(row["prefixes"]) == ["t4"]]
    assert len(rows) == 1
    rows[0]["tier"] = "large"


def _small_cpu_6(data: Any) -> None:
    data["tiers"]["small"]["cpu"] = "6"


def _medium_ram(data: Any) -> None:
    data["tiers"]["medium"]["ram"] = "96Gi"


@pytest.mark.parametrize("change, expected", [
    pytest.param(_t4_large, {T4: {"cpu": "12", "ram": "128Gi"}}, id="t4-entry-becomes-large"),
    pytest.param(_small_cpu_6, {T4: {"cpu": "6", "ram": "32Gi"}}, id="small-tier-cpu-6"),
    pytest.param(_medium_ram, {A10G: {"cpu": "8", "ram": "96Gi"}}, id="medium-tier-ram-96Gi"),
])
def test_preset_change_changes_derived_unit_resources(tmp_path: Path, change: Callable[[Any], None],
                                                      expected: dict[str, dict[str, str]]) -> None:
    rules = copy_rules(tmp_path)
    edit_rule(rules, "presets.yaml", change)
    base = default_items()
    want = copy.deepcopy(base)
    for obj in want:
        if obj["kind"] == "InstanceType" and obj["metadata"]["name"] in expected:
            assert obj["spec"]["unitResources"] != expected[obj["metadata"]["name"]]
            obj["spec"]["unitResources"] = expected[obj["metadata"]["name"]]
    assert want != base
    assert_same_items(render(rules), want)


# --------------------------------------------------------------------------------------------
# (d) reserved namespaces (namespaces.yaml)
# --------------------------------------------------------------------------------------------


def test_reserved_namespace_drops_its_local_queues(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    edit_rule(rules, "namespaces.yaml", lambda data: data["reserved"].append("team-a"))
    base = default_items()
    assert any(o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "team-a" for o in base)
    want = [o for o in base if not (o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "team-a")]
    assert any(o["kind"] == "LocalQueue" for o in want), "other namespaces keep their LocalQueues"
    assert_same_items(render(rules), want)


def test_unreserving_a_namespace_adds_its_local_queues(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    edit_rule(rules, "namespaces.yaml", lambda data: data["reserved"].remove("kube-system"))
    base, actual = default_items(), render(rules)
    added = {ident(o) for o in actual} - {ident(o) for o in base}
    queues = sorted(o["metadata"]["name"] for o in of_kind(base, "ClusterQueue"))
    assert added == {("LocalQueue", "kube-system", "gpustack-fnv64-" + fnv1a64_hex(q)) for q in queues}
    assert_same_items([o for o in actual if ident(o) not in added], base)


# --------------------------------------------------------------------------------------------
# (e) topology levels (topology.yaml)
# --------------------------------------------------------------------------------------------


def test_topology_levels_change_the_profile_and_warn(tmp_path: Path) -> None:
    levels = ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
    rules = copy_rules(tmp_path)

    def change(data: Any) -> None:
        data["levels"].clear()
        data["levels"].extend(levels)

    edit_rule(rules, "topology.yaml", change)
    profile = "fnv64-" + fnv1a64_hex("topology.kubernetes.io/zone\x00kubernetes.io/hostname")
    assert profile != DEFAULT_PROFILE

    base_text, _ = render_raw()
    assert DEFAULT_PROFILE in base_text
    want = json.loads(base_text.replace(DEFAULT_PROFILE, profile))["items"]
    for obj in want:
        if obj["kind"] == "Topology":
            obj["spec"]["levels"] = [{"nodeLabel": level} for level in levels]
    want.sort(key=order_key)

    out, err = render_raw(rules)
    assert DEFAULT_PROFILE not in out
    actual = json.loads(out)["items"]
    assert_same_items(actual, want)
    assert [o["metadata"]["name"] for o in of_kind(actual, "Topology")] == [f"gpustack-{profile}"]

    nodes = sorted(o["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] for o in of_kind(actual, "NodeFeature"))
    assert nodes
    warning_lines = [line for line in err.splitlines() if "warning" in line]
    for node in nodes:
        assert any(node in line and "topology.kubernetes.io/zone" in line for line in warning_lines), \
            f"no warning about {node} lacking the zone label:\n{err}"


def test_topology_zone_label_present_gives_no_warning(tmp_path: Path) -> None:
    """The warning is about nodes lacking the label, not about the level as such."""
    snap = tmp_path / "snapshot"
    shutil.copytree(DEMO, snap)
    nodes_path = snap / "nodes.yaml"
    doc = yaml.safe_load(nodes_path.read_text(encoding="utf-8"))
    for node in doc["items"]:
        node["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-a"
    nodes_path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    rules = copy_rules(tmp_path)
    edit_rule(rules, "topology.yaml", lambda data: data["levels"].insert(0, "topology.kubernetes.io/zone"))
    _, err = render_raw(rules, snapshot=snap)
    assert "topology.kubernetes.io/zone" not in err


# --------------------------------------------------------------------------------------------
# (f) settings defaults (settings.yaml)
# --------------------------------------------------------------------------------------------

SETTING_NAMES = sorted(YAML(typ="safe").load((RULES / "settings.yaml").read_text(encoding="utf-8"))["defaults"])


@pytest.mark.parametrize("name", SETTING_NAMES)
def test_flipped_setting_default_equals_set_flag(tmp_path: Path, name: str) -> None:
    rules = copy_rules(tmp_path)
    state: dict[str, bool] = {}

    def change(data: Any) -> None:
        state["flipped"] = not data["defaults"][name]
        data["defaults"][name] = state["flipped"]

    edit_rule(rules, "settings.yaml", change)
    flag = f"{name}={'true' if state['flipped'] else 'false'}"
    assert render_raw(rules) == render_raw(sets=(flag,))


def test_aware_default_true_changes_output(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    edit_rule(rules, "settings.yaml",
              lambda data: data["defaults"].__setitem__("instance-type-aware-cpu-manufacturer", True))
    out = render_raw(rules)
    assert out == render_raw(sets=("instance-type-aware-cpu-manufacturer=true",))
    assert out[0] != render_raw()[0]
    # and --set still wins over the rule default
    assert render_raw(rules, sets=("instance-type-aware-cpu-manufacturer=false",))[0] == render_raw()[0]


# --------------------------------------------------------------------------------------------
# (g) quota expression (queues.yaml)
# --------------------------------------------------------------------------------------------


def test_quota_expression_doubles_accelerated_quota(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    edit_rule(rules, "queues.yaml",
              lambda data: data["quota"]["accelerated"].__setitem__("nominalQuota", "capacity * M * 2"))
    base, actual = default_items(), render(rules)
    assert [ident(o) for o in actual] == [ident(o) for o in base]
    doubled = 0
    for old, new in zip(base, actual):
        if old["kind"] != "ClusterQueue":
            assert new == old, f"{ident(old)} changed"
            continue
        accelerated = old["metadata"]["labels"]["feature.gpustack.ai/acceleratable"] == "true"
        old_q = [(f["name"], r["name"], r["nominalQuota"]) for g in old["spec"].get("resourceGroups", [])
                 for f in g["flavors"] for r in f["resources"]]
        new_q = [(f["name"], r["name"], r["nominalQuota"]) for g in new["spec"].get("resourceGroups", [])
                 for f in g["flavors"] for r in f["resources"]]
        assert [q[:2] for q in new_q] == [q[:2] for q in old_q]
        for (_, _, before), (_, _, after) in zip(old_q, new_q):
            if accelerated:
                assert si_int(after) == 2 * si_int(before), (ident(old), before, after)
                doubled += 1
            else:
                assert after == before
        # apart from the quantities, the queue is unchanged
        strip = lambda cq: json.dumps(  # noqa: E731
            {**cq, "spec": {k: v for k, v in cq["spec"].items() if k != "resourceGroups"}}, sort_keys=True)
        assert strip(new) == strip(old)
    assert doubled >= 3  # a10g (1 flavor) + t4 (2 flavors)


def test_quota_expression_for_cpu_uses_other_variables(tmp_path: Path) -> None:
    """nodes and count are quota variables too: nodes * count == capacity."""
    rules = copy_rules(tmp_path)
    edit_rule(rules, "queues.yaml", lambda data: data["quota"]["cpu"].__setitem__("nominalQuota", "nodes * count"))
    assert render_raw(rules)[0] == render_raw()[0]
