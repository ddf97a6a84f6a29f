"""``explain`` formats the evaluator's own decision records (issue 13 point 1).

Two checks:

* every decision the evaluator records for a target is shown by ``explain`` for it (no record is
  computed for nothing, none is lost on the way to the report), over the demo, the capacity mix and
  the lifecycle / overlapping-selectors / existing-instance-type fixture cases;
* against a capture of ``explain --format json`` made before explain became a formatter
  (tests/golden/explain-before.json.gz: per target its snapshot, ``--set`` and the JSON then): every
  piece of information present then — rule file:line origins, settings with their sources, fields
  and their values, section lines, facts — is present now. Compared as sets of items, not byte for
  byte.
"""

from __future__ import annotations

import gzip
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from gpustack_render import pipeline
from gpustack_render.explain import explain
from gpustack_render.rules.expressions import Verdict

REPO = Path(__file__).resolve().parents[1]


def _case_inputs() -> dict[str, tuple[list[str], list[str]]]:
    """label -> (snapshot paths relative to the repository, --set values)."""
    out: dict[str, tuple[list[str], list[str]]] = {
        "demo": (["fixtures/demo"], []), "mixed": (["fixtures/capacity/mixed"], [])}
    for case in sorted((REPO / "fixtures" / "cases").iterdir()):
        if not (case.name.startswith("lifecycle-") or case.name in ("overlapping-selectors", "existing-instance-type")):
            continue
        spec = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
        if spec.get("rules") or spec.get("command", "render") != "render":
            continue
        sets = spec.get("set") or []
        out[case.name] = ([os.path.relpath(case / p, REPO) for p in spec["snapshot"]], list(sets))
    return out


CASES = _case_inputs()


@lru_cache(maxsize=None)
def _context(label: str) -> tuple[Any, dict[str, tuple[str, str]]]:
    snap, sets = CASES[label]
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        ctx = pipeline.prepare(snap, sets, None)
        return ctx, pipeline.setting_sources(ctx, sets)
    finally:
        os.chdir(cwd)


def _explain(label: str, target: str) -> dict[str, Any]:
    ctx, sources = _context(label)
    cwd = os.getcwd()
    os.chdir(REPO)  # origins are shown relative to the working directory, as the capture ran
    try:
        report = explain(ctx, target, sources)
        return json.loads(json.dumps(report.as_json(), default=str))
    finally:
        os.chdir(cwd)


def _targets(label: str) -> list[str]:
    ctx, _ = _context(label)
    plan = ctx.evaluation.plan
    out = [f"node/{name}" for name in sorted(ctx.snapshot.nodes)]
    out += [f"ResourceFlavor/{f.name}" for f in plan.flavors]
    out += [f"ClusterQueue/{q.name}" for q in plan.cluster_queues]
    out += [f"InstanceType/{it.name}" for it in plan.instance_types]
    out += [f"NodeFeature/{n.name}" for n in plan.node_features]
    out += [f"Topology/{t.name}" for t in plan.topologies] + [f"AdmissionCheck/{a.name}" for a in plan.admission_checks]
    out += [f"LocalQueue/{lq.namespace}/{lq.name}" for lq in plan.local_queues[:3]]
    return out


def _texts(report: dict[str, Any]) -> str:
    """Everything a report says, as one string (lines, origins, fields' origins)."""
    parts = [line["text"] for s in report["sections"] for line in s["lines"]]
    parts += [o for s in report["sections"] for line in s["lines"] for o in line.get("from", [])]
    parts += [o for f in report["fields"] for o in f["from"]]
    return "\n".join(parts)


def _verdict_shown(verdict: Verdict | None, text: str) -> bool:
    """A recorded verdict is shown by its reason when it decided against, else by its value."""
    return verdict is None or verdict.value or verdict.reason in text


