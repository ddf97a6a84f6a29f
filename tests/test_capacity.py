"""Node capacity extended resources and per-card fit labels, driven through `node-patches`.

Independent check of stage3-node.md §3-§5, inputs.md §3 and examples.md §4. Every expected value
below is derived by hand from the spec (the derivation is in the comment or the case id), never
from the tool's own output. Snapshots are built from small Python dicts, written to tmp_path as
JSON and fed to ``python -m gpustack_render node-patches ... --format json``.

Vocabulary used in the comments: M = 1,600,000 units per card; L / P = logical / partitioned cards.
"""

from __future__ import annotations

import itertools
import re
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from cli_invoke import CliResult, invoke

REPO = Path(__file__).resolve().parents[1]
M = 1_600_000
AK = "acceleratable.feature.gpustack.ai/"
SLICED = "sliced-max-free-units.fit.gpustack.ai/"
SHARED = "shared-free-cards.fit.gpustack.ai/"
_counter = itertools.count()


# --------------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------------

def make_node(name: str, *, akeys: dict[str, dict[str, str]] | None = None, labels: dict[str, Any] | None = None,
              capacity: dict[str, Any] | None = None, allocatable: dict[str, Any] | None = None,
              managed: str | None = "true", no_labels: bool = False) -> dict[str, Any]:
    """A Node. ``akeys`` maps an aKey to its extra label suffixes, e.g. {"nvidia-l4": {"memory": "24Gi"}}."""
    lab: dict[str, Any] = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                           "kubernetes.io/hostname": name}
    if managed is not None:
        lab["gpustack.ai/managed"] = managed
    for akey, extra in (akeys or {}).items():
        lab["feature.gpustack.ai/acceleratable"] = "true"
        lab[AK + akey.split("-", 1)[0]] = "true"
        lab[AK + akey] = "true"
        for suffix, value in extra.items():
            lab[f"{AK}{akey}.{suffix}"] = value
    lab.update(labels or {})
    meta: dict[str, Any] = {"name": name}
    if not no_labels:
        meta["labels"] = lab
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    status: dict[str, Any] = {}
    if capacity is not None:
        status["capacity"] = dict(capacity)
    if allocatable is not None:
        status["allocatable"] = dict(allocatable)
    if status:
        node["status"] = status
    return node


def logical_card(card_id: str, slices: int = 128, overcommit: bool = True, unhealthy: bool = False) -> dict:
    return {"id": card_id, "status": {"unhealthy": unhealthy,
                                      "logicalSliced": {"count": slices, "coresPercentageOvercommit": overcommit}}}


def mig_card(card_id: str, profiles: list[tuple[str, int]]) -> dict:
    """A card in partitioning mode; physicalSliced.count is the largest profile count (inputs.md §3.2)."""
    return {"id": card_id, "status": {"unhealthy": False, "physicalSliced": {
        "count": max(c for _, c in profiles) if profiles else 1,
        "profiles": [{"name": n, "count": c, "memoryMib": 1024} for n, c in profiles]}}}


def plain_card(card_id: str) -> dict:
    """Neither logically sliceable nor partitioned."""
    return {"id": card_id, "status": {"unhealthy": False}}


def whole_card(card_id: str) -> dict:
    """Whole-card capable but not logically sliceable (logicalSliced.count 0)."""
    return {"id": card_id, "status": {"unhealthy": False, "logicalSliced": {"count": 0}}}


def group(manufacturer: str, gid: str, cards: list[dict], overcommit: bool | None = True,
          logical_block: bool = True) -> dict:
    g: dict[str, Any] = {"id": gid, "manufacturer": manufacturer, "name": gid, "memory": 1024, "accelerators": cards}
    if logical_block:
        total = sum(c["status"].get("logicalSliced", {}).get("count", 0) for c in cards)
        logical: dict[str, Any] = {"count": total}
        if overcommit is not None:
            logical["coresPercentageOvercommit"] = overcommit
        g["acceleratorSlicedDetail"] = {"logical": logical}
    return g


def row(card_id: str, mode: Any = 0, remaining: int | None = None, allocated: int | None = None,
        allocated_slices: int | None = None, allocated_profiles: list[tuple[str, int]] | None = None,
        remaining_profiles: list[tuple[str, int]] | None = None) -> dict:
    r: dict[str, Any] = {"id": card_id, "mode": mode}
    if remaining is not None:
        r["remaining"] = remaining
    if allocated is not None:
        r["allocated"] = allocated
    if allocated_slices is not None:
        r["allocatedSlices"] = allocated_slices
    if allocated_profiles:
        r["allocatedProfiles"] = [{"name": n, "count": c} for n, c in allocated_profiles]
    if remaining_profiles:
        r["remainingProfiles"] = [{"name": n, "count": c} for n, c in remaining_profiles]
    return r


def ledger(manufacturer: str, gid: str, rows: list[dict]) -> dict:
    return {"id": gid, "manufacturer": manufacturer, "accelerators": rows}


def make_devices(name: str, groups: list[dict], ledgers: list[dict] | None = None) -> dict:
    d: dict[str, Any] = {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices",
                         "metadata": {"name": name, "labels": {"gpustack.ai/managed": "true"}},
                         "spec": {"groups": groups}}
    if ledgers is not None:
        d["status"] = {"groups": ledgers}
    return d


# --------------------------------------------------------------------------------------------------
# Running the CLI
# --------------------------------------------------------------------------------------------------

def write_snapshot(tmp_path: Path, objects: list[dict]) -> Path:
    path = tmp_path / f"snapshot-{next(_counter)}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=1))
    return path


def run_node_patches(args: list[str], stdin: str | None = None) -> CliResult:
    """``node-patches ARGS`` in process."""
    return invoke("node-patches", *args, input=stdin)


def run_objects(tmp_path: Path, objects: list[dict], *extra: str, fmt: str = "json") -> CliResult:
    return run_node_patches([str(write_snapshot(tmp_path, objects)), *extra, "--format", fmt])


def patches(tmp_path: Path, objects: list[dict], *extra: str) -> list[dict]:
    """Run, require success, return the parsed JSON entry list."""
    proc = run_objects(tmp_path, objects, *extra)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def entry_ops(entries: list[dict], node: str, subresource: str) -> list[dict]:
    """The ops of one entry, [] when there is no entry (§4.7: no entry for a Node with no op)."""
    found = [e for e in entries if e["node"] == node and e["subresource"] == subresource]
    assert len(found) <= 1, f"duplicate entries for {node!r}/{subresource!r}: {found}"
    if found:
        assert found[0]["patch"], "an entry must not carry an empty patch"
        return found[0]["patch"]
    return []


def cap(key: str) -> str:
    return "/status/capacity/" + key.replace("~", "~0").replace("/", "~1")


def lab(key: str) -> str:
    return "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")


def add(path: str, value: Any) -> dict:
    return {"op": "add", "path": path, "value": value}


def rep(path: str, value: Any) -> dict:
    return {"op": "replace", "path": path, "value": value}


def rm(path: str) -> dict:
    return {"op": "remove", "path": path}


def status_ops_of(tmp_path: Path, objects: list[dict], node: str = "n1", *extra: str) -> list[dict]:
    return entry_ops(patches(tmp_path, objects, *extra), node, "status")


def label_ops_of(tmp_path: Path, objects: list[dict], node: str = "n1", *extra: str) -> list[dict]:
    return entry_ops(patches(tmp_path, objects, *extra), node, "")


NV_SLICED4 = ["nvidia.com/gpu.sliced.cores-percentage", "nvidia.com/gpu.sliced.memory-mib",
              "nvidia.com/gpu.sliced.memory-percentage", "nvidia.com/gpu.sliced.units"]


# --------------------------------------------------------------------------------------------------
# 1. examples.md §4 and its variations
# --------------------------------------------------------------------------------------------------

EXAMPLE4_EXPECTED = json.loads("""
[
  {"node": "gpu-a", "subresource": "status", "patch": [
    {"op": "add", "path": "/status/capacity/nvidia.com~1gpu.sliced.cores-percentage", "value": "25600"},
    {"op": "add", "path": "/status/capacity/nvidia.com~1gpu.sliced.memory-mib", "value": "65536"},
    {"op": "add", "path": "/status/capacity/nvidia.com~1gpu.sliced.memory-percentage", "value": "200"},
    {"op": "add", "path": "/status/capacity/nvidia.com~1gpu.sliced.units", "value": "3200k"}
  ]}
]
""")

EXAMPLE4_KEYS = {"nvidia.com/gpu.sliced.cores-percentage": "25600", "nvidia.com/gpu.sliced.memory-mib": "65536",
                 "nvidia.com/gpu.sliced.memory-percentage": "200", "nvidia.com/gpu.sliced.units": "3200k"}


def example4_node(*, managed: str = "true", sliced_pool: str | None = "256", extra_capacity: dict | None = None,
                  overrides: dict | None = None) -> dict:
    """Node gpu-a exactly as examples.md §4 gives it (only the relevant parts)."""
    capacity = {"cpu": "32", "nvidia.com/gpu": "2", "nvidia.com/gpu.shared": "20",
                "nvidia.com/gpu.partitioned": "0"}
    if sliced_pool is not None:
        capacity["nvidia.com/gpu.sliced"] = sliced_pool
    capacity.update(extra_capacity or {})
    labels = {
        "gpustack.ai/managed": managed,
        "feature.gpustack.ai/acceleratable": "true",
        "acceleratable.feature.gpustack.ai/nvidia": "true",
        "acceleratable.feature.gpustack.ai/nvidia-fabrikam-fx2": "true",
        "acceleratable.feature.gpustack.ai/nvidia-fabrikam-fx2.count": "2",
        "acceleratable.feature.gpustack.ai/nvidia-fabrikam-fx2.memory": "32Gi",
    }
    labels.update(overrides or {})
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a", "labels": labels},
            "status": {"capacity": capacity}}


