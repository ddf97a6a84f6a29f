"""A Kueue Workload's API identity: what the snapshot reader needs to place one, without the typed
model (:mod:`.workload_model`, which only the commands that read Workloads load)."""

from __future__ import annotations

GROUP = "kueue.x-k8s.io"
KIND = "Workload"
DEFAULT_NAMESPACE = "default"  # a Workload without metadata.namespace, as `kubectl apply` would place it
