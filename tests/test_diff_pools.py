"""`diff`: the summary (text line, json data), the --max-removals guard, the "more than half removed"
warning, the markdown pool table (before → after, changed rows first) and its diagram, cutting a
huge comment to GitHub's limit, and `--against -` (standard input). In-process through CliRunner."""

from __future__ import annotations

import copy
import io
import json
import re
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import pytest
from cli_invoke import invoke
import yaml
from click.testing import Result

from gpustack_render import pipeline
from gpustack_render.diff.report import _diagram_section, MARKDOWN_DIAGRAM_BUDGET
from gpustack_render.errors import UserError
from gpustack_render.diff.manifests import read_manifests
from gpustack_render.yamlio import dump_yaml_stream

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
CQ_GENERIC = "gpustack--generic-linux-amd64"
CQ_A10G = "gpustack--nvidia-a10g-linux-amd64"
CQ_T4 = "gpustack--nvidia-tesla-t4-linux-amd64"
GITHUB_COMMENT_LIMIT = 65_536


def cli(*args: str, stdin: str | None = None) -> Result:
    result = invoke(*args, input=stdin)
    assert "Traceback" not in result.stderr, result.stderr
    return result


@lru_cache(maxsize=None)
def _context(snapshot: str) -> pipeline.Context:
    return pipeline.prepare([snapshot], [], None)


def render(snapshot: Path) -> list[dict[str, Any]]:
    return copy.deepcopy(pipeline.render_objects(_context(str(snapshot)), None))


def find(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in items if o["kind"] == kind and o["metadata"]["name"] == name)


def write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(dump_yaml_stream(items), encoding="utf-8")
    return path


def selected(node_labels: Mapping[str, Mapping[str, str]], flavors: list[dict[str, Any]], queue: dict[str, Any]) -> int:
    """The test's own count of a queue's Nodes: a plain scan, every Node against every flavor."""
    names = {f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]}
    selectors = [f["spec"]["nodeLabels"] for f in flavors if f["metadata"]["name"] in names]
    return sum(any(all(labels.get(k) == v for k, v in sel.items()) for sel in selectors)
               for labels in node_labels.values())


@pytest.fixture(scope="module")
def converged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo snapshot after NFD applied the rendered NodeFeatures: Node labels = converged labels,
    so "before" Node counts are real (in the raw demo no Node carries a flavor's labels yet)."""
    snap = tmp_path_factory.mktemp("converged")
    shutil.copytree(DEMO, snap, dirs_exist_ok=True)
    labels = {f.name: f.converged for f in _context(str(DEMO)).evaluation.node_facts}
    nodes = yaml.safe_load((DEMO / "nodes.yaml").read_text(encoding="utf-8"))
    for node in nodes["items"]:
        node["metadata"]["labels"] = dict(labels[node["metadata"]["name"]])
    (snap / "nodes.yaml").write_text(yaml.safe_dump(nodes), encoding="utf-8")
    return snap


def _owned_queue(name: str, flavor: str, quota: str = "16") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name, "labels": {"resource.gpustack.ai/type": "instancetypes"}},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}}


def _owned_flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": {"resource.gpustack.ai/type": "nodes"}},
            "spec": {"nodeLabels": {"team": name}}}


# --- summary --------------------------------------------------------------------------------------