def example4_devices(overcommit: bool = True) -> dict:
    return {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "metadata": {"name": "gpu-a"},
            "spec": {"groups": [{
                "id": "fabrikam-fx2", "manufacturer": "nvidia", "name": "Fabrikam FX2", "memory": 32768,
                "acceleratorSlicedDetail": {"logical": {"count": 256, "coresPercentageOvercommit": overcommit}},
                "accelerators": [
                    {"id": "GPU-fx2-0", "index": 0,
                     "status": {"logicalSliced": {"count": 128, "coresPercentageOvercommit": overcommit}}},
                    {"id": "GPU-fx2-1", "index": 1,
                     "status": {"logicalSliced": {"count": 128, "coresPercentageOvercommit": overcommit}}},
                ]}]}}


def test_example4_exact_output(tmp_path: Path) -> None:
    assert patches(tmp_path, [example4_node(), example4_devices()]) == EXAMPLE4_EXPECTED


def test_example4_without_overcommit(tmp_path: Path) -> None:
    # "Had the group reported no overcommit, cores-percentage would be 2 × 100 = 200."
    ops = status_ops_of(tmp_path, [example4_node(), example4_devices(overcommit=False)], "gpu-a")
    assert add(cap("nvidia.com/gpu.sliced.cores-percentage"), "200") in ops


REMOVE_ALL_FOUR = [rm(cap(k)) for k in NV_SLICED4]


def other_devices() -> dict:
    """A Devices object for some other Node: the snapshot holds Devices, just not this Node's, so
    §4.3's removal applies (a snapshot with no Devices at all skips GPU Nodes instead)."""
    return make_devices("some-other-node", [])


@pytest.mark.parametrize("node, with_devices", [
    pytest.param(example4_node(sliced_pool=None, extra_capacity=EXAMPLE4_KEYS), True, id="sliced-pool-removed"),
    pytest.param(example4_node(sliced_pool="0", extra_capacity=EXAMPLE4_KEYS), True, id="sliced-pool-zeroed"),
    pytest.param(example4_node(managed="false", extra_capacity=EXAMPLE4_KEYS), True, id="managed-false"),
    pytest.param(example4_node(managed="no", extra_capacity=EXAMPLE4_KEYS), True, id="managed-other-value"),
    pytest.param(example4_node(managed="True", extra_capacity=EXAMPLE4_KEYS), True, id="managed-True-not-exact"),
    pytest.param(example4_node(extra_capacity=EXAMPLE4_KEYS), False, id="no-devices-object-for-this-node"),
])
def test_example4_variations_remove_all_four(tmp_path: Path, node: dict, with_devices: bool) -> None:
    objects = [node] + ([example4_devices()] if with_devices else [other_devices()])
    assert patches(tmp_path, objects) == [{"node": "gpu-a", "subresource": "status", "patch": REMOVE_ALL_FOUR}]


def test_example4_manual_mode_node_without_managed_label_removes(tmp_path: Path) -> None:
    # §1.2: node-management-manual=true and no managed label -> key omitted -> not managed.
    node = example4_node(extra_capacity=EXAMPLE4_KEYS)
    del node["metadata"]["labels"]["gpustack.ai/managed"]
    entries = patches(tmp_path, [node, example4_devices()], "--set", "node-management-manual=true")
    assert entries == [{"node": "gpu-a", "subresource": "status", "patch": REMOVE_ALL_FOUR}]


def test_example4_default_mode_node_without_managed_label_is_managed(tmp_path: Path) -> None:
    node = example4_node()
    del node["metadata"]["labels"]["gpustack.ai/managed"]
    assert patches(tmp_path, [node, example4_devices()]) == EXAMPLE4_EXPECTED


def test_node_being_deleted_is_skipped(tmp_path: Path) -> None:
    """A Node being deleted is skipped entirely (stage3 intro): no entry even with stale keys."""
    node = example4_node(extra_capacity=EXAMPLE4_KEYS)
    node["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    # the only Node is being deleted: the snapshot holds no live Node, which needs --allow-empty
    assert patches(tmp_path, [node, example4_devices()], "--allow-empty") == []


def test_example4_boolean_label_values_read_as_text(tmp_path: Path) -> None:
    # inputs.md §1: booleans are read as "true"/"false", as if quoted
    node = example4_node(overrides={"gpustack.ai/managed": True,
                                    "acceleratable.feature.gpustack.ai/nvidia-fabrikam-fx2": True})
    assert patches(tmp_path, [node, example4_devices()]) == EXAMPLE4_EXPECTED


def test_example4_boolean_false_managed_removes(tmp_path: Path) -> None:
    node = example4_node(extra_capacity=EXAMPLE4_KEYS, overrides={"gpustack.ai/managed": False})
    assert patches(tmp_path, [node, example4_devices()]) == [
        {"node": "gpu-a", "subresource": "status", "patch": REMOVE_ALL_FOUR}]


def test_devices_without_node_gives_nothing(tmp_path: Path) -> None:
    assert patches(tmp_path, [example4_devices()], "--allow-empty") == []


def test_example4_apply_then_render_again_is_empty(tmp_path: Path) -> None:
    node = example4_node()
    first = patches(tmp_path, [node, example4_devices()])
    assert first == EXAMPLE4_EXPECTED
    applied = jsonpatch.apply_patch(node, first[0]["patch"])
    assert applied["status"]["capacity"] == {**node["status"]["capacity"], **EXAMPLE4_KEYS}
    assert patches(tmp_path, [applied, example4_devices()]) == []


@pytest.mark.parametrize("variant", ["sliced-pool-removed", "managed-false", "no-devices"])
def test_example4_removal_apply_then_render_again_is_empty(tmp_path: Path, variant: str) -> None:
    node = example4_node(sliced_pool=None if variant == "sliced-pool-removed" else "256",
                         managed="false" if variant == "managed-false" else "true", extra_capacity=EXAMPLE4_KEYS)
    objects_rest = [other_devices()] if variant == "no-devices" else [example4_devices()]
    first = patches(tmp_path, [node, *objects_rest])
    applied = jsonpatch.apply_patch(node, first[0]["patch"])
    assert not set(EXAMPLE4_KEYS) & set(applied["status"]["capacity"])
    assert patches(tmp_path, [applied, *objects_rest]) == []


# --------------------------------------------------------------------------------------------------
# 2. Formulas (§4.3)
# --------------------------------------------------------------------------------------------------

def nv_sliced_ops(units: str, cores: str, mem_pct: str, mem_mib: str, op=add) -> list[dict]:
    """The four nvidia .sliced.* ops in path order."""
    return [op(cap("nvidia.com/gpu.sliced.cores-percentage"), cores),
            op(cap("nvidia.com/gpu.sliced.memory-mib"), mem_mib),
            op(cap("nvidia.com/gpu.sliced.memory-percentage"), mem_pct),
            op(cap("nvidia.com/gpu.sliced.units"), units)]


NV_POOLS = {"nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.partitioned": "0"}

FORMULA_CASES = [
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [logical_card("c0", 128, True), logical_card("c1", 128, True)], overcommit=False)],
        # group says false, cards say true: the group's flag decides -> cores = L*100 = 200
        nv_sliced_ops("3200k", "200", "200", "65536"),
        id="overcommit-false-on-group-wins-over-cards"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [logical_card("c0", 100, False), logical_card("c1", 28, False)], overcommit=True)],
        # slices = 100 + 28 = 128 -> 12800
        nv_sliced_ops("3200k", "12800", "200", "65536"),
        id="overcommit-true-on-group-sums-card-slices"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [logical_card("c0", 128, True), logical_card("c1", 128, False)], logical_block=False)],
        # inputs.md §3.1: logical block absent -> true when any logical card reports true -> 256*100
        nv_sliced_ops("3200k", "25600", "200", "65536"),
        id="no-logical-block-any-card-true"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [logical_card("c0", 128, False), logical_card("c1", 128, False)], logical_block=False)],
        nv_sliced_ops("3200k", "200", "200", "65536"),
        id="no-logical-block-all-cards-false"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [logical_card("c0", 128, True), logical_card("c1", 128, True)], overcommit=None)],
        # the logical block is present but carries no flag: only a *missing block* falls back to the
        # cards (inputs.md §3.1), so the flag reads false -> L*100
        nv_sliced_ops("3200k", "200", "200", "65536"),
        id="logical-block-without-flag-is-false"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [{**group("nvidia", "x", [logical_card("c0", 128, True)], logical_block=False),
          "acceleratorSlicedDetail": {"physical": {"count": 0, "profiles": []}}}],
        nv_sliced_ops("1600k", "12800", "100", "32768"),
        id="sliced-detail-without-logical-block-card-true"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi", "count": "8"}},
        [group("nvidia", "x", [logical_card("c0"), logical_card("c1")])],
        # .count label says 8; Devices has 2 cards and wins
        nv_sliced_ops("3200k", "25600", "200", "65536"),
        id="count-label-disagrees-devices-wins"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi", "count": "1"}},
        [group("nvidia", "x", [logical_card(f"c{i}") for i in range(4)])],
        # 4 cards: units 6.4M -> 6400k, cores 512*100 = 51200, mem-pct 400, mib 131072
        nv_sliced_ops("6400k", "51200", "400", "131072"),
        id="four-cards-count-label-one"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [logical_card("c0"), plain_card("c1"), whole_card("c2")])],
        # only c0 is logical: L = 1
        nv_sliced_ops("1600k", "12800", "100", "32768"),
        id="cards-neither-logical-nor-partitioned-not-counted"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [logical_card("c0", unhealthy=True)])],
        nv_sliced_ops("1600k", "12800", "100", "32768"),
        id="unhealthy-card-still-counted"),
    pytest.param(
        {"nvidia-a100": {"memory": "80Gi"}, "nvidia-t4": {"memory": "15Gi"}},
        [group("nvidia", "a100", [logical_card("a0"), logical_card("a1")], overcommit=True),
         group("nvidia", "t4", [logical_card("t0", 128, False)], overcommit=False)],
        # units 3*M = 4800k; cores 256*100 + 1*100 = 25700; mem-pct 300; mib 2*81920 + 15360 = 179200
        nv_sliced_ops("4800k", "25700", "300", "179200"),
        id="two-models-one-manufacturer-summed"),
    pytest.param(
        {"nvidia-a100": {"memory": "80Gi"}, "nvidia-t4": {"memory": "15Gi"}},
        [group("nvidia", "a100", [logical_card("a0"), logical_card("a1")]),
         group("nvidia", "t4", [plain_card("t0")])],
        # t4 has L = P = 0: skipped, contributes nothing
        nv_sliced_ops("3200k", "25600", "200", "163840"),
        id="two-models-one-skipped"),
    pytest.param(
        {"nvidia-a100": {"memory": "80Gi"}},
        [group("nvidia", "a100", [logical_card("a0")]), group("nvidia", "t4", [logical_card("t0")])],
        # t4 group in Devices but no aKey label on the Node: not counted
        nv_sliced_ops("1600k", "12800", "100", "81920"),
        id="group-without-akey-label-ignored"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "x", [plain_card("c0"), plain_card("c1")])],
        [],
        id="model-with-neither-kind-of-card-skipped"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("nvidia", "y", [logical_card("c0")])],
        [],
        id="akey-without-spec-group-skipped"),
    pytest.param(
        {"nvidia-x": {"memory": "32Gi"}},
        [group("amd", "x", [logical_card("c0")])],
        # the group's aKey is amd-x, not nvidia-x
        [],
        id="group-of-other-manufacturer-does-not-match"),
    pytest.param(
        {},
        [group("nvidia", "x", [logical_card("c0")])],
        [],
        id="node-without-akeys"),
]


