"""Independent acceptance tests on the demo cluster (examples.md §5, fixtures/demo).

Every expected value below was derived by hand from the spec pages in /work/shared/spec
(cli-contract.md, inputs.md, stage3-node.md, stage4-chain.md, examples.md), never from the
implementation's output. The tool is driven exactly as cli-contract.md says:
``python -m gpustack_render <command> SNAPSHOT... [--set N=V]... [--format ...] [-o DIR]``.

Hand derivations (stage3-node.md §1.3, NormalizeName with stripCruft):

* node-cpu  ``AMD EPYC 7R13 Processor``: manu ``amd``; drop trailing `` Processor`` ->
  ``AMD EPYC 7R13``; char pass: buffer reaches ``amd`` and is emptied, ``-`` dropped ->
  ``epyc-7r13``.                                       gKey ``amd-epyc-7r13``
* node-a10g ``AMD EPYC 7R32``: nothing to strip.        gKey ``amd-epyc-7r32``
* node-t4-* ``Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz``: manu ``intel``; cut at `` @ ``;
  delete ``(R)``; drop trailing `` CPU`` -> ``Intel Xeon Platinum 8259CL`` -> ``intel`` emptied ->
  ``xeon-platinum-8259cl``.                             gKey ``intel-xeon-platinum-8259cl``

Profile (hostname only): ``fnv64-87bf574bea2a4f23`` (examples.md §2).
"""

from __future__ import annotations

import base64
import copy
import json
import random
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest
import yaml
from cli_invoke import invoke

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
DEMO_FILES = ("nodes.yaml", "devices.yaml", "namespaces.json")

M = 1_600_000
PROFILE = "fnv64-87bf574bea2a4f23"
TOPOLOGY = "gpustack-" + PROFILE
OS, ARCH = "linux", "amd64"

KIND_ORDER = [
    "NodeFeature",
    "Topology",
    "AdmissionCheck",
    "ResourceFlavor",
    "InstanceType",
    "ClusterQueue",
    "LocalQueue",
]

CHECK_DEVICES = "gpustack-node-devices"
CHECK_JOINT = "gpustack-model-deployment-joint"


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def fnv1a64_hex(text: str) -> str:
    """FNV-1a 64 as written in examples.md §1 / stage3-node.md §7."""
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def local_queue_name(cluster_queue: str) -> str:
    return "gpustack-fnv64-" + fnv1a64_hex(cluster_queue)


@lru_cache(maxsize=None)
def _cached(args: tuple[str, ...]) -> tuple[int, bytes, bytes]:
    proc = invoke(*args)
    return proc.returncode, proc.stdout_bytes, proc.stderr_bytes


def ok_stdout(*args: str) -> bytes:
    rc, out, err = _cached(tuple(args))
    assert rc == 0, f"exit {rc} for {args}\nstderr:\n{err.decode(errors='replace')}"
    assert b"Traceback" not in err
    return out


def render_json(*sets: str) -> dict:
    args = ["render", "fixtures/demo", "--format", "json"]
    for s in sets:
        args += ["--set", s]
    return json.loads(ok_stdout(*args))


def items_of(doc: dict, kind: str) -> dict[str, dict]:
    """name -> object, for one kind (names are unique per kind in the demo, namespaced kinds keyed
    by namespace/name)."""
    out = {}
    for obj in doc["items"]:
        if obj["kind"] != kind:
            continue
        md = obj["metadata"]
        key = f"{md['namespace']}/{md['name']}" if md.get("namespace") else md["name"]
        out[key] = obj
    return out


def demo_objects() -> list[dict]:
    """Every object of the demo snapshot, lists expanded, in file order."""
    objs: list[dict] = []
    for name in DEMO_FILES:
        text = (DEMO / name).read_text()
        docs = [json.loads(text)] if name.endswith(".json") else list(yaml.load_all(text, Loader=yaml.CSafeLoader))
        for doc in docs:
            if doc is None:
                continue
            if doc.get("kind", "").endswith("List") and "items" in doc:
                objs.extend(doc["items"])
            else:
                objs.append(doc)
    return objs


