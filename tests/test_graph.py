"""`gpustack-render graph` and the gpustack_render.views.graph model.

The model is checked against the rendered manifests themselves (every ClusterQueue, every flavor a
queue lists, quota sums recomputed here with the quantity parser, LocalQueue counts counted here),
Node counts against a plain Node x flavor scan of the converged labels. The DOT text is checked by
Graphviz's own `dot` (the final SVG text holds the names, quotes and backslashes included); the
Mermaid text structurally (every line is a declaration, an edge or a style, every edge joins
declared ids) and, when installed, by Mermaid's own parser (`mermaid.parse` under node + jsdom).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from cli_invoke import invoke
from gpustack_render import pipeline
from gpustack_render.views.graph import build_graph, count_nodes_per_flavor, pool_names, to_dot, to_mermaid
from gpustack_render.k8s import parse_quantity

REPO = Path(__file__).resolve().parents[1]
DEMO = str(REPO / "fixtures/demo")
CASES = REPO / "fixtures/cases"
MERMAID_DIR = Path(os.environ.get("GPUSTACK_RENDER_MERMAID_DIR", REPO / ".venv/mermaid"))


def case_snapshot(name: str) -> tuple[str, ...]:
    import yaml
    case = yaml.safe_load((CASES / name / "case.yaml").read_text())
    return tuple(str(CASES / name / s) for s in case["snapshot"])


@lru_cache(maxsize=None)
def context(snapshot: tuple[str, ...]) -> pipeline.Context:
    return pipeline.prepare(list(snapshot), [], None)


@lru_cache(maxsize=None)
def rendered(snapshot: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    return tuple(pipeline.render_objects(context(snapshot), None))


def graph_of(snapshot: tuple[str, ...], pools: list[str] | None = None) -> Any:
    ctx, objects = context(snapshot), list(rendered(snapshot))
    flavors = [o for o in objects if o["kind"] == "ResourceFlavor"]
    counts = count_nodes_per_flavor(flavors, {f.name: f.converged for f in ctx.evaluation.node_facts})
    refusals = {q.name: q.refusal for q in ctx.evaluation.plan.cluster_queues if q.refusal}
    return build_graph(objects, counts, refusals, pools)


def cli(*args: str) -> Any:
    return invoke(*args)


def of_kind(objects: Any, kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


# --- the model ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("snapshot", [(DEMO,), case_snapshot("overlapping-selectors"),
                                      case_snapshot("lifecycle-finalizing-flavor")])
def test_node_counts_equal_a_plain_scan_of_every_node_and_flavor(snapshot: tuple[str, ...]) -> None:
    ctx = context(snapshot)
    flavors = of_kind(rendered(snapshot), "ResourceFlavor")
    labels = {f.name: f.converged for f in ctx.evaluation.node_facts}
    expected = {f["metadata"]["name"]: sum(all(node.get(k) == v for k, v in f["spec"]["nodeLabels"].items())
                                           for node in labels.values()) for f in flavors}
    assert count_nodes_per_flavor(flavors, labels) == expected
    assert any(expected.values())


def test_node_counts_by_signature_on_synthetic_labels() -> None:
    flavors = [{"metadata": {"name": "a"}, "spec": {"nodeLabels": {"x": "1"}}},
               {"metadata": {"name": "b"}, "spec": {"nodeLabels": {"x": "1", "y": "2"}}},
               {"metadata": {"name": "none"}, "spec": {"nodeLabels": {"x": "9"}}}]
    nodes = {f"n{i}": {"x": "1", "y": "2" if i % 2 else "3", "other": str(i)} for i in range(10)}
    assert count_nodes_per_flavor(flavors, nodes) == {"a": 10, "b": 5, "none": 0}


def test_demo_graph_holds_every_queue_flavor_edge_and_summed_quota() -> None:
    objects = rendered((DEMO,))
    graph = graph_of((DEMO,))
    queues = of_kind(objects, "ClusterQueue")
    assert [q.name for q in graph.queues] == sorted(q["metadata"]["name"] for q in queues)
    expected_edges = {(f["name"], q["metadata"]["name"]) for q in queues
                      for g in q["spec"].get("resourceGroups", []) for f in g["flavors"]}
    assert {(e.flavor, e.queue) for e in graph.edges} == expected_edges
    assert {f.name for f in graph.flavors} == {f["metadata"]["name"] for f in of_kind(objects, "ResourceFlavor")}
    for queue, box in zip(sorted(queues, key=lambda q: q["metadata"]["name"]), graph.queues):
        sums: dict[str, Any] = {}
        for group in queue["spec"].get("resourceGroups", []):
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    sums[res["name"]] = sums.get(res["name"], 0) + parse_quantity(res["nominalQuota"])
        assert {r: parse_quantity(v) for r, v in box.quota} == sums
        lqs = [lq for lq in of_kind(objects, "LocalQueue") if lq["spec"]["clusterQueue"] == box.name]
        assert box.local_queues == len(lqs) > 0
        assert box.namespaces == tuple(sorted({lq["metadata"]["namespace"] for lq in lqs}))
        assert not box.refused and not box.held


def test_pool_narrows_to_its_flavors_and_local_queues() -> None:
    pool = "gpustack--nvidia-tesla-t4-linux-amd64"
    graph = graph_of((DEMO,), [pool])
    queue = next(q for q in of_kind(rendered((DEMO,)), "ClusterQueue") if q["metadata"]["name"] == pool)
    assert [q.name for q in graph.queues] == [pool]
    assert {f.name for f in graph.flavors} == {f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]}
    assert all(e.queue == pool for e in graph.edges)
    flavor_nodes = {f.name: len(f.nodes) for f in context((DEMO,)).evaluation.plan.flavors}
    assert all(f.nodes == flavor_nodes[f.name] for f in graph.flavors)


def test_refused_and_held_queues_are_marked() -> None:
    snapshot = case_snapshot("lifecycle-refused-too-many-flavors")
    graph = graph_of(snapshot)
    refused = {q.name: q.refusal for q in context(snapshot).evaluation.plan.cluster_queues if q.refusal}
    assert refused and {q.name for q in graph.queues if q.refused} == set(refused)
    text = to_mermaid(graph)
    marked = re.search(r"^  class (\S+) refused$", text, re.M)
    assert marked is not None
    assert len(marked.group(1).split(",")) == len(refused)
    held_snapshot = case_snapshot("lifecycle-admin-hold-and-drain")
    held = graph_of(held_snapshot)
    stopped = {q["metadata"]["name"] for q in of_kind(rendered(held_snapshot), "ClusterQueue")
               if q["spec"]["stopPolicy"] != "None"}
    assert stopped and {q.name for q in held.queues if q.held} == stopped
    assert re.search(r"^  class \S+ held$", to_mermaid(held), re.M)


def test_output_does_not_depend_on_object_order() -> None:
    objects = list(rendered((DEMO,)))
    ctx = context((DEMO,))
    counts = count_nodes_per_flavor(of_kind(objects, "ResourceFlavor"),
                                    {f.name: f.converged for f in ctx.evaluation.node_facts})
    first = build_graph(objects, counts)
    shuffled = objects[:]
    random.Random(7).shuffle(shuffled)
    second = build_graph(shuffled, counts)
    assert to_mermaid(first) == to_mermaid(second) and to_dot(first) == to_dot(second)


def test_ids_follow_names_so_another_pool_does_not_move_them() -> None:
    objects = list(rendered((DEMO,)))
    whole = to_mermaid(build_graph(objects, {}))
    one = to_mermaid(build_graph(objects, {}, pools=["gpustack--nvidia-a10g-linux-amd64"]))
    ids = set(re.findall(r"^  (cq_\w+)\[\[", one, re.M))
    assert ids and ids <= set(re.findall(r"^  (cq_\w+)\[\[", whole, re.M))


# --- awkward names: escaping -------------------------------------------------------------------------

AWKWARD = 'we"ird<b>#1;|x`[y]{z}\\q&amp;'


def awkward_objects() -> list[dict[str, Any]]:
    return [
        {"kind": "ResourceFlavor", "metadata": {"name": AWKWARD}, "spec": {"nodeLabels": {"k": "v"}}},
        {"kind": "ResourceFlavor", "metadata": {"name": "we-ird"}, "spec": {"nodeLabels": {"k": "w"}}},
        {"kind": "ClusterQueue", "metadata": {"name": "q" + AWKWARD},
         "spec": {"stopPolicy": "Hold", "resourceGroups": [
             {"coveredResources": ["r"], "flavors": [
                 {"name": AWKWARD, "resources": [{"name": 'r"1', "nominalQuota": "1500m"}]},
                 {"name": "we-ird", "resources": [{"name": 'r"1', "nominalQuota": "500m"}]},
                 {"name": "missing", "resources": [{"name": 'r"1', "nominalQuota": "1"}]}]}]}},
        {"kind": "LocalQueue", "metadata": {"name": "l", "namespace": "ns<1>"}, "spec": {"clusterQueue": "q" + AWKWARD}},
    ]


def test_awkward_names_quota_and_unrendered_flavors() -> None:
    graph = build_graph(awkward_objects(), {AWKWARD: 3}, {"q" + AWKWARD: "Because: reasons"})
    assert [q.quota for q in graph.queues] == [(('r"1', "3"),)]
    assert {f.name: (f.nodes, f.rendered) for f in graph.flavors} == {
        AWKWARD: (3, True), "we-ird": (0, True), "missing": (0, False)}
    assert graph.queues[0].refused and graph.queues[0].held


_MERMAID_ID = r"[A-Za-z][A-Za-z0-9_]*"
_LABEL = r'"[^"]*"'
_MERMAID_LINE = re.compile(
    rf"^  (?:(?P<decl>{_MERMAID_ID})(?:\(\[{_LABEL}\]\)|\[\[{_LABEL}\]\]|\[{_LABEL}\]|>{_LABEL}\])"
    rf"|(?P<src>{_MERMAID_ID}) -->(?:\|{_LABEL}\|)? (?P<dst>{_MERMAID_ID})"
    rf"|classDef (?P<cls>\w+) [^\"]+"
    rf"|class (?P<members>{_MERMAID_ID}(?:,{_MERMAID_ID})*) (?P<use>\w+))$")


def mermaid_structure(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """Declared ids and edges of our flowchart; fails on any line of another shape."""
    lines = text.splitlines()
    assert lines[0] == "flowchart LR" and text.endswith("\n")
    declared, edges, classes = [], [], set()
    for line in lines[1:]:
        m = _MERMAID_LINE.match(line)
        assert m, f"unexpected Mermaid line: {line!r}"
        if m["decl"]:
            declared.append(m["decl"])
        elif m["src"]:
            edges.append((m["src"], m["dst"]))
        elif m["cls"]:
            classes.add(m["cls"])
        else:
            assert m["use"] in classes and set(m["members"].split(",")) <= set(declared)
    assert len(declared) == len(set(declared)), "duplicate ids"
    assert all(a in declared and b in declared for a, b in edges), "edge to an undeclared id"
    return declared, edges


def test_mermaid_structure_of_demo_and_awkward_names() -> None:
    graph = graph_of((DEMO,))
    declared, edges = mermaid_structure(to_mermaid(graph))
    # Nodes -> flavor per flavor, flavor -> queue per edge, queue -> LocalQueues per queue with some
    assert len(edges) == len(graph.flavors) + len(graph.edges) + sum(1 for q in graph.queues if q.local_queues)
    assert len(declared) == 2 * len(graph.flavors) + len(graph.queues) + sum(1 for q in graph.queues if q.local_queues)
    text = to_mermaid(build_graph(awkward_objects(), {}, {"q" + AWKWARD: "x"}))
    mermaid_structure(text)
    assert "#quot;" in text and "#lt;b#gt;" in text and "#35;1;" in text and "#124;" in text
    assert "&amp;" not in text  # & itself is escaped, so an entity in a name is shown literally


def test_empty_graph_is_still_a_diagram() -> None:
    assert mermaid_structure(to_mermaid(build_graph([], {}))) == (["empty"], [])


# --- Mermaid's own parser (optional) -------------------------------------------------------------------

_PARSE_JS = """
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import fs from "node:fs";
const req = createRequire(process.argv[2] + "/package.json");
const { JSDOM } = req("jsdom");
const dom = new JSDOM("<!DOCTYPE html><body></body>");
globalThis.window = dom.window; globalThis.document = dom.window.document;
const { default: mermaid } = await import(pathToFileURL(req.resolve("mermaid")).href);
mermaid.initialize({ startOnLoad: false });
const texts = JSON.parse(fs.readFileSync(0, "utf8"));
const out = [];
for (const text of texts) {
  try { out.push((await mermaid.parse(text)).diagramType); } catch (e) { out.push("ERROR " + String(e.message || e)); }
}
console.log(JSON.stringify(out));
"""


def mermaid_parse(tmp_path: Path, texts: list[str]) -> list[str]:
    if shutil.which("node") is None or not (MERMAID_DIR / "node_modules" / "mermaid").is_dir():
        pytest.skip(f"Mermaid's parser is not installed (node and {MERMAID_DIR}/node_modules/mermaid): "
                    f"npm install --prefix {MERMAID_DIR} mermaid@11 jsdom")
    script = tmp_path / "parse.mjs"
    script.write_text(_PARSE_JS)
    done = subprocess.run(["node", str(script), str(MERMAID_DIR)], input=json.dumps(texts), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_mermaids_parser_accepts_every_diagram_and_rejects_a_broken_one(tmp_path: Path) -> None:
    texts = [to_mermaid(graph_of((DEMO,))), to_mermaid(graph_of(case_snapshot("lifecycle-refused-too-many-flavors"))),
             to_mermaid(build_graph(awkward_objects(), {}, {"q" + AWKWARD: 'r"x'})), to_mermaid(build_graph([], {})),
             'flowchart LR\n  a["unclosed]\n']
    results = mermaid_parse(tmp_path, texts)
    assert results[:-1] == ["flowchart-v2"] * (len(texts) - 1), results
    assert results[-1].startswith("ERROR")


# --- Graphviz ------------------------------------------------------------------------------------------

def dot_svg(text: str) -> ET.Element:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (Debian: apt-get install graphviz)")
    done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return ET.fromstring(done.stdout)


SVG = "{http://www.w3.org/2000/svg}"


def svg_nodes(svg: ET.Element) -> dict[str, list[str]]:
    """Graphviz's node names (the SVG <title>) → the text lines it drew."""
    out = {}
    for group in svg.iter(f"{SVG}g"):
        if group.get("class") == "node":
            title = group.find(f"{SVG}title")
            assert title is not None and title.text is not None
            out[title.text] = [t.text or "" for t in group.iter(f"{SVG}text")]
    return out