@pytest.mark.parametrize("akeys, groups, expected", FORMULA_CASES)
def test_formulas(tmp_path: Path, akeys: dict, groups: list[dict], expected: list[dict]) -> None:
    node = make_node("n1", akeys=akeys, capacity={"cpu": "8", **NV_POOLS})
    assert status_ops_of(tmp_path, [node, make_devices("n1", groups)]) == expected


def test_akey_label_not_true_is_not_an_akey(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-x": {"memory": "32Gi"}}, capacity=NV_POOLS,
                     labels={AK + "nvidia-x": "false"})
    assert status_ops_of(tmp_path, [node, make_devices("n1", [group("nvidia", "x", [logical_card("c0")])])]) == []


def test_two_manufacturers_separate_key_sets(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-l4": {"memory": "24Gi"}, "ascend-910b": {"memory": "64Gi"}},
                     capacity={"nvidia.com/gpu.sliced": "128", "huawei.com/npu.sliced": "126"})
    devices = make_devices("n1", [
        group("nvidia", "l4", [logical_card("g0", 128, True)]),
        group("ascend", "910b", [logical_card("n0", 63, True), logical_card("n1", 63, True)]),
    ])
    # ascend: L=2, slices=126 -> units 3200k, cores 12600, mem-pct 200, mib 2*65536 = 131072
    # nvidia: L=1 -> units 1600k, cores 12800, mem-pct 100, mib 24576
    assert status_ops_of(tmp_path, [node, devices]) == [
        add(cap("huawei.com/npu.sliced.cores-percentage"), "12600"),
        add(cap("huawei.com/npu.sliced.memory-mib"), "131072"),
        add(cap("huawei.com/npu.sliced.memory-percentage"), "200"),
        add(cap("huawei.com/npu.sliced.units"), "3200k"),
        *nv_sliced_ops("1600k", "12800", "100", "24576"),
    ]


def test_two_manufacturers_each_gated_on_own_pool(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-l4": {"memory": "24Gi"}, "ascend-910b": {"memory": "64Gi"}},
                     capacity={"nvidia.com/gpu.sliced": "128", "huawei.com/npu.sliced": "0"})
    devices = make_devices("n1", [group("nvidia", "l4", [logical_card("g0")]),
                                  group("ascend", "910b", [logical_card("n0", 63)])])
    assert status_ops_of(tmp_path, [node, devices]) == nv_sliced_ops("1600k", "12800", "100", "24576")


@pytest.mark.parametrize("memory, mib", [
    pytest.param("80Gi", "81920", id="80Gi"),
    pytest.param("40537Mi", "40537", id="40537Mi"),
    pytest.param("40Gi", "40960", id="40Gi"),
    pytest.param("24Gi", "24576", id="24Gi"),
    pytest.param("15Gi", "15360", id="15Gi"),
    pytest.param("512Mi", "512", id="512Mi"),
    pytest.param("1.5Gi", "1536", id="1.5Gi"),
    pytest.param("1Ti", "1048576", id="1Ti"),
    pytest.param("24G", "22888", id="decimal-24G-floored"),          # 24e9 / 2^20 = 22888.18
    pytest.param("100M", "95", id="decimal-100M-floored"),           # 1e8 / 2^20 = 95.37
    pytest.param("85899345920", "81920", id="plain-bytes"),         # 80 * 2^30
    pytest.param("1048575", "0", id="just-below-1Mi-floors-to-0"),
])
def test_memory_label_read_as_floor_mib(tmp_path: Path, memory: str, mib: str) -> None:
    node = make_node("n1", akeys={"nvidia-x": {"memory": memory}}, capacity=NV_POOLS)
    devices = make_devices("n1", [group("nvidia", "x", [logical_card("c0")])])
    proc = run_objects(tmp_path, [node, devices])
    assert proc.returncode == 0, proc.stderr
    ops = entry_ops(json.loads(proc.stdout), "n1", "status")
    assert ops == nv_sliced_ops("1600k", "12800", "100", mib)