def write_snapshot(dest: Path, objects: list[dict]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return path


def cpu_detail(**fields) -> str:
    """Compact JSON in the key order of stage4-chain.md §1.4 (callers pass keys in that order)."""
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# the demo cluster, as derived by hand from the spec
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoNode:
    gkey: str
    gmanu: str
    cpus: str
    cpu_name: str
    # cpuDetail of a CPU flavor (no manufacturer/product/family keys)
    cpu_detail_cpu: str
    # cpuDetail of an accelerated flavor (aware only): manufacturer + product first
    cpu_detail_acc: str
    akey: str | None = None
    cards: str | None = None
    product: str | None = None
    family: str | None = None
    memory: str | None = None
    cores: str | None = None


XEON = "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz"

NODES: dict[str, DemoNode] = {
    "node-cpu": DemoNode(
        gkey="amd-epyc-7r13",
        gmanu="amd",
        cpus="16",
        cpu_name="AMD EPYC 7R13 Processor",
        cpu_detail_cpu=cpu_detail(
            physicalCores="8",
            threadsPerPhysicalCore="2",
            logicalCores="16",
            clockSpeed="2650000000",
            cache={"l2": "4194304", "l3": "33554432"},
        ),
        cpu_detail_acc="",  # no accelerator
    ),
    "node-a10g": DemoNode(
        gkey="amd-epyc-7r32",
        gmanu="amd",
        cpus="4",
        cpu_name="AMD EPYC 7R32",
        cpu_detail_cpu=cpu_detail(
            physicalCores="2", logicalCores="4", clockSpeed="2800000000", cache={"l2": "1048576"}
        ),
        cpu_detail_acc=cpu_detail(
            manufacturer="amd",
            product="AMD EPYC 7R32",
            physicalCores="2",
            logicalCores="4",
            clockSpeed="2800000000",
            cache={"l2": "1048576"},
        ),
        akey="nvidia-a10g",
        cards="1",
        product="NVIDIA-A10G",
        family="Ampere",
        memory="24Gi",
        cores="9216",
    ),
    "node-t4-a": DemoNode(
        gkey="intel-xeon-platinum-8259cl",
        gmanu="intel",
        cpus="4",
        cpu_name=XEON,
        # no cache annotations at all: "cache" is still present as {}
        cpu_detail_cpu=cpu_detail(
            physicalCores="2",
            threadsPerPhysicalCore="2",
            logicalCores="4",
            clockSpeed="2500000000",
            cache={},
        ),
        cpu_detail_acc=cpu_detail(
            manufacturer="intel",
            product=XEON,
            physicalCores="2",
            threadsPerPhysicalCore="2",
            logicalCores="4",
            clockSpeed="2500000000",
            cache={},
        ),
        akey="nvidia-tesla-t4",
        cards="1",
        product="Tesla-T4",
        family="Turing",
        memory="15Gi",
        cores="2560",
    ),
    "node-t4-b": DemoNode(
        gkey="intel-xeon-platinum-8259cl",
        gmanu="intel",
        cpus="48",
        cpu_name=XEON,
        cpu_detail_cpu=cpu_detail(
            physicalCores="24",
            threadsPerPhysicalCore="2",
            logicalCores="48",
            clockSpeed="2500000000",
            cache={"l2": "25165824", "l3": "37486592"},
        ),
        cpu_detail_acc=cpu_detail(
            manufacturer="intel",
            product=XEON,
            physicalCores="24",
            threadsPerPhysicalCore="2",
            logicalCores="48",
            clockSpeed="2500000000",
            cache={"l2": "25165824", "l3": "37486592"},
        ),
        akey="nvidia-tesla-t4",
        cards="4",
        product="Tesla-T4",
        family="Turing",
        memory="15Gi",
        cores="2560",
    ),
}

# Flavor names (stage4-chain.md §1.2), written out by hand. name -> (contributing node, kind)
F_CPU_AMD_7R13 = "gpustack--amd-epyc-7r13-linux-amd64-16c-fnv64-87bf574bea2a4f23"
F_CPU_AMD_7R32 = "gpustack--amd-epyc-7r32-linux-amd64-4c-fnv64-87bf574bea2a4f23"
F_CPU_XEON_4 = "gpustack--intel-xeon-platinum-8259cl-linux-amd64-4c-fnv64-87bf574bea2a4f23"
F_CPU_XEON_48 = "gpustack--intel-xeon-platinum-8259cl-linux-amd64-48c-fnv64-87bf574bea2a4f23"
F_A10G = "gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64-1d-fnv64-87bf574bea2a4f23"
F_T4_1 = "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-1d-fnv64-87bf574bea2a4f23"
F_T4_4 = "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64-4d-fnv64-87bf574bea2a4f23"

CPU_FLAVOR_NODE = {
    F_CPU_AMD_7R13: "node-cpu",
    F_CPU_AMD_7R32: "node-a10g",
    F_CPU_XEON_4: "node-t4-a",
    F_CPU_XEON_48: "node-t4-b",
}
ACC_FLAVOR_NODE = {F_A10G: "node-a10g", F_T4_1: "node-t4-a", F_T4_4: "node-t4-b"}

# Pools / queue names (stage4-chain.md §2.1)
Q_CPU = "gpustack--generic-linux-amd64"
Q_A10G = "gpustack--nvidia-a10g-linux-amd64"
Q_T4 = "gpustack--nvidia-tesla-t4-linux-amd64"

QA_CPU_7R13 = "gpustack--amd-epyc-7r13-linux-amd64"
QA_CPU_7R32 = "gpustack--amd-epyc-7r32-linux-amd64"
QA_CPU_XEON = "gpustack--intel-xeon-platinum-8259cl-linux-amd64"
QA_A10G = "gpustack--amd-epyc-7r32--nvidia-a10g-linux-amd64"
QA_T4 = "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4-linux-amd64"

LQ_NAMESPACES = ("default", "team-a")  # gpustack-system and kube-system are reserved

# unitResources presets (stage4-chain.md §4.3): a10g -> medium, tesla-t4 -> t4 -> small
UNIT_CPU_POOL = {"cpu": "1", "ram": "2Gi"}
UNIT_MEDIUM = {"cpu": "8", "ram": "64Gi"}
UNIT_SMALL = {"cpu": "8", "ram": "32Gi"}


def expected_nodefeature(node: str, *, mixed: bool = True) -> dict:
    n = NODES[node]
    labels = {
        "gpustack.ai/managed": "true",
        f"general.feature.gpustack.ai/{n.gmanu}": "true",
        f"general.feature.gpustack.ai/{n.gkey}": "true",
        f"general.feature.gpustack.ai/{n.gkey}.count": n.cpus,
    }
    if not mixed and n.akey is None:
        labels["feature.gpustack.ai/cpu-only"] = "true"
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": f"{node}-gpustack-worker",
            "namespace": "gpustack-system",
            "labels": {
                "app.kubernetes.io/part-of": "gpustack-operator-worker",
                "nfd.node.kubernetes.io/node-name": node,
            },
        },
        "spec": {"labels": labels},
    }


def expected_cpu_flavor(name: str, *, mixed: bool = True) -> dict:
    node = CPU_FLAVOR_NODE[name]
    n = NODES[node]
    own = f"general.feature.gpustack.ai/{n.gkey}"
    node_labels = {
        "gpustack.ai/managed": "true",
        "kubernetes.io/os": OS,
        "kubernetes.io/arch": ARCH,
        own: "true",
        f"{own}.count": n.cpus,
        "topology.gpustack.ai/profile": PROFILE,
    }
    if not mixed:
        node_labels["feature.gpustack.ai/cpu-only"] = "true"
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {
            "name": name,
            "labels": {
                own: "true",
                f"{own}.count": n.cpus,
                f"{own}.capacity": n.cpus,  # one contributing node each
                "feature.gpustack.ai/acceleratable": "false",
                "kubernetes.io/os": OS,
                "kubernetes.io/arch": ARCH,
                "resource.gpustack.ai/type": "nodes",
                "topology.gpustack.ai/profile": PROFILE,
            },
            # no cpu-family annotation on any demo node -> no "family" note
            "annotations": {
                "note.gpustack.ai/acceleratable": "false",
                "note.gpustack.ai/generalGroup": n.gkey,
                "note.gpustack.ai/manufacturer": n.gmanu,
                "note.gpustack.ai/product": n.cpu_name,
                "note.gpustack.ai/topologyProfile": PROFILE,
                "note.gpustack.ai/cpuDetail": n.cpu_detail_cpu,
            },
        },
        "spec": {
            "nodeLabels": node_labels,
            "tolerations": [{"operator": "Exists"}],
            "topologyName": TOPOLOGY,
        },
    }


