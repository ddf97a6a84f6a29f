"""`gpustack-render summary`: one kubectl-style table of pools.

The numbers are recomputed here from what the other commands print, not from the summary code:
Nodes by matching the pool's ResourceFlavors' spec.nodeLabels against the Nodes' converged labels,
cards from the flavors' ``<aKey>.capacity`` labels, free cards and the largest free slice by
applying `node-patches`' own fit-label patches (jsonpatch) to the snapshot Nodes and reading the
keys the Capacity rules name; quota from the rendered ClusterQueue.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from cli_invoke import invoke
import yaml
from gpustack_render import pipeline
from gpustack_render.k8s import parse_quantity
from gpustack_render.views.summary import COLUMNS, WIDE_COLUMNS, format_table, summarise

REPO = Path(__file__).resolve().parents[1]
DEMO = str(REPO / "fixtures/demo")
MIXED = str(REPO / "fixtures/capacity/mixed")
CASES = REPO / "fixtures/cases"


def case(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    data = yaml.safe_load((CASES / name / "case.yaml").read_text())
    return tuple(str(CASES / name / s) for s in data["snapshot"]), tuple(data.get("set") or [])


@lru_cache(maxsize=None)
def context(snapshot: tuple[str, ...], sets: tuple[str, ...] = ()) -> pipeline.Context:
    return pipeline.prepare(list(snapshot), list(sets), None)


def cli(*args: str) -> Any:
    return invoke(*args)


def summary_json(snapshot: tuple[str, ...], sets: tuple[str, ...] = ()) -> dict[str, Any]:
    args = ["summary", *snapshot, "-o", "json"] + [a for s in sets for a in ("--set", s)]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def patched_node_labels(ctx: pipeline.Context) -> dict[str, dict[str, str]]:
    """The snapshot Nodes' labels after applying node-patches' metadata ("") patches."""
    nodes = {name: {"metadata": {"labels": dict(node.metadata.labels or {})}}
             for name, node in ctx.snapshot.nodes.items()}
    for entry in pipeline.node_patches(ctx):
        if entry["subresource"] == "":
            nodes[entry["node"]] = jsonpatch.apply_patch(copy.deepcopy(nodes[entry["node"]]), entry["patch"])
    return {name: node["metadata"].get("labels", {}) for name, node in nodes.items()}


def expected_pools(snapshot: tuple[str, ...], sets: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    ctx = context(snapshot, sets)
    objects = pipeline.render_objects(ctx, None)
    flavors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceFlavor"}
    converged = {f.name: f.converged for f in ctx.evaluation.node_facts}
    labels = patched_node_labels(ctx)
    prefix = ctx.rules.normalisation.aKey.labelPrefix
    out = {}
    for queue in (o for o in objects if o["kind"] == "ClusterQueue"):
        names = [f["name"] for g in queue["spec"].get("resourceGroups", []) for f in g["flavors"]]
        nodes = {n for n, lab in converged.items() for f in names
                 if all(lab.get(k) == v for k, v in flavors[f]["spec"]["nodeLabels"].items())}
        akeys = {k[len(prefix):] for f in names for k, v in flavors[f]["metadata"]["labels"].items()
                 if k.startswith(prefix) and v == "true"}
        entry: dict[str, Any] = {"nodes": len(nodes), "quota": {}}
        for f in (f for g in queue["spec"].get("resourceGroups", []) for f in g["flavors"]):
            for r in f["resources"]:
                entry["quota"][r["name"]] = entry["quota"].get(r["name"], 0) + parse_quantity(r["nominalQuota"])
        if akeys:
            (akey,) = akeys
            entry["cards"] = sum(int(flavors[f]["metadata"]["labels"][f"{prefix}{akey}.capacity"]) for f in names)
            shared = ctx.rules.capacity.fit_shared_label.render({"aKey": akey})
            sliced = ctx.rules.capacity.fit_sliced_label.render({"aKey": akey})
            entry["freeCards"] = sum(int(labels[n][shared]) for n in nodes if shared in labels[n])
            entry["maxFreeSlice"] = max((int(labels[n][sliced]) for n in nodes if sliced in labels[n]), default=None)
        out[queue["metadata"]["name"]] = entry
    return out


@pytest.mark.parametrize("snapshot,sets", [((DEMO,), ()), ((MIXED,), ()),
                                           ((DEMO,), ("instance-type-aware-cpu-manufacturer=true",))])
def test_numbers_match_what_render_and_node_patches_print(snapshot: tuple[str, ...], sets: tuple[str, ...]) -> None:
    pools = {p["name"]: p for p in summary_json(snapshot, sets)["pools"]}
    expected = expected_pools(snapshot, sets)
    assert set(pools) == set(expected)
    for name, want in expected.items():
        got = pools[name]
        assert got["nodes"] == want["nodes"] > 0, name
        assert {r: parse_quantity(v) for r, v in got["quota"].items()} == want["quota"], name
        if "cards" in want:
            assert got["acceleratable"] and got["cards"] == want["cards"] > 0, name
            assert got["freeCards"] == want["freeCards"], name
            assert got["maxFreeSlice"] == want["maxFreeSlice"], name
        else:
            assert not got["acceleratable"] and got["cards"] is None and got["freeCards"] is None, name


def test_mixed_snapshot_has_busy_cards() -> None:
    """The mixed fixture has allocated cards: free cards below cards, a slice below a whole card."""
    pools = summary_json((MIXED,))["pools"]
    accelerated = [p for p in pools if p["acceleratable"]]
    assert any(p["freeCards"] < p["cards"] for p in accelerated)
    units = context((MIXED,)).rules.manufacturers.units_per_accelerator
    assert any(p["maxFreeSlice"] is not None and 0 < p["maxFreeSlice"] < units for p in accelerated)


def test_json_shape() -> None:
    data = summary_json((DEMO,))
    assert list(data) == ["pools"]
    for pool in data["pools"]:
        assert set(pool) == {"name", "acceleratable", "acceleratorGroup", "nodes", "cards", "quota", "freeCards",
                             "maxFreeSlice", "stopPolicy", "refusal", "flavors", "localQueues", "warnings"}
        assert isinstance(pool["nodes"], int) and isinstance(pool["quota"], dict)
        assert all(isinstance(v, str) for v in pool["quota"].values())
        assert pool["stopPolicy"] == "None" and pool["refusal"] is None and pool["warnings"] == []
        assert pool["localQueues"] == 2  # namespaces default and team-a
    assert [p["name"] for p in data["pools"]] == sorted(p["name"] for p in data["pools"])


def columns_of(line: str, starts: list[int]) -> list[str]:
    return [line[a:b].rstrip() for a, b in zip(starts, starts[1:] + [len(line) + 1])]


@pytest.mark.parametrize("wide", [False, True])
def test_table_layout_is_kubectls(wide: bool) -> None:
    result = cli("summary", DEMO, *(["-o", "wide"] if wide else []))
    assert result.exit_code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    header = list(WIDE_COLUMNS if wide else COLUMNS)
    assert lines[0].split() == header and all(h == h.upper() for h in header)
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    assert len(lines) == 1 + len(summary_json((DEMO,))["pools"])
    for line in lines:
        assert line == line.rstrip()
        cells = columns_of(line, starts)
        assert all(cell and not cell.startswith(" ") for cell in cells), line  # left-aligned under the header
    for i in range(1, len(starts)):  # 3 spaces after the widest cell of each column
        widest = max(len(columns_of(line, starts)[i - 1]) for line in lines)
        assert starts[i] - starts[i - 1] == widest + 3
    rows = {columns_of(line, starts)[0]: dict(zip(header, columns_of(line, starts))) for line in lines[1:]}
    t4 = rows["gpustack--nvidia-tesla-t4-linux-amd64"]
    want = expected_pools((DEMO,))["gpustack--nvidia-tesla-t4-linux-amd64"]
    assert (t4["NODES"], t4["CARDS"], t4["FREE-CARDS"]) == (str(want["nodes"]), str(want["cards"]),
                                                            str(want["freeCards"]))
    assert rows["gpustack--generic-linux-amd64"]["CARDS"] == "<none>"


def test_empty_pools_held_and_unknown_fit() -> None:
    """No Node has an L4: the L4 pools are empty (0 Nodes, 0 cards, no quota), held, fit unknown."""
    snapshot, sets = case("lifecycle-empty-plan-hold")
    pools = {p["name"]: p for p in summary_json(snapshot, sets)["pools"]}
    empty = [p for p in pools.values() if p["acceleratable"]]
    assert len(empty) == 3
    for pool in empty:
        assert (pool["nodes"], pool["cards"], pool["quota"], pool["flavors"]) == (0, 0, {}, [])
        assert pool["freeCards"] is None and pool["maxFreeSlice"] is None and pool["stopPolicy"] == "Hold"
    assert [w for w in pools["team-l4-admin"]["warnings"] if "back-fill" in w]
    table = cli("summary", *snapshot).stdout
    row = next(line for line in table.splitlines() if line.startswith("team-l4 "))
    assert row.split()[1:6] == ["0", "0", "<none>", "<unknown>", "<unknown>"]


def test_refused_pool_shows_reason_and_its_warning_only() -> None:
    snapshot, sets = case("overlapping-selectors")
    pools = {p["name"]: p for p in summary_json(snapshot, sets)["pools"]}
    refused = {q.name: q.refusal for q in context(snapshot, sets).evaluation.plan.cluster_queues if q.refusal}
    assert refused
    for name, reason in refused.items():
        assert pools[name]["refusal"] == reason
        assert any(reason in w for w in pools[name]["warnings"])
        assert pools[name]["nodes"] > 0  # the pool's hardware is still shown
    others = [p for name, p in pools.items() if name not in refused]
    assert others and all(not any("plan refused" in w for w in p["warnings"]) for p in others)
    table = cli("summary", *snapshot).stdout
    assert any(line.startswith(name) and " OverlappingSelectors " in line
               for line in table.splitlines() for name in refused)


def test_no_pools_says_so_on_stderr() -> None:
    snapshot, sets = case("demo-manual")
    result = cli("summary", *snapshot, *[a for s in sets for a in ("--set", s)])
    assert result.exit_code == 0 and result.stdout == "" and "No resources found." in result.stderr
    assert summary_json(snapshot, sets) == {"pools": []}
    assert format_table([]) == ""


def test_summary_uses_the_one_evaluation() -> None:
    ctx = pipeline.prepare([DEMO], [], None)
    evaluation = ctx.evaluation
    summarise(ctx, pipeline.fit_node_labels(ctx))
    assert ctx.evaluation is evaluation


def test_output_does_not_depend_on_input_order() -> None:
    files = sorted(str(p) for p in Path(DEMO).iterdir())
    outputs = {cli("summary", *order).stdout for order in (files, files[::-1])}
    assert len(outputs) == 1 and next(iter(outputs)).startswith("NAME ")
    wide = {cli("summary", *order, "-o", "wide").stdout for order in (files, files[::-1])}
    assert len(wide) == 1