def test_memory_label_beats_group_memory_field(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-x": {"memory": "40Gi"}}, capacity=NV_POOLS)
    g = group("nvidia", "x", [logical_card("c0")])
    g["memory"] = 40537  # the exact MiB; the label (40Gi -> 40960) wins
    assert status_ops_of(tmp_path, [node, make_devices("n1", [g])]) == nv_sliced_ops("1600k", "12800", "100", "40960")


def test_memory_label_absent_reads_zero(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-x": {}}, capacity=NV_POOLS)
    devices = make_devices("n1", [group("nvidia", "x", [logical_card("c0"), logical_card("c1")])])
    assert status_ops_of(tmp_path, [node, devices]) == nv_sliced_ops("3200k", "25600", "200", "0")


@pytest.mark.parametrize("memory", ["lots", "80GiB", "Gi", "80Gi-x"])
def test_memory_label_unparseable_reads_zero_with_warning(tmp_path: Path, memory: str) -> None:
    node = make_node("n1", akeys={"nvidia-x": {"memory": memory}}, capacity=NV_POOLS)
    devices = make_devices("n1", [group("nvidia", "x", [logical_card("c0"), logical_card("c1")])])
    proc = run_objects(tmp_path, [node, devices])
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert entry_ops(json.loads(proc.stdout), "n1", "status") == nv_sliced_ops("3200k", "25600", "200", "0")
    warning_lines = [ln for ln in proc.stderr.splitlines() if "nvidia-x.memory" in ln]
    assert warning_lines, f"expected a warning naming the .memory label, got:\n{proc.stderr}"
    assert memory in warning_lines[0]


# --------------------------------------------------------------------------------------------------
# 3. Partitioned cards, ledger rule (§4.4) and profile names (§4.5)
# --------------------------------------------------------------------------------------------------

A100_PROFILES = [("1g.10gb", 7), ("2g.20gb", 3), ("3g.40gb", 2), ("7g.80gb", 1)]
MIG_POOLS = {"nvidia.com/gpu.sliced": "0", "nvidia.com/gpu.partitioned": "7"}


def nv_part(profile_counts: dict[str, str], units: str = "1600k", base: str = "nvidia.com/gpu",
            kind: str = "mig") -> list[dict]:
    ops = [add(cap(f"{base}.partitioned.{kind}-{p}"), v) for p, v in sorted(profile_counts.items())]
    return ops + [add(cap(f"{base}.partitioned.units"), units)]


PARTITION_CASES = [
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [ledger("nvidia", "a100", [row("m0", 4, allocated_profiles=[("2g.20gb", 1)],
                                       remaining_profiles=[("1g.10gb", 5), ("2g.20gb", 2), ("3g.40gb", 1)])])],
        # ready: allocated + remaining; 7g.80gb only in the static list -> 0 (still published)
        nv_part({"1g.10gb": "5", "2g.20gb": "3", "3g.40gb": "1", "7g.80gb": "0"}),
        id="ready-row-allocated-plus-remaining-zero-kept"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        None,
        nv_part({"1g.10gb": "7", "2g.20gb": "3", "3g.40gb": "2", "7g.80gb": "1"}),
        id="no-ledger-at-all-static-counts"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [ledger("nvidia", "a100", [row("m1", 4, remaining_profiles=[("1g.10gb", 1)])])],
        nv_part({"1g.10gb": "7", "2g.20gb": "3", "3g.40gb": "2", "7g.80gb": "1"}),
        id="row-for-this-card-missing-static-counts"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [ledger("nvidia", "a100", [row("m0", 4)])],
        nv_part({"1g.10gb": "7", "2g.20gb": "3", "3g.40gb": "2", "7g.80gb": "1"}),
        id="row-with-empty-profile-lists-static-counts"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [{**ledger("nvidia", "a100", []), "accelerators": [
            {"id": "m0", "mode": 4, "allocatedProfiles": [], "remainingProfiles": []}]}],
        nv_part({"1g.10gb": "7", "2g.20gb": "3", "3g.40gb": "2", "7g.80gb": "1"}),
        id="row-with-explicit-empty-lists-static-counts"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [ledger("nvidia", "other-group", [row("m0", 4, remaining_profiles=[("1g.10gb", 1)])])],
        # the row must be found in the ledger group with the same manufacturer AND id
        nv_part({"1g.10gb": "7", "2g.20gb": "3", "3g.40gb": "2", "7g.80gb": "1"}),
        id="row-in-other-ledger-group-not-used"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [ledger("amd", "a100", [row("m0", 4, remaining_profiles=[("1g.10gb", 1)])])],
        nv_part({"1g.10gb": "7", "2g.20gb": "3", "3g.40gb": "2", "7g.80gb": "1"}),
        id="row-in-ledger-group-of-other-manufacturer-not-used"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [ledger("nvidia", "a100", [row("m0", 4, allocated_profiles=[("7g.80gb", 1)])])],
        # only allocatedProfiles non-empty: still ready; everything else 0
        nv_part({"1g.10gb": "0", "2g.20gb": "0", "3g.40gb": "0", "7g.80gb": "1"}),
        id="ready-row-only-allocated-full-card"),
    pytest.param(
        [mig_card("m0", A100_PROFILES)],
        [ledger("nvidia", "a100", [row("m0", 4, remaining_profiles=[("1g.10gb", 7), ("4g.40gb", 1)])])],
        # 4g.40gb exists only in the ledger: it gets a key too
        nv_part({"1g.10gb": "7", "2g.20gb": "0", "3g.40gb": "0", "4g.40gb": "1", "7g.80gb": "0"}),
        id="name-only-in-ledger-gets-key"),
    pytest.param(
        [mig_card("m0", [("MIG 1G.10GB", 7), ("MIG 3G.40GB", 2)])],
        None,
        nv_part({"1g.10gb": "7", "3g.40gb": "2"}),
        id="vendor-spelling-normalised-static"),
    pytest.param(
        [mig_card("m0", [("MIG 1G.10GB", 7), ("MIG 3G.40GB", 2)])],
        [ledger("nvidia", "a100", [row("m0", 4, allocated_profiles=[("MIG 3G.40GB", 1)],
                                       remaining_profiles=[("mig  1g.10gb", 3), ("3g.40gb", 1)])])],
        # all spellings land on the same published names: 1g.10gb 3, 3g.40gb 1+1
        nv_part({"1g.10gb": "3", "3g.40gb": "2"}),
        id="vendor-spelling-normalised-static-and-ledger-merged"),
    pytest.param(
        [mig_card("m0", [("4g48gb", 2)])],
        None,
        # the T-Head rewrite is keyed on the manufacturer: NVIDIA keeps 4g48gb
        nv_part({"4g48gb": "2"}),
        id="nvidia-4g48gb-unchanged"),
    pytest.param(
        [mig_card("m0", A100_PROFILES), mig_card("m1", A100_PROFILES)],
        [ledger("nvidia", "a100", [row("m0", 4, allocated_profiles=[("3g.40gb", 2)])])],
        # m0 ready: 3g.40gb 2, others 0; m1 static: 7,3,2,1 -> sums 7,3,4,1; units 2*M
        nv_part({"1g.10gb": "7", "2g.20gb": "3", "3g.40gb": "4", "7g.80gb": "1"}, units="3200k"),
        id="two-cards-one-ready-one-static-summed"),
]


@pytest.mark.parametrize("cards, ledgers, expected", PARTITION_CASES)
def test_partitioned(tmp_path: Path, cards: list[dict], ledgers: list[dict] | None, expected: list[dict]) -> None:
    node = make_node("n1", akeys={"nvidia-a100": {"memory": "80Gi"}}, capacity=MIG_POOLS)
    devices = make_devices("n1", [group("nvidia", "a100", cards)], ledgers)
    assert status_ops_of(tmp_path, [node, devices]) == expected


def test_partitioned_profiles_summed_across_models(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-a100": {"memory": "80Gi"}, "nvidia-h100": {"memory": "80Gi"}},
                     capacity=MIG_POOLS)
    devices = make_devices("n1", [
        group("nvidia", "a100", [mig_card("a0", [("1g.10gb", 7), ("7g.80gb", 1)])]),
        group("nvidia", "h100", [mig_card("h0", [("1g.10gb", 7), ("1g.20gb", 4)])]),
    ])
    assert status_ops_of(tmp_path, [node, devices]) == nv_part(
        {"1g.10gb": "14", "1g.20gb": "4", "7g.80gb": "1"}, units="3200k")


THEAD_POOLS = {"alibabacloud.com/ppu.partitioned": "4"}


@pytest.mark.parametrize("static, ledgers, expected", [
    pytest.param([("4g48gb", 2), ("2g24gb", 4)], None, {"2g.24gb": "4", "4g.48gb": "2"}, id="static-rewritten"),
    pytest.param([("PPU 4G48GB", 2)], None, {"4g.48gb": "2"}, id="vendor-spelling-then-rewritten"),
    pytest.param([("4g.48gb", 2)], None, {"4g.48gb": "2"}, id="already-published-idempotent"),
    pytest.param([("4g48gb", 2), ("1g12gb-me", 1)], None, {"1g12gb-me": "1", "4g.48gb": "2"},
                 id="non-matching-name-unchanged"),
    pytest.param([("4g48gb", 2), ("2g24gb", 4)],
                 [ledger("thead", "ppu", [row("p0", 4, allocated_profiles=[("4g.48gb", 1)],
                                              remaining_profiles=[("2g24gb", 2)])])],
                 # static 4g48gb and ledger 4g.48gb publish to the same name: one key
                 {"2g.24gb": "2", "4g.48gb": "1"}, id="static-and-ledger-spellings-merge"),
])
def test_thead_profile_publishing(tmp_path: Path, static: list, ledgers: list | None, expected: dict) -> None:
    node = make_node("n1", akeys={"thead-ppu": {"memory": "96Gi"}}, capacity=THEAD_POOLS)
    devices = make_devices("n1", [group("thead", "ppu", [mig_card("p0", static)])], ledgers)
    assert status_ops_of(tmp_path, [node, devices]) == nv_part(expected, base="alibabacloud.com/ppu")


def test_hygon_gets_no_partitioned_keys(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"hygon-k100": {"memory": "64Gi"}},
                     capacity={"hygon.com/dcu.partitioned": "4", "hygon.com/dcu.sliced": "4",
                               # owned (.partitioned.units is owned for every base) and stale -> removed
                               "hygon.com/dcu.partitioned.units": "1600k",
                               # not owned: Hygon has no partition kind -> untouched
                               "hygon.com/dcu.partitioned.mig-1g.16gb": "4"})
    devices = make_devices("n1", [group("hygon", "k100", [
        mig_card("h0", [("1g.16gb", 4)]), logical_card("h1", 4, False)], overcommit=False)])
    # h1: L=1, slices 4, no overcommit -> cores 100; mib 65536
    assert status_ops_of(tmp_path, [node, devices]) == [
        rm(cap("hygon.com/dcu.partitioned.units")),
        add(cap("hygon.com/dcu.sliced.cores-percentage"), "100"),
        add(cap("hygon.com/dcu.sliced.memory-mib"), "65536"),
        add(cap("hygon.com/dcu.sliced.memory-percentage"), "100"),
        add(cap("hygon.com/dcu.sliced.units"), "1600k"),
    ]


@pytest.mark.parametrize("bad", ["1g.10gb+me", "1g.10gb_", "x" * 64])
def test_invalid_profile_resource_name_skipped_with_warning(tmp_path: Path, bad: str) -> None:
    node = make_node("n1", akeys={"nvidia-a100": {"memory": "80Gi"}}, capacity=MIG_POOLS)
    devices = make_devices("n1", [group("nvidia", "a100", [mig_card("m0", [("1g.10gb", 7), (bad, 1)])])])
    proc = run_objects(tmp_path, [node, devices])
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert entry_ops(json.loads(proc.stdout), "n1", "status") == nv_part({"1g.10gb": "7"})
    assert bad in proc.stderr, f"expected a warning naming {bad!r}:\n{proc.stderr}"


# inputs.md §3.4, verbatim (the topology blocks and placements are descriptive and kept).
INPUTS_34_DEVICES_YAML = """
apiVersion: worker.gpustack.ai/v1alpha1
kind: Devices
metadata:
  name: gpu-node-07
  labels:
    gpustack.ai/managed: "true"
spec:
  groups:
    - id: a100-80gb-pcie
      manufacturer: nvidia
      name: NVIDIA A100 80GB PCIe
      memory: 81920
      cores: 6912
      driverVersion: "570.124.06"
      runtimeVersion: "12.8"
      computeCapability: "8.0"
      family: Ampere
      acceleratorSlicedDetail:
        logical: {count: 128, coresPercentageOvercommit: true}
        physical:
          count: 7
          profiles:
            - {name: 1g.10gb, count: 7, memoryMib: 9728}
            - {name: 2g.20gb, count: 3, memoryMib: 19968}
            - {name: 3g.40gb, count: 2, memoryMib: 40192}
            - {name: 7g.80gb, count: 1, memoryMib: 80384}
      accelerators:
        - id: GPU-3f6c1a52-8d0e-4b7a-9c21-5e8f0d7a1b44
          index: 0
          physicalIndexes: [0]
          topology: {pciBusId: "0000:17:00.0", pciRootId: "0000:16:01.0", pciClass: "0302",
                     numaAffinity: "0", cpuAffinity: "0-31", pciSwitches: ["0000:16:01.0"]}
          status:
            unhealthy: false
            physicalSliced:
              count: 7
              profiles:
                - {name: 1g.10gb, memoryMib: 9728, computeSlices: 1, memorySlices: 1, count: 7,
                   placements: [{start: 0, length: 1}, {start: 1, length: 1}, {start: 2, length: 1},
                                {start: 3, length: 1}, {start: 4, length: 1}, {start: 5, length: 1},
                                {start: 6, length: 1}]}
                - {name: 2g.20gb, memoryMib: 19968, computeSlices: 2, memorySlices: 2, count: 3,
                   placements: [{start: 0, length: 2}, {start: 2, length: 2}, {start: 4, length: 2}]}
                - {name: 3g.40gb, memoryMib: 40192, computeSlices: 3, memorySlices: 4, count: 2,
                   placements: [{start: 0, length: 4}, {start: 4, length: 4}]}
                - {name: 7g.80gb, memoryMib: 80384, computeSlices: 7, memorySlices: 8, count: 1,
                   placements: [{start: 0, length: 8}]}
        - id: GPU-9b2d7e10-44c3-4f8a-b6e5-0a1c2d3e4f56
          index: 1
          physicalIndexes: [1]
          topology: {pciBusId: "0000:ca:00.0", pciRootId: "0000:c9:01.0", pciClass: "0302",
                     numaAffinity: "1", cpuAffinity: "32-63", pciSwitches: ["0000:c9:01.0"]}
          status:
            unhealthy: false
            logicalSliced: {count: 128, coresPercentageOvercommit: true}
status:
  groups:
    - id: a100-80gb-pcie
      manufacturer: nvidia
      accelerators:
        - id: GPU-3f6c1a52-8d0e-4b7a-9c21-5e8f0d7a1b44
          index: 0
          mode: 4                       # Partitioned
          allocatedProfiles: [{name: 2g.20gb, count: 1}]
          remainingProfiles: [{name: 1g.10gb, count: 5}, {name: 2g.20gb, count: 2},
                              {name: 3g.40gb, count: 1}]
        - id: GPU-9b2d7e10-44c3-4f8a-b6e5-0a1c2d3e4f56
          index: 1
          mode: 3                       # Sliced
          allocated: 400000
          remaining: 1200000
          allocatedSlices: 1
"""

