"""Run every fixture case under ``fixtures/cases/`` through the case runner (gpustack_render.casetest),
in process, exactly as ``gpustack-render test`` does.

``pytest tests/test_fixture_cases.py``                   compare with each case's expected.yaml
``pytest tests/test_fixture_cases.py --update-goldens``  rewrite expected.yaml from the output (the code
                                                         path of ``gpustack-render test --update``; also
                                                         ``GPUSTACK_RENDER_UPDATE_GOLDENS=1``), then review
                                                         ``git diff fixtures/cases``
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_render import casetest
from gpustack_render.casetest import (
    CaseDefinitionError,
    compare_objects,
    compare_patches,
    diff_values,
    identity,
    load_case,
    run_case,
)

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "fixtures" / "cases"
CASE_DIRS = casetest.case_dirs(CASES)
PYTEST_WRITER = "pytest tests/test_fixture_cases.py --update-goldens"


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_fixture_case(case_dir: Path, update_goldens: bool) -> None:
    try:
        case = load_case(case_dir)
    except CaseDefinitionError as err:
        pytest.fail(str(err), pytrace=False)
    outcome = run_case(case, REPO, update=update_goldens, python=casetest.PROGRAM, writer=PYTEST_WRITER)
    if not outcome.ok:
        pytest.fail(outcome.report(), pytrace=False)


def test_cases_exist() -> None:
    assert CASE_DIRS, f"no fixture cases under {CASES}"
    for case_dir in CASE_DIRS:
        assert (case_dir / casetest.CASE_FILE).is_file(), f"{case_dir}: no case.yaml"


SHARED_SNAPSHOTS = (REPO / "fixtures" / "snapshots", REPO / "fixtures" / "demo")


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_a_case_reads_only_its_folder_or_shared_snapshots(case_dir: Path) -> None:
    """A case is self-contained or names shared snapshots (fixtures/snapshots/<name>/, the demo):
    it never reads another case's folder, so changing one case cannot break another."""
    case = load_case(case_dir)
    for rel in case.snapshot:
        target = (case_dir / rel).resolve()
        assert target.is_relative_to(case_dir.resolve()) or any(
            target.is_relative_to(root.resolve()) for root in SHARED_SNAPSHOTS), \
            f"{case_dir.name}: snapshot {rel!r} is outside the case and fixtures/snapshots/"


def test_goldens_hold_only_what_their_case_is_about() -> None:
    """Most render cases select the kinds their description is about (``expect:``); the goldens
    stay small, so a naming change does not rewrite every one."""
    render_cases = [load_case(d) for d in CASE_DIRS]
    render_cases = [c for c in render_cases if c.command == "render" and c.expect_exit_code == 0]
    selected = [c for c in render_cases if not c.expect.everything]
    assert len(selected) >= len(render_cases) - 4, [c.name for c in render_cases if c.expect.everything]
    for case in selected:
        for item in casetest.load_expected(case):
            assert item["kind"] in case.expect.kinds, (case.name, item["kind"])


# ------------------------------------------------------------------------------------------------
# The comparison semantics themselves (so that a green fixture run means what it says)
# ------------------------------------------------------------------------------------------------


def _obj(kind: str, name: str, api: str = "kueue.x-k8s.io/v1beta2", namespace: str | None = None, **spec):
    meta = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec}


def test_identity_uses_group_not_version() -> None:
    assert identity(_obj("ClusterQueue", "q", api="kueue.x-k8s.io/v1beta1")) == ("kueue.x-k8s.io", "ClusterQueue", "", "q")
    assert identity(_obj("Namespace", "n", api="v1")) == ("", "Namespace", "", "n")
    assert identity(_obj("LocalQueue", "l", namespace="team-a"))[2] == "team-a"
    assert identity({"kind": "X"}) is None


def test_equal_lists_in_any_order() -> None:
    a, b = _obj("ClusterQueue", "a"), _obj("ClusterQueue", "b")
    assert compare_objects([a, b], [b, a]) == []


def test_missing_extra_changed_reported() -> None:
    want = [_obj("ClusterQueue", "a", stopPolicy="None"), _obj("ClusterQueue", "b")]
    got = [_obj("ClusterQueue", "a", stopPolicy="Hold"), _obj("ResourceFlavor", "c")]
    problems = compare_objects(want, got)
    text = "\n".join(problems)
    assert "missing: ClusterQueue/b (kueue.x-k8s.io)" in text
    assert "extra:   ResourceFlavor/c (kueue.x-k8s.io)" in text
    assert 'spec.stopPolicy: expected "None", got "Hold"' in text