def test_dot_of_demo_draws_every_box_and_edge() -> None:
    graph = graph_of((DEMO,))
    svg = dot_svg(to_dot(graph))
    nodes = svg_nodes(svg)
    assert {n for n in nodes if n.startswith("cq:")} == {"cq:" + q.name for q in graph.queues}
    assert {n for n in nodes if n.startswith("rf:")} == {"rf:" + f.name for f in graph.flavors}
    edges = [g for g in svg.iter(f"{SVG}g") if g.get("class") == "edge"]
    assert len(edges) == len(graph.flavors) + len(graph.edges) + sum(1 for q in graph.queues if q.local_queues)
    t4 = nodes["cq:gpustack--nvidia-tesla-t4-linux-amd64"]
    assert t4[:2] == ["ClusterQueue", "gpustack--nvidia-tesla-t4-linux-amd64"] and "stopPolicy: None" in t4


def test_dot_keeps_awkward_names_verbatim() -> None:
    drawn = svg_nodes(dot_svg(to_dot(build_graph(awkward_objects(), {AWKWARD: 2}, {"q" + AWKWARD: 'no "way"'}))))
    texts = list(drawn.values())
    assert ["ResourceFlavor", AWKWARD] in texts
    queue = next(t for t in texts if t[:1] == ["ClusterQueue"])
    assert queue == ["ClusterQueue", "q" + AWKWARD, 'r"1: 3', "stopPolicy: Hold", 'REFUSED: no "way"']
    assert ["1 LocalQueue", "ns<1>"] in texts and ["2 Nodes"] in texts
    assert len(drawn) == 2 * 3 + 2  # node groups and flavors (two rendered, one missing), queue, LocalQueues