INPUTS_34_NODE_YAML = """
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-07
  labels:
    gpustack.ai/managed: "true"
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: gpu-node-07
    feature.gpustack.ai/acceleratable: "true"
    acceleratable.feature.gpustack.ai/nvidia: "true"
    acceleratable.feature.gpustack.ai/nvidia-a100-80gb-pcie: "true"
    acceleratable.feature.gpustack.ai/nvidia-a100-80gb-pcie.count: "2"
    acceleratable.feature.gpustack.ai/nvidia-a100-80gb-pcie.memory: 80Gi
    acceleratable.feature.gpustack.ai/nvidia-a100-80gb-pcie.product: NVIDIA-A100-80GB-PCIe
status:
  capacity:
    cpu: "64"
    nvidia.com/gpu: "1"
    nvidia.com/gpu.sliced: "128"
    nvidia.com/gpu.partitioned: "7"
"""

# Hand derivation: card 0 partitioned (P=1), card 1 logical (L=1, slices=128, overcommit on),
# vram 80Gi = 81920 MiB. Ledger row of card 0 is ready: 1g.10gb 5, 2g.20gb 1+2 = 3, 3g.40gb 1,
# 7g.80gb 0 (static only). Fit labels: card 1 is the only sliceable and the only whole-card
# capable card; 1 slice used of 128 -> remaining 1200000; its mode is Sliced -> 0 shared cards.
INPUTS_34_EXPECTED = [
    {"node": "gpu-node-07", "subresource": "", "patch": [
        add("/metadata/labels/shared-free-cards.fit.gpustack.ai~1nvidia-a100-80gb-pcie", "0"),
        add("/metadata/labels/sliced-max-free-units.fit.gpustack.ai~1nvidia-a100-80gb-pcie", "1200000"),
    ]},
    {"node": "gpu-node-07", "subresource": "status", "patch": [
        add("/status/capacity/nvidia.com~1gpu.partitioned.mig-1g.10gb", "5"),
        add("/status/capacity/nvidia.com~1gpu.partitioned.mig-2g.20gb", "3"),
        add("/status/capacity/nvidia.com~1gpu.partitioned.mig-3g.40gb", "1"),
        add("/status/capacity/nvidia.com~1gpu.partitioned.mig-7g.80gb", "0"),
        add("/status/capacity/nvidia.com~1gpu.partitioned.units", "1600k"),
        add("/status/capacity/nvidia.com~1gpu.sliced.cores-percentage", "12800"),
        add("/status/capacity/nvidia.com~1gpu.sliced.memory-mib", "81920"),
        add("/status/capacity/nvidia.com~1gpu.sliced.memory-percentage", "100"),
        add("/status/capacity/nvidia.com~1gpu.sliced.units", "1600k"),
    ]},
]


