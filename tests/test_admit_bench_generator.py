"""tests/bench/gen_workloads.py, the admit bench row's Workloads: valid Workloads the admit reader
takes, half holding quota on a flavor of their queue with a Node of that flavor, a tenth fit-pinned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import yaml

from bench_generator import load_workload_generator

REPO = Path(__file__).resolve().parents[1]


def _nodes() -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all((REPO / "fixtures/admit/cluster/nodes.yaml").read_text()))
    items = [item for doc in docs for item in (doc.get("items") or [doc])]
    return [item for item in items if item.get("kind") == "Node"]


def test_generated_workloads(cli: Callable[..., Any], tmp_path: Path) -> None:
    rendered = json.loads(cli("render", "fixtures/demo", "--format", "json").stdout)["items"]
    doc = load_workload_generator().generate(rendered, _nodes(), 40, seed=1)
    items = doc["items"]
    assert len(items) == 40 and doc["kind"] == "WorkloadList"
    holders = [w for w in items if "status" in w]
    assert 0 < len(holders) <= 20
    flavors = {o["metadata"]["name"] for o in rendered if o["kind"] == "ResourceFlavor"}
    for w in holders:
        assert set(w["status"]["admission"]["podSetAssignments"][0]["flavors"].values()) <= flavors
    assert any("affinity" in w["spec"]["podSets"][0]["template"]["spec"] for w in items[::10])
    path = tmp_path / "workloads.json"
    path.write_text(json.dumps(doc))
    result = cli("admit", "fixtures/admit/cluster", path, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert len(json.loads(result.stdout)["workloads"]) >= 40
