"""Fast checks of the benchmark snapshot generator (tests/bench/gen_snapshot.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from bench_generator import load_generator

N = 20
NS = 5

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
ACC_PREFIX = "acceleratable.feature.gpustack.ai/"
KNOWN_MANUFACTURERS = {"amd", "ascend", "cambricon", "hygon", "iluvatar", "metax", "mthreads",
                       "nvidia", "thead"}


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return load_generator()


def run_generator(out: Path, *args: str) -> bytes:
    """The generator's command line (``main(argv)``), in process."""
    assert load_generator().main([*args, "-o", str(out)]) in (0, None)
    return out.read_bytes()


def split(doc: dict):
    nodes = [o for o in doc["items"] if o["kind"] == "Node"]
    devices = [o for o in doc["items"] if o["kind"] == "Devices"]
    namespaces = [o for o in doc["items"] if o["kind"] == "Namespace"]
    return nodes, devices, namespaces


def akeys(node: dict) -> list[str]:
    """aKeys as stage3-node.md §2 defines them."""
    out = []
    for key, value in node["metadata"]["labels"].items():
        if key.startswith(ACC_PREFIX) and value == "true":
            rest = key[len(ACC_PREFIX):]
            if "-" in rest and rest.split("-", 1)[0] in KNOWN_MANUFACTURERS:
                out.append(rest)
    return sorted(out)


# ------------------------------------------------------------------------------------------
def test_cli_is_byte_deterministic_and_seed_sensitive(tmp_path):
    a = run_generator(tmp_path / "a.json", "--nodes", str(N), "--namespaces", str(NS))
    b = run_generator(tmp_path / "b.json", "--nodes", str(N), "--namespaces", str(NS), "--seed", "0")
    c = run_generator(tmp_path / "c.json", "--nodes", str(N), "--namespaces", str(NS), "--seed", "1")
    assert a == b
    assert a != c
    doc = json.loads(a)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"


def test_function_is_deterministic(gen):
    assert gen.dumps(gen.generate(N, NS, 7)) == gen.dumps(gen.generate(N, NS, 7))
    assert gen.dumps(gen.generate(N, NS, 7)) != gen.dumps(gen.generate(N, NS, 8))


def test_smaller_snapshot_is_a_prefix_of_a_larger_one(gen):
    small, _, _ = split(gen.generate(N, NS, 3))
    large, _, _ = split(gen.generate(3 * N, NS, 3))
    assert large[:N] == small


def test_counts(gen):
    doc = gen.generate(N, NS, 0)
    nodes, devices, namespaces = split(doc)
    assert len(doc["items"]) == len(nodes) + len(devices) + len(namespaces)
    assert len(nodes) == N
    gpu_nodes = [n for n in nodes if n["metadata"]["labels"]["feature.gpustack.ai/acceleratable"]
                 == "true"]
    assert len(devices) == len(gpu_nodes) > 0
    assert len(namespaces) == NS + 3
    names = [ns["metadata"]["name"] for ns in namespaces]
    assert {"default", "kube-system", "gpustack-system"} <= set(names)
    assert [n for n in names if n.startswith("team-")] == [f"team-{k:03d}" for k in range(NS)]
    assert len({n["metadata"]["name"] for n in nodes}) == N


def test_devices_match_nodes(gen):
    nodes, devices, _ = split(gen.generate(N, NS, 0))
    by_name = {n["metadata"]["name"]: n for n in nodes}
    for dev in devices:
        assert dev["apiVersion"] == "worker.gpustack.ai/v1alpha1"
        assert "namespace" not in dev["metadata"]
        node = by_name[dev["metadata"]["name"]]
        assert node["metadata"]["labels"]["feature.gpustack.ai/acceleratable"] == "true"


def test_label_annotation_and_capacity_values_are_strings(gen):
    doc = gen.generate(N, NS, 0)
    for obj in doc["items"]:
        meta = obj["metadata"]
        for field in ("labels", "annotations"):
            for key, value in meta.get(field, {}).items():
                assert isinstance(value, str), (meta["name"], field, key, value)
                assert QUALIFIED_NAME.match(key), key
                if field == "labels":
                    assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)
        if obj["kind"] == "Node":
            for field in ("capacity", "allocatable"):
                for key, value in obj["status"][field].items():
                    assert isinstance(value, str), (meta["name"], field, key, value)


def test_count_label_equals_accelerators_in_devices_group(gen):
    nodes, devices, _ = split(gen.generate(N, NS, 0))
    dev_by_name = {d["metadata"]["name"]: d for d in devices}
    checked = 0
    for node in nodes:
        labels = node["metadata"]["labels"]
        keys = akeys(node)
        if labels["feature.gpustack.ai/acceleratable"] != "true":
            assert keys == []
            assert node["metadata"]["name"] not in dev_by_name
            continue
        groups = {f'{g["manufacturer"]}-{g["id"]}': g
                  for g in dev_by_name[node["metadata"]["name"]]["spec"]["groups"]}
        assert sorted(groups) == keys
        for akey in keys:
            group = groups[akey]
            assert labels[f"{ACC_PREFIX}{akey}.count"] == str(len(group["accelerators"]))
            assert labels[f"{ACC_PREFIX}{akey}.memory"] == gen.binary_si_from_mib(group["memory"])
            assert labels[f"{ACC_PREFIX}{akey}.cores"] == str(group["cores"])
            checked += 1
    assert checked > 0