def test_dot_of_empty_graph_parses() -> None:
    assert svg_nodes(dot_svg(to_dot(build_graph([], {})))) == {"empty": ["no pools"]}


# --- the command ----------------------------------------------------------------------------------------

def test_cli_graph_mermaid_and_dot_match_the_model() -> None:
    graph = graph_of((DEMO,))
    mermaid = cli("graph", DEMO)
    assert mermaid.exit_code == 0, mermaid.output
    assert mermaid.stdout == to_mermaid(graph)
    dot = cli("graph", DEMO, "--format", "dot", "--pool", "gpustack--nvidia-a10g-linux-amd64")
    assert dot.exit_code == 0 and dot.stdout == to_dot(graph_of((DEMO,), ["gpustack--nvidia-a10g-linux-amd64"]))


def test_cli_unknown_pool_is_a_usage_error_with_a_suggestion() -> None:
    result = cli("graph", DEMO, "--pool", "gpustack--nvidia-tesla-t5-linux-amd64")
    assert result.exit_code == 2 and result.stdout == ""
    assert "did you mean 'gpustack--nvidia-tesla-t4-linux-amd64'?" in result.stderr
    assert "Traceback" not in result.stderr
    far = cli("graph", DEMO, "--pool", "zzz")
    assert far.exit_code == 2 and all(p in far.stderr for p in pool_names(rendered((DEMO,))))


def test_cli_output_does_not_depend_on_input_order() -> None:
    files = sorted(str(p) for p in Path(DEMO).iterdir())
    for fmt in ("mermaid", "dot"):
        outputs = {cli("graph", *order, "--format", fmt).stdout for order in (files, files[::-1])}
        assert len(outputs) == 1 and next(iter(outputs)).strip()


def test_cli_warns_when_the_diagram_is_too_big_for_mermaid(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpustack_render.views.graph as graph_module
    small = cli("graph", DEMO)
    assert small.exit_code == 0 and "warning" not in small.stderr
    monkeypatch.setattr(graph_module, "MERMAID_MAX_TEXT", len(small.stdout) - 1)
    big = cli("graph", DEMO)
    assert big.exit_code == 0 and big.stdout == small.stdout
    assert f"the diagram is {len(small.stdout):,} characters" in big.stderr and "--pool" in big.stderr
    assert "warning" not in cli("graph", DEMO, "--format", "dot").stderr
