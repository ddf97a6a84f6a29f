"""admit: reading the chain objects (admission.md §4) and the output views (§9)."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_render.admit.chain import quantity_text, read_chain, resource_value
from gpustack_render.admit.output import compare, markdown, text

K = "kueue.x-k8s.io/v1beta2"


def cq(name: str, flavors: list[str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": K, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"],
                                         "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": "4"}]}
                                                     for f in flavors]}], **spec}}


def rf(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": K, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def test_read_chain_fields() -> None:
    chain = read_chain([
        cq("q", ["f"], queueingStrategy="StrictFIFO", preemption={"withinClusterQueue": "LowerPriority"},
           flavorFungibility={"whenCanPreempt": "MayStopSearch"},
           admissionChecksStrategy={"admissionChecks": [{"name": "ac"}]}),
        rf("f", nodeLabels={"k": "v"}, topologyName="t"),
        {"apiVersion": K, "kind": "Topology", "metadata": {"name": "t"},
         "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": K, "kind": "AdmissionCheck", "metadata": {"name": "ac"}},
        {"apiVersion": K, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "n"},
         "spec": {"clusterQueue": "q"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ignored"}},
    ])
    queue = chain.queues["q"]
    assert (queue.strategy, queue.preempt_within, queue.when_can_preempt) == ("StrictFIFO", "LowerPriority",
                                                                             "MayStopSearch")
    assert queue.flavors[0].nominal == {"cpu": 4000} and queue.admission_checks == ["ac"]
    assert queue.inactive == ""
    assert chain.local_queues == {("n", "lq"): "q"}
    assert chain.flavors["f"].node_labels == {"k": "v"} and chain.topologies["t"] == ["kubernetes.io/hostname"]


@pytest.mark.parametrize("objects, reason", [
    ([cq("q", ["f"], stopPolicy="Hold"), rf("f")], "stopPolicy is Hold"),
    ([cq("q", ["missing"])], "flavor missing doesn't exist"),
    ([cq("q", ["f"]), rf("f", topologyName="none")], "Topology none doesn't exist"),
    ([cq("q", ["f"], admissionChecks=["ac"]), rf("f")], "AdmissionCheck ac doesn't exist"),
    ([cq("q", ["f"], admissionChecks=["ac"]), rf("f"),
      {"apiVersion": K, "kind": "AdmissionCheck", "metadata": {"name": "ac"},
       "status": {"conditions": [{"type": "Active", "status": "False"}]}}], "AdmissionCheck ac is inactive"),
])
def test_inactive_reasons(objects: list[dict[str, Any]], reason: str) -> None:
    assert read_chain(objects).queues["q"].inactive == reason


def test_mixed_tas_flavors_make_the_queue_inactive() -> None:
    objects = [cq("q", ["a", "b"]), rf("a", topologyName="t"), rf("b"),
               {"apiVersion": K, "kind": "Topology", "metadata": {"name": "t"}, "spec": {"levels": []}}]
    assert read_chain(objects).queues["q"].inactive == "TAS and non-TAS flavors in one resource group"


def test_int64_accounting_and_quantity_text() -> None:
    from fractions import Fraction
    assert resource_value("cpu", Fraction(1, 2)) == 500 and quantity_text("cpu", 500) == "500m"
    assert quantity_text("cpu", 4000) == "4"
    assert resource_value("memory", Fraction(3, 2)) == 2  # rounded up, as Quantity.Value
    assert quantity_text("example.com/credits", 1600000) == "1600k"
    assert quantity_text("memory", 3 << 30) == "3Gi" and quantity_text("memory", 1500) == "1500"
    assert quantity_text("hugepages-2Mi", 4 << 20) == "4Mi"


def _doc(outcome: str, used: str = "1") -> dict[str, Any]:
    return {"chain": "x", "workloads": [{"namespace": "n", "name": "w", "clusterQueue": "q", "priority": 0,
                                         "outcome": outcome, "podSets": [{"name": "main", "count": 1, "flavor": "f",
                                                                          "mode": "Fit", "nodes": {"node-1": 1},
                                                                          "requests": {}, "reasons": []}],
                                         "preempts": [], "preemptedBy": None, "evicted": None, "reason": "r|x"}],
            "queues": [{"name": "q", "flavors": [{"name": "f", "resource": "cpu", "nominal": "4", "used": used}]}]}


def test_compare_and_views() -> None:
    same = compare(_doc("Admitted"), _doc("Admitted"))
    assert same["changed"] == []
    changed = compare(_doc("Kept"), _doc("Pending", used="0"))
    assert changed["changed"] == [{"namespace": "n", "name": "w", "live": "Kept", "rendered": "Pending", "why": "r|x"}]
    md = markdown(changed)
    assert "| `n/w` | Kept | Pending | r\\|x |" in md and "| `q` | `f` | cpu | 1 → 0 | 4 → 4 |" in md
    table = text(_doc("Admitted"))
    assert table.splitlines()[0].split() == ["NAMESPACE", "NAME", "QUEUE", "PRIORITY", "OUTCOME", "FLAVOR", "NODES",
                                             "REASON"]
    assert "ClusterQueue q: f cpu 1/4" in table


def test_markdown_stays_within_limit() -> None:
    live, rendered = _doc("Kept"), _doc("Pending")
    live["workloads"] = [dict(live["workloads"][0], name=f"w{i}") for i in range(500)]
    rendered["workloads"] = [dict(rendered["workloads"][0], name=f"w{i}") for i in range(500)]
    md = markdown(compare(live, rendered), limit=4000)
    assert len(md) <= 4000 and "more row(s) left off" in md