def test_inputs_34_example_full_key_set(tmp_path: Path) -> None:
    (tmp_path / "devices.yaml").write_text(INPUTS_34_DEVICES_YAML)
    (tmp_path / "node.yaml").write_text(INPUTS_34_NODE_YAML)
    proc = run_node_patches([str(tmp_path / "node.yaml"), str(tmp_path / "devices.yaml"), "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == INPUTS_34_EXPECTED


def test_inputs_34_example_partitioned_pool_zero_keeps_only_sliced(tmp_path: Path) -> None:
    (tmp_path / "devices.yaml").write_text(INPUTS_34_DEVICES_YAML)
    (tmp_path / "node.yaml").write_text(INPUTS_34_NODE_YAML.replace('nvidia.com/gpu.partitioned: "7"',
                                                                    'nvidia.com/gpu.partitioned: "0"'))
    proc = run_node_patches([str(tmp_path), "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    assert entry_ops(json.loads(proc.stdout), "gpu-node-07", "status") == nv_sliced_ops("1600k", "12800", "100", "81920")


# --------------------------------------------------------------------------------------------------
# 4. Presence gating (§4.3, §4.6) and comparison by value (§3.3, §4.7)
# --------------------------------------------------------------------------------------------------

def _gating_node(capacity: dict, allocatable: dict | None = None) -> dict:
    return make_node("n1", akeys={"nvidia-x": {"memory": "32Gi"}}, capacity=capacity, allocatable=allocatable)


def _x_logical_devices(n: int = 2) -> dict:
    return make_devices("n1", [group("nvidia", "x", [logical_card(f"c{i}") for i in range(n)])])


OWNED_X2 = {"nvidia.com/gpu.sliced.cores-percentage": "25600", "nvidia.com/gpu.sliced.memory-mib": "65536",
            "nvidia.com/gpu.sliced.memory-percentage": "200", "nvidia.com/gpu.sliced.units": "3200k"}

GATING_CASES = [
    pytest.param({}, None, [], id="pool-absent-no-keys"),
    pytest.param({"nvidia.com/gpu.sliced": "0"}, None, [], id="pool-zero-no-keys"),
    pytest.param(dict(OWNED_X2), None, [rm(cap(k)) for k in NV_SLICED4], id="pool-absent-existing-removed"),
    pytest.param({"nvidia.com/gpu.sliced": "0", **OWNED_X2}, None, [rm(cap(k)) for k in NV_SLICED4],
                 id="pool-zero-existing-removed"),
    pytest.param({"nvidia.com/gpu.sliced": "0", **OWNED_X2}, {"nvidia.com/gpu.sliced": "256"},
                 [rm(cap(k)) for k in NV_SLICED4], id="pool-in-allocatable-only-existing-removed"),
    pytest.param({}, {"nvidia.com/gpu.sliced": "256"}, [], id="pool-in-allocatable-only-no-keys"),
    pytest.param({"nvidia.com/gpu.sliced": "256", **OWNED_X2}, {"nvidia.com/gpu.sliced": "0"}, [],
                 id="allocatable-zero-capacity-positive-keys-kept"),
    pytest.param({"nvidia.com/gpu.sliced": 256}, None, nv_sliced_ops("3200k", "25600", "200", "65536"),
                 id="pool-as-json-integer"),
    pytest.param({"nvidia.com/gpu.sliced": "1"}, None, nv_sliced_ops("3200k", "25600", "200", "65536"),
                 id="pool-one"),
    pytest.param({"nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.partitioned": "7"}, None,
                 nv_sliced_ops("3200k", "25600", "200", "65536"),
                 id="partitioned-pool-open-but-no-partitioned-cards"),
    pytest.param({"nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.partitioned.units": "1600k"}, None,
                 [rm(cap("nvidia.com/gpu.partitioned.units")),
                  *nv_sliced_ops("3200k", "25600", "200", "65536")],
                 id="stale-partitioned-units-removed-when-no-partitioned-cards"),
    # comparison by value
    pytest.param({"nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.sliced.units": "3200000",
                  "nvidia.com/gpu.sliced.cores-percentage": "25.6k",
                  "nvidia.com/gpu.sliced.memory-percentage": 200,
                  "nvidia.com/gpu.sliced.memory-mib": "65536"}, None, [], id="equal-by-value-no-op"),
    pytest.param({"nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.sliced.units": "3.2M",
                  "nvidia.com/gpu.sliced.cores-percentage": "2.56e4",
                  "nvidia.com/gpu.sliced.memory-percentage": "0.2k",
                  "nvidia.com/gpu.sliced.memory-mib": "65536000m"}, None, [], id="equal-by-value-other-notations"),
    pytest.param({"nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.sliced.units": "1600k",
                  "nvidia.com/gpu.sliced.cores-percentage": "25600",
                  "nvidia.com/gpu.sliced.memory-percentage": "200",
                  "nvidia.com/gpu.sliced.memory-mib": "64Ki"}, None,
                 # 64Ki = 65536: equal; units differs -> replace with the canonical string
                 [rep(cap("nvidia.com/gpu.sliced.units"), "3200k")], id="replace-when-value-differs"),
    pytest.param({"nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.sliced.units": "3200k",
                  "nvidia.com/gpu.sliced.cores-percentage": "0",
                  "nvidia.com/gpu.sliced.memory-percentage": "200"}, None,
                 [rep(cap("nvidia.com/gpu.sliced.cores-percentage"), "25600"),
                  add(cap("nvidia.com/gpu.sliced.memory-mib"), "65536")],
                 id="replace-and-add-mixed"),
]


@pytest.mark.parametrize("capacity, allocatable, expected", GATING_CASES)
def test_presence_gating_and_value_comparison(tmp_path: Path, capacity: dict, allocatable: dict | None,
                                              expected: list[dict]) -> None:
    assert status_ops_of(tmp_path, [_gating_node(capacity, allocatable), _x_logical_devices()]) == expected


def test_6400k_equals_6400000(tmp_path: Path) -> None:
    # 4 cards: units 4 * M = 6,400,000 whose canonical string is 6400k (§3.3 table)
    capacity = {"nvidia.com/gpu.sliced": "512", "nvidia.com/gpu.sliced.units": "6400000"}
    ops = status_ops_of(tmp_path, [_gating_node(capacity), _x_logical_devices(4)])
    assert ops == [add(cap("nvidia.com/gpu.sliced.cores-percentage"), "51200"),
                   add(cap("nvidia.com/gpu.sliced.memory-mib"), "131072"),
                   add(cap("nvidia.com/gpu.sliced.memory-percentage"), "400")]


def test_partitioned_gate_on_own_pool(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-a100": {"memory": "80Gi"}},
                     capacity={"nvidia.com/gpu.sliced": "128", "nvidia.com/gpu.partitioned": "0",
                               "nvidia.com/gpu.partitioned.units": "1600k",
                               "nvidia.com/gpu.partitioned.mig-1g.10gb": "7",
                               "nvidia.com/gpu.partitioned.mig-7g.80gb": "0"},
                     allocatable={"nvidia.com/gpu.partitioned": "7"})
    devices = make_devices("n1", [group("nvidia", "a100", [mig_card("m0", A100_PROFILES), logical_card("c1")])])
    assert status_ops_of(tmp_path, [node, devices]) == [
        rm(cap("nvidia.com/gpu.partitioned.mig-1g.10gb")),
        rm(cap("nvidia.com/gpu.partitioned.mig-7g.80gb")),
        rm(cap("nvidia.com/gpu.partitioned.units")),
        *nv_sliced_ops("1600k", "12800", "100", "81920"),
    ]


def test_zero_valued_profile_key_equal_is_no_op(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-a100": {"memory": "80Gi"}},
                     capacity={**MIG_POOLS, "nvidia.com/gpu.partitioned.units": "1600k",
                               "nvidia.com/gpu.partitioned.mig-1g.10gb": "0",
                               "nvidia.com/gpu.partitioned.mig-7g.80gb": "1"})
    devices = make_devices("n1", [group("nvidia", "a100", [mig_card("m0", [("1g.10gb", 7), ("7g.80gb", 1)])])],
                           [ledger("nvidia", "a100", [row("m0", 4, allocated_profiles=[("7g.80gb", 1)])])])
    # ready row: 7g.80gb 1, 1g.10gb 0 (static name, nothing in the ledger) -> both equal, no entry
    assert status_ops_of(tmp_path, [node, devices]) == []


def test_stale_profile_key_removed_when_profile_gone(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-a100": {"memory": "80Gi"}},
                     capacity={**MIG_POOLS, "nvidia.com/gpu.partitioned.units": "1600k",
                               "nvidia.com/gpu.partitioned.mig-1g.10gb": "7",
                               "nvidia.com/gpu.partitioned.mig-1g.5gb": "14"})
    devices = make_devices("n1", [group("nvidia", "a100", [mig_card("m0", [("1g.10gb", 7)])])])
    assert status_ops_of(tmp_path, [node, devices]) == [rm(cap("nvidia.com/gpu.partitioned.mig-1g.5gb"))]


# --------------------------------------------------------------------------------------------------
# 5. Ownership (§4.2)
# --------------------------------------------------------------------------------------------------

FOREIGN_CAPACITY = {
    "cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti",
    "nvidia.com/gpu": "2", "nvidia.com/gpu.sliced": "256", "nvidia.com/gpu.partitioned": "7",
    "nvidia.com/gpu.shared": "20",
    "example.com/foo.sliced.units": "3", "example.com/foo.partitioned.mig-1g.10gb": "1",
    "nvidia.com/gpu.sliced.mig-1g.10gb": "7",            # superseded, never touched
    "nvidia.com/gpu.partitioned.mps-1g.10gb": "1",       # not the manufacturer's kind
    "nvidia.com/gpu.partitioned.mig-": "1",              # empty profile
    "nvidia.com/gpu.sliced.units.extra": "1",
    "hygon.com/dcu.partitioned.mig-1g.16gb": "4",        # Hygon has no kind
    "huawei.com/npu.sliced": "63", "huawei.com/npu.shared": "10",
}


@pytest.mark.parametrize("managed, with_devices", [
    pytest.param("false", True, id="unmanaged"),
    pytest.param("true", False, id="managed-without-devices"),
    pytest.param("true", True, id="managed-with-devices-no-akeys"),
])
def test_foreign_keys_never_touched(tmp_path: Path, managed: str, with_devices: bool) -> None:
    node = make_node("n1", managed=managed, capacity=FOREIGN_CAPACITY)
    objs = [node] + ([make_devices("n1", [group("nvidia", "x", [logical_card("c0")])])] if with_devices else [])
    assert patches(tmp_path, objs) == []


def test_only_owned_keys_change_next_to_foreign_ones(tmp_path: Path) -> None:
    node = make_node("n1", managed="false",
                     capacity={**FOREIGN_CAPACITY, "nvidia.com/gpu.sliced.units": "1600k",
                               "nvidia.com/gpu.partitioned.mig-1g.10gb": "7",
                               "huawei.com/npu.sliced.memory-mib": "65536",
                               "cambricon.com/mlu.partitioned.units": "0"})
    devices = make_devices("n1", [group("nvidia", "x", [logical_card("c0")])])
    entries = patches(tmp_path, [node, devices])
    assert entries == [{"node": "n1", "subresource": "status", "patch": [
        rm(cap("cambricon.com/mlu.partitioned.units")),
        rm(cap("huawei.com/npu.sliced.memory-mib")),
        rm(cap("nvidia.com/gpu.partitioned.mig-1g.10gb")),
        rm(cap("nvidia.com/gpu.sliced.units")),
    ]}]
    applied = jsonpatch.apply_patch(node, entries[0]["patch"])
    assert applied["status"]["capacity"] == FOREIGN_CAPACITY


def test_managed_node_desired_keys_next_to_foreign_ones(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-x": {"memory": "32Gi"}}, capacity=FOREIGN_CAPACITY)
    devices = make_devices("n1", [group("nvidia", "x", [logical_card("c0"), logical_card("c1")])])
    assert status_ops_of(tmp_path, [node, devices]) == nv_sliced_ops("3200k", "25600", "200", "65536")


def test_foreign_labels_never_touched(tmp_path: Path) -> None:
    labels = {"foo.fit.gpustack.ai/nvidia-x": "3", "sliced-max-free-units.fit.gpustack.ai": "1",
              "example.com/sliced-max-free-units.fit.gpustack.ai": "1",
              "feature.gpustack.ai/rdma.capable": "true", "topology.gpustack.ai/profile": "fnv64-87bf574bea2a4f23",
              "sliced-max-free-units.fit.gpustack.ai/nvidia-x": "5"}
    node = make_node("n1", managed="false", labels=labels)
    assert patches(tmp_path, [node]) == [{"node": "n1", "subresource": "", "patch": [
        rm(lab("sliced-max-free-units.fit.gpustack.ai/nvidia-x"))]}]


# --------------------------------------------------------------------------------------------------
# 6. Fit labels (§5)
# --------------------------------------------------------------------------------------------------

def fit_ops(akey: str, shared: str | None, sliced: str | None, op=add) -> list[dict]:
    ops = []
    if shared is not None:
        ops.append(op(lab(SHARED + akey), shared))
    if sliced is not None:
        ops.append(op(lab(SLICED + akey), sliced))
    return ops


FIT_CASES = [
    pytest.param(
        [logical_card("c0"), logical_card("c1")],
        [row("c0", 3, allocated=400000, remaining=1200000, allocated_slices=1),
         row("c1", 0, allocated=0, remaining=1600000, allocated_slices=0)],
        # sliced: max(1200000, 1600000); shared: c1 (None, 1.6M) only
        fit_ops("nvidia-l40s", "1", "1600000"), id="two-logical-cards"),
    pytest.param(
        [logical_card("c0", 4)],
        [row("c0", 3, allocated=800000, remaining=800000, allocated_slices=4)],
        # allocatedSlices >= count: 0 however much memory is left; mode Sliced: 0 shared
        fit_ops("nvidia-l40s", "0", "0"), id="all-slices-taken-reads-zero"),
    pytest.param(
        [logical_card("c0", 4), logical_card("c1", 4)],
        [row("c0", 3, remaining=800000, allocated_slices=5),
         row("c1", 3, remaining=400000, allocated_slices=3)],
        # c0 over-full -> 0; c1 has a free slot -> 400000
        fit_ops("nvidia-l40s", "0", "400000"), id="over-full-card-zero-other-card-remaining"),
    pytest.param(
        [logical_card("c0"), logical_card("c1")],
        [row("c0", 3, remaining=1200000), row("c1", 3, remaining=0, allocated_slices=0)],
        # allocatedSlices absent means 0
        fit_ops("nvidia-l40s", "0", "1200000"), id="allocated-slices-absent-is-zero"),
    pytest.param(
        [logical_card(f"c{i}") for i in range(6)],
        [row("c0", "None", remaining=1600000), row("c1", "shared", remaining=160000),
         row("c2", 2, remaining=159999), row("c3", "Exclusive", remaining=0),
         row("c4", "Sliced", remaining=800000, allocated_slices=2), row("c5", "SHARED", remaining=1440000)],
        # shared: c0 (None, 1.6M), c1 (Shared, exactly 160000), c5 (Shared) -> 3; c2 below threshold
        fit_ops("nvidia-l40s", "3", "1600000"), id="mode-names-and-share-threshold"),
    pytest.param(
        [logical_card("c0"), logical_card("c1")],
        [row("c0", 1, remaining=0), row("c1", 5, remaining=1600000)],
        # Exclusive/Visibility never grant a share; sliced ignores mode: max(0, 1.6M)
        fit_ops("nvidia-l40s", "0", "1600000"), id="mode-ignored-for-sliced-value"),
    pytest.param(
        [whole_card("c0"), plain_card("c1")],
        [row("c0", 0, remaining=1600000), row("c1", 2, remaining=320000)],
        # no logically sliceable card: no sliced label; both whole-card capable and free
        fit_ops("nvidia-l40s", "2", None), id="whole-card-only-no-sliced-label"),
    pytest.param(
        [mig_card("m0", A100_PROFILES), mig_card("m1", A100_PROFILES)],
        [row("m0", 4, remaining=1600000, remaining_profiles=[("1g.10gb", 7)]),
         row("m1", 0, remaining=1600000)],
        [], id="partitioned-only-group-no-labels"),
    pytest.param(
        [mig_card("m0", A100_PROFILES), logical_card("c1")],
        [row("m0", 0, remaining=1600000), row("c1", 0, remaining=1000000)],
        # the partitioned card is neither sliceable nor whole-card capable, whatever its row says
        fit_ops("nvidia-l40s", "1", "1000000"), id="partitioned-card-excluded-from-both"),
    pytest.param(
        [logical_card("c0"), logical_card("c1")],
        [row("c0", 0, remaining=500000)],
        # c1 has no ledger row: not counted
        fit_ops("nvidia-l40s", "1", "500000"), id="card-without-ledger-row-not-counted"),
    pytest.param(
        [logical_card("c0")],
        [],
        # ledger group with no rows: the populations are ledger rows, so both are empty -> no labels
        [], id="ledger-group-without-rows-no-labels"),
    pytest.param(
        [logical_card("c0")],
        [row("c0", 3, remaining=100000, allocated_slices=1), row("ghost", 0, remaining=1600000)],
        # the ghost row has no spec card: ignored
        fit_ops("nvidia-l40s", "0", "100000"), id="ledger-row-without-spec-card-ignored"),
    pytest.param(
        [logical_card("c0", unhealthy=True)],
        [row("c0", 0, remaining=1600000)],
        fit_ops("nvidia-l40s", "1", "1600000"), id="health-ignored"),
    pytest.param(
        [logical_card("c0"), logical_card("c1")],
        [row("c0", 1, remaining=0, allocated=1600000), row("c1", 3, remaining=0, allocated_slices=128)],
        fit_ops("nvidia-l40s", "0", "0"), id="full-population-reads-zero"),
]


@pytest.mark.parametrize("cards, rows, expected", FIT_CASES)
def test_fit_labels(tmp_path: Path, cards: list[dict], rows: list[dict], expected: list[dict]) -> None:
    node = make_node("n1", akeys={"nvidia-l40s": {"memory": "48Gi"}})
    devices = make_devices("n1", [group("nvidia", "l40s", cards)], [ledger("nvidia", "l40s", rows)])
    assert label_ops_of(tmp_path, [node, devices]) == expected


def test_fit_labels_need_a_ledger_group(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-l40s": {}})
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])])
    assert label_ops_of(tmp_path, [node, devices]) == []


def test_fit_labels_ledger_group_without_spec_group(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-l40s": {}})
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])],
                           [ledger("nvidia", "h100", [row("c0", 0, remaining=1600000)])])
    assert label_ops_of(tmp_path, [node, devices]) == []