def expected_acc_flavor(name: str, *, aware: bool = False) -> dict:
    node = ACC_FLAVOR_NODE[name]
    n = NODES[node]
    own = f"acceleratable.feature.gpustack.ai/{n.akey}"
    general = f"general.feature.gpustack.ai/{n.gkey}"
    notes = {
        "note.gpustack.ai/acceleratable": "true",
        "note.gpustack.ai/generalGroup": n.gkey,
        "note.gpustack.ai/acceleratorGroup": n.akey,
        "note.gpustack.ai/manufacturer": "nvidia",
        "note.gpustack.ai/product": n.product,
        "note.gpustack.ai/family": n.family,
        "note.gpustack.ai/memory": n.memory,
        "note.gpustack.ai/cores": n.cores,
        "note.gpustack.ai/topologyProfile": PROFILE,
    }
    if aware:
        notes["note.gpustack.ai/cpuDetail"] = n.cpu_detail_acc
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {
            "name": name,
            "labels": {
                own: "true",
                f"{own}.count": n.cards,
                f"{own}.capacity": n.cards,
                "feature.gpustack.ai/acceleratable": "true",
                general: "true",
                "kubernetes.io/os": OS,
                "kubernetes.io/arch": ARCH,
                "resource.gpustack.ai/type": "nodes",
                "topology.gpustack.ai/profile": PROFILE,
            },
            "annotations": notes,
        },
        "spec": {
            "nodeLabels": {
                "gpustack.ai/managed": "true",
                "kubernetes.io/os": OS,
                "kubernetes.io/arch": ARCH,
                general: "true",
                own: "true",
                f"{own}.count": n.cards,
                "topology.gpustack.ai/profile": PROFILE,
            },
            "tolerations": [{"operator": "Exists"}],
            "topologyName": TOPOLOGY,
        },
    }


@dataclass(frozen=True)
class Pool:
    name: str
    acceleratable: bool
    general_group: str  # "generic" or gKey
    akey: str | None
    display_name: str
    unit: dict
    flavors: tuple[tuple[str, str], ...]  # (flavor, nominalQuota) in §2.4 order
    aware: bool = False


POOLS_DEFAULT = (
    Pool(
        Q_CPU,
        False,
        "generic",
        None,
        "CPU-only",
        UNIT_CPU_POOL,
        # sorted by per-node count (4, 4, 16, 48) then name
        (
            (F_CPU_AMD_7R32, "4"),
            (F_CPU_XEON_4, "4"),
            (F_CPU_AMD_7R13, "16"),
            (F_CPU_XEON_48, "48"),
        ),
    ),
    Pool(Q_A10G, True, "generic", "nvidia-a10g", "NVIDIA-A10G", UNIT_MEDIUM, ((F_A10G, "1600k"),)),
    Pool(
        Q_T4,
        True,
        "generic",
        "nvidia-tesla-t4",
        "Tesla-T4",
        UNIT_SMALL,
        ((F_T4_1, "1600k"), (F_T4_4, "6400k")),
    ),
)

POOLS_AWARE = (
    Pool(
        QA_CPU_7R13,
        False,
        "amd-epyc-7r13",
        None,
        "AMD EPYC 7R13 Processor",
        UNIT_CPU_POOL,
        ((F_CPU_AMD_7R13, "16"),),
        aware=True,
    ),
    Pool(
        QA_CPU_7R32,
        False,
        "amd-epyc-7r32",
        None,
        "AMD EPYC 7R32",
        UNIT_CPU_POOL,
        ((F_CPU_AMD_7R32, "4"),),
        aware=True,
    ),
    Pool(
        QA_CPU_XEON,
        False,
        "intel-xeon-platinum-8259cl",
        None,
        XEON,
        UNIT_CPU_POOL,
        ((F_CPU_XEON_4, "4"), (F_CPU_XEON_48, "48")),
        aware=True,
    ),
    Pool(
        QA_A10G,
        True,
        "amd-epyc-7r32",
        "nvidia-a10g",
        "NVIDIA-A10G",
        UNIT_MEDIUM,
        ((F_A10G, "1600k"),),
        aware=True,
    ),
    Pool(
        QA_T4,
        True,
        "intel-xeon-platinum-8259cl",
        "nvidia-tesla-t4",
        "Tesla-T4",
        UNIT_SMALL,
        ((F_T4_1, "1600k"), (F_T4_4, "6400k")),
        aware=True,
    ),
)

POOLS_MIXED_OFF = (
    Pool(Q_CPU, False, "generic", None, "CPU-only", UNIT_CPU_POOL, ((F_CPU_AMD_7R13, "16"),)),
    POOLS_DEFAULT[1],
    POOLS_DEFAULT[2],
)


def expected_instance_type(p: Pool) -> dict:
    spec = {"displayName": p.display_name, "generalGroup": p.general_group}
    if p.akey:
        spec["acceleratorGroup"] = p.akey
    spec.update(
        {
            "acceleratable": p.acceleratable,
            "os": OS,
            "arch": ARCH,
            "unitResources": dict(p.unit),
            "localStorage": "100Gi",
        }
    )
    return {
        "apiVersion": "worker.gpustack.ai/v1alpha1",
        "kind": "InstanceType",
        "metadata": {
            "name": p.name,
            "labels": {"schedule.gpustack.ai/derived-from-node": "true"},
        },
        "spec": spec,
    }


def expected_cluster_queue(p: Pool) -> dict:
    labels = {
        "feature.gpustack.ai/acceleratable": "true" if p.acceleratable else "false",
        "kubernetes.io/os": OS,
        "kubernetes.io/arch": ARCH,
        "resource.gpustack.ai/type": "instancetypes",
    }
    if p.akey:
        labels[f"acceleratable.feature.gpustack.ai/{p.akey}"] = "true"
    if p.aware and p.general_group != "generic":
        labels[f"general.feature.gpustack.ai/{p.general_group}"] = "true"
    resource = "credits.gpustack.ai/nvidia" if p.acceleratable else "cpu"
    checks = ([{"name": CHECK_DEVICES}] if p.acceleratable else []) + [{"name": CHECK_JOINT}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {
            "name": p.name,
            "labels": labels,
            "annotations": {"topology.gpustack.ai/tas-queue": "true"},
        },
        "spec": {
            "namespaceSelector": {},
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
            "preemption": {
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "Never"},
                "withinClusterQueue": "LowerPriority",
            },
            "resourceGroups": [
                {
                    "coveredResources": [resource],
                    "flavors": [
                        {"name": f, "resources": [{"name": resource, "nominalQuota": q}]}
                        for f, q in p.flavors
                    ],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": checks},
            "stopPolicy": "None",
        },
    }


def expected_local_queue(cq: str, ns: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {
            "name": local_queue_name(cq),
            "namespace": ns,
            "annotations": {"schedule.gpustack.ai/queue": cq},
        },
        "spec": {"clusterQueue": cq},
    }


EXPECTED_TOPOLOGY = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Topology",
    "metadata": {"name": TOPOLOGY, "labels": {"resource.gpustack.ai/type": "topology"}},
    "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
}