def test_version_change_is_a_change_not_missing_extra() -> None:
    problems = compare_objects([_obj("Topology", "t")], [_obj("Topology", "t", api="kueue.x-k8s.io/v1beta1")])
    assert len(problems) == 1 and problems[0].startswith("changed: Topology/t")
    assert "apiVersion" in problems[0]


def test_namespace_is_part_of_identity() -> None:
    problems = compare_objects([_obj("LocalQueue", "l", namespace="a")], [_obj("LocalQueue", "l", namespace="b")])
    assert any(p.startswith("missing: LocalQueue/a/l") for p in problems)
    assert any(p.startswith("extra:   LocalQueue/b/l") for p in problems)


def test_type_strict() -> None:
    assert diff_values({"v": "1"}, {"v": 1}) == ['v: expected string "1", got integer 1']
    assert diff_values([True], [1]) == ["[0]: expected boolean true, got integer 1"]
    assert diff_values({"a/b": {"c": 1}}, {"a/b": {}}) == ['["a/b"].c: missing (expected 1)']
    assert diff_values([1, 2], [1, 2, 3]) == ["[2]: unexpected (got 3)"]


def test_duplicates_reported() -> None:
    a = _obj("ClusterQueue", "a")
    assert any("appears twice" in p for p in compare_objects([a], [a, a]))


def test_patches_keyed_by_node_and_subresource_ops_ordered() -> None:
    op1 = {"op": "add", "path": "/status/capacity/a", "value": "1"}
    op2 = {"op": "add", "path": "/status/capacity/b", "value": "2"}
    want = [{"node": "n", "subresource": "status", "patch": [op1, op2]},
            {"node": "n", "subresource": "", "patch": []}]
    assert compare_patches(want, list(reversed(want))) == []
    got = [{"node": "n", "subresource": "status", "patch": [op2, op1]}]
    problems = compare_patches(want, got)
    assert any(p.startswith('missing: node n subresource ""') for p in problems)
    assert any("patch[0].path" in p for p in problems)


def test_case_yaml_validation(tmp_path: Path) -> None:
    (tmp_path / "snap.yaml").write_text("")
    (tmp_path / "case.yaml").write_text("description: x\nsnapshot: [snap.yaml]\nexpectExitcode: 2\n")
    with pytest.raises(CaseDefinitionError, match="unknown field"):
        load_case(tmp_path)
    (tmp_path / "case.yaml").write_text("description: x\nsnapshot: [nope.yaml]\n")
    with pytest.raises(CaseDefinitionError, match="does not exist"):
        load_case(tmp_path)
    (tmp_path / "case.yaml").write_text("description: x\ncommand: pin\nsnapshot: [snap.yaml]\n")
    with pytest.raises(CaseDefinitionError, match="command"):
        load_case(tmp_path)
    (tmp_path / "case.yaml").write_text("description: x\nsnapshot: [snap.yaml]\nset: [a=b]\n")
    case = load_case(tmp_path)
    assert (case.command, case.set, case.expect_exit_code) == ("render", ("a=b",), 0)


def test_runner_with_fake_invoker(tmp_path: Path) -> None:
    """The whole check path, without the CLI: exit code, crash markers, stderr, golden update."""
    (tmp_path / "snap.yaml").write_text("")
    (tmp_path / "case.yaml").write_text("description: fake\nsnapshot: [snap.yaml]\nexpectStderr: [warn-x]\n")
    case = load_case(tmp_path)
    listing = '{"apiVersion": "v1", "kind": "List", "items": [%s]}'
    item = '{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"}}'

    def invoker(stdout: str, stderr: str = "warn-x", code: int = 0):
        return lambda argv, cwd: (code, stdout, stderr)

    assert not run_case(case, tmp_path, invoker=invoker(listing % item)).ok  # no expected.yaml yet
    outcome = run_case(case, tmp_path, update=True, invoker=invoker(listing % item))
    assert outcome.ok and outcome.updated, outcome.report()
    assert run_case(case, tmp_path, invoker=invoker(listing % item)).ok
    assert not run_case(case, tmp_path, invoker=invoker(listing % "")).ok
    assert not run_case(case, tmp_path, invoker=invoker(listing % item, stderr="")).ok
    crashed = run_case(case, tmp_path, update=True, invoker=invoker("", "warn-x internal error: boom", 2))
    assert not crashed.ok and not crashed.updated
    assert run_case(case, tmp_path, invoker=invoker(listing % item)).ok  # golden untouched