def _mixed_previous(demo: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One added AdmissionCheck, two changed ClusterQueues, one removed ResourceFlavor."""
    previous = [o for o in demo if o["metadata"]["name"] != "gpustack-node-devices"]
    find(previous, "ClusterQueue", CQ_T4)["spec"]["stopPolicy"] = "Hold"
    find(previous, "ClusterQueue", CQ_A10G)["spec"]["stopPolicy"] = "HoldAndDrain"
    return previous + [_owned_flavor("gpustack--gone")]


def test_text_ends_with_a_summary_per_kind_in_rule_order(tmp_path: Path) -> None:
    prev = write(tmp_path / "prev.yaml", _mixed_previous(render(DEMO)))
    result = cli("diff", DEMO, "--against", prev)
    assert result.exit_code == 1, result.stderr
    last = result.stdout.splitlines()[-1]
    assert last == "1 added (AdmissionCheck 1), 2 changed (ClusterQueue 2), 1 removed (ResourceFlavor 1)"
    assert result.stdout.count("\ndiff -u ") + result.stdout.startswith("diff -u ") == 4


def test_json_carries_the_same_summary_as_data(tmp_path: Path) -> None:
    prev = write(tmp_path / "prev.yaml", _mixed_previous(render(DEMO)))
    out = json.loads(cli("diff", DEMO, "--against", prev, "--format", "json").stdout)
    assert out["summary"] == {
        "added": 1, "changed": 2, "removed": 1,
        "kinds": {"AdmissionCheck": {"added": 1, "changed": 0, "removed": 0},
                  "ResourceFlavor": {"added": 0, "changed": 0, "removed": 1},
                  "ClusterQueue": {"added": 0, "changed": 2, "removed": 0}}}
    assert [c["action"] for c in out["changes"]] == ["added", "removed", "changed", "changed"]


def test_summary_counts_a_node_once_for_its_two_patches(tmp_path: Path) -> None:
    prev = write(tmp_path / "prev.yaml", render(DEMO))
    patches = json.loads(cli("node-patches", DEMO, "--format", "json").stdout)
    nodes = {p["node"] for p in patches}
    assert len(patches) > len(nodes), "the demo must have a Node with both patches for this test to mean anything"
    result = cli("diff", DEMO, "--against", prev, "--include-node-patches")
    assert result.stdout.splitlines()[-1] == f"0 added, {len(nodes)} changed (Node {len(nodes)}), 0 removed"


# --- --max-removals -------------------------------------------------------------------------------

@pytest.mark.parametrize("limit, code", [(3, 1), (4, 1), (2, 2), (0, 2)])
def test_max_removals_boundary(tmp_path: Path, limit: int, code: int) -> None:
    """Three removals: a limit of 3 or more reports them (exit 1); below, exit 2 with one error line
    and nothing on stdout, in every format."""
    previous = render(DEMO) + [_owned_flavor(f"gpustack--gone-{i}") for i in range(3)]
    prev = write(tmp_path / "prev.yaml", previous)
    for fmt in ("text", "json", "markdown"):
        result = cli("diff", DEMO, "--against", prev, "--format", fmt, "--max-removals", str(limit))
        assert result.exit_code == code, (fmt, result.stderr)
        if code == 2:
            assert result.stdout == ""
            assert result.stderr.splitlines() == [
                f"gpustack-render: error: 3 owned objects would be removed (ResourceFlavor 3), "
                f"more than --max-removals {limit}"]
        else:
            assert "error" not in result.stderr and "warning: diff:" not in result.stderr  # 3 of 10: no warning
            assert "removed" in result.stdout


def test_max_removals_zero_passes_a_render_without_removals(tmp_path: Path) -> None:
    previous = render(DEMO)
    find(previous, "ClusterQueue", CQ_T4)["spec"]["stopPolicy"] = "Hold"
    result = cli("diff", DEMO, "--against", write(tmp_path / "prev.yaml", previous), "--max-removals", "0")
    assert result.exit_code == 1 and result.stdout.splitlines()[-1] == "0 added, 1 changed (ClusterQueue 1), 0 removed"


def test_max_removals_must_be_a_count() -> None:
    result = cli("diff", DEMO, "--max-removals", "-1")
    assert result.exit_code == 2 and "--max-removals" in result.stderr and result.stdout == ""


# --- more than half removed -----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_losing_more_than_half_of_a_kind_warns(tmp_path: Path, fmt: str) -> None:
    """The render keeps 3 ClusterQueues; 4 more owned ones in the previous render would go: 4 of 7."""
    extra = [_owned_queue(f"gpustack--old-{i}", "gpustack--gone") for i in range(4)]
    result = cli("diff", DEMO, "--against", write(tmp_path / "prev.yaml", render(DEMO) + extra), "--format", fmt)
    assert result.exit_code == 1
    warning = ("gpustack-render: warning: diff: 4 of 7 owned ClusterQueue objects would be removed (more than "
               "half); check the snapshot and the rules before applying")
    assert warning in result.stderr.splitlines()
    if fmt == "markdown":
        assert "> **Warning:** diff: 4 of 7 owned ClusterQueue objects would be removed" in result.stdout
    else:
        assert "warning" not in result.stdout


def test_losing_exactly_half_does_not_warn(tmp_path: Path) -> None:
    extra = [_owned_queue(f"gpustack--old-{i}", "gpustack--gone") for i in range(3)]
    result = cli("diff", DEMO, "--against", write(tmp_path / "prev.yaml", render(DEMO) + extra))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "0 added, 0 changed, 3 removed (ClusterQueue 3)"
    assert "warning" not in result.stderr


def test_live_objects_count_as_owned_too(tmp_path: Path) -> None:
    """Without --against the snapshot's own objects are current: its one owned foreign-named flavor
    vanishing is all of that kind's owned objects there (1 of 1), so it warns."""
    snap = tmp_path / "snap"
    shutil.copytree(DEMO, snap)
    write(snap / "live.yaml", [_owned_flavor("gpustack--gone")])
    result = cli("diff", snap, "--format", "json")
    assert "warning: diff: 1 of 1 owned ResourceFlavor objects would be removed" in result.stderr


# --- the pool table -------------------------------------------------------------------------------

def _pool_rows(markdown: str) -> list[list[str]]:
    section = markdown.split("#### Pools (before → after)\n\n", 1)[1].split("\n\n", 1)[0]
    lines = section.splitlines()
    assert lines[0] == "| ClusterQueue | Change | Nodes | Flavors | Quota | Stop policy |"
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]