EXPECTED_CHECKS = {
    CHECK_DEVICES: "worker.gpustack.ai/node-devices",
    CHECK_JOINT: "worker.gpustack.ai/model-deployment-joint",
}


def identity(obj: dict) -> tuple[str, str, str]:
    md = obj["metadata"]
    return obj["kind"], md.get("namespace", "") or "", md["name"]


def sort_key(ident: tuple[str, str, str]):
    kind, ns, name = ident
    return KIND_ORDER.index(kind), ns, name


def expected_identities(pools, flavors) -> list[tuple[str, str, str]]:
    idents = [("NodeFeature", "gpustack-system", f"{n}-gpustack-worker") for n in NODES]
    idents.append(("Topology", "", TOPOLOGY))
    idents += [("AdmissionCheck", "", c) for c in EXPECTED_CHECKS]
    idents += [("ResourceFlavor", "", f) for f in flavors]
    idents += [("InstanceType", "", p.name) for p in pools]
    idents += [("ClusterQueue", "", p.name) for p in pools]
    idents += [("LocalQueue", ns, local_queue_name(p.name)) for p in pools for ns in LQ_NAMESPACES]
    return sorted(idents, key=sort_key)


ALL_FLAVORS = sorted([*CPU_FLAVOR_NODE, *ACC_FLAVOR_NODE])
FLAVORS_MIXED_OFF = sorted([F_CPU_AMD_7R13, *ACC_FLAVOR_NODE])


def assert_subset_meta(actual: dict, expected: dict) -> None:
    """apiVersion/kind/spec exact; metadata: name/namespace/labels/annotations exact, and none
    of the server-owned fields."""
    assert actual["apiVersion"] == expected["apiVersion"]
    assert actual["kind"] == expected["kind"]
    amd, emd = actual["metadata"], expected["metadata"]
    for key in ("name", "namespace", "labels", "annotations"):
        assert amd.get(key) == emd.get(key), f"metadata.{key} of {identity(expected)}"
    for banned in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences", "finalizers"):
        assert banned not in amd
    assert "status" not in actual
    assert actual.get("spec") == expected.get("spec"), f"spec of {identity(expected)}"


# --------------------------------------------------------------------------------------------
# sanity of the hand-written reference helpers against the spec's own numbers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, digest",
    [
        pytest.param("gpustack--nvidia-l4-linux-amd64", "3a013a0c49722e23", id="examples-1-localqueue"),
        pytest.param("kubernetes.io/hostname", "87bf574bea2a4f23", id="examples-2-profile"),
    ],
)
def test_reference_fnv_matches_spec_examples(text, digest):
    assert fnv1a64_hex(text) == digest


def test_demo_fixture_shape():
    """The snapshot itself matches examples.md §5 (guards against fixture drift)."""
    objs = demo_objects()
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == ["Devices"] * 3 + ["Namespace"] * 4 + ["Node"] * 4
    nodes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Node"}
    assert set(nodes) == set(NODES)
    for name, node in nodes.items():
        labels = node["metadata"]["labels"]
        assert all(isinstance(v, str) for v in labels.values())
        assert labels["gpustack.ai/managed"] == "true"
        assert labels["kubernetes.io/hostname"] == name
        assert "topology.gpustack.ai/profile" not in labels
        assert node["metadata"]["annotations"]["feature.gpustack.ai/cpu-name"] == NODES[name].cpu_name
        assert node["status"]["capacity"]["cpu"] == NODES[name].cpus
    devices = {o["metadata"]["name"] for o in objs if o["kind"] == "Devices"}
    assert devices == {"node-a10g", "node-t4-a", "node-t4-b"}


# --------------------------------------------------------------------------------------------
# render --format json: envelope, ordering, object shape
# --------------------------------------------------------------------------------------------


def test_render_json_envelope():
    doc = render_json()
    assert set(doc) == {"apiVersion", "kind", "items"}
    assert doc["apiVersion"] == "v1"
    assert doc["kind"] == "List"
    assert isinstance(doc["items"], list)


def test_render_order_and_identities_default():
    doc = render_json()
    actual = [identity(o) for o in doc["items"]]
    assert actual == expected_identities(POOLS_DEFAULT, ALL_FLAVORS)
    assert len(actual) == 4 + 1 + 2 + 7 + 3 + 3 + 6


def test_render_object_key_order_and_sorted_maps():
    doc = render_json()
    for obj in doc["items"]:
        assert list(obj.keys()) == ["apiVersion", "kind", "metadata", "spec"], identity(obj)
        md = obj["metadata"]
        for data_map in (md.get("labels"), md.get("annotations")):
            if data_map is not None:
                assert list(data_map) == sorted(data_map), identity(obj)
        if obj["kind"] == "NodeFeature":
            labels = obj["spec"]["labels"]
            assert list(labels) == sorted(labels)


def _all_string_values(obj: dict):
    md = obj["metadata"]
    for m in (md.get("labels") or {}, md.get("annotations") or {}):
        yield from m.values()
    spec = obj.get("spec") or {}
    yield from (spec.get("labels") or {}).values()
    yield from (spec.get("nodeLabels") or {}).values()
    for group in spec.get("resourceGroups") or []:
        for fl in group["flavors"]:
            for res in fl["resources"]:
                yield res["nominalQuota"]


def test_render_yaml_default_is_same_stream_with_string_values():
    out = ok_stdout("render", "fixtures/demo")
    docs = [d for d in yaml.safe_load_all(out) if d is not None]
    assert docs == render_json()["items"]
    for obj in docs:
        for value in _all_string_values(obj):
            assert isinstance(value, str), (identity(obj), value)


# --------------------------------------------------------------------------------------------
# Stage 3: NodeFeatures
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("node", list(NODES))
def test_nodefeature(node):
    nfs = items_of(render_json(), "NodeFeature")
    key = f"gpustack-system/{node}-gpustack-worker"
    assert key in nfs
    assert_subset_meta(nfs[key], expected_nodefeature(node))


