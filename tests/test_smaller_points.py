"""Issue 24's smaller points (8), each against what a new admin ran into:

* ``pin --snapshot S W`` says that ``--snapshot`` took W, and how to write it;
* ``summary -o wide`` lists each pool's LocalQueue names (checked against the rendered LocalQueues);
* ``explain`` suggests the closest real name: the H100 pool for a mistyped H100 name, not the L4 one;
* ``summary`` writes MAX-FREE-SLICE as it writes the quota (``1600k``, not ``1600000``);
* a warning about a Node's labels names the snapshot file, the line of the label and the Node, and
  ``summary`` counts it under the pool the label was meant for (not the CPU pool the Node is left in);
* the README's timings say which machine they were measured on.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bench_generator import load_generator
from cli_invoke import invoke
from gpustack_render.k8s import parse_quantity

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
BAD_COUNT = "acceleratable.feature.gpustack.ai/nvidia-tesla-t4.count"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 generated Nodes: among their pools nvidia-h100-80gb-hbm3 and nvidia-l4 (both linux/amd64)."""
    path = tmp_path_factory.mktemp("generated") / "nodes.json"
    path.write_text(json.dumps(load_generator().generate(40, 3, seed=3), indent=1), encoding="utf-8")
    return path


# --- pin --snapshot S W ------------------------------------------------------------------------

def test_pin_says_that_snapshot_took_the_workloads() -> None:
    result = invoke("pin", "--snapshot", "fixtures/demo", "fixtures/pin/workloads")
    assert (result.exit_code, result.stdout) == (2, "")
    assert "Missing argument 'WORKLOAD...': --snapshot took every path up to the next option (fixtures/demo, " \
           "fixtures/pin/workloads), so none was left for WORKLOAD." in result.stderr
    assert "pin WORKLOAD... --snapshot SNAPSHOT..." in result.stderr
    assert "pin --snapshot SNAPSHOT... -- WORKLOAD..." in result.stderr
    # the way it names works, and pins what the other order pins
    ended = invoke("pin", "--snapshot", "fixtures/demo", "--", "fixtures/pin/workloads")
    first = invoke("pin", "fixtures/pin/workloads", "--snapshot", "fixtures/demo")
    assert ended.exit_code == first.exit_code == 0
    assert ended.stdout == first.stdout and "kind: Workload" in first.stdout


def test_pin_without_any_workload_is_still_the_plain_usage_error() -> None:
    result = invoke("pin", "--snapshot", "fixtures/demo")
    assert result.exit_code == 2
    assert "Missing argument 'WORKLOAD...'." in result.stderr and "took every path" not in result.stderr


# --- summary: LocalQueue names, one quantity format --------------------------------------------

def _table(stdout: str) -> list[dict[str, str]]:
    """A kubectl-style table as one dict per row (cells hold no blanks)."""
    header, *lines = stdout.splitlines()
    names = header.split()
    return [dict(zip(names, line.split())) for line in lines]


@pytest.mark.parametrize("which", ["demo", "generated"])
def test_summary_wide_lists_each_pools_local_queue_names(which: str, generated: Path) -> None:
    snapshot = str(DEMO if which == "demo" else generated)
    rendered = invoke("render", snapshot, "--format", "json")
    assert rendered.exit_code == 0
    wanted: dict[str, set[str]] = {}
    for obj in json.loads(rendered.stdout)["items"]:
        if obj["kind"] == "LocalQueue":
            wanted.setdefault(obj["spec"]["clusterQueue"], set()).add(obj["metadata"]["name"])
    assert wanted, "the snapshot renders no LocalQueue"
    result = invoke("summary", snapshot, "-o", "wide")
    assert result.exit_code == 0
    rows = _table(result.stdout)
    assert {row["NAME"]: set(row["LOCAL-QUEUES"].split(",")) - {"<none>"} for row in rows} == \
        {row["NAME"]: wanted.get(row["NAME"], set()) for row in rows}