def test_fit_labels_several_groups_sorted_by_path(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-t4": {}, "ascend-910b": {}})
    devices = make_devices("n1", [group("nvidia", "t4", [logical_card("t0")]),
                                  group("ascend", "910b", [logical_card("a0", 63)])],
                           [ledger("nvidia", "t4", [row("t0", 0, remaining=1600000)]),
                            ledger("ascend", "910b", [row("a0", 3, remaining=320000, allocated_slices=50)])])
    assert label_ops_of(tmp_path, [node, devices]) == [
        add(lab(SHARED + "ascend-910b"), "0"), add(lab(SHARED + "nvidia-t4"), "1"),
        add(lab(SLICED + "ascend-910b"), "320000"), add(lab(SLICED + "nvidia-t4"), "1600000")]


def test_fit_labels_stale_removed_changed_replaced_equal_kept(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-l40s": {}}, labels={
        SLICED + "nvidia-l40s": "800000",      # differs -> replace
        SHARED + "nvidia-l40s": "1",           # equal -> nothing
        SLICED + "nvidia-old": "5",            # stale -> remove
        SHARED + "nvidia-old": "0",            # stale -> remove
    })
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])],
                           [ledger("nvidia", "l40s", [row("c0", 0, remaining=1600000)])])
    assert label_ops_of(tmp_path, [node, devices]) == [
        rm(lab(SHARED + "nvidia-old")),
        rep(lab(SLICED + "nvidia-l40s"), "1600000"),
        rm(lab(SLICED + "nvidia-old")),
    ]


@pytest.mark.parametrize("existing", ["01", "1600000.0", " 1"])
def test_fit_label_values_compared_as_strings(tmp_path: Path, existing: str) -> None:
    node = make_node("n1", labels={SHARED + "nvidia-l40s": existing, SLICED + "nvidia-l40s": "1600000"})
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])],
                           [ledger("nvidia", "l40s", [row("c0", 0, remaining=1600000)])])
    assert label_ops_of(tmp_path, [node, devices]) == [rep(lab(SHARED + "nvidia-l40s"), "1")]


def test_fit_label_disappears_when_population_gone(tmp_path: Path) -> None:
    # the card was switched to MIG: both labels go
    node = make_node("n1", akeys={"nvidia-a100": {}}, labels={SLICED + "nvidia-a100": "0",
                                                             SHARED + "nvidia-a100": "0"})
    devices = make_devices("n1", [group("nvidia", "a100", [mig_card("m0", A100_PROFILES)])],
                           [ledger("nvidia", "a100", [row("m0", 4, remaining_profiles=[("1g.10gb", 7)])])])
    assert label_ops_of(tmp_path, [node, devices]) == [rm(lab(SHARED + "nvidia-a100")), rm(lab(SLICED + "nvidia-a100"))]


@pytest.mark.parametrize("managed, with_devices, extra", [
    pytest.param("false", True, [], id="unmanaged"),
    pytest.param("true", False, [], id="no-devices"),
    pytest.param(None, True, ["--set", "node-management-manual=true"], id="manual-mode-unlabelled"),
])
def test_fit_labels_removed_when_not_desired(tmp_path: Path, managed: str | None, with_devices: bool,
                                             extra: list[str]) -> None:
    node = make_node("n1", managed=managed, akeys={"nvidia-l40s": {}},
                     labels={SLICED + "nvidia-l40s": "1600000", SHARED + "nvidia-l40s": "1"})
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])],
                           [ledger("nvidia", "l40s", [row("c0", 0, remaining=1600000)])])
    objs = [node] + ([devices] if with_devices else [other_devices()])
    assert label_ops_of(tmp_path, objs, "n1", *extra) == [rm(lab(SHARED + "nvidia-l40s")),
                                                         rm(lab(SLICED + "nvidia-l40s"))]


def test_node_without_labels_gets_one_add_of_the_whole_map(tmp_path: Path) -> None:
    # No labels at all: default mode -> managed (§1.2, §1.5). Fit labels do not need the aKey label.
    node = make_node("n1", no_labels=True)
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0"), logical_card("c1")])],
                           [ledger("nvidia", "l40s", [row("c0", 0, remaining=1600000),
                                                      row("c1", 3, remaining=700000, allocated_slices=3)])])
    assert patches(tmp_path, [node, devices]) == [{"node": "n1", "subresource": "", "patch": [
        {"op": "add", "path": "/metadata/labels",
         "value": {SHARED + "nvidia-l40s": "1", SLICED + "nvidia-l40s": "1600000"}}]}]


def test_node_without_labels_in_manual_mode_no_entry(tmp_path: Path) -> None:
    node = make_node("n1", no_labels=True)
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])],
                           [ledger("nvidia", "l40s", [row("c0", 0, remaining=1600000)])])
    assert patches(tmp_path, [node, devices], "--set", "node-management-manual=true") == []


def test_node_with_empty_labels_map_gets_per_key_adds(tmp_path: Path) -> None:
    node = make_node("n1")
    node["metadata"]["labels"] = {}
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])],
                           [ledger("nvidia", "l40s", [row("c0", 0, remaining=1600000)])])
    assert label_ops_of(tmp_path, [node, devices]) == fit_ops("nvidia-l40s", "1", "1600000")


def test_group_id_with_space_gets_no_labels_but_others_do(tmp_path: Path) -> None:
    node = make_node("n1", akeys={"nvidia-t4": {}})
    devices = make_devices("n1", [group("nvidia", "a100 80gb", [logical_card("a0")]),
                                  group("nvidia", "t4", [logical_card("t0")])],
                           [ledger("nvidia", "a100 80gb", [row("a0", 0, remaining=1600000)]),
                            ledger("nvidia", "t4", [row("t0", 0, remaining=1600000)])])
    proc = run_objects(tmp_path, [node, devices])
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert entry_ops(json.loads(proc.stdout), "n1", "") == fit_ops("nvidia-t4", "1", "1600000")
    assert "a100 80gb" in proc.stderr, f"expected a warning naming the group:\n{proc.stderr}"


def test_group_id_too_long_for_a_label_name_gets_no_labels(tmp_path: Path) -> None:
    gid = "g" * 57  # aKey "nvidia-" + 57 = 64 characters: the label name part exceeds 63
    node = make_node("n1")
    devices = make_devices("n1", [group("nvidia", gid, [logical_card("c0")])],
                           [ledger("nvidia", gid, [row("c0", 0, remaining=1600000)])])
    proc = run_objects(tmp_path, [node, devices])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    assert gid in proc.stderr