@pytest.mark.parametrize(
    "node, gkey",
    [
        pytest.param("node-cpu", "amd-epyc-7r13", id="AMD-EPYC-7R13-Processor"),
        pytest.param("node-a10g", "amd-epyc-7r32", id="AMD-EPYC-7R32"),
        pytest.param("node-t4-a", "intel-xeon-platinum-8259cl", id="Xeon-8259CL-t4-a"),
        pytest.param("node-t4-b", "intel-xeon-platinum-8259cl", id="Xeon-8259CL-t4-b"),
    ],
)
def test_gkey_derivation(node, gkey):
    labels = items_of(render_json(), "NodeFeature")[f"gpustack-system/{node}-gpustack-worker"]["spec"][
        "labels"
    ]
    general = sorted(k for k in labels if k.startswith("general.feature.gpustack.ai/"))
    manu = gkey.split("-", 1)[0]
    assert general == sorted(
        {
            f"general.feature.gpustack.ai/{manu}",
            f"general.feature.gpustack.ai/{gkey}",
            f"general.feature.gpustack.ai/{gkey}.count",
        }
    )


# --------------------------------------------------------------------------------------------
# Stage 4: Topology, AdmissionChecks, ResourceFlavors
# --------------------------------------------------------------------------------------------


def test_topology():
    topos = items_of(render_json(), "Topology")
    assert list(topos) == [TOPOLOGY]
    assert_subset_meta(topos[TOPOLOGY], EXPECTED_TOPOLOGY)


@pytest.mark.parametrize("name, controller", list(EXPECTED_CHECKS.items()), ids=list(EXPECTED_CHECKS))
def test_admission_checks(name, controller):
    checks = items_of(render_json(), "AdmissionCheck")
    assert set(checks) == set(EXPECTED_CHECKS)
    obj = checks[name]
    assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert obj["metadata"]["labels"] == {"app.kubernetes.io/part-of": "gpustack-operator"}
    assert obj["spec"]["controllerName"] == controller


def test_resource_flavor_names():
    assert sorted(items_of(render_json(), "ResourceFlavor")) == ALL_FLAVORS


@pytest.mark.parametrize("flavor", sorted(CPU_FLAVOR_NODE), ids=lambda f: CPU_FLAVOR_NODE[f] + "-cpu")
def test_cpu_flavor(flavor):
    rfs = items_of(render_json(), "ResourceFlavor")
    assert flavor in rfs
    assert_subset_meta(rfs[flavor], expected_cpu_flavor(flavor))


@pytest.mark.parametrize("flavor", sorted(ACC_FLAVOR_NODE), ids=lambda f: ACC_FLAVOR_NODE[f] + "-acc")
def test_accelerated_flavor(flavor):
    rfs = items_of(render_json(), "ResourceFlavor")
    assert flavor in rfs
    assert_subset_meta(rfs[flavor], expected_acc_flavor(flavor))


def test_t4_nodes_are_separate_flavors():
    rfs = items_of(render_json(), "ResourceFlavor")
    t4 = [n for n in rfs if "--nvidia-tesla-t4-" in n]
    assert sorted(t4) == [F_T4_1, F_T4_4]
    caps = {n: rfs[n]["metadata"]["labels"]["acceleratable.feature.gpustack.ai/nvidia-tesla-t4.capacity"] for n in t4}
    assert caps == {F_T4_1: "1", F_T4_4: "4"}


# --------------------------------------------------------------------------------------------
# Stage 4: InstanceTypes, ClusterQueues, LocalQueues (default, aware, mixed-off)
# --------------------------------------------------------------------------------------------

SCENARIOS = {
    "default": ((), POOLS_DEFAULT),
    "aware": (("instance-type-aware-cpu-manufacturer=true",), POOLS_AWARE),
    "mixed-off": (("instance-type-mixed-on-node=false",), POOLS_MIXED_OFF),
}


def _pool_cases():
    for scen, (_, pools) in SCENARIOS.items():
        for p in pools:
            yield pytest.param(scen, p, id=f"{scen}:{p.name}")


@pytest.mark.parametrize("scenario, pool", list(_pool_cases()))
def test_instance_type(scenario, pool):
    sets, pools = SCENARIOS[scenario]
    its = items_of(render_json(*sets), "InstanceType")
    assert sorted(its) == sorted(p.name for p in pools)
    assert_subset_meta(its[pool.name], expected_instance_type(pool))


@pytest.mark.parametrize("scenario, pool", list(_pool_cases()))
def test_cluster_queue(scenario, pool):
    sets, pools = SCENARIOS[scenario]
    cqs = items_of(render_json(*sets), "ClusterQueue")
    assert sorted(cqs) == sorted(p.name for p in pools)
    assert_subset_meta(cqs[pool.name], expected_cluster_queue(pool))


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_local_queues(scenario):
    sets, pools = SCENARIOS[scenario]
    lqs = items_of(render_json(*sets), "LocalQueue")
    expected = {
        f"{ns}/{local_queue_name(p.name)}": expected_local_queue(p.name, ns)
        for p in pools
        for ns in LQ_NAMESPACES
    }
    assert sorted(lqs) == sorted(expected)
    for key, exp in expected.items():
        assert_subset_meta(lqs[key], exp)
        assert len(lqs[key]["metadata"]["name"]) == 31


def test_local_queue_hashes_by_hand():
    # Spot-check values computed with the examples.md §1 function, written out literally.
    lqs = items_of(render_json(), "LocalQueue")
    assert "team-a/gpustack-fnv64-3b93966fd73eb9ec" in lqs  # gpustack--generic-linux-amd64
    assert "default/gpustack-fnv64-c4680bb149644f1c" in lqs  # gpustack--nvidia-a10g-linux-amd64
    assert "team-a/gpustack-fnv64-6b371caa2da0b799" in lqs  # gpustack--nvidia-tesla-t4-linux-amd64
    assert not any(k.startswith(("gpustack-system/", "kube-system/")) for k in lqs)


# --------------------------------------------------------------------------------------------
# Settings toggles
# --------------------------------------------------------------------------------------------


def test_aware_changes_queues_not_flavor_names():
    default, aware = render_json(), render_json("instance-type-aware-cpu-manufacturer=true")
    rf_d, rf_a = items_of(default, "ResourceFlavor"), items_of(aware, "ResourceFlavor")
    assert sorted(rf_a) == sorted(rf_d) == ALL_FLAVORS
    for name in ALL_FLAVORS:
        assert rf_a[name]["spec"] == rf_d[name]["spec"]
        assert rf_a[name]["metadata"]["labels"] == rf_d[name]["metadata"]["labels"]
    assert sorted(items_of(aware, "ClusterQueue")) == sorted(p.name for p in POOLS_AWARE)
    assert sorted(items_of(aware, "InstanceType")) == sorted(p.name for p in POOLS_AWARE)
    assert set(items_of(aware, "ClusterQueue")).isdisjoint(items_of(default, "ClusterQueue"))


