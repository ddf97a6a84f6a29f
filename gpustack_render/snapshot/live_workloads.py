"""What ``snapshot`` keeps of a Kueue Workload: the fields the admission preview reads (admission.md §2).

A cluster's Workloads carry whole Pod templates (images, commands, environment, volumes) and long
status histories; a snapshot is committed to Git and re-read on every run, so only the fields the
preview reads are kept. The result is still a valid Workload of the version it was served at:
the keys kept are the ones its schema requires (a PodSet's ``template.spec.containers[].name``) or
reads, at the same paths.
"""

from __future__ import annotations

from typing import Any

# The kept fields as a tree: ``True`` keeps the value whole, a mapping keeps those keys of a mapping
# (of each item, for a list). Everything else is dropped.
Shape = dict[str, Any]

_CONTAINER: Shape = {"name": True, "resources": True}
_KEPT: Shape = {
    "apiVersion": True,
    "kind": True,
    "metadata": {"name": True, "namespace": True, "creationTimestamp": True},
    "spec": {
        "queueName": True,
        "priority": True,
        "podSets": {
            "name": True,
            "count": True,
            "topologyRequest": True,
            "template": {
                "metadata": {"annotations": True},
                "spec": {
                    "containers": _CONTAINER,
                    "initContainers": _CONTAINER,
                    "overhead": True,
                    "nodeSelector": True,
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": True}},
                    "tolerations": True,
                },
            },
        },
    },
    "status": {"admission": True, "conditions": True},
}


def _kept(value: Any, shape: Shape | bool) -> Any:
    if shape is True:
        return value
    assert isinstance(shape, dict)
    if isinstance(value, list):
        return [_kept(item, shape) for item in value]
    if not isinstance(value, dict):
        return value  # a wrong type stays as it is: the reader names it
    out: dict[str, Any] = {}
    for key, inner in shape.items():
        if key in value:
            kept = _kept(value[key], inner)
            if kept != {} or value[key] == {}:  # a mapping left empty by pruning goes (no `metadata: {}`)
                out[key] = kept
    return out


def prune_workload(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (a Workload as the API server serves it) with only the fields the preview reads."""
    pruned: dict[str, Any] = _kept(obj, _KEPT)
    return pruned