def test_pool_table_changed_rows_first_with_before_and_after(tmp_path: Path, converged: Path) -> None:
    desired = render(converged)
    previous = copy.deepcopy(desired)
    find(previous, "ClusterQueue", CQ_T4)["spec"]["stopPolicy"] = "Hold"
    generic = find(previous, "ClusterQueue", CQ_GENERIC)
    dropped = generic["spec"]["resourceGroups"][0]["flavors"].pop()
    flavors = [o for o in desired if o["kind"] == "ResourceFlavor"]
    kept_flavor = generic["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    previous.append(_owned_queue("gpustack--old-pool", kept_flavor, "16"))
    result = cli("diff", converged, "--against", write(tmp_path / "prev.yaml", previous), "--format", "markdown")
    assert result.exit_code == 1, result.stderr

    labels = {n: dict(node.metadata.labels or {}) for n, node in _context(str(converged)).snapshot.nodes.items()}
    queues = {q["metadata"]["name"]: q for q in desired if q["kind"] == "ClusterQueue"}
    nodes_before = selected(labels, flavors, generic)
    nodes_after = selected(labels, flavors, queues[CQ_GENERIC])
    assert nodes_before < nodes_after, "dropping a flavor must drop Nodes for this test to mean anything"
    quota_before = sum(int(f["resources"][0]["nominalQuota"]) for f in generic["spec"]["resourceGroups"][0]["flavors"])
    quota_after = quota_before + int(dropped["resources"][0]["nominalQuota"])
    t4_nodes = selected(labels, flavors, queues[CQ_T4])
    a10g_nodes = selected(labels, flavors, queues[CQ_A10G])
    old_nodes = selected(labels, flavors, previous[-1])
    assert min(t4_nodes, a10g_nodes, old_nodes) > 0

    rows = _pool_rows(result.stdout)
    # changed rows by name, then the unchanged one (a10g sorts before t4 but comes last)
    assert [r[:2] for r in rows] == [[f"`{CQ_GENERIC}`", "changed"], [f"`{CQ_T4}`", "changed"],
                                     ["`gpustack--old-pool`", "removed"], [f"`{CQ_A10G}`", "—"]]
    assert rows[0][2:] == [f"{nodes_before} → {nodes_after}", "3 → 4 (+1)",
                           f"`cpu` {quota_before} → {quota_after}", "None"]
    assert rows[1][2] == str(t4_nodes) and rows[1][3] == "2" and rows[1][5] == "Hold → None"
    assert rows[2][2:] == [f"{old_nodes} → —", "1 → —", "`cpu` 16 → —", "None → —"]
    assert rows[3][2] == str(a10g_nodes) and rows[3][5] == "None"


def test_after_counts_use_the_converged_labels(tmp_path: Path) -> None:
    """In the raw demo no Node carries the flavor labels yet; after counts what the rendered
    NodeFeatures will give them, and before what the current NodeFeatures give them: a previous
    render without NodeFeatures counts no Node."""
    desired = render(DEMO)
    previous = [o for o in copy.deepcopy(desired) if o["kind"] != "NodeFeature"]
    find(previous, "ClusterQueue", CQ_T4)["spec"]["stopPolicy"] = "Hold"
    result = cli("diff", DEMO, "--against", write(tmp_path / "prev.yaml", previous), "--format", "markdown")
    converged = {f.name: f.converged for f in _context(str(DEMO)).evaluation.node_facts}
    flavors = [o for o in desired if o["kind"] == "ResourceFlavor"]
    expected = selected(converged, flavors, find(desired, "ClusterQueue", CQ_T4))
    assert expected > 0
    t4 = next(r for r in _pool_rows(result.stdout) if r[0] == f"`{CQ_T4}`")
    assert t4[2] == f"0 → {expected}"


def test_before_counts_apply_the_current_node_features(tmp_path: Path) -> None:
    """A rules change that leaves the Nodes alone: the previous render's NodeFeatures (never applied
    to the raw demo's Nodes) give the Nodes the same flavor labels, so the Node count is unchanged."""
    desired = render(DEMO)
    previous = copy.deepcopy(desired)
    find(previous, "ClusterQueue", CQ_T4)["spec"]["stopPolicy"] = "Hold"
    result = cli("diff", DEMO, "--against", write(tmp_path / "prev.yaml", previous), "--format", "markdown")
    converged = {f.name: f.converged for f in _context(str(DEMO)).evaluation.node_facts}
    flavors = [o for o in desired if o["kind"] == "ResourceFlavor"]
    expected = selected(converged, flavors, find(desired, "ClusterQueue", CQ_T4))
    rows = {r[0]: r for r in _pool_rows(result.stdout)}
    assert rows[f"`{CQ_T4}`"][2] == str(expected)
    assert rows[f"`{CQ_T4}`"][5] == "Hold → None"
    unchanged = [r for name, r in rows.items() if name != f"`{CQ_T4}`"]
    assert unchanged and all(r[1] == "—" and "→" not in r[2] for r in unchanged)


def test_no_pool_section_when_no_queue_changes(tmp_path: Path, converged: Path) -> None:
    previous = [o for o in render(converged) if o["kind"] != "LocalQueue"]
    result = cli("diff", converged, "--against", write(tmp_path / "prev.yaml", previous), "--format", "markdown")
    assert result.exit_code == 1
    assert "#### Pools" not in result.stdout and "mermaid" not in result.stdout
    assert "#### Objects" in result.stdout


# --- size limits ----------------------------------------------------------------------------------

def _assert_valid_markdown(text: str) -> None:
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert text.count("<details>") == text.count("</details>")
    assert sum(1 for line in text.splitlines() if re.fullmatch(r"`{3,}\w*", line)) % 2 == 0
    columns = {"| Kind ": 4, "| ClusterQueue ": 6}
    for block in text.split("\n\n"):
        lines = block.splitlines()
        if lines and lines[0].startswith(tuple(columns)):
            want = next(n for head, n in columns.items() if lines[0].startswith(head))
            for line in lines:
                assert line.startswith("| ") and line.endswith(" |")
                assert len(re.findall(r"(?<!\\)\|", line)) == want + 1, line


def test_a_huge_diff_is_cut_to_a_valid_comment(tmp_path: Path, converged: Path) -> None:
    desired = render(converged)
    flavor = find(desired, "ClusterQueue", CQ_GENERIC)["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    previous = desired + [_owned_queue(f"gpustack--old-{i:04d}", flavor) for i in range(1500)]
    find(previous, "ClusterQueue", CQ_T4)["spec"]["stopPolicy"] = "Hold"
    result = cli("diff", converged, "--against", write(tmp_path / "prev.yaml", previous), "--format", "markdown")
    assert result.exit_code == 1
    text = result.stdout
    _assert_valid_markdown(text)
    rows = _pool_rows(text)
    assert rows[-1][0] == "…" and re.fullmatch(r"\d+ more pool\(s\), 2 of them unchanged", rows[-1][1])
    assert int(rows[-1][1].split()[0]) + len(rows) - 1 == 1503
    assert "| … | " in text.split("#### Objects", 1)[1]
    assert re.search(r"_Cut to fit a comment \(\d+ diff\(s\) not shown, \d+ pool row\(s\)\)", text)
    assert "```mermaid" in text  # the one changed pool that remains is drawn


def test_the_diagram_keeps_whole_pools_within_its_budget() -> None:
    def draw(pools: Any) -> str:
        return "flowchart LR\n" + "".join(f'  cq_{p}[["{p}"]]\n' + "  %% padding\n" * 40 for p in pools)
    names = [f"pool-{i:03d}" for i in range(200)]
    block = _diagram_section(names, draw)
    assert len(block) <= MARKDOWN_DIAGRAM_BUDGET
    drawn = re.findall(r"cq_(pool-\d+)", block)
    assert drawn and drawn == names[:len(drawn)] and len(drawn) < len(names)
    assert f"_{len(names) - len(drawn)} more changed pool(s) left out of the diagram" in block
    assert block.count("```") == 2
    assert "left out" in _diagram_section(["p"], lambda pools: "x" * (MARKDOWN_DIAGRAM_BUDGET + 1))
    assert "```mermaid" not in _diagram_section(["p"], lambda pools: "x" * (MARKDOWN_DIAGRAM_BUDGET + 1))


# --- --against - ----------------------------------------------------------------------------------

def test_against_stdin_equals_against_a_file(tmp_path: Path) -> None:
    previous = _mixed_previous(render(DEMO))
    prev = write(tmp_path / "prev.yaml", previous)
    for fmt in ("text", "json"):
        from_file = cli("diff", DEMO, "--against", prev, "--format", fmt)
        from_stdin = cli("diff", DEMO, "--against", "-", "--format", fmt, stdin=prev.read_text(encoding="utf-8"))
        assert (from_stdin.exit_code, from_stdin.stdout) == (from_file.exit_code, from_file.stdout) \
            and from_file.exit_code == 1
    as_list = json.dumps({"apiVersion": "v1", "kind": "List", "items": render(DEMO)})
    assert cli("diff", DEMO, "--against", "-", stdin=as_list).exit_code == 0


def test_snapshot_and_against_cannot_both_be_stdin() -> None:
    result = cli("diff", "-", "--against", "-", stdin="")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "gpustack-render: error: SNAPSHOT and --against cannot both be '-': standard input can be read once"]


def test_read_manifests_reads_stdin_and_names_it_in_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(dump_yaml_stream(render(DEMO)[:2])))
    assert [o["kind"] for o in read_manifests("-")] == [o["kind"] for o in render(DEMO)[:2]]
    monkeypatch.setattr("sys.stdin", io.StringIO("kind: [unclosed\n"))
    with pytest.raises(UserError) as err:
        read_manifests(Path("-"))
    assert "<stdin>" in str(err.value) and "invalid YAML" in str(err.value)
    monkeypatch.setattr("sys.stdin", io.StringIO("apiVersion: v1\nkind: ConfigMap\n"))
    with pytest.raises(UserError, match="<stdin>.*metadata.name"):
        read_manifests("-")