@pytest.mark.parametrize("flavor", ALL_FLAVORS)
def test_aware_flavor_objects(flavor):
    rfs = items_of(render_json("instance-type-aware-cpu-manufacturer=true"), "ResourceFlavor")
    expected = (
        expected_cpu_flavor(flavor) if flavor in CPU_FLAVOR_NODE else expected_acc_flavor(flavor, aware=True)
    )
    assert_subset_meta(rfs[flavor], expected)


def test_aware_render_order():
    doc = render_json("instance-type-aware-cpu-manufacturer=true")
    assert [identity(o) for o in doc["items"]] == expected_identities(POOLS_AWARE, ALL_FLAVORS)


def test_mixed_off_flavors():
    doc = render_json("instance-type-mixed-on-node=false")
    rfs = items_of(doc, "ResourceFlavor")
    assert sorted(rfs) == FLAVORS_MIXED_OFF
    assert_subset_meta(rfs[F_CPU_AMD_7R13], expected_cpu_flavor(F_CPU_AMD_7R13, mixed=False))
    assert rfs[F_CPU_AMD_7R13]["spec"]["nodeLabels"]["feature.gpustack.ai/cpu-only"] == "true"
    for name in ACC_FLAVOR_NODE:
        assert_subset_meta(rfs[name], expected_acc_flavor(name))


@pytest.mark.parametrize("node", list(NODES))
def test_mixed_off_nodefeatures(node):
    nfs = items_of(render_json("instance-type-mixed-on-node=false"), "NodeFeature")
    obj = nfs[f"gpustack-system/{node}-gpustack-worker"]
    assert_subset_meta(obj, expected_nodefeature(node, mixed=False))
    assert ("feature.gpustack.ai/cpu-only" in obj["spec"]["labels"]) == (node == "node-cpu")


def test_mixed_off_render_order():
    doc = render_json("instance-type-mixed-on-node=false")
    assert [identity(o) for o in doc["items"]] == expected_identities(POOLS_MIXED_OFF, FLAVORS_MIXED_OFF)


def test_derived_off_renders_no_instance_types_or_queues():
    doc = render_json("instance-type-derived-from-node=false")
    kinds = [o["kind"] for o in doc["items"]]
    for kind in ("InstanceType", "ClusterQueue", "LocalQueue"):
        assert kind not in kinds
    assert sorted(items_of(doc, "ResourceFlavor")) == ALL_FLAVORS
    assert set(items_of(doc, "AdmissionCheck")) == set(EXPECTED_CHECKS)


@pytest.mark.parametrize(
    "setting",
    [
        pytest.param("node-management-manual=true", id="manual-mode-nodes-already-labelled"),
        pytest.param("instance-type-drain-when-no-flavors=false", id="drain-off-no-empty-queue"),
        pytest.param("workload-fit-affinity=false", id="fit-affinity-off"),
        pytest.param("instance-type-mixed-on-node=true", id="explicit-default-mixed"),
    ],
)
def test_settings_without_effect_on_demo(setting):
    """Every demo Node carries gpustack.ai/managed=true explicitly and every pool has flavors, so
    these settings must leave the render byte-identical."""
    base = ok_stdout("render", "fixtures/demo")
    assert ok_stdout("render", "fixtures/demo", "--set", setting) == base


@pytest.mark.parametrize("value", ["true", "True", "TRUE", "t", "T", "1"])
def test_set_boolean_grammar(value):
    aware = ok_stdout("render", "fixtures/demo", "--set", "instance-type-aware-cpu-manufacturer=true")
    assert ok_stdout("render", "fixtures/demo", "--set", f"instance-type-aware-cpu-manufacturer={value}") == aware


def _settings_secret(**values: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": "gpustack-settings", "namespace": "gpustack-system"},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


def test_settings_secret_and_set_precedence(tmp_path):
    secret = _settings_secret(**{"instance-type-aware-cpu-manufacturer": "true", "some-other-key": "x"})
    # the same name in another namespace is ignored
    decoy = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpustack-settings", "namespace": "default"},
        "data": {"instance-type-mixed-on-node": "false"},
    }
    extra = tmp_path / "settings.yaml"
    extra.write_text(yaml.safe_dump_all([secret, decoy], sort_keys=False))
    aware = ok_stdout("render", "fixtures/demo", "--set", "instance-type-aware-cpu-manufacturer=true")
    default = ok_stdout("render", "fixtures/demo")
    with_secret = invoke("render", "fixtures/demo", str(extra))
    assert with_secret.returncode == 0, with_secret.stderr
    assert with_secret.stdout_bytes == aware
    overridden = invoke(
        "render", "fixtures/demo", str(extra), "--set", "instance-type-aware-cpu-manufacturer=false"
    )
    assert overridden.returncode == 0, overridden.stderr
    assert overridden.stdout_bytes == default


# --------------------------------------------------------------------------------------------
# Determinism
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "order",
    [
        pytest.param(("namespaces.json", "devices.yaml", "nodes.yaml"), id="reversed-files"),
        pytest.param(("devices.yaml", "namespaces.json", "nodes.yaml"), id="shuffled-files"),
        pytest.param(("nodes.yaml", "namespaces.json", "devices.yaml"), id="nodes-first"),
    ],
)
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_file_order_does_not_matter(order, fmt):
    base = ok_stdout("render", "fixtures/demo", "--format", fmt)
    assert base
    files = [f"fixtures/demo/{n}" for n in order]
    assert ok_stdout("render", *files, "--format", fmt) == base


@pytest.mark.parametrize("seed", [1, 7, 42])
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_shuffled_stdin_stream_is_byte_identical(seed, fmt):
    base = ok_stdout("render", "fixtures/demo", "--format", fmt)
    objs = demo_objects()
    random.Random(seed).shuffle(objs)
    stream = yaml.safe_dump_all(objs, sort_keys=False).encode()
    proc = invoke("render", "-", "--format", fmt, input=stream)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout_bytes == base


def test_shuffled_json_list_on_stdin_is_byte_identical():
    base = ok_stdout("render", "fixtures/demo")
    objs = demo_objects()
    random.Random(3).shuffle(objs)
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}).encode()
    proc = invoke("render", "-", input=stream)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout_bytes == base