# ------------------------------------------------------------------------------------------
# Shape and variety on a somewhat larger snapshot (still well under a second).
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big(gen):
    return split(gen.generate(400, 3, 0))


def test_devices_shape_and_ledger(gen, big):
    nodes, devices, _ = big
    node_by_name = {n["metadata"]["name"]: n for n in nodes}
    partitioned_nodes = 0
    for dev in devices:
        node = node_by_name[dev["metadata"]["name"]]
        ledger = {(g["manufacturer"], g["id"]): g for g in dev["status"]["groups"]}
        assert len(ledger) == len(dev["spec"]["groups"])
        indexes = []
        any_partitioned = False
        for group in dev["spec"]["groups"]:
            manu = group["manufacturer"]
            expected_slices = gen.MANUFACTURERS[manu]["slices"]
            rows = {r["id"]: r for r in ledger[(manu, group["id"])]["accelerators"]}
            assert [a["id"] for a in group["accelerators"]] == list(rows)
            logical = 0
            for acc in group["accelerators"]:
                indexes.append(acc["index"])
                status = acc["status"]
                row = rows[acc["id"]]
                assert isinstance(row["mode"], int) and 0 <= row["mode"] <= 5
                if "physicalSliced" in status:
                    any_partitioned = True
                    assert "logicalSliced" not in status
                    assert group["id"] in ("a100-80gb-pcie", "h100-80gb-hbm3")
                    ps = status["physicalSliced"]
                    assert ps["count"] == 7
                    assert [p["name"] for p in ps["profiles"]] == ["1g.10gb", "3g.40gb"]
                    assert row["mode"] == (4 if row.get("allocatedProfiles") else 0)
                    for field in ("allocatedProfiles", "remainingProfiles"):
                        if field in row:
                            names = [p["name"] for p in row[field]]
                            assert names == sorted(names) and row[field]
                            assert all(p["count"] > 0 for p in row[field])
                else:
                    ls = status["logicalSliced"]
                    assert ls["count"] == expected_slices
                    assert ls["coresPercentageOvercommit"] is gen.MANUFACTURERS[manu]["overcommit"]
                    logical += ls["count"]
                    assert row["allocated"] + row["remaining"] == gen.M
                    assert 0 <= row["remaining"] <= gen.M
            detail = group["acceleratorSlicedDetail"]
            if logical:
                assert detail["logical"]["count"] == logical
            base = gen.MANUFACTURERS[manu]["base"]
            cap = node["status"]["capacity"]
            for pool in (base, base + ".shared", base + ".sliced", base + ".partitioned"):
                assert pool in cap
        assert len(indexes) == len(set(indexes))
        partitioned_nodes += any_partitioned
        if "gpustack.ai/managed" in node["metadata"]["labels"]:
            assert dev["metadata"]["labels"]["gpustack.ai/managed"] == \
                node["metadata"]["labels"]["gpustack.ai/managed"]
    assert partitioned_nodes > 0


def test_variety(big):
    nodes, devices, _ = big
    archs = [n["metadata"]["labels"]["kubernetes.io/arch"] for n in nodes]
    managed = [n["metadata"]["labels"].get("gpustack.ai/managed") for n in nodes]
    assert 0.03 < archs.count("arm64") / len(nodes) < 0.2
    assert set(archs) == {"amd64", "arm64"}
    assert 0.85 < managed.count("true") / len(nodes) < 1
    assert "false" in managed
    cpu_only = len(nodes) - len(devices)
    assert 0.07 < cpu_only / len(nodes) < 0.25
    models = {f'{g["manufacturer"]}-{g["id"]}' for d in devices for g in d["spec"]["groups"]}
    assert models == {"nvidia-h100-80gb-hbm3", "nvidia-a100-80gb-pcie", "nvidia-l4",
                      "nvidia-tesla-t4", "ascend-910b", "amd-mi300x"}
    counts = {len(g["accelerators"]) for d in devices for g in d["spec"]["groups"]}
    assert {2, 4, 8} <= counts
    cpu_names = {n["metadata"]["annotations"].get("feature.gpustack.ai/cpu-name") for n in nodes}
    assert len(cpu_names - {None}) >= 8
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        for key in ("vendor_id", "family", "id"):
            assert labels[f"feature.node.kubernetes.io/cpu-model.{key}"]
        assert int(node["status"]["capacity"]["cpu"]) > 0


@pytest.mark.parametrize("mib,text", [(24576, "24Gi"), (1536, "2Gi"), (40537, "40Gi"),
                                      (512, "512Mi"), (81920, "80Gi"), (81559, "80Gi")])
def test_binary_si(gen, mib, text):
    assert gen.binary_si_from_mib(mib) == text


@pytest.mark.parametrize("value,text", [(6400000, "6400k"), (25600, "25600"), (8000000, "8M"),
                                        (65536, "65536"), (1600000, "1600k"), (1000, "1k"),
                                        (48000, "48k"), (1600000000, "1600M"), (0, "0")])
def test_decimal_si(gen, value, text):
    assert gen.decimal_si(value) == text
