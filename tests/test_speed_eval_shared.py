"""What stage 3 and ``node-patches`` share between Nodes gives exactly what per-Node work gives.

Stage 3 decides the flavors once per shape group and keeps their warnings to give them per Node,
falling back to Node-by-Node work when deciding fails; ``node-patches`` shares one desired capacity
mapping between Nodes with equal cards and decides the capacity ops once per distinct (desired,
owned keys, held quantities); the queue stage tests each signature against the flavors filed under
their rarest label; ``kubectl`` lines are written by orjson when it agrees with the stdlib. Each is
compared here with a plain reading: the recorded evaluation (which shares nothing), a per-Node
patch loop written out in the test, every flavor tested against every signature, ``json.dumps``.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from bench_generator import load_generator

from gpustack_render import pipeline
from gpustack_render.emit import patches
from gpustack_render.errors import Diagnostics, UserError
from gpustack_render.evaluate import build
from gpustack_render.evaluate.capacity import CapacityEvaluator
from gpustack_render.evaluate.queues import NodeMatcher
from gpustack_render.evaluate.record import Records
from gpustack_render.rules.resources import default_rules_dir


def _write(path: Path, items: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


@pytest.fixture(scope="module")
def generated_items() -> list[dict[str, Any]]:
    """300 Nodes of the benchmark's machine mix with their Devices."""
    return list(load_generator().generate(300, 3, seed=11)["items"])