def test_fit_label_with_tilde_escaped_on_removal(tmp_path: Path) -> None:
    node = make_node("n1", managed="false", labels={SLICED + "a~b": "1"})
    assert patches(tmp_path, [node]) == [{"node": "n1", "subresource": "", "patch": [
        rm("/metadata/labels/sliced-max-free-units.fit.gpustack.ai~1a~0b")]}]


# --------------------------------------------------------------------------------------------------
# 7. Fit-label populations are ledger rows joined to their spec card (§5, issue 12.4), in-process
# --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def capacity_evaluator() -> Any:
    from gpustack_render.errors import Diagnostics
    from gpustack_render.evaluate.capacity import CapacityEvaluator
    from gpustack_render.rules import load_rules
    return CapacityEvaluator(load_rules(), Diagnostics())


def _fit_labels_of(evaluator: Any, cards: list[dict], rows: list[dict]) -> dict[str, str]:
    import msgspec

    from gpustack_render.snapshot import inputs
    node = msgspec.convert(make_node("n1", akeys={"nvidia-l40s": {}}), inputs.Node)
    devices = msgspec.convert(
        make_devices("n1", [group("nvidia", "l40s", cards)], [ledger("nvidia", "l40s", rows)]), inputs.Devices)
    return evaluator.fit_labels(node, devices)


L40S_SLICED, L40S_SHARED = SLICED + "nvidia-l40s", SHARED + "nvidia-l40s"

LEDGER_ROW_CASES = [
    pytest.param(
        [logical_card("c0"), logical_card("c1"), whole_card("c2")],
        [row("c0", 3, remaining=500000, allocated_slices=1)],
        # c1 (sliceable) and c2 (whole) have no row: only c0 counts. c0 is Sliced -> 0 shared cards.
        {L40S_SLICED: "500000", L40S_SHARED: "0"}, id="cards-without-rows-among-others-not-counted"),
    pytest.param(
        [logical_card("c0"), logical_card("c1")],
        [row("c1", 0, remaining=1600000)],
        # c0 without a row would otherwise be a fully free slice source: it is not one
        {L40S_SLICED: "1600000", L40S_SHARED: "1"}, id="row-for-one-of-two-sliceable-cards"),
    pytest.param(
        [logical_card("c0"), whole_card("c1")],
        [row("c1", 0, remaining=1600000)],
        # the only sliceable card has no row: no sliced label at all (not "0"); c1 gives the shared one
        {L40S_SHARED: "1"}, id="only-sliceable-card-without-row-no-sliced-label"),
    pytest.param(
        [mig_card("m0", A100_PROFILES), whole_card("c1")],
        [row("m0", 4, remaining_profiles=[("1g.10gb", 7)])],
        # the only whole-card capable card has no row (m0 is partitioned): no shared label
        {}, id="only-shared-card-without-row-no-shared-label"),
    pytest.param(
        [mig_card("m0", A100_PROFILES), logical_card("c1")],
        [row("m0", 4, remaining_profiles=[("1g.10gb", 7)])],
        # c1 is in both populations but has no row: neither label
        {}, id="only-non-partitioned-card-without-row-no-labels"),
    pytest.param(
        [logical_card("c0"), whole_card("c1")],
        [],
        {}, id="no-rows-at-all-no-labels"),
    pytest.param(
        [logical_card("c0")],
        [row("ghost", 0, remaining=1600000)],
        # a row without a spec card is not a member either
        {}, id="only-row-has-no-spec-card-no-labels"),
]


@pytest.mark.parametrize("cards, rows, expected", LEDGER_ROW_CASES)
def test_fit_label_populations_are_ledger_rows(capacity_evaluator: Any, cards: list[dict], rows: list[dict],
                                               expected: dict[str, str]) -> None:
    assert _fit_labels_of(capacity_evaluator, cards, rows) == expected


def test_fit_label_of_card_that_lost_its_row_is_removed(tmp_path: Path) -> None:
    # Before: a label "0" from when the sliceable card had a row. Now it has none: the label goes.
    node = make_node("n1", akeys={"nvidia-l40s": {}}, labels={L40S_SLICED: "0", L40S_SHARED: "1"})
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0"), whole_card("c1")])],
                           [ledger("nvidia", "l40s", [row("c1", 0, remaining=1600000)])])
    assert label_ops_of(tmp_path, [node, devices]) == [rm(lab(L40S_SLICED))]


def _rules_with_populations(tmp_path: Path, sliced: str, shared: str) -> Path:
    import shutil
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    text = (rules / "capacity.yaml").read_text()
    old = "    slicedMaxFreeUnits: logical\n    sharedFreeCards: wholeCard\n"
    assert text.count(old) == 1, "rules/capacity.yaml no longer has the populations block this test edits"
    (rules / "capacity.yaml").write_text(text.replace(
        old, f"    slicedMaxFreeUnits: {sliced}\n    sharedFreeCards: {shared}\n"))
    return rules


def test_fit_label_populations_are_rule_data(tmp_path: Path) -> None:
    """Changing ``fitLabels.populations`` in the rules changes which cards count, with no code change."""
    rules = _rules_with_populations(tmp_path, "logical", "logical")
    node = make_node("n1", akeys={"nvidia-l40s": {}})
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0"), whole_card("c1")])],
                           [ledger("nvidia", "l40s", [row("c0", 3, remaining=800000, allocated_slices=1),
                                                      row("c1", 0, remaining=1600000)])])
    snap = write_snapshot(tmp_path, [node, devices])
    # built-in: c1 (whole card, None, 1.6M free) is a shared card -> 1; with shared = logical only c0
    # (Sliced) is a candidate -> 0
    for rules_args, shared in (([], "1"), (["--rules", str(rules)], "0")):
        result = invoke("node-patches", str(snap), *rules_args, "--format", "json")
        assert result.exit_code == 0, result.output
        assert entry_ops(json.loads(result.stdout), "n1", "") == fit_ops("nvidia-l40s", shared, "800000")


def test_fit_label_population_unknown_value_is_a_rule_error(tmp_path: Path) -> None:
    rules = _rules_with_populations(tmp_path, "logical", "everyCard")
    result = invoke("lint", "--rules", str(rules))
    assert result.exit_code == 1, result.output
    line = next(ln for ln in result.stdout.splitlines() if "populations" in ln)
    assert re.match(r".*capacity\.yaml:\d+:\d+: error: fitLabels\.populations\.sharedFreeCards", line), line


def _rules_with_fit_formats(tmp_path: Path, sliced: str, shared: str) -> Path:
    import shutil
    rules = tmp_path / "rules-fit"
    shutil.copytree(REPO / "rules", rules)
    text = (rules / "capacity.yaml").read_text()
    old = ('  slicedMaxFreeUnits: "sliced-max-free-units.fit.gpustack.ai/{aKey}"\n'
           '  sharedFreeCards: "shared-free-cards.fit.gpustack.ai/{aKey}"\n')
    assert text.count(old) == 1, "rules/capacity.yaml no longer has the fitLabels formats this test edits"
    (rules / "capacity.yaml").write_text(text.replace(
        old, f'  slicedMaxFreeUnits: "{sliced}"\n  sharedFreeCards: "{shared}"\n'))
    return rules


def test_fit_label_ownership_follows_the_rule_formats(tmp_path: Path) -> None:
    """Renamed fit labels in the rules: the new keys are written and owned (stale ones removed);
    the built-in keys are then foreign and left alone."""
    rules = _rules_with_fit_formats(tmp_path, "fit.example.com/{aKey}.sliced", "fit.example.com/{aKey}.shared")
    node = make_node("n1", akeys={"nvidia-l40s": {}}, labels={
        "fit.example.com/nvidia-old.sliced": "5",   # owned under the new formats, stale -> removed
        SLICED + "nvidia-l40s": "7",                # the built-in key: foreign now -> kept
        "fit.example.com/.sliced": "1",             # empty aKey: not owned
    })
    devices = make_devices("n1", [group("nvidia", "l40s", [logical_card("c0")])],
                           [ledger("nvidia", "l40s", [row("c0", 0, remaining=1600000)])])
    result = invoke("node-patches", write_snapshot(tmp_path, [node, devices]), "--rules", rules, "--format", "json")
    assert result.exit_code == 0, result.output
    assert entry_ops(json.loads(result.stdout), "n1", "") == [
        add(lab("fit.example.com/nvidia-l40s.shared"), "1"),
        add(lab("fit.example.com/nvidia-l40s.sliced"), "1600000"),
        rm(lab("fit.example.com/nvidia-old.sliced")),
    ]


@pytest.mark.parametrize("sliced, shared, field, message", [
    pytest.param("{aKey}", "shared-free-cards.fit.gpustack.ai/{aKey}", "slicedMaxFreeUnits",
                 "needs text besides {aKey}", id="placeholder-only"),
    pytest.param("sliced-max-free-units.fit.gpustack.ai/{aKey}", "x/{aKey}-{aKey}", "sharedFreeCards",
                 "must contain the placeholder {aKey} exactly once", id="placeholder-twice"),
    pytest.param("fit.example.com/{aKey}", "fit.example.com/{aKey}", "sharedFreeCards",
                 "already used by slicedMaxFreeUnits", id="same-format-twice"),
])
def test_fit_label_formats_that_would_own_foreign_labels_are_rule_errors(
        tmp_path: Path, sliced: str, shared: str, field: str, message: str) -> None:
    rules = _rules_with_fit_formats(tmp_path, sliced, shared)
    result = invoke("lint", "--rules", str(rules))
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.stdout.splitlines() if ": error: " in ln]
    assert len(lines) == 1, result.stdout
    assert re.match(rf".*capacity\.yaml:\d+:\d+: error: fitLabels\.{field}: .*{re.escape(message)}", lines[0]), lines[0]