def test_identical_duplicate_is_fine():
    base = ok_stdout("render", "fixtures/demo")
    assert ok_stdout("render", "fixtures/demo", "fixtures/demo/nodes.yaml") == base


# --------------------------------------------------------------------------------------------
# catalog
# --------------------------------------------------------------------------------------------

CATALOG_DEFAULT = [
    ("gpustack--generic", {"generalGroup": "generic", "acceleratable": False, "manufacturer": "generic", "sliceable": False}),
    (
        "gpustack--nvidia-a10g",
        {
            "generalGroup": "generic",
            "acceleratorGroup": "nvidia-a10g",
            "acceleratable": True,
            "manufacturer": "nvidia",
            "product": "NVIDIA-A10G",
            "family": "Ampere",
            "memory": "24Gi",
            "cores": "9216",
            "sliceable": True,
        },
    ),
    (
        "gpustack--nvidia-tesla-t4",
        {
            "generalGroup": "generic",
            "acceleratorGroup": "nvidia-tesla-t4",
            "acceleratable": True,
            "manufacturer": "nvidia",
            "product": "Tesla-T4",
            "family": "Turing",
            "memory": "15Gi",
            "cores": "2560",
            "sliceable": True,
        },
    ),
]

CATALOG_AWARE = [
    ("gpustack--amd-epyc-7r13", {"generalGroup": "amd-epyc-7r13", "acceleratable": False, "manufacturer": "amd", "product": "AMD EPYC 7R13 Processor", "sliceable": False}),
    ("gpustack--amd-epyc-7r32", {"generalGroup": "amd-epyc-7r32", "acceleratable": False, "manufacturer": "amd", "product": "AMD EPYC 7R32", "sliceable": False}),
    (
        "gpustack--amd-epyc-7r32--nvidia-a10g",
        {
            "generalGroup": "amd-epyc-7r32",
            "acceleratorGroup": "nvidia-a10g",
            "acceleratable": True,
            "manufacturer": "nvidia",
            "product": "NVIDIA-A10G",
            "family": "Ampere",
            "memory": "24Gi",
            "cores": "9216",
            "sliceable": True,
        },
    ),
    ("gpustack--intel-xeon-platinum-8259cl", {"generalGroup": "intel-xeon-platinum-8259cl", "acceleratable": False, "manufacturer": "intel", "product": XEON, "sliceable": False}),
    (
        "gpustack--intel-xeon-platinum-8259cl--nvidia-tesla-t4",
        {
            "generalGroup": "intel-xeon-platinum-8259cl",
            "acceleratorGroup": "nvidia-tesla-t4",
            "acceleratable": True,
            "manufacturer": "nvidia",
            "product": "Tesla-T4",
            "family": "Turing",
            "memory": "15Gi",
            "cores": "2560",
            "sliceable": True,
        },
    ),
]


@pytest.mark.parametrize(
    "sets, expected",
    [
        pytest.param((), CATALOG_DEFAULT, id="default"),
        pytest.param(("instance-type-aware-cpu-manufacturer=true",), CATALOG_AWARE, id="aware"),
    ],
)
def test_catalog_json(sets, expected):
    args = ["catalog", "fixtures/demo", "--format", "json"]
    for s in sets:
        args += ["--set", s]
    doc = json.loads(ok_stdout(*args))
    assert doc["apiVersion"] == "v1"
    assert doc["kind"] == "List"
    names = [i["metadata"]["name"] for i in doc["items"]]
    assert names == [n for n, _ in expected]  # sorted by name
    assert names == sorted(names)
    for item, (name, spec) in zip(doc["items"], expected):
        assert item["apiVersion"] == "gpustack.ai/v1"
        assert item["kind"] == "InstanceTypeFlavor"
        assert not item["metadata"].get("labels")
        assert "namespace" not in item["metadata"]
        assert item["spec"] == spec, name


def test_catalog_yaml_matches_json():
    as_json = json.loads(ok_stdout("catalog", "fixtures/demo", "--format", "json"))
    docs = [d for d in yaml.safe_load_all(ok_stdout("catalog", "fixtures/demo")) if d is not None]
    # a single list object, or the items as a stream: either way the same items
    if len(docs) == 1 and docs[0].get("kind") == "List":
        docs = docs[0]["items"]
    assert docs == as_json["items"]


def test_catalog_not_in_render():
    assert "InstanceTypeFlavor" not in {o["kind"] for o in render_json()["items"]}


# --------------------------------------------------------------------------------------------
# node-patches (stage 3 capacity keys and fit labels on the demo)
# --------------------------------------------------------------------------------------------

CAP = "/status/capacity/nvidia.com~1gpu.sliced."
FIT_SHARED = "/metadata/labels/shared-free-cards.fit.gpustack.ai~1"
FIT_SLICED = "/metadata/labels/sliced-max-free-units.fit.gpustack.ai~1"


def _add(path, value):
    return {"op": "add", "path": path, "value": value}


# Hand computation (stage3-node.md §4.3 and §5) from fixtures/demo/devices.yaml:
#  node-a10g: L=1, slices=128 (overcommit), vram 24Gi=24576 MiB; ledger card mode 0, remaining 1.6M
#  node-t4-a: L=1, slices=128, vram 15Gi=15360; card mode 3 (Sliced), remaining 1.2M, 1 slice used
#  node-t4-b: L=4, slices=512; cards: (3, rem 0.8M, 2 slices), (0, 1.6M), (0, 1.6M), (3, rem 0)
#  node-cpu: no Devices, no owned keys -> no entry
EXPECTED_NODE_PATCHES = [
    {"node": "node-a10g", "subresource": "", "patch": [
        _add(FIT_SHARED + "nvidia-a10g", "1"),
        _add(FIT_SLICED + "nvidia-a10g", "1600000"),
    ]},
    {"node": "node-a10g", "subresource": "status", "patch": [
        _add(CAP + "cores-percentage", "12800"),
        _add(CAP + "memory-mib", "24576"),
        _add(CAP + "memory-percentage", "100"),
        _add(CAP + "units", "1600k"),
    ]},
    {"node": "node-t4-a", "subresource": "", "patch": [
        _add(FIT_SHARED + "nvidia-tesla-t4", "0"),
        _add(FIT_SLICED + "nvidia-tesla-t4", "1200000"),
    ]},
    {"node": "node-t4-a", "subresource": "status", "patch": [
        _add(CAP + "cores-percentage", "12800"),
        _add(CAP + "memory-mib", "15360"),
        _add(CAP + "memory-percentage", "100"),
        _add(CAP + "units", "1600k"),
    ]},
    {"node": "node-t4-b", "subresource": "", "patch": [
        _add(FIT_SHARED + "nvidia-tesla-t4", "2"),
        _add(FIT_SLICED + "nvidia-tesla-t4", "1600000"),
    ]},
    {"node": "node-t4-b", "subresource": "status", "patch": [
        _add(CAP + "cores-percentage", "51200"),
        _add(CAP + "memory-mib", "61440"),
        _add(CAP + "memory-percentage", "400"),
        _add(CAP + "units", "6400k"),
    ]},
]


