"""The case runner's support for ``command: admit`` (gpustack_render.casetest): case fields, the
argv it builds, the shape check of ``admit --format json`` and the comparison of Workload entries.
None of these need the admission engine: a fake invoker stands for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_render import casetest
from gpustack_render.casetest import CaseDefinitionError, admission, load_case, run_case


def _entry(name: str, outcome: str = "Admitted", **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "namespace": "team-a", "name": name, "clusterQueue": "cq", "priority": 0, "outcome": outcome,
        "podSets": [{"name": "main", "count": 1, "flavor": "f1", "mode": "Fit", "nodes": {"n1": 1},
                     "requests": {"cpu": "1"}, "reasons": []}],
        "preempts": [], "preemptedBy": None, "evicted": None, "reason": "admitted",
    }
    entry.update(extra)
    return entry


def _view(chain: str, *entries: dict[str, Any], queues: list[Any] | None = None) -> dict[str, Any]:
    return {"chain": chain, "workloads": list(entries),
            "queues": queues if queues is not None else [{"name": "cq", "flavors": []}]}


# ------------------------------------------------------------------------------------------------
# shape and comparison
# ------------------------------------------------------------------------------------------------


def test_output_shape_is_checked_whole() -> None:
    assert admission.check_output(_view("live", _entry("a")), "live")["chain"] == "live"
    with pytest.raises(admission.ShapeError, match="chain is 'live', expected 'rendered'"):
        admission.check_output(_view("live"), "rendered")
    with pytest.raises(admission.ShapeError, match="missing field.*queues"):
        admission.check_output({"chain": "live", "workloads": []}, "live")
    with pytest.raises(admission.ShapeError, match="unexpected field.*items"):
        admission.check_output({**_view("live"), "items": []}, "live")
    with pytest.raises(admission.ShapeError, match="workloads is not a list"):
        admission.check_output({"chain": "live", "workloads": {}, "queues": []}, "live")
    both = {"live": _view("live"), "rendered": _view("rendered"), "changed": []}
    assert admission.check_output(both, "compare") is both
    with pytest.raises(admission.ShapeError, match=r"stdout.rendered: chain"):
        admission.check_output({**both, "rendered": _view("live")}, "compare")


def test_golden_needs_workloads_or_changed_only() -> None:
    assert admission.check_golden({"workloads": []}, "rendered", "g")
    with pytest.raises(admission.ShapeError, match="missing field.*workloads"):
        admission.check_golden({"queues": []}, "rendered", "g")
    assert admission.check_golden({"changed": []}, "compare", "g")
    with pytest.raises(admission.ShapeError, match="live: missing field.*workloads"):
        admission.check_golden({"changed": [], "live": {"queues": []}}, "compare", "g")


def test_entries_matched_by_namespace_and_name_in_any_order() -> None:
    want = {"workloads": [_entry("a"), _entry("b", "Pending")]}
    got = _view("live", _entry("b", "Pending"), _entry("a"))
    assert admission.compare(want, got, "live") == []


def test_missing_extra_and_changed_entries_reported_field_by_field() -> None:
    want = {"workloads": [_entry("a"), _entry("b")]}
    changed = _entry("a")
    changed["podSets"][0]["reasons"] = ["insufficient quota for cpu in flavor f1"]
    got = _view("live", changed, _entry("c"))
    problems = admission.compare(want, got, "live")
    assert "missing: Workload team-a/b" in problems
    assert "extra:   Workload team-a/c" in problems
    assert any(p.startswith("changed: Workload team-a/a") and "podSets[0].reasons[0]: unexpected" in p
               for p in problems), problems


def test_namespace_is_part_of_the_entry_identity() -> None:
    other = _entry("a")
    other["namespace"] = "team-b"
    problems = admission.compare({"workloads": [_entry("a")]}, _view("live", other), "live")
    assert problems == ["missing: Workload team-a/a", "extra:   Workload team-b/a"]


def test_comparison_is_type_strict_inside_an_entry() -> None:
    got = _entry("a")
    got["podSets"][0]["requests"] = {"cpu": 1}
    problems = admission.compare({"workloads": [_entry("a")]}, _view("live", got), "live")
    assert len(problems) == 1 and 'requests.cpu: expected string "1", got integer 1' in problems[0]
    got = _entry("a", priority="0")
    assert admission.compare({"workloads": [_entry("a")]}, _view("live", got), "live")


def test_queues_and_chain_compared_only_when_the_golden_gives_them() -> None:
    got = _view("live", _entry("a"), queues=[{"name": "cq", "flavors": [{"name": "f1", "used": "1"}]}])
    assert admission.compare({"workloads": [_entry("a")]}, got, "live") == []
    problems = admission.compare({"workloads": [_entry("a")], "queues": [{"name": "cq", "flavors": []}]}, got, "live")
    assert len(problems) == 1 and problems[0].startswith("changed: queue cq")
    assert admission.compare({"workloads": [_entry("a")], "chain": "rendered"}, got, "live") == \
        ["chain: expected 'rendered', got 'live'"]


def test_compare_view_matches_changed_and_optional_sides() -> None:
    change = {"namespace": "team-a", "name": "a", "live": "Admitted", "rendered": "Evicted", "why": "x"}
    got = {"live": _view("live", _entry("a")), "rendered": _view("rendered", _entry("a", "Evicted")),
           "changed": [change]}
    assert admission.compare({"changed": [change]}, got, "compare") == []
    problems = admission.compare({"changed": [{**change, "rendered": "Kept"}],
                                  "rendered": {"workloads": [_entry("a")]}}, got, "compare")
    assert any(p.startswith("changed: changed Workload team-a/a") for p in problems)
    assert any(p.startswith("rendered: changed: Workload team-a/a") for p in problems), problems


# ------------------------------------------------------------------------------------------------
# case.yaml, argv, the runner
# ------------------------------------------------------------------------------------------------


def _case(tmp_path: Path, text: str) -> casetest.Case:
    (tmp_path / "snap.yaml").write_text("")
    (tmp_path / "wl.yaml").write_text("")
    (tmp_path / "case.yaml").write_text(text)
    return load_case(tmp_path)


def test_admit_case_fields(tmp_path: Path) -> None:
    case = _case(tmp_path, "description: x\ncommand: admit\nsnapshot: [snap.yaml]\nchain: live\n"
                           "workloads: [wl.yaml]\nreserve: [cpu=500m]\n")
    assert (case.chain, case.workloads, case.reserve) == ("live", ("wl.yaml",), ("cpu=500m",))
    assert _case(tmp_path, "description: x\ncommand: admit\nsnapshot: [snap.yaml]\n").chain == "rendered"
    bad = {
        "chain: sideways\n": "chain: 'sideways' is not one of",
        "workloads: [nope.yaml]\n": "workloads: 'nope.yaml' does not exist",
        "reserve: [cpu]\n": "reserve: 'cpu' is not NAME=VALUE",
        "expect: {names: [a]}\n": "nothing to select",
        "expectExitCode: 1\n": "exits 1 only with chain: compare",
    }
    for extra, message in bad.items():
        with pytest.raises(CaseDefinitionError, match=message):
            _case(tmp_path, "description: x\ncommand: admit\nsnapshot: [snap.yaml]\n" + extra)
    with pytest.raises(CaseDefinitionError, match="chain: only for command: admit"):
        _case(tmp_path, "description: x\nsnapshot: [snap.yaml]\nchain: live\n")


def test_admit_argv(tmp_path: Path) -> None:
    case = _case(tmp_path, "description: x\ncommand: admit\nsnapshot: [snap.yaml]\nchain: compare\n"
                           "workloads: [wl.yaml]\nreserve: [cpu=1, memory=1Gi]\nset: [a=b]\n")
    argv = casetest.command_argv(case, tmp_path, python="gpustack-render")
    assert argv == ["gpustack-render", "admit", "snap.yaml", "--set", "a=b", "--chain", "compare",
                    "--workloads", "wl.yaml", "--reserve", "cpu=1", "--reserve", "memory=1Gi", "--format", "json"]
    parsed = casetest._parse_argv(argv)  # what the in-process runner hands to admit
    assert (parsed.command, parsed.snapshots, parsed.sets, parsed.chain, parsed.workloads, parsed.reserve,
            parsed.fmt, parsed.rules) == ("admit", ["snap.yaml"], ["a=b"], "compare", ["wl.yaml"],
                                          ["cpu=1", "memory=1Gi"], "json", None)


def _golden(tmp_path: Path, doc: Any) -> None:
    (tmp_path / "expected.yaml").write_text("---\n" + json.dumps(doc) + "\n")


def test_runner_compares_an_admit_run(tmp_path: Path) -> None:
    case = _case(tmp_path, "description: x\ncommand: admit\nsnapshot: [snap.yaml]\nchain: live\n")
    out = json.dumps(_view("live", _entry("a")))

    def invoker(stdout: str, code: int = 0, stderr: str = ""):
        return lambda argv, cwd: (code, stdout, stderr)

    _golden(tmp_path, {"workloads": [_entry("a")]})
    assert run_case(case, tmp_path, invoker=invoker(out)).ok
    _golden(tmp_path, {"workloads": [_entry("a", "Pending")]})
    failed = run_case(case, tmp_path, invoker=invoker(out))
    assert not failed.ok and "outcome: expected \"Pending\", got \"Admitted\"" in failed.report()
    assert not run_case(case, tmp_path, invoker=invoker(json.dumps(_view("rendered", _entry("a"))))).ok
    assert not run_case(case, tmp_path, invoker=invoker(out, code=1)).ok  # exit 1 only for compare
    updated = run_case(case, tmp_path, update=True, invoker=invoker(out))
    assert updated.ok and updated.updated
    assert run_case(case, tmp_path, invoker=invoker(out)).ok


def test_runner_compare_case_expects_exit_1_with_output(tmp_path: Path) -> None:
    case = _case(tmp_path, "description: x\ncommand: admit\nsnapshot: [snap.yaml]\nchain: compare\n"
                           "expectExitCode: 1\n")
    change = {"namespace": "team-a", "name": "a", "live": "Admitted", "rendered": "Pending", "why": "w"}
    out = json.dumps({"live": _view("live", _entry("a")), "rendered": _view("rendered", _entry("a", "Pending")),
                      "changed": [change]})
    _golden(tmp_path, {"changed": [change]})
    outcome = run_case(case, tmp_path, invoker=lambda argv, cwd: (1, out, ""))
    assert outcome.ok, outcome.report()
    assert not run_case(case, tmp_path, invoker=lambda argv, cwd: (0, out, "")).ok


def test_runner_admit_bad_input_expects_no_stdout(tmp_path: Path) -> None:
    case = _case(tmp_path, "description: x\ncommand: admit\nsnapshot: [snap.yaml]\nexpectExitCode: 2\n"
                           "expectStderr: ['spec.queueName']\n")
    (tmp_path / "expected.yaml").write_text("# nothing\n")
    line = "gpustack-render: snap.yaml: Workload/team-a/a: spec.queueName: required\n"
    assert run_case(case, tmp_path, invoker=lambda argv, cwd: (2, "", line)).ok
    assert not run_case(case, tmp_path, invoker=lambda argv, cwd: (2, "{}", line)).ok


REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["admit-preempt-stops-search", "admit-reserve", "admit-compare-exit-1", "admit-bad-input"])
def test_admit_case_in_process_equals_the_child_process(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``admit`` runs in process through the command body the CLI runs (``pipeline.admit_command``):
    the same exit code, stdout and stderr as ``python -m gpustack_render admit ...`` in a child process."""
    case_dir = REPO / "fixtures" / "cases" / name
    assert (case_dir / casetest.CASE_FILE).is_file(), f"{case_dir}: admit smoke case missing"
    monkeypatch.chdir(REPO)
    argv = casetest.command_argv(casetest.load_case(case_dir), REPO)
    assert casetest.inprocess_invoker(argv, REPO) == casetest.subprocess_invoker(argv, REPO)


def test_admit_in_process_from_another_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths (snapshots, --workloads, --rules) are taken relative to the case runner's cwd."""
    case = load_case(REPO / "fixtures" / "cases" / "admit-reserve")
    argv = casetest.command_argv(case, REPO)
    monkeypatch.chdir(tmp_path)
    code, out, _ = casetest.inprocess_invoker(argv, REPO)
    assert code == 0 and json.loads(out)["chain"] == "live"