@pytest.mark.parametrize("label", sorted(CASES))
def test_every_recorded_decision_is_shown(label: str) -> None:
    ctx, _ = _context(label)
    records = ctx.records
    checked = 0
    for target in _targets(label):
        report = _explain(label, target)
        text = _texts(report)
        kind, _, name = target.partition("/")
        if kind == "node":
            subject = f"Node/{name}"
            gkey = records.first(subject, "gKey")
            assert gkey is not None and report["facts"]["gKey"] == gkey.result
            assert [s["step"] for s in report["facts"]["gKeySteps"]] == [s["step"] for s in gkey.steps]
            for decision in records.of(subject, "flavor.cpu") + records.of(subject, "flavor.accelerated"):
                assert _verdict_shown(decision.verdict, text), (target, decision)
                if decision.verdict is None:  # a zero or missing count label
                    assert f"no flavor for {decision.input('aKey')}" in text, target
            managed = records.first(subject, "managed")
            assert managed is not None and (managed.result or _verdict_shown(managed.verdict, text)), target
            checked += 1
        elif kind == "ClusterQueue":
            subject = target
            selection = records.first(subject, "queue.selection")
            assert selection is not None and report["facts"]["selected"] == selection.result, target
            source = records.first(subject, "queue.instanceType")
            assert source is not None and report["facts"]["instanceType"] == source.result, target
            assert any(s["title"] == f"InstanceType ({source.result})" for s in report["sections"]), target
            refusal = records.first(subject, "queue.refusal")
            assert refusal is None or f"plan refused: {refusal.result}" in text, target
            for flavor in selection.result:
                assert f"selected {flavor}:" in text, target
            for decision in records.of(subject, "admissionCheck"):
                assert decision.input("check") in text, target
                assert _verdict_shown(decision.verdict, text), (target, decision)
            lifecycle = records.first(subject, "lifecycle")
            assert lifecycle is not None and f"lifecycle rule '{lifecycle.input('rule')}'" in text, target
            assert report["facts"]["stopPolicy"] == lifecycle.result, target
            save = records.first(subject, "lifecycle.save")
            assert save is None or f"saves {save.result}" in text, target
            checked += 1
        elif kind == "ResourceFlavor":
            selects = records.first(target, "flavor.nodeLabels")
            assert selects is not None, target
            extra = sorted(set(selects.result) - set(selects.input("contributing")))
            assert all(node in text for node in extra), (target, extra)
            checked += 1
        elif kind == "InstanceType" and report["rendered"]:
            preset = records.first(target, "preset")
            assert preset is not None and report["facts"]["pool"] == preset.input("flavors"), target
            match = next((s for s in preset.steps if s["step"] == "match"), None)
            assert report["facts"]["tier"] == (match["tier"] if match else None), target
            checked += 1
    assert checked


def test_render_records_nothing() -> None:
    """render's evaluation takes no recorder: the plain evaluation and the recording one plan the same."""
    from gpustack_render.evaluate.build import evaluate
    from gpustack_render.evaluate.record import Records
    from gpustack_render.errors import Diagnostics
    ctx, _ = _context("demo")
    plain = evaluate(ctx.snapshot, ctx.rules, ctx.settings, Diagnostics())
    records = Records()
    recorded = evaluate(ctx.snapshot, ctx.rules, ctx.settings, Diagnostics(), records)
    assert plain.plan == recorded.plan and records.by_subject


# --- against the capture made before explain became a formatter -----------------------------------

def _flat(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            yield from _flat(sub, f"{path}.{key}")
    elif isinstance(value, list) and value:
        for i, sub in enumerate(value):
            yield from _flat(sub, f"{path}[{i}]")
    else:
        yield f"{path}={json.dumps(value, sort_keys=True)}"


def inventory(report: dict[str, Any]) -> set[str]:
    """Every piece of information of an explain JSON report, one string each."""
    items = {f"meta {k}={json.dumps(report[k])}" for k in
             ("target", "kind", "name", "namespace", "rendered", "template", "sourceFile")}
    for item in report["fields"]:
        items.add(f"field {item['path']}={json.dumps(item['value'], sort_keys=True)}")
        items.update(f"fieldFrom {item['path']} <- {o}" for o in item["from"])
    for section in report["sections"]:
        for line in section["lines"]:
            items.add(f"line [{section['title']}] {line['text']}")
            items.update(f"from {o}" for o in line.get("from", []))
    for s in report["settings"]:
        items.add(f"setting {s['name']}={json.dumps(s['value'])} {s['source']} {s['detail']}")
    items.update(f"fact {x}" for x in _flat(report["facts"]))
    return items


BEFORE_BUNDLE = Path(__file__).parent / "golden" / "explain-before.json.gz"


@lru_cache(maxsize=1)
def _before_index() -> dict[str, dict[str, Any]]:
    """target key → {target, snapshot, set, before}: the capture of explain's JSON made before it
    became a formatter of the evaluator's records, kept (gzipped, the two 65-flavor cases left out
    for size) in tests/golden/explain-before.json.gz so the comparison runs everywhere."""
    with gzip.open(BEFORE_BUNDLE, "rt", encoding="utf-8") as handle:
        return dict(json.load(handle))


def _captured_labels() -> list[str]:
    return sorted({key.split("__", 1)[0] for key in _before_index()})


def test_the_capture_covers_the_cases() -> None:
    """The bundle must hold every case of CASES but the 65-flavor ones (left out for size; the last one
    came after the capture)."""
    assert set(_captured_labels()) == set(CASES) - {"lifecycle-too-many-flavors-boundary",
                                                    "lifecycle-refused-too-many-flavors",
                                                    "lifecycle-refused-drops-gone-flavors"}


@pytest.mark.parametrize("label", _captured_labels())
def test_explain_keeps_the_information_of_the_capture_before(label: str) -> None:
    index = {k: v for k, v in _before_index().items() if k.split("__", 1)[0] == label}
    assert index
    lost: dict[str, list[str]] = {}
    for key, entry in index.items():
        before = entry["before"]
        if before.startswith("EXIT"):
            continue
        # the templates are templates/<Kind>.yaml since they became YAML trees (the capture names .yaml.j2)
        missing = inventory(json.loads(before.replace(".yaml.j2", ".yaml"))) - inventory(_explain(label, entry["target"]))
        if missing:
            lost[entry["target"]] = sorted(missing)
    assert not lost, json.dumps(lost, indent=1)[:4000]