def test_node_patches_json():
    out = json.loads(ok_stdout("node-patches", "fixtures/demo", "--format", "json"))
    assert out == EXPECTED_NODE_PATCHES


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _apply(node: dict, ops: list[dict]) -> None:
    for op in ops:
        parts = [_unescape(p) for p in op["path"].split("/")[1:]]
        target = node
        for p in parts[:-1]:
            target = target[p]
        if op["op"] in ("add", "replace"):
            target[parts[-1]] = op["value"]
        elif op["op"] == "remove":
            del target[parts[-1]]
        else:  # pragma: no cover - the spec only produces add/replace/remove
            raise AssertionError(op)


def test_node_patches_applied_then_nothing_to_do(tmp_path):
    patches = json.loads(ok_stdout("node-patches", "fixtures/demo", "--format", "json"))
    objs = demo_objects()
    nodes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Node"}
    for entry in patches:
        _apply(nodes[entry["node"]], entry["patch"])
    snap = write_snapshot(tmp_path / "applied", objs)
    again = invoke("node-patches", str(snap), "--format", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == []


# --------------------------------------------------------------------------------------------
# -o DIR
# --------------------------------------------------------------------------------------------


def _file_name(obj: dict) -> str:
    kind, ns, name = identity(obj)
    return f"{kind.lower()}-{ns}-{name}.yaml" if ns else f"{kind.lower()}-{name}.yaml"


@pytest.mark.parametrize("precreate", [True, False], ids=["existing-empty-dir", "new-dir"])
def test_output_dir(tmp_path, precreate):
    out_dir = tmp_path / "out"
    if precreate:
        out_dir.mkdir()
    proc = invoke("render", "fixtures/demo", "-o", str(out_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout_bytes == b""

    items = render_json()["items"]
    expected_files = [_file_name(o) for o in items]
    assert "nodefeature-gpustack-system-node-cpu-gpustack-worker.yaml" in expected_files
    assert f"topology-{TOPOLOGY}.yaml" in expected_files
    assert f"localqueue-team-a-{local_queue_name(Q_T4)}.yaml" in expected_files
    assert sorted(p.name for p in out_dir.iterdir()) == sorted([*expected_files, "kustomization.yaml"])

    kust = yaml.safe_load((out_dir / "kustomization.yaml").read_text())
    assert kust["resources"] == expected_files

    for obj, fname in zip(items, expected_files):
        docs = [d for d in yaml.safe_load_all((out_dir / fname).read_text()) if d is not None]
        assert docs == [obj], fname


# --------------------------------------------------------------------------------------------
# bad input and usage errors
# --------------------------------------------------------------------------------------------


def _bad_cpu_snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "snap"
    shutil.copytree(DEMO, snap)
    nodes = yaml.safe_load((snap / "nodes.yaml").read_text())
    for node in nodes["items"]:
        if node["metadata"]["name"] == "node-t4-a":
            node["status"]["capacity"]["cpu"] = "eight"
    (snap / "nodes.yaml").write_text(yaml.safe_dump(nodes, sort_keys=False))
    return snap


@pytest.mark.parametrize("command", ["render", "node-patches", "catalog"])
def test_invalid_quantity_is_input_error(tmp_path, command):
    snap = _bad_cpu_snapshot(tmp_path)
    proc = invoke(command, str(snap))
    err = proc.stderr
    assert proc.returncode == 2, err
    assert proc.stdout_bytes == b""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if "Node/node-t4-a" in ln]
    assert lines, err
    # one line per problem naming the source file, the object and the field path (inputs.md §10)
    assert any("status.capacity.cpu" in ln and "nodes.yaml" in ln for ln in lines), err
    assert "eight" in err


def test_invalid_quantity_leaves_no_output_dir(tmp_path):
    snap = _bad_cpu_snapshot(tmp_path)
    out_dir = tmp_path / "out"
    proc = invoke("render", str(snap), "-o", str(out_dir))
    assert proc.returncode == 2
    assert proc.stdout_bytes == b""
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_invalid_settings_secret_value(tmp_path):
    bad = tmp_path / "settings.yaml"
    bad.write_text(yaml.safe_dump(_settings_secret(**{"instance-type-mixed-on-node": "maybe"})))
    proc = invoke("render", "fixtures/demo", str(bad))
    err = proc.stderr
    assert proc.returncode == 2, err
    assert proc.stdout_bytes == b""
    assert "Traceback" not in err
    assert "gpustack-settings" in err and "instance-type-mixed-on-node" in err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--set", "no-such-setting=true"), id="unknown-setting"),
        pytest.param(("--set", "instance-type-mixed-on-node=maybe"), id="non-boolean"),
        pytest.param(("--set", "instance-type-mixed-on-node"), id="missing-value"),
        pytest.param(("--set", "instance-type-aware-cpu-manufacturer=yes"), id="yes-is-not-boolean"),
        pytest.param(("--format", "xml"), id="bad-format"),
    ],
)
def test_usage_errors_exit_2(args):
    proc = invoke("render", "fixtures/demo", *args)
    err = proc.stderr
    assert proc.returncode == 2, err
    assert proc.stdout_bytes == b""
    assert "Traceback" not in err
    assert err.strip()


def test_missing_snapshot_path_exit_2(tmp_path):
    proc = invoke("render", str(tmp_path / "does-not-exist.yaml"))
    assert proc.returncode == 2
    assert proc.stdout_bytes == b""
    assert "Traceback" not in proc.stderr


def test_conflicting_duplicate_is_input_error(tmp_path):
    objs = demo_objects()
    node = copy.deepcopy(next(o for o in objs if o["metadata"]["name"] == "node-cpu"))
    node["status"]["capacity"]["cpu"] = "32"
    extra = write_snapshot(tmp_path / "dup", [node])
    proc = invoke("render", "fixtures/demo", str(extra))
    err = proc.stderr
    assert proc.returncode == 2, err
    assert proc.stdout_bytes == b""
    assert "Node/node-cpu" in err
    assert "Traceback" not in err