def _drifted(items: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The snapshot with capacity values rewritten to equal quantities in other spellings (other
    objects of one value), some changed, some removed, fit labels and ledger rows edited."""
    rng = random.Random(seed)
    items = copy.deepcopy(items)
    for item in items:
        if item["kind"] == "Node":
            capacity = item.get("status", {}).get("capacity", {})
            for key, value in list(capacity.items()):
                roll = rng.random()
                if roll < 0.15 and value.isdigit() and value.endswith("000") and len(value) > 3:
                    capacity[key] = value[:-3] + "k"  # the same quantity, another text
                elif roll < 0.2:
                    capacity[key] = str(rng.choice([0, 1, 3, 6400000]))
                elif roll < 0.23:
                    del capacity[key]
            labels = item["metadata"].get("labels", {})
            for key in [k for k in labels if ".fit." in k]:
                if rng.random() < 0.2:
                    labels[key] = rng.choice(["0", "1", "1600000", "x"])
        elif item["kind"] == "Devices":
            for group in item.get("status", {}).get("groups", []):
                for row in group.get("accelerators", []):
                    if rng.random() < 0.2:
                        row["remaining"] = rng.choice([0, 160000, 1600000])
    return items


def _reference_patches(ctx: pipeline.Context) -> list[dict[str, Any]]:
    """node-patches read Node by Node: the desired keys (a fresh mapping each), then each key
    compared by value with the Node's own (a Fraction with an int), the owned keys not desired
    removed, the ops sorted by path."""
    evaluation = ctx.partial_evaluation
    evaluator = CapacityEvaluator(ctx.rules, Diagnostics())
    skipped = set(patches.uncaptured_devices(ctx.snapshot, evaluation, evaluator))
    out: list[dict[str, Any]] = []
    for facts in evaluation.node_facts:
        if facts.name in skipped:
            continue
        node = ctx.snapshot.nodes[facts.name]
        desired = evaluator.desired(node, ctx.snapshot.devices.get(facts.name), facts)
        for subresource, base, current, wanted, capacity in (
                ("", "/metadata/labels", node.metadata.labels, desired.labels, False),
                ("status", "/status/capacity", node.status.capacity, desired.capacity, True)):
            texts = {k: (patches.format_decimal_si(v) if capacity else v) for k, v in wanted.items()}
            if current is None:
                ops = [{"op": "add", "path": base, "value": dict(sorted(texts.items()))}] if wanted else []
            else:
                ops = []
                for key in sorted(wanted):
                    path = f"{base}/{patches.escape(key)}"
                    if key not in current:
                        ops.append({"op": "add", "path": path, "value": texts[key]})
                    elif current[key] != wanted[key]:
                        ops.append({"op": "replace", "path": path, "value": texts[key]})
                owns = evaluator.owns_capacity if capacity else evaluator.owns_label
                ops += [{"op": "remove", "path": f"{base}/{patches.escape(k)}"}
                        for k in current if owns(k) and k not in wanted]
                ops.sort(key=lambda op: op["path"])
            if ops:
                out.append({"node": facts.name, "subresource": subresource, "patch": ops})
    return out


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_shared_patches_equal_the_node_by_node_reading(tmp_path: Path, generated_items: list[dict[str, Any]],
                                                        seed: int | None) -> None:
    items = generated_items if seed is None else _drifted(generated_items, seed)
    ctx = pipeline.prepare([_write(tmp_path / "snapshot.json", items)], [], None)
    entries = pipeline.node_patches(ctx)
    assert entries == _reference_patches(ctx)
    assert len(entries) > 50  # the comparison is only worth something when there are ops
    if seed is not None:  # equal quantities in other spellings were really compared
        assert any(isinstance(v, str) and v.endswith("k") for i in items if i["kind"] == "Node"
                   for v in i["status"].get("capacity", {}).values())
    ops = [op for entry in entries for op in entry["patch"]]
    assert len({id(op) for op in ops}) == len(ops)  # no op object is shared (a YAML writer would alias it)


def test_shared_desired_capacity_is_only_handed_out_when_asked(tmp_path: Path,
                                                                generated_items: list[dict[str, Any]]) -> None:
    ctx = pipeline.prepare([_write(tmp_path / "snapshot.json", generated_items)], [], None)
    evaluator = CapacityEvaluator(ctx.rules, Diagnostics())
    by_capacity: dict[tuple[tuple[str, int], ...], list[dict[str, int]]] = {}
    for facts in ctx.partial_evaluation.node_facts:
        devices = ctx.snapshot.devices.get(facts.name)
        node = ctx.snapshot.nodes[facts.name]
        desired = evaluator.desired(node, devices, facts)
        if not facts.managed or devices is None:
            assert desired.capacity == {} and desired.labels == {}
            continue
        shared, labels = evaluator.desired_parts(node, devices, facts)
        assert desired.capacity == shared and desired.capacity is not shared and desired.labels == labels
        by_capacity.setdefault(tuple(sorted(shared.items())), []).append(shared)
    sharing = [group for group in by_capacity.values() if len(group) > 1 and group[0]]
    assert sharing and all(all(d is group[0] for d in group) for group in sharing)


# --- stage 3: flavors once per shape, Node by Node when that fails ---------------------------------

def _node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi"}}}


def _gpu_labels(count: str, os_label: bool = True, os: str = "linux", arch: str = "amd64") -> dict[str, str]:
    labels = {"gpustack.ai/managed": "true", "kubernetes.io/arch": arch,
              "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
              "acceleratable.feature.gpustack.ai/nvidia-l4": "true",
              "acceleratable.feature.gpustack.ai/nvidia-l4.count": count}
    if os_label:
        labels["kubernetes.io/os"] = os
    return labels


def _evaluate(paths: list[str], rules_dir: Path | None, recorded: bool) -> tuple[str, list[str]]:
    ctx = pipeline.prepare(paths, [], rules_dir)
    diag = Diagnostics()
    try:
        build.evaluate(ctx.snapshot, ctx.rules, ctx.settings, diag, Records() if recorded else None)
    except UserError as err:
        return "; ".join(p.format() for p in err.problems), diag.warnings
    return "", diag.warnings


def test_a_flavor_name_collision_comes_after_the_same_warnings(tmp_path: Path) -> None:
    """A name format that runs os and arch together makes two groups of one name (linux/amd64 and
    linu/xamd64): the error is raised at the second group's first Node, after the warnings of the
    Nodes before it and its own, exactly as Node-by-Node work (the recorded evaluation) gives them."""
    rules_dir = tmp_path / "rules"
    shutil.copytree(default_rules_dir(), rules_dir)
    naming = (rules_dir / "naming.yaml").read_text()
    old = 'accelerated: "gpustack--{gKey}--{aKey}-{os}-{arch}-{count}d-{profile}"'
    assert old in naming
    (rules_dir / "naming.yaml").write_text(naming.replace(old, old.replace("-{os}-{arch}-", "-{os}{arch}-")))
    snapshot = _write(tmp_path / "nodes.json", [
        _node("a-warned", _gpu_labels("2", os_label=False)),   # warned: no os label
        _node("b-two", _gpu_labels("2")),
        _node("c-bad-count", _gpu_labels("x")),                 # warned by its flavors: count is not a number
        _node("d-other", _gpu_labels("2", os="linu", arch="xamd64")),  # its flavor's name is b-two's
        _node("e-late", _gpu_labels("2", os_label=False)),      # after the collision: never warned
    ])
    cached = _evaluate([snapshot], rules_dir, recorded=False)
    recorded = _evaluate([snapshot], rules_dir, recorded=True)
    assert cached == recorded
    error, warnings = cached
    assert "two flavor groups get the same name" in error
    assert [w[w.index("Node/"):].split(":")[0] for w in warnings] == ["Node/a-warned", "Node/c-bad-count"]


def test_shape_flavor_warnings_are_given_per_node_in_name_order(tmp_path: Path) -> None:
    snapshot = _write(tmp_path / "nodes.json", [
        _node(name, _gpu_labels("x", os_label=name != "n2")) for name in ("n3", "n1", "n2", "n4")])
    cached = _evaluate([snapshot], None, recorded=False)
    recorded = _evaluate([snapshot], None, recorded=True)
    assert cached == recorded
    assert [w[w.index("Node/"):].split(":")[0] for w in cached[1]] == ["Node/n1", "Node/n2", "Node/n2", "Node/n3", "Node/n4"]


def test_queue_matcher_equals_every_flavor_against_every_signature(tmp_path: Path,
                                                                   generated_items: list[dict[str, Any]]) -> None:
    ctx = pipeline.prepare([_write(tmp_path / "snapshot.json", generated_items)], [], None)
    flavors_builder = build.FlavorBuilder(ctx.rules, ctx.settings, Diagnostics())
    _, facts, groups = build._stage3(ctx.snapshot, ctx.rules, ctx.settings, Diagnostics(), None, None,
                                     flavors_builder)
    flavors = flavors_builder.flavors()
    matcher = NodeMatcher(groups, flavors)
    keys = {k for f in flavors for k in f.node_labels}
    expected: dict[str, list[str]] = {}
    for node in facts:
        if node.managed:
            labels = {k: v for k, v in node.converged.items() if k in keys}
            for flavor in flavors:
                if flavor.node_labels.items() <= labels.items():
                    expected.setdefault(flavor.name, []).append(node.name)
    assert {k: sorted(v) for k, v in matcher.matches.items()} == expected
    assert sum(len(nodes) for nodes, _ in matcher.by_signature) == sum(f.managed for f in facts)


# --- kubectl lines ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["plain", "a\"quote\\slash/", "tab\tnew\nline\r", "\x00\x01\x1f", "del\x7f",
                                  "caf\u00e9", "\u2028sep", "astral \U0001F600", ""])
def test_compact_json_is_the_stdlib_json(text: str) -> None:
    value = [{"op": "add", "path": f"/metadata/labels/{text}", "value": text}, {text: {text: text}}]
    assert patches._compact_json(value) == json.dumps(value, separators=(",", ":"))
