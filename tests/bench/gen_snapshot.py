#!/usr/bin/env python3
"""Deterministic synthetic cluster snapshot for benchmarking gpustack-render.

    python tests/bench/gen_snapshot.py --nodes 10000 --namespaces 100 [--seed 0] -o snap.json

Writes ONE JSON document ``{"apiVersion": "v1", "kind": "List", "items": [...]}`` holding

* N ``v1`` Nodes, named ``node-00000`` ... , with the labels, annotations and capacity that
  inputs.md §2 reads (NFD CPU labels, ``feature.gpustack.ai/cpu-*`` annotations, device-manager
  accelerator labels, ``<base>``/``.shared``/``.sliced``/``.partitioned`` pools) plus the usual
  noise a ``kubectl get nodes -o json`` carries (uid, resourceVersion, conditions, nodeInfo, ...);
* one ``worker.gpustack.ai/v1alpha1`` ``Devices`` per GPU Node (same name, cluster-scoped), shaped
  as inputs.md §3: spec groups with accelerators (logically sliced cards, and on ~20 % of the
  A100/H100 Nodes half of the cards MIG-partitioned), and the ``status.groups`` allocation ledger;
* ``--namespaces`` team Namespaces ``team-000`` ... plus ``default``, ``kube-system`` and
  ``gpustack-system``.

Mix of Nodes (by weight): 15 % CPU-only, H100, A100, L4, T4, Ascend 910B, MI300X, and a few
Nodes with two NVIDIA models (L4 + T4). Most GPU Nodes have 8 cards, some 4 or 2. About 10 % of
the Nodes are arm64 (all Ascend Nodes and a quarter of the CPU-only ones). ``gpustack.ai/managed``
is "true" on ~95 %, "false" on ~4 % and absent on ~1 %. About 60 % of the Nodes are in a "steady
state": they already carry the topology profile label and the owned capacity keys / fit labels
that the spec's rules give for this snapshot (a few of them deliberately drifted), so
``node-patches`` sees a realistic mix of no-op, replace, add and remove.

Stdlib only. Byte-deterministic for a given (--nodes, --namespaces, --seed): every Node draws
from its own RNG seeded with (seed, index), so the Nodes of a smaller snapshot are exactly the
first Nodes of a larger one with the same seed.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import time

GENERATOR_VERSION = "1"

M = 1_600_000  # units of one whole accelerator
SHARE = M // 10

# --------------------------------------------------------------------------------------------
# CPU pool. family/id are the NFD cpu-model labels (decimal); caches in bytes, clocks in Hz.
# --------------------------------------------------------------------------------------------
CPUS = {
    "spr-8480": dict(name="Intel(R) Xeon(R) Platinum 8480+", vendor="Intel", family="6", id="143",
                     arch="amd64", cores=56, threads=2, sockets=2, stepping="8",
                     hz="2000000000", boost="3800000000", l1i="32768", l1d="49152",
                     l2="2097152", l3="110100480"),
    "spr-8468": dict(name="Intel(R) Xeon(R) Platinum 8468", vendor="Intel", family="6", id="143",
                     arch="amd64", cores=48, threads=2, sockets=2, stepping="8",
                     hz="2100000000", boost="3800000000", l1i="32768", l1d="49152",
                     l2="2097152", l3="110100480"),
    "icx-6338": dict(name="Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", vendor="Intel", family="6",
                     id="106", arch="amd64", cores=32, threads=2, sockets=2, stepping="6",
                     hz="2000000000", boost="3200000000", l1i="32768", l1d="49152",
                     l2="1310720", l3="50331648"),
    "clx-8259": dict(name="Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", vendor="Intel",
                     family="6", id="85", arch="amd64", cores=24, threads=2, sockets=1,
                     stepping="7", hz="2500000000", boost="3500000000", l1i="32768",
                     l1d="32768", l2="1048576", l3="37486592"),
    "genoa-9654": dict(name="AMD EPYC 9654 96-Core Processor", vendor="AMD", family="25", id="17",
                       arch="amd64", cores=96, threads=2, sockets=2, stepping="1",
                       hz="2400000000", boost="3700000000", l1i="32768", l1d="32768",
                       l2="1048576", l3="402653184"),
    "genoa-9474f": dict(name="AMD EPYC 9474F 48-Core Processor", vendor="AMD", family="25",
                        id="17", arch="amd64", cores=48, threads=2, sockets=2, stepping="1",
                        hz="3600000000", boost="4100000000", l1i="32768", l1d="32768",
                        l2="1048576", l3="268435456"),
    "milan-7763": dict(name="AMD EPYC 7763 64-Core Processor", vendor="AMD", family="25", id="1",
                       arch="amd64", cores=64, threads=2, sockets=2, stepping="1",
                       hz="2450000000", boost="3500000000", l1i="32768", l1d="32768",
                       l2="524288", l3="268435456"),
    "milan-7r13": dict(name="AMD EPYC 7R13 Processor", vendor="AMD", family="25", id="1",
                       arch="amd64", cores=48, threads=2, sockets=1, stepping="1",
                       hz="2650000000", boost="3600000000", l1i="32768", l1d="32768",
                       l2="524288", l3="201326592"),
    # arm64
    "kunpeng-920": dict(name="HUAWEI Kunpeng 920 5250", vendor="HiSilicon", family="72",
                        id="3329", arch="arm64", cores=48, threads=1, sockets=4, stepping="1",
                        hz="2600000000", boost="2600000000", l1i="65536", l1d="65536",
                        l2="524288", l3="50331648"),
    "altra-max": dict(name="Ampere(R) Altra(R) Max Processor", vendor="Ampere", family="65",
                      id="3340", arch="arm64", cores=128, threads=1, sockets=1, stepping="1",
                      hz="3000000000", boost="3000000000", l1i="65536", l1d="65536",
                      l2="1048576", l3="16777216"),
    "grace": dict(name="Neoverse-V2", vendor="ARM", family="65", id="3407", arch="arm64",
                  cores=72, threads=1, sockets=2, stepping="0", hz="3100000000",
                  boost="3400000000", l1i="65536", l1d="65536", l2="1048576",
                  l3="119537664"),
}
AMD64_BIG = ["spr-8480", "spr-8468", "genoa-9654", "milan-7763"]
AMD64_SMALL = ["icx-6338", "clx-8259", "genoa-9474f", "milan-7r13"]
AMD64_ALL = AMD64_BIG + AMD64_SMALL
ARM64_CPU_ONLY = ["altra-max", "grace"]

# --------------------------------------------------------------------------------------------
# Accelerator models (Devices spec group fields) and manufacturers.
# --------------------------------------------------------------------------------------------
MANUFACTURERS = {
    "nvidia": dict(base="nvidia.com/gpu", slices=128, overcommit=True, id_prefix="GPU-",
                   partition_kind="mig"),
    "ascend": dict(base="huawei.com/npu", slices=63, overcommit=True, id_prefix="NPU-",
                   partition_kind=None),
    "amd": dict(base="amd.com/gpu", slices=16, overcommit=False, id_prefix="",
                partition_kind=None),
}

MODELS = {
    "nvidia-h100-80gb-hbm3": dict(manufacturer="nvidia", id="h100-80gb-hbm3",
                                  name="NVIDIA H100 80GB HBM3", memory=81559, cores=16896,
                                  family="Hopper", cc="9.0", driver="570.124.06",
                                  runtime="12.8", pci_class="0302", mig=True),
    "nvidia-a100-80gb-pcie": dict(manufacturer="nvidia", id="a100-80gb-pcie",
                                  name="NVIDIA A100 80GB PCIe", memory=81920, cores=6912,
                                  family="Ampere", cc="8.0", driver="570.124.06",
                                  runtime="12.8", pci_class="0302", mig=True),
    "nvidia-l4": dict(manufacturer="nvidia", id="l4", name="NVIDIA L4", memory=23034,
                      cores=7424, family="Ada Lovelace", cc="8.9", driver="550.127.05",
                      runtime="12.4", pci_class="0302", mig=False),
    "nvidia-tesla-t4": dict(manufacturer="nvidia", id="tesla-t4", name="Tesla T4",
                            memory=15360, cores=2560, family="Turing", cc="7.5",
                            driver="550.127.05", runtime="12.4", pci_class="0302", mig=False),
    "ascend-910b": dict(manufacturer="ascend", id="910b", name="Ascend 910B", memory=65536,
                        cores=24, family="Ascend910B", cc="", driver="24.1.rc2",
                        runtime="8.0.RC3", pci_class="1200", mig=False),
    "amd-mi300x": dict(manufacturer="amd", id="mi300x", name="AMD Instinct MI300X",
                       memory=196592, cores=304, family="CDNA3", cc="gfx942",
                       driver="6.8.5", runtime="6.2.4", pci_class="1200", mig=False),
}

# Node kinds with weights (sum 100). "mixed" = one NVIDIA L4 group + one T4 group.
KINDS = [
    ("cpu", 15),
    ("nvidia-h100-80gb-hbm3", 25),
    ("nvidia-a100-80gb-pcie", 18),
    ("nvidia-l4", 12),
    ("nvidia-tesla-t4", 10),
    ("ascend-910b", 7),
    ("amd-mi300x", 8),
    ("mixed", 5),
]
KIND_NAMES = [k for k, _ in KINDS]
KIND_CUM = []
_acc = 0
for _, _w in KINDS:
    _acc += _w
    KIND_CUM.append(_acc)

INSTANCE_TYPES = {
    "cpu": "m7i.24xlarge", "nvidia-h100-80gb-hbm3": "p5.48xlarge",
    "nvidia-a100-80gb-pcie": "a100.8x", "nvidia-l4": "g6.48xlarge",
    "nvidia-tesla-t4": "g4dn.metal", "ascend-910b": "atlas-800t-a2",
    "amd-mi300x": "mi300x.8x", "mixed": "g-mixed.24xlarge",
}

# MIG profiles used on partitioned A100/H100 80GB cards (status.physicalSliced.profiles).
MIG_PROFILES = [
    {"name": "1g.10gb", "memoryMib": 9728, "computeSlices": 1, "memorySlices": 1, "count": 7,
     "placements": [{"start": s, "length": 1} for s in range(7)]},
    {"name": "3g.40gb", "memoryMib": 40192, "computeSlices": 3, "memorySlices": 4, "count": 2,
     "placements": [{"start": 0, "length": 4}, {"start": 4, "length": 4}]},
]
MIG_MAX = 7
PCI_BUSES = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
KERNELS = ["5.15.0-125-generic", "6.8.0-49-generic", "6.8.0-52-generic"]
KUBELETS = ["v1.30.6", "v1.31.4"]
TOPOLOGY_PROFILE = "fnv64-87bf574bea2a4f23"  # hostname-only levels
BASE_TS = 1_717_200_000  # 2024-06-01
SNAPSHOT_TS = "2025-01-15T08:00:00Z"


# --------------------------------------------------------------------------------------------
# Small helpers (same rules the renderer implements; see stage3-node.md §3).
# --------------------------------------------------------------------------------------------
def label_value(text: str) -> str:
    """Device-manager sanitising of free text: whitespace -> '-', keep [A-Za-z0-9-_.], <= 63."""
    out = []
    for ch in text:
        if ch.isspace():
            out.append("-")
        elif ch.isascii() and (ch.isalnum() or ch in "-_."):
            out.append(ch)
    value = "".join(out)[:63]
    start, end = 0, len(value)
    while start < end and not value[start].isalnum():
        start += 1
    while end > start and not value[end - 1].isalnum():
        end -= 1
    return value[start:end]


def binary_si_from_mib(mib: int) -> str:
    """`.memory` label: largest binary unit the value reaches, rounded half up."""
    value = mib * 2**20
    units = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
    chosen = None
    for power, unit in enumerate(units, start=1):
        if value >= 1024**power:
            chosen = (1024**power, unit)
    if chosen is None:
        return str(value)
    size, unit = chosen
    return f"{(2 * value + size) // (2 * size)}{unit}"


def mib_from_binary_si(text: str) -> int:
    for power, unit in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"], start=1):
        if text.endswith(unit):
            return int(text[: -len(unit)]) * 1024**power // 2**20
    return int(text) // 2**20


_SI_SUFFIX = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def decimal_si(v: int) -> str:
    """Canonical Kubernetes DecimalSI string of an integer (stage3-node.md §3.3)."""
    if v == 0:
        return "0"
    sign = "-" if v < 0 else ""
    m, e = abs(v), 0
    while m % 10 == 0:
        m //= 10
        e += 1
    m *= 10 ** (e % 3)
    e -= e % 3
    if e > 18:
        m *= 10 ** (e - 18)
        e = 18
    return f"{sign}{m}{_SI_SUFFIX[e]}"


def uuid_like(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def timestamp(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def cpu_list(start: int, count: int) -> str:
    return f"{start}-{start + count - 1}"


# --------------------------------------------------------------------------------------------
# Devices: one spec group + its ledger group per accelerator model on the Node.
# --------------------------------------------------------------------------------------------
def make_group(rng: random.Random, model_key: str, n_cards: int, first_index: int,
               partition_half: bool, cpu: dict):
    model = MODELS[model_key]
    manu = model["manufacturer"]
    minfo = MANUFACTURERS[manu]
    slices_per_card = minfo["slices"]
    overcommit = minfo["overcommit"]
    threads_per_socket = cpu["cores"] * cpu["threads"]
    sockets = cpu["sockets"]
    total_logical = threads_per_socket * sockets

    accelerators, ledger = [], []
    logical_cards = partitioned_cards = 0
    logical_slices = 0
    sliced_values = []       # per logically sliceable card: fit value
    shared_free = 0
    whole_capable = 0
    profile_totals: dict[str, int] = {}

    n_partitioned = n_cards // 2 if partition_half else 0
    for k in range(n_cards):
        index = first_index + k
        acc_id = minfo["id_prefix"] + uuid_like(rng)
        bus = int(PCI_BUSES[index % len(PCI_BUSES)], 16)
        numa = 0 if k < max(1, n_cards // 2) else 1
        socket = numa % sockets
        per_socket = total_logical // sockets
        if cpu["threads"] > 1:
            phys = cpu["cores"]
            affinity = (f"{cpu_list(socket * phys, phys)},"
                        f"{cpu_list(sockets * phys + socket * phys, phys)}")
        else:
            affinity = cpu_list(socket * per_socket, per_socket)
        acc = {
            "id": acc_id,
            "index": index,
            "topology": {
                "pciBusId": f"0000:{bus:02x}:00.0",
                "pciRootId": f"0000:{bus - 1:02x}:01.0",
                "pciClass": model["pci_class"],
                "numaAffinity": str(numa),
                "cpuAffinity": affinity,
            },
        }
        row = {"id": acc_id, "index": index}
        if k < n_partitioned:
            partitioned_cards += 1
            acc["status"] = {"unhealthy": False,
                             "physicalSliced": {"count": MIG_MAX, "profiles": MIG_PROFILES}}
            row["mode"] = 0                  # None until an instance is carved (4 below)
            r = rng.random()
            if r < 0.25:
                # Fresh card: no live partitions reported yet -> not ready, static ceilings count.
                counts = {p["name"]: p["count"] for p in MIG_PROFILES}
            else:
                a1 = rng.choice([0, 0, 1, 2, 3])
                a3 = rng.choice([0, 0, 1])
                allocated = {}
                if a1:
                    allocated["1g.10gb"] = a1
                if a3:
                    allocated["3g.40gb"] = a3
                if a3:
                    remaining = {"1g.10gb": 3 - a1, "3g.40gb": 0}
                else:
                    remaining = {"1g.10gb": 7 - a1, "3g.40gb": 2 if a1 == 0 else 1}
                remaining = {n: c for n, c in remaining.items() if c > 0}
                if allocated:
                    row["mode"] = 4              # Partitioned
                    row["allocatedProfiles"] = [{"name": n, "count": c}
                                                for n, c in sorted(allocated.items())]
                if remaining:
                    row["remainingProfiles"] = [{"name": n, "count": c}
                                                for n, c in sorted(remaining.items())]
                counts = {p["name"]: 0 for p in MIG_PROFILES}
                for n, c in list(allocated.items()) + list(remaining.items()):
                    counts[n] = counts.get(n, 0) + c
                if not allocated and not remaining:  # cannot happen, keeps the rule explicit
                    counts = {p["name"]: p["count"] for p in MIG_PROFILES}
            for n, c in counts.items():
                profile_totals[n] = profile_totals.get(n, 0) + c
        else:
            logical_cards += 1
            whole_capable += 1
            logical_slices += slices_per_card
            acc["status"] = {"unhealthy": False,
                             "logicalSliced": {"count": slices_per_card,
                                               "coresPercentageOvercommit": overcommit}}
            r = rng.random()
            slices_used = 0
            if r < 0.45:
                mode, allocated = 0, 0
            elif r < 0.65:
                mode, allocated = 1, M
            elif r < 0.80:
                mode, allocated = 2, rng.randint(1, 9) * SHARE
            else:
                mode = 3
                slices_used = rng.randint(1, 8)
                allocated = min(M, slices_used * rng.randint(5, 25) * 16_000)
                if rng.random() < 0.1:
                    slices_used = slices_per_card  # every slot taken
            remaining = M - allocated
            row["mode"] = mode
            row["allocated"] = allocated
            row["remaining"] = remaining
            if slices_used:
                row["allocatedSlices"] = slices_used
            sliced_values.append(0 if slices_used >= slices_per_card else remaining)
            if mode in (0, 2) and remaining >= SHARE:
                shared_free += 1
        accelerators.append(acc)
        ledger.append(row)

    detail = {}
    if logical_cards:
        detail["logical"] = {"count": logical_slices, "coresPercentageOvercommit": overcommit}
    if partitioned_cards:
        detail["physical"] = {"count": MIG_MAX,
                              "profiles": [{"name": p["name"], "count": p["count"],
                                            "memoryMib": p["memoryMib"]}
                                           for p in MIG_PROFILES]}
    spec_group = {
        "id": model["id"],
        "manufacturer": manu,
        "name": model["name"],
        "memory": model["memory"],
        "cores": model["cores"],
        "driverVersion": model["driver"],
        "runtimeVersion": model["runtime"],
    }
    if model["cc"]:
        spec_group["computeCapability"] = model["cc"]
    spec_group["family"] = model["family"]
    spec_group["acceleratorSlicedDetail"] = detail
    spec_group["accelerators"] = accelerators
    status_group = {"id": model["id"], "manufacturer": manu, "accelerators": ledger}

    # Aggregates for the Node side (pools, steady-state owned keys, fit labels).
    vram = mib_from_binary_si(binary_si_from_mib(model["memory"]))
    summary = {
        "manufacturer": manu, "L": logical_cards, "P": partitioned_cards,
        "slices": logical_slices, "overcommit": overcommit, "vram": vram,
        "profiles": profile_totals,
        "fit_sliced": max(sliced_values) if sliced_values else None,
        "fit_shared": shared_free if whole_capable else None,
    }
    return spec_group, status_group, summary


# --------------------------------------------------------------------------------------------
# One Node (+ its Devices)
# --------------------------------------------------------------------------------------------
def pick_kind(rng: random.Random) -> str:
    x = rng.random() * 100
    for name, cum in zip(KIND_NAMES, KIND_CUM):
        if x < cum:
            return name
    return KIND_NAMES[-1]


def make_node(seed: int, i: int):
    rng = random.Random(f"gpustack-bench:{seed}:{i}")
    name = f"node-{i:05d}"
    kind = pick_kind(rng)

    if kind == "cpu":
        cpu_key = rng.choice(ARM64_CPU_ONLY) if rng.random() < 0.25 else rng.choice(AMD64_ALL)
    elif kind == "ascend-910b":
        cpu_key = "kunpeng-920"
    elif kind in ("nvidia-l4", "nvidia-tesla-t4", "mixed"):
        cpu_key = rng.choice(AMD64_SMALL)
    else:
        cpu_key = rng.choice(AMD64_BIG)
    cpu = CPUS[cpu_key]
    arch = cpu["arch"]
    logical_cpus = cpu["cores"] * cpu["threads"] * cpu["sockets"]

    r = rng.random()
    managed = "true" if r < 0.95 else ("false" if r < 0.99 else None)
    steady = rng.random() < 0.6

    # ---- accelerator groups
    models: list[tuple[str, int]] = []
    if kind == "mixed":
        n = rng.choice([2, 4])
        models = [("nvidia-l4", n), ("nvidia-tesla-t4", n)]
    elif kind != "cpu":
        r = rng.random()
        n = 8 if r < 0.75 else (4 if r < 0.90 else 2)
        models = [(kind, n)]
    partition_half = (kind in ("nvidia-h100-80gb-hbm3", "nvidia-a100-80gb-pcie")
                      and models[0][1] >= 2 and rng.random() < 0.2)

    spec_groups, status_groups, summaries = [], [], []
    first = 0
    for model_key, n in models:
        sg, st, sm = make_group(rng, model_key, n, first, partition_half, cpu)
        first += n
        spec_groups.append(sg)
        status_groups.append(st)
        summaries.append((model_key, n, sm))

    # ---- labels
    zone = ZONES[i % len(ZONES)]
    labels = {
        "kubernetes.io/arch": arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": INSTANCE_TYPES[kind],
        "topology.kubernetes.io/region": zone[:-1],
        "topology.kubernetes.io/zone": zone,
        "feature.node.kubernetes.io/cpu-model.vendor_id": cpu["vendor"],
        "feature.node.kubernetes.io/cpu-model.family": cpu["family"],
        "feature.node.kubernetes.io/cpu-model.id": cpu["id"],
        "feature.gpustack.ai/acceleratable": "true" if models else "false",
    }
    if managed is not None:
        labels["gpustack.ai/managed"] = managed
    if steady:
        labels["topology.gpustack.ai/profile"] = TOPOLOGY_PROFILE
    manus_seen = set()
    for model_key, n, _ in summaries:
        model = MODELS[model_key]
        manu = model["manufacturer"]
        p = "acceleratable.feature.gpustack.ai/" + model_key
        if manu not in manus_seen:
            labels["acceleratable.feature.gpustack.ai/" + manu] = "true"
            manus_seen.add(manu)
        labels[p] = "true"
        labels[p + ".count"] = str(n)
        labels[p + ".memory"] = binary_si_from_mib(model["memory"])
        labels[p + ".product"] = label_value(model["name"])
        labels[p + ".family"] = label_value(model["family"])
        labels[p + ".cores"] = str(model["cores"])
        if model["cc"] and manu == "nvidia":
            labels[p + ".comcap"] = model["cc"]
    if kind in ("nvidia-h100-80gb-hbm3", "amd-mi300x") and rng.random() < 0.5:
        labels["feature.gpustack.ai/rdma.capable"] = "true"
        labels["feature.gpustack.ai/rdma.numa"] = "0_1"
        labels["feature.gpustack.ai/rdma.distance"] = rng.choice(["PIX", "PXB", "NODE"])

    # ---- annotations
    annotations = {
        "node.alpha.kubernetes.io/ttl": "0",
    }
    if rng.random() >= 0.02:  # ~2 %: NFD worker rule not applied yet -> family-id gKey path
        physical = cpu["cores"] * cpu["sockets"]
        fg = "feature.gpustack.ai/"
        annotations.update({
            fg + "cpu-name": cpu["name"],
            fg + "cpu-family": cpu["family"],
            fg + "cpu-physical-cores": str(physical),
            fg + "cpu-threads-per-core": str(cpu["threads"]),
            fg + "cpu-logical-cores": str(logical_cpus),
            fg + "cpu-stepping": cpu["stepping"],
            fg + "cpu-hz": cpu["hz"],
            fg + "cpu-boost-freq": cpu["boost"],
            fg + "cpu-cache-line": "64",
            fg + "cpu-cache-l1i": cpu["l1i"],
            fg + "cpu-cache-l1d": cpu["l1d"],
            fg + "cpu-cache-l2": cpu["l2"],
            fg + "cpu-cache-l3": cpu["l3"],
        })

    # ---- capacity
    mem_gib = {"cpu": 512, "nvidia-l4": 768, "nvidia-tesla-t4": 384, "mixed": 768}.get(kind, 2048)
    mem_ki = mem_gib * 1024 * 1024 * 985 // 1000 + rng.randrange(4096)
    capacity = {
        "cpu": str(logical_cpus),
        "ephemeral-storage": f"{1844284980 + rng.randrange(1_000_000)}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki}Ki",
        "pods": "110",
    }
    allocatable = {
        "cpu": f"{logical_cpus * 1000 - 100}m",
        "ephemeral-storage": str((1844284980 - 10_000_000) * 1024 // 1000 * 1000),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{mem_ki - 1_048_576}Ki",
        "pods": "110",
    }
    per_manu: dict[str, dict] = {}
    for model_key, n, sm in summaries:
        t = per_manu.setdefault(sm["manufacturer"], {"cards": 0, "L": 0, "P": 0, "units": 0,
                                                     "cores": 0, "mib": 0, "profiles": {}})
        t["cards"] += n
        t["L"] += sm["L"]
        t["P"] += sm["P"]
        t["cores"] += sm["slices"] * 100 if sm["overcommit"] else sm["L"] * 100
        t["mib"] += sm["L"] * sm["vram"]
        for pn, pc in sm["profiles"].items():
            t["profiles"][pn] = t["profiles"].get(pn, 0) + pc
    for manu, t in per_manu.items():
        base = MANUFACTURERS[manu]["base"]
        slices = sum(sm["slices"] for _, _, sm in summaries if sm["manufacturer"] == manu)
        pools = {
            base: str(t["cards"]),
            base + ".shared": str(t["L"] * 10),
            base + ".sliced": str(slices),
            base + ".partitioned": str(t["P"] * MIG_MAX),
        }
        capacity.update(pools)
        allocatable.update(pools)
        if steady and managed == "true":
            owned = {}
            if t["L"]:
                owned[base + ".sliced.units"] = t["L"] * M
                owned[base + ".sliced.cores-percentage"] = t["cores"]
                owned[base + ".sliced.memory-percentage"] = t["L"] * 100
                owned[base + ".sliced.memory-mib"] = t["mib"]
            kind_p = MANUFACTURERS[manu]["partition_kind"]
            if t["P"] and kind_p:
                owned[base + ".partitioned.units"] = t["P"] * M
                for pn, pc in t["profiles"].items():
                    owned[f"{base}.partitioned.{kind_p}-{pn}"] = pc
            drift = rng.random()
            if drift < 0.05 and t["L"]:
                owned[base + ".sliced.memory-mib"] -= 1024          # -> replace
            elif drift < 0.08 and t["L"]:
                del owned[base + ".sliced.units"]                   # -> add
            elif drift < 0.10 and kind_p:
                owned[f"{base}.partitioned.{kind_p}-2g.20gb"] = 3   # -> remove (stale)
            for key, value in owned.items():
                capacity[key] = decimal_si(value)
                allocatable[key] = decimal_si(value)
    if steady and managed == "true":
        for model_key, _, sm in summaries:
            if sm["fit_sliced"] is not None:
                labels["sliced-max-free-units.fit.gpustack.ai/" + model_key] = str(sm["fit_sliced"])
            if sm["fit_shared"] is not None:
                labels["shared-free-cards.fit.gpustack.ai/" + model_key] = str(sm["fit_shared"])

    created = BASE_TS + rng.randrange(180 * 86400)
    uid = uuid_like(rng)
    octet3, octet4 = (i // 250) % 250, i % 250 + 1
    ip = f"10.{20 + i // 62500}.{octet3}.{octet4}"
    spec = {
        "podCIDR": f"10.{128 + (i >> 8) % 128}.{i & 255}.0/24",
        "providerID": f"aws:///{zone}/i-{rng.getrandbits(68):017x}",
    }
    if models and rng.random() < 0.3:
        spec["taints"] = [{"effect": "NoSchedule",
                           "key": MANUFACTURERS[summaries[0][2]["manufacturer"]]["base"],
                           "value": "present"}]
    transition = timestamp(created + 120)
    conditions = [
        {"lastHeartbeatTime": SNAPSHOT_TS, "lastTransitionTime": transition,
         "reason": reason, "status": status, "type": ctype}
        for ctype, reason, status in (("MemoryPressure", "KubeletHasSufficientMemory", "False"),
                                      ("DiskPressure", "KubeletHasNoDiskPressure", "False"),
                                      ("Ready", "KubeletReady", "True"))
    ]
    kubelet = KUBELETS[i % len(KUBELETS)]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": dict(sorted(annotations.items())),
            "creationTimestamp": timestamp(created),
            "labels": dict(sorted(labels.items())),
            "name": name,
            "resourceVersion": str(10_000_000 + rng.randrange(90_000_000)),
            "uid": uid,
        },
        "spec": spec,
        "status": {
            "addresses": [{"address": ip, "type": "InternalIP"},
                          {"address": name, "type": "Hostname"}],
            "allocatable": dict(sorted(allocatable.items())),
            "capacity": dict(sorted(capacity.items())),
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": arch,
                "containerRuntimeVersion": "containerd://1.7.24",
                "kernelVersion": KERNELS[i % len(KERNELS)],
                "kubeProxyVersion": kubelet,
                "kubeletVersion": kubelet,
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
                "systemUUID": uuid_like(rng).upper(),
            },
        },
    }

    devices = None
    if models:
        dmeta = {
            "creationTimestamp": timestamp(created + 300),
            "generation": 1 + rng.randrange(40),
            "name": name,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
            "resourceVersion": str(10_000_000 + rng.randrange(90_000_000)),
            "uid": uuid_like(rng),
        }
        if managed is not None:
            dmeta["labels"] = {"gpustack.ai/managed": managed}
        devices = {
            "apiVersion": "worker.gpustack.ai/v1alpha1",
            "kind": "Devices",
            "metadata": dict(sorted(dmeta.items())),
            "spec": {"groups": spec_groups},
            "status": {"groups": status_groups},
        }
    return node, devices


def make_namespace(seed: int, name: str, k: int) -> dict:
    rng = random.Random(f"gpustack-bench-ns:{seed}:{name}")
    labels = {"kubernetes.io/metadata.name": name}
    if name.startswith("team-"):
        labels["gpustack.ai/team"] = name[5:]
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "creationTimestamp": timestamp(BASE_TS + k * 3600),
            "labels": labels,
            "name": name,
            "resourceVersion": str(1000 + rng.randrange(9_000_000)),
            "uid": uuid_like(rng),
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


SYSTEM_NAMESPACES = ["default", "kube-system", "gpustack-system"]


def team_namespace_names(count: int) -> list[str]:
    width = max(3, len(str(max(count - 1, 0))))
    return [f"team-{k:0{width}d}" for k in range(count)]


def generate(nodes: int, namespaces: int, seed: int = 0) -> dict:
    """The snapshot as a dict: Nodes, then Devices, then Namespaces."""
    node_items, device_items = [], []
    # Millions of small acyclic dicts: the cyclic GC only burns time here (~2x at 10k Nodes).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for i in range(nodes):
            node, devices = make_node(seed, i)
            node_items.append(node)
            if devices is not None:
                device_items.append(devices)
    finally:
        if gc_was_enabled:
            gc.enable()
    ns_names = SYSTEM_NAMESPACES + team_namespace_names(namespaces)
    ns_items = [make_namespace(seed, n, k) for k, n in enumerate(ns_names)]
    return {"apiVersion": "v1", "kind": "List", "items": node_items + device_items + ns_items,
            "metadata": {"resourceVersion": ""}}


def dumps(doc: dict, indent: int | None = None) -> str:
    if indent:
        return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n"


def write_snapshot(path: str, nodes: int, namespaces: int, seed: int = 0,
                   indent: int | None = None) -> int:
    """Generate and write atomically; returns the number of bytes written."""
    data = dumps(generate(nodes, namespaces, seed), indent).encode("utf-8")
    if path == "-":
        sys.stdout.buffer.write(data)
        return len(data)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return len(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, required=True, help="number of Nodes")
    ap.add_argument("--namespaces", type=int, default=100,
                    help="team Namespaces team-000.. (default, kube-system and gpustack-system "
                         "are always added; default 100)")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
    ap.add_argument("--indent", type=int, default=None,
                    help="pretty-print with this indent (default: compact JSON)")
    ap.add_argument("-o", "--output", required=True, help="output file, '-' for stdout")
    args = ap.parse_args(argv)
    if args.nodes < 0 or args.namespaces < 0:
        ap.error("--nodes and --namespaces must be >= 0")
    t0 = time.perf_counter()
    size = write_snapshot(args.output, args.nodes, args.namespaces, args.seed, args.indent)
    if args.output != "-":
        print(f"wrote {args.output}: {args.nodes} nodes, {args.namespaces} team namespaces, "
              f"{size / 1e6:.1f} MB in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