@pytest.mark.parametrize("snapshot", ["fixtures/demo", "fixtures/capacity/mixed"])
def test_summary_writes_the_free_slice_as_it_writes_the_quota(snapshot: str) -> None:
    table = invoke("summary", snapshot)
    pools = {p["name"]: p for p in json.loads(invoke("summary", snapshot, "-o", "json").stdout)["pools"]}
    sliced = [row for row in _table(table.stdout) if pools[row["NAME"]]["maxFreeSlice"] is not None]
    assert sliced
    for row in sliced:
        cell, units = row["MAX-FREE-SLICE"], pools[row["NAME"]]["maxFreeSlice"]
        assert parse_quantity(cell) == units, row
        quota = row["QUOTA"].split("=", 1)[1]
        # the quota's own form: the shortest decimal-SI spelling (1600k, 8M), as the quota shows it
        assert len(cell) <= len(str(units)) and (units < 1000 or not cell.endswith("000")), row
        assert re.fullmatch(r"[0-9]+[kMGTPE]?", cell) and re.fullmatch(r"[0-9]+[kMGTPE]?", quota), row
    if snapshot == "fixtures/demo":
        assert {row["NAME"]: row["MAX-FREE-SLICE"] for row in sliced} == {
            "gpustack--nvidia-a10g-linux-amd64": "1600k", "gpustack--nvidia-tesla-t4-linux-amd64": "1600k"}


# --- explain's did-you-mean ---------------------------------------------------------------------

def test_explain_suggests_the_h100_pool_for_a_mistyped_h100_name(generated: Path) -> None:
    names = {row["NAME"] for row in _table(invoke("summary", generated).stdout)}
    assert {"gpustack--nvidia-h100-80gb-hbm3-linux-amd64", "gpustack--nvidia-l4-linux-amd64"} <= names
    result = invoke("explain", "ClusterQueue/gpustack--nvidia-h100-linux-amd64", generated)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "gpustack-render: error: ClusterQueue/gpustack--nvidia-h100-linux-amd64: not rendered from this snapshot "
        "(did you mean 'gpustack--nvidia-h100-80gb-hbm3-linux-amd64'?)"]


@pytest.mark.parametrize("typed, hint", [
    ("gpustack--nvidia-h100-linux-amd64", "did you mean 'gpustack--nvidia-h100-80gb-hbm3-linux-amd64'?"),
    ("gpustack--nvidia-l4-linux-amd65", "did you mean 'gpustack--nvidia-l4-linux-amd64'?"),
    ("gpustack--nvidia-h10-linux-amd64", "did you mean 'gpustack--nvidia-h100-80gb-hbm3-linux-amd64'?"),
    ("gpustack--generic-linux-arm64", "did you mean 'gpustack--generic-linux-amd64'?"),
])
def test_what_tells_the_names_apart_decides(typed: str, hint: str) -> None:
    from gpustack_render.explain import suggestion
    names = ["gpustack--generic-linux-amd64", "gpustack--nvidia-l4-linux-amd64",
             "gpustack--nvidia-h100-80gb-hbm3-linux-amd64", "gpustack--nvidia-tesla-t4-linux-amd64",
             "gpustack--amd-mi300x-linux-amd64"]
    assert suggestion(typed, names, "ClusterQueue") == hint


# --- warnings about a Node's labels -------------------------------------------------------------

def _demo_with_bad_count(tmp_path: Path) -> tuple[Path, int]:
    """The demo with node-t4-b's count label 'four'; the file and the label's line."""
    dest = tmp_path / "demo"
    shutil.copytree(DEMO, dest)
    nodes = dest / "nodes.yaml"
    lines = nodes.read_text(encoding="utf-8").splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.strip() == "name: node-t4-b")  # labels come first
    index = max(i for i in range(end) if lines[i].strip().startswith(BAD_COUNT + ":"))
    lines[index] = lines[index].split(":", 1)[0] + ": four\n"
    nodes.write_text("".join(lines), encoding="utf-8")
    return nodes, index + 1


