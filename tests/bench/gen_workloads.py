#!/usr/bin/env python3
"""Kueue Workloads for the ``admit`` bench row, from a rendered chain and its snapshot.

Reads the render (``render SNAP --format json``: ClusterQueues, LocalQueues, ResourceFlavors,
NodeFeatures) and the snapshot's Nodes, and writes a ``WorkloadList`` of ``--count`` Workloads spread
over the ClusterQueues by the size of their pools: half hold quota (``status.admission`` on one
flavor of their queue, one Pod placed on a Node of that flavor with room, as a ``slices``
topologyAssignment), the rest are pending; a tenth carry a fit-pin required node affinity. Whole
cards are asked of accelerated queues (the manufacturer's resource base), CPU of the others.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_snapshot import MANUFACTURERS  # noqa: E402  (the bases the snapshot's Nodes carry)

HOSTNAME = "kubernetes.io/hostname"
PROFILE = "topology.gpustack.ai/profile"  # set on the converged Nodes (the snapshot's lack it): not compared
FIT_KEY = "sliced-max-free-units.fit.gpustack.ai/{group}"


def _items(path: str) -> list[dict]:
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    return doc["items"] if isinstance(doc, dict) and "items" in doc else doc


def _base(resource: str) -> str | None:
    """The card resource a credits resource counts (credits.<...>/<manufacturer>)."""
    manufacturer = resource.rpartition("/")[2]
    entry = MANUFACTURERS.get(manufacturer)
    return entry["base"] if entry else None


def generate(rendered: list[dict], snapshot: list[dict], count: int, seed: int) -> dict:
    rng = random.Random(seed)
    features = {o["metadata"]["labels"].get("nfd.node.kubernetes.io/node-name"): o["spec"]["labels"]
                for o in rendered if o["kind"] == "NodeFeature"}
    nodes = {}
    for o in snapshot:
        if o.get("kind") == "Node":
            name = o["metadata"]["name"]
            nodes[name] = ({**o["metadata"].get("labels", {}), **features.get(name, {})},
                           o.get("status", {}).get("allocatable", {}))
    flavor_nodes = {}
    for o in rendered:
        if o["kind"] == "ResourceFlavor":
            wanted = o["spec"].get("nodeLabels", {})
            flavor_nodes[o["metadata"]["name"]] = [n for n, (labels, _) in sorted(nodes.items())
                                                   if all(labels.get(k) == v for k, v in wanted.items()
                                                          if k != PROFILE)]
    queues = {}
    for o in rendered:
        if o["kind"] == "ClusterQueue":
            group = o["spec"]["resourceGroups"][0]
            flavors = [f["name"] for f in group["flavors"]]
            queues[o["metadata"]["name"]] = (group["coveredResources"][0], flavors,
                                            o["metadata"]["labels"])
    local = {}
    for o in rendered:
        if o["kind"] == "LocalQueue":
            local.setdefault(o["spec"]["clusterQueue"], []).append((o["metadata"]["namespace"], o["metadata"]["name"]))
    weights = {q: max(1, sum(len(flavor_nodes.get(f, [])) for f in queues[q][1])) for q in queues if q in local}
    names = sorted(weights)
    used: dict[tuple[str, str], int] = {}
    items = []
    for i in range(count):
        cq = rng.choices(names, weights=[weights[q] for q in names])[0]
        resource, flavors, labels = queues[cq]
        namespace, queue = rng.choice(local[cq])
        base = _base(resource)
        request = {base: "1", "cpu": "1", "memory": "2Gi"} if base else {"cpu": str(rng.choice([1, 2])),
                                                                        "memory": "1Gi"}
        spec: dict = {"containers": [{"name": "main", "resources": {"requests": request}}]}
        if i % 10 == 0 and base:
            group = next((k.rpartition("/")[2] for k in labels if k.startswith("acceleratable.")), "group")
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": FIT_KEY.format(group=group), "operator": "Gt", "values": ["0"]}]}]}}}
        workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                    "metadata": {"name": f"wl-{i:06d}", "namespace": namespace,
                                 "creationTimestamp": f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"},
                    "spec": {"queueName": queue, "priority": rng.choice([0, 0, 10, 100]),
                             "podSets": [{"name": "main", "count": 1, "template": {"spec": spec}}]}}
        if i % 2 == 0:
            status = _holding(rng, cq, resource, flavors, flavor_nodes, nodes, used, base or "cpu", i)
            if status:
                workload["status"] = status
        items.append(workload)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadList", "items": items}


def _holding(rng: random.Random, cq: str, resource: str, flavors: list[str], flavor_nodes: dict, nodes: dict,
             used: dict, card: str, i: int) -> dict | None:
    """QuotaReserved + Admitted on a random flavor, its Pod on a Node with a free card (or None)."""
    order = rng.sample(flavors, len(flavors))
    for flavor, node in ((f, n) for f in order
                         for n in rng.sample(flavor_nodes.get(f, []), min(32, len(flavor_nodes.get(f, []))))):
        have = nodes[node][1].get(card)
        if have is None:
            continue
        have = int(have) if card != "cpu" else int(str(have).rstrip("m")) // (1000 if str(have).endswith("m") else 1)
        if used.get((node, card), 0) + 2 > have:
            continue
        used[(node, card)] = used.get((node, card), 0) + (1 if card != "cpu" else 2)
        stamp = f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:30:00Z"
        return {"admission": {"clusterQueue": cq, "podSetAssignments": [{
                    "name": "main", "flavors": {resource: flavor}, "count": 1,
                    "topologyAssignment": {"levels": [HOSTNAME], "slices": [
                        {"domainCount": 1, "valuesPerLevel": [{"universal": node}], "podCounts": {"universal": 1}}]}}]},
                "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp,
                                "reason": "QuotaReserved", "message": ""},
                               {"type": "Admitted", "status": "True", "lastTransitionTime": stamp,
                                "reason": "Admitted", "message": ""}]}
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--render", required=True, help="render SNAP --format json output")
    ap.add_argument("--snapshot", required=True, help="the snapshot (a JSON List)")
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    doc = generate(_items(args.render), _items(args.snapshot), args.count, args.seed)
    Path(args.output).write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
