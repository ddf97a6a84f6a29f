"""fixtures/admit: the converged demo cluster is current (regenerate.py), its Workloads never change
what `render` writes (a bad one included), and bad Workload input through `admit` is exit 2 with one
line naming file, Workload and field and nothing on stdout (admission.md §1, issue 23 point 7)."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import pytest

import cli_invoke
from gpustack_render.rules import load_rules
from gpustack_render.snapshot import load_snapshot
from gpustack_render.snapshot.workloads import snapshot_workloads

REPO = Path(__file__).resolve().parents[1]
ADMIT = REPO / "fixtures" / "admit"
CLUSTER = str(ADMIT / "cluster")


def test_converged_files_are_current() -> None:
    texts = runpy.run_path(str(ADMIT / "regenerate.py"))["texts"]()
    stale = [str(path) for path, text in texts.items() if path.read_text() != text]
    assert not stale, f"stale (run .venv/bin/python fixtures/admit/regenerate.py): {stale}"


def test_render_ignores_workloads_even_a_bad_one() -> None:
    """Workloads (a broken one too) are kept untyped: the cluster renders byte-identically with and
    without them, and `diff` finds the live chain it holds equal to its render."""
    files = [str(p) for p in sorted((ADMIT / "cluster").iterdir()) if p.name != "workloads.yaml"]
    without = cli_invoke.invoke("render", *files)
    with_them = cli_invoke.invoke("render", CLUSTER, str(ADMIT / "bad" / "bad-topology.yaml"))
    assert without.exit_code == with_them.exit_code == 0, with_them.stderr
    assert with_them.stdout_bytes == without.stdout_bytes and b"kind: ClusterQueue" in without.stdout_bytes
    assert "holds no object" not in with_them.stderr  # a Workloads file is read (kept), not unused
    diff = cli_invoke.invoke("diff", CLUSTER)
    assert diff.exit_code == 0 and "0 added, 0 changed, 0 removed" in diff.output, diff.output


def test_workloads_read() -> None:
    rules = load_rules(None)
    snap = load_snapshot([CLUSTER], rules.settings.source, rules.vocabulary.workerApiGroup)
    workloads = snapshot_workloads(snap)
    assert len(workloads) == 8
    assert sorted(w.ref for w in workloads if w.holds_quota) == ["default/cpu-web", "team-a/t4-batch-low",
                                                                "team-a/t4-train"]
    batch = next(w for w in workloads if w.name == "t4-batch-low")
    assert batch.api_version.endswith("/v1beta1") and batch.placements[0] is not None
    assert batch.placements[0].lowest() == {"node-t4-b": 2}


BAD = [
    ("no-queue.yaml", "--workloads", ["no-queue.yaml:6:", "Workload/team-a/no-queue", "spec.queueName"]),
    ("no-template.yaml", "--workloads", ["no-template.yaml:9:", "Workload/team-a/no-template",
                                         "spec.podSets[0].template", "a PodSet needs a template"]),
    ("bad-quantity.yaml", "--workloads", ["bad-quantity.yaml:17:", "Workload/team-a/bad-quantity",
                                          "spec.podSets[0].template.spec.containers[0].resources.limits.nvidia.com/gpu",
                                          '"one" is not a valid quantity']),
    ("unknown-version.yaml", "--workloads", ["unknown-version.yaml:1:", "Workload/team-a/unknown-version",
                                             "apiVersion", "'v1alpha1' of kueue.x-k8s.io is not served"]),
    ("bad-topology.yaml", "snapshot", ["bad-topology.yaml:31:", "Workload/team-a/bad-topology",
                                       "status.admission.podSetAssignments[0].topologyAssignment.slices[0]"
                                       ".valuesPerLevel[0].individual.roots", "has 2 root(s), domainCount is 1"]),
]


@pytest.mark.parametrize("name, where, fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_workloads_exit_2(name: str, where: str, fragments: list[str]) -> None:
    path = str(ADMIT / "bad" / name)
    args = ("admit", CLUSTER, "--workloads", path) if where == "--workloads" else ("admit", CLUSTER, path)
    result = cli_invoke.invoke(*args)
    assert result.exit_code == 2 and result.stdout == "", result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("gpustack-render: error: ") and all(f in line for f in fragments), line


def test_workloads_from_stdin_are_pending() -> None:
    """`--workloads -`: read from standard input like any file; its status is ignored (pending)."""
    text = (ADMIT / "extra" / "cpu-notebook.yaml").read_text()
    result = cli_invoke.invoke("admit", CLUSTER, "--workloads", "-", "--chain", "live", "--format", "json",
                               input=text)
    assert result.exit_code == 0, result.output
    (entry,) = [w for w in json.loads(result.stdout)["workloads"] if w["name"] == "cpu-notebook"]
    assert entry["outcome"] not in ("Kept", "Evicted")  # it held nothing: the status was not read


def test_a_snapshot_file_given_as_workloads_is_one_problem() -> None:
    result = cli_invoke.invoke("admit", CLUSTER, "--workloads", str(ADMIT / "cluster" / "nodes.yaml"))
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "holds no Kueue Workload, only snapshot objects (Node: 4)" in line, line


def test_the_demo_story(tmp_path: Path) -> None:
    """What fixtures/admit/README.md tells of each Workload, under the live chain, and the one change
    when the accelerated quota is halved (the closing note's demo)."""
    live = cli_invoke.invoke("admit", CLUSTER, "--workloads", str(ADMIT / "extra"), "--chain", "live", "--format", "json")
    assert live.exit_code == 0, live.output
    outcomes = {w["name"]: w["outcome"] for w in json.loads(live.stdout)["workloads"]}
    assert outcomes == {"cpu-web": "Kept", "cpu-etl": "QuotaReserved", "cpu-notebook": "QuotaReserved",
                        "a10g-chat": "QuotaReserved", "a10g-too-big": "Pending", "t4-urgent": "Preempt",
                        "t4-train": "Kept", "t4-infer": "QuotaReserved", "t4-batch-low": "Preempted"}
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    queues = rules / "queues.yaml"
    text = queues.read_text()
    assert text.count('nominalQuota: "capacity * M"}') == 1
    queues.write_text(text.replace('nominalQuota: "capacity * M"}', 'nominalQuota: "capacity * M // 2"}'))
    compare = cli_invoke.invoke("admit", CLUSTER, "--chain", "compare", "--format", "json", "--rules", str(rules))
    assert compare.exit_code == 1, compare.output
    assert [(c["namespace"], c["name"], c["live"], c["rendered"]) for c in json.loads(compare.stdout)["changed"]] == \
        [("team-a", "t4-train", "Kept", "Preempted")]