WARNING = (f"Node/node-t4-b: label {BAD_COUNT}='four' is not a positive integer; no flavor for nvidia-tesla-t4")


def test_a_node_label_warning_names_file_line_and_node(tmp_path: Path) -> None:
    nodes, line = _demo_with_bad_count(tmp_path)
    for command in ("render", "node-patches", "catalog"):
        result = invoke(command, nodes.parent)
        assert result.exit_code == 0, result.stderr
        assert f"gpustack-render: warning: {nodes}:{line}: {WARNING}" in result.stderr.splitlines(), command
    piped = invoke("render", "-", input=nodes.read_text(encoding="utf-8"))
    assert f"gpustack-render: warning: <stdin>: {WARNING}" in piped.stderr.splitlines()


def test_a_node_label_warning_in_a_json_snapshot_has_its_line(generated: Path, tmp_path: Path) -> None:
    data = json.loads(generated.read_text(encoding="utf-8"))
    node = next(n for n in data["items"] if n["kind"] == "Node"
                and any(k.endswith(".count") and k.startswith("acceleratable.") for k in n["metadata"]["labels"]))
    key = next(k for k in node["metadata"]["labels"] if k.endswith(".count") and k.startswith("acceleratable."))
    node["metadata"]["labels"][key] = "four"
    path = tmp_path / "nodes.json"
    text = json.dumps(data, indent=1)
    path.write_text(text, encoding="utf-8")
    line = text[:text.index(f'"{key}": "four"')].count("\n") + 1
    akey = key.split("/", 1)[1].rsplit(".", 1)[0]
    result = invoke("render", path)
    assert result.exit_code == 0
    assert (f"gpustack-render: warning: {path}:{line}: Node/{node['metadata']['name']}: label {key}='four' is not a "
            f"positive integer; no flavor for {akey}") in result.stderr.splitlines()


def test_summary_counts_a_label_warning_under_the_pool_it_was_meant_for(tmp_path: Path) -> None:
    nodes, line = _demo_with_bad_count(tmp_path)
    pools = {p["name"]: p for p in json.loads(invoke("summary", nodes.parent, "-o", "json").stdout)["pools"]}
    assert pools["gpustack--nvidia-tesla-t4-linux-amd64"]["warnings"] == [f"{nodes}:{line}: {WARNING}"]
    # node-t4-b is left in the CPU pool only, which the label was not meant for
    assert pools["gpustack--generic-linux-amd64"]["warnings"] == []
    rows = {row["NAME"]: row for row in _table(invoke("summary", nodes.parent).stdout)}
    assert rows["gpustack--nvidia-tesla-t4-linux-amd64"]["WARNINGS"] == "1"
    assert rows["gpustack--generic-linux-amd64"]["WARNINGS"] == "0"


# --- README timings -----------------------------------------------------------------------------

def test_the_readme_timings_name_the_machine() -> None:
    paragraphs = (REPO / "README.md").read_text(encoding="utf-8").split("\n\n")
    timed = [p for p in paragraphs if "about 45 s" in p or p.startswith("Measured on")]
    assert len(timed) == 2, timed
    for paragraph in (" ".join(p.split()) for p in timed):
        assert "2-vCPU AMD EPYC" in paragraph and "GiB RAM" in paragraph and "Python 3.11" in paragraph, paragraph


def test_the_readme_summary_is_a_fresh_run() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert invoke("summary", "fixtures/demo").stdout in text


def test_a_large_snapshot_file_is_named_without_a_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding the line composes the file again (the bulk readers keep no positions): over
    MAX_LOCATED_BYTES the warning names the file only, so a large snapshot does not pay for it."""
    from gpustack_render.snapshot import place
    nodes, line = _demo_with_bad_count(tmp_path)
    monkeypatch.setattr(place, "MAX_LOCATED_BYTES", nodes.stat().st_size - 1)
    result = invoke("render", nodes.parent)
    assert f"gpustack-render: warning: {nodes}: {WARNING}" in result.stderr.splitlines()
