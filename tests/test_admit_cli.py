"""admit, explain workload/..., diff --admission through the CLI, on fixtures/admit (admission.md §1, §9)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

CLUSTER = "fixtures/admit/cluster"
EXTRA = "fixtures/admit/extra"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def half_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in rules with every accelerated queue's quota halved (the T4 queue's among them)."""
    out = tmp_path_factory.mktemp("rules") / "rules"
    shutil.copytree(REPO / "rules", out)
    queues = out / "queues.yaml"
    text = queues.read_text()
    assert 'nominalQuota: "capacity * M"}' in text
    queues.write_text(text.replace('nominalQuota: "capacity * M"}', 'nominalQuota: "capacity * M // 2"}'))
    return out


def _json(cli: Callable[..., Any], *args: object) -> tuple[int, dict[str, Any]]:
    result = cli("admit", CLUSTER, *args, "--format", "json")
    return result.exit_code, json.loads(result.stdout) if result.stdout else {}


def test_live_outcomes(cli: Callable[..., Any]) -> None:
    code, doc = _json(cli, "--chain", "live", "--workloads", EXTRA)
    assert code == 0 and doc["chain"] == "live"
    outcomes = {f"{w['namespace']}/{w['name']}": w["outcome"] for w in doc["workloads"]}
    assert outcomes["team-a/t4-urgent"] == "Preempt" and outcomes["team-a/t4-batch-low"] == "Preempted"
    assert outcomes["team-a/t4-train"] == "Kept" and outcomes["team-a/a10g-too-big"] == "Pending"
    urgent = next(w for w in doc["workloads"] if w["name"] == "t4-urgent")
    assert urgent["preempts"] == ["team-a/t4-batch-low"]
    assert [q["name"] for q in doc["queues"]] == sorted(q["name"] for q in doc["queues"])


def test_compare_exit_1_and_changed(cli: Callable[..., Any], half_rules: Path) -> None:
    same, doc = _json(cli, "--chain", "compare")
    assert same == 0 and doc["changed"] == []  # the applied chain is what the rules render
    code, doc = _json(cli, "--chain", "compare", "--rules", half_rules)
    assert code == 1
    assert doc["changed"] == [{"namespace": "team-a", "name": "t4-train", "live": "Kept", "rendered": "Preempted",
                               "why": "preempted by team-a/t4-urgent"}]


def test_text_and_markdown(cli: Callable[..., Any], half_rules: Path) -> None:
    text = cli("admit", CLUSTER, "--chain", "live")
    assert text.exit_code == 0
    assert text.stdout.splitlines()[0].split() == ["NAMESPACE", "NAME", "QUEUE", "PRIORITY", "OUTCOME", "FLAVOR",
                                                   "NODES", "REASON"]
    assert "waiting for admission checks" in text.stdout and "--reserve" in text.stderr
    md = cli("admit", CLUSTER, "--chain", "compare", "--rules", half_rules, "--format", "markdown")
    assert md.exit_code == 1 and "| `team-a/t4-train` | Kept | Preempted |" in md.stdout


def test_bad_reserve_is_exit_2(cli: Callable[..., Any]) -> None:
    result = cli("admit", CLUSTER, "--reserve", "cpu")
    assert result.exit_code == 2 and result.stdout == "" and "--reserve cpu" in result.stderr


def test_reserve_takes_room(cli: Callable[..., Any]) -> None:
    _, plain = _json(cli, "--chain", "live")
    _, reserved = _json(cli, "--chain", "live", "--reserve", "cpu=60", "--reserve", "cpu=40")
    before = {w["name"]: w["outcome"] for w in plain["workloads"]}
    after = {w["name"]: w["outcome"] for w in reserved["workloads"]}
    assert before["cpu-etl"] == "QuotaReserved" and after["cpu-etl"] == "Pending"


def test_explain_workload(cli: Callable[..., Any]) -> None:
    result = cli("explain", "workload/team-a/t4-urgent", CLUSTER)
    assert result.exit_code == 0, result.stderr
    assert "outcome Preempt" in result.stdout
    assert "NoFit, passed over: insufficient quota for credits.gpustack.ai/nvidia" in result.stdout
    assert "Nodes of flavor" in result.stdout and "node-t4-b:" in result.stdout
    assert "<- rules/admission.yaml:" in result.stdout  # the transformation the quota went through
    missing = cli("explain", "workload/team-a/t4-urgen", CLUSTER)
    assert missing.exit_code == 2 and "did you mean 'team-a/t4-urgent'?" in missing.stderr
    assert cli("explain", "workload/t4-urgent", CLUSTER).exit_code == 2


def test_diff_markdown_admission(cli: Callable[..., Any], half_rules: Path) -> None:
    result = cli("diff", CLUSTER, "--rules", half_rules, "--format", "markdown", "--admission")
    assert result.exit_code == 1
    assert "#### Admission preview" in result.stdout and "| `team-a/t4-train` | Kept | Preempted |" in result.stdout
    assert "6400k → 3200k" in result.stdout
    plain = cli("diff", CLUSTER, "--rules", half_rules, "--format", "markdown")
    assert "Admission preview" not in plain.stdout
