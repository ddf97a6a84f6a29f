"""`gpustack-render test [PATH...] [--update] [--format text|json|junit]`: rule test cases run in-process
through the pipeline, with the semantics of the pytest fixture driver (gpustack_render/casetest).
The CLI runs in process too (the ``cli`` fixture); the child-process invoker is checked against the
in-process one in tests/test_smoke.py.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from cli_invoke import invoke

from gpustack_render import casetest

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "fixtures" / "cases"
CASE_DIRS = casetest.case_dirs(CASES)
_FINAL = re.compile(r"^\d+ passed, \d+ failed$")


@pytest.fixture(autouse=True)
def _no_update_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests decide themselves when ``test`` updates (``--update-goldens`` sets the switch)."""
    monkeypatch.delenv(casetest.UPDATE_ENV, raising=False)


def final_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if _FINAL.match(line)]


def write_case(root: Path, name: str, golden: str | None, **fields: object) -> Path:
    """A case folder using the demo snapshot."""
    case = root / name
    case.mkdir(parents=True)
    body = {"description": f"case {name}", "command": "catalog", "snapshot": [str(REPO / "fixtures" / "demo")],
            **fields}
    (case / "case.yaml").write_text(json.dumps(body), encoding="utf-8")
    if golden is not None:
        (case / "expected.yaml").write_text(golden, encoding="utf-8")
    return case


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path


def test_project_cases_pass(cli) -> None:
    proc = cli("test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["CASE", "COMMAND", "RESULT", "TIME", "RULES"]
    rows = [line.split() for line in lines[1:1 + len(CASE_DIRS)]]
    assert [r[0] for r in rows] == [d.name for d in CASE_DIRS]
    assert all(r[2] == "pass" for r in rows)
    own = {d.name: casetest.load_case(d).rules for d in CASE_DIRS}
    assert [r[4] for r in rows] == [
        "built-in" if own[d.name] is None else str((d / own[d.name]).relative_to(REPO)) for d in CASE_DIRS]
    assert lines[-1] == f"{len(CASE_DIRS)} passed, 0 failed"
    assert final_lines(proc.stdout) == [lines[-1]]  # exactly one summary line, and it is the last


def test_failing_case_shows_differences_and_exits_1(scratch: Path, cli) -> None:
    ok = cli("catalog", "fixtures/demo", "--format", "json")
    items = json.loads(ok.stdout)["items"]
    good = "".join("---\n" + json.dumps(item) + "\n" for item in items)
    items[0]["spec"]["generalGroup"] = "something-else"
    bad = "".join("---\n" + json.dumps(item) + "\n" for item in items)
    write_case(scratch, "a-good", good)
    write_case(scratch, "b-bad", bad)
    proc = cli("test", str(scratch))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^a-good\s+catalog\s+pass\s", proc.stdout, re.M)
    assert re.search(r"^b-bad\s+catalog\s+FAIL\s", proc.stdout, re.M)
    assert "FAIL b-bad: case b-bad" in proc.stdout
    assert "changed: InstanceTypeFlavor/gpustack--generic" in proc.stdout
    assert 'spec.generalGroup: expected "something-else", got "generic"' in proc.stdout
    assert proc.stdout.splitlines()[-1] == "1 passed, 1 failed" and len(final_lines(proc.stdout)) == 1


def test_update_rewrites_goldens_then_passes(scratch: Path, cli) -> None:
    case = write_case(scratch, "fresh", None)
    rel = str(case)
    first = cli("test", rel)
    assert first.returncode == 1 and "expected.yaml: missing" in first.stdout
    updated = cli("test", rel, "--update")
    assert updated.returncode == 0, updated.stdout
    assert re.search(r"^fresh\s+catalog\s+updated\s", updated.stdout, re.M)
    assert "updated 1 golden file(s)" in updated.stdout
    golden = (case / "expected.yaml").read_text(encoding="utf-8")
    assert golden.startswith("# Golden for fixtures case 'fresh'") and "kind: InstanceTypeFlavor" in golden
    again = cli("test", rel)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "1 passed, 0 failed"
    assert "updated" not in again.stdout


def test_update_never_hides_a_wrong_exit_code(scratch: Path, cli) -> None:
    case = write_case(scratch, "wrong-exit", "", expectExitCode=2)
    proc = cli("test", str(case), "--update")
    assert proc.returncode == 1 and "exit code 0, expected 2" in proc.stdout
    assert (case / "expected.yaml").read_text(encoding="utf-8") == ""


def test_expected_error_case_with_stderr(scratch: Path, cli) -> None:
    case = write_case(scratch, "bad-set", "", expectExitCode=2, set=["nope=true"],
                      expectStderr=["nope: unknown setting"])
    proc = cli("test", str(case))
    assert proc.returncode == 0, proc.stdout


def test_case_with_its_own_rules(scratch: Path, cli) -> None:
    rules = scratch / "my-rules"
    shutil.copytree(REPO / "rules", rules)
    text = (rules / "naming.yaml").read_text(encoding="utf-8")
    (rules / "naming.yaml").write_text(text.replace('cpu: "gpustack--generic"', 'cpu: "cpu--generic"'), "utf-8")
    case = write_case(scratch, "renamed", None, rules="../my-rules")
    rel = str(case)
    assert cli("test", rel, "--update").returncode == 0
    assert "name: cpu--generic" in (case / "expected.yaml").read_text(encoding="utf-8")
    assert cli("test", rel).returncode == 0


def test_broken_case_yaml_is_a_failed_case_not_a_crash(scratch: Path, cli) -> None:
    write_case(scratch, "ok", None)
    (scratch / "typo").mkdir()
    (scratch / "typo" / "case.yaml").write_text("description: x\nsnapshot: [nope.yaml]\n", encoding="utf-8")
    proc = cli("test", str(scratch))
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert re.search(r"^typo\s+render\s+FAIL\s", proc.stdout, re.M)
    assert "'nope.yaml' does not exist" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "0 passed, 2 failed"


def test_several_paths_and_a_single_case_folder(cli) -> None:
    one, two = CASE_DIRS[0], CASE_DIRS[1]
    proc = cli("test", str(one.relative_to(REPO)), str(two.relative_to(REPO)), str(one.relative_to(REPO)))
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "2 passed, 0 failed"


def test_missing_or_empty_path_is_a_usage_error(tmp_path: Path, cli) -> None:
    missing = cli("test", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such case directory" in missing.stderr
    empty = cli("test", str(tmp_path))
    assert empty.returncode == 2 and "no test cases found" in empty.stderr
    elsewhere = cli("test", cwd=tmp_path)  # default fixtures/cases does not exist there
    assert elsewhere.returncode == 2 and "fixtures/cases" in elsewhere.stderr


def test_json_format(cli) -> None:
    """The json report (on three project cases: every case already runs in test_project_cases_pass)."""
    some = CASE_DIRS[:3]
    proc = cli("test", *(str(d.relative_to(REPO)) for d in some), "--format", "json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert (data["passed"], data["failed"]) == (len(some), 0)
    assert [c["name"] for c in data["cases"]] == [d.name for d in some]
    assert all(c["result"] == "pass" and c["failures"] == [] for c in data["cases"])
    assert proc.stderr.strip() == f"{len(some)} passed, 0 failed"


def test_junit_format(scratch: Path, cli) -> None:
    write_case(scratch, "missing-golden", None)
    proc = cli("test", str(scratch), "--format", "junit")
    assert proc.returncode == 1
    root = ET.fromstring(proc.stdout)
    suite = root.find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("1", "1")
    case = suite.find("testcase")
    assert case is not None and case.get("name") == "missing-golden"
    failure = case.find("failure")
    assert failure is not None and "expected.yaml: missing" in (failure.get("message") or "") + (failure.text or "")
    assert proc.stderr.strip() == "0 passed, 1 failed"


def test_test_is_visible_in_help(cli) -> None:
    assert re.search(r"^\s+test\s", cli("--help").stdout, re.M)


# --- test --rules DIR: which rules each case ran with (in-process) --------------------------------

def run_in_process(*args: str) -> tuple[int, str, str]:
    """``gpustack-render test ARGS`` from the current directory (the tests chdir to their scratch)."""
    code, out, err = invoke("test", *args, cwd=None)
    return code, out, err


def renamed_rules(root: Path, name: str, prefix: str) -> Path:
    rules = root / name
    shutil.copytree(REPO / "rules", rules)
    text = (rules / "naming.yaml").read_text(encoding="utf-8")
    assert text.count('cpu: "gpustack--generic"') == 1
    (rules / "naming.yaml").write_text(text.replace('cpu: "gpustack--generic"', f'cpu: "{prefix}--generic"'), "utf-8")
    return rules


def row(stdout: str, case: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.split()[:1] == [case])


def test_rules_option_replaces_the_builtin_rules_of_cases_without_their_own(
        scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(scratch)
    plain = write_case(scratch / "cases", "plain", None)
    assert run_in_process(str(plain), "--update")[0] == 0  # golden from the built-in rules
    other = renamed_rules(scratch, "other-rules", "other")
    code, out, _ = run_in_process(str(plain), "--rules", "other-rules")
    assert code == 1, out
    assert row(out, "plain") == ["plain", "catalog", "FAIL", row(out, "plain")[3], "other-rules"]
    assert "  rules: other-rules" in out and "--rules other-rules" in out
    assert "missing: InstanceTypeFlavor/gpustack--generic" in out and "extra:   InstanceTypeFlavor/other--generic" in out
    code, out, _ = run_in_process(str(plain))
    assert code == 0 and row(out, "plain")[4] == "built-in"
    assert other.is_dir()


def test_a_cases_own_rules_win_over_the_rules_option(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(scratch)
    renamed_rules(scratch, "own-rules", "own")
    renamed_rules(scratch, "other-rules", "other")
    case = write_case(scratch / "cases", "own", None, rules="../../own-rules")
    assert run_in_process(str(case), "--update")[0] == 0
    assert "name: own--generic" in (case / "expected.yaml").read_text(encoding="utf-8")
    code, out, _ = run_in_process(str(case), "--rules", "other-rules")
    assert code == 0, out
    assert row(out, "own")[4] == "own-rules"


def test_rules_option_in_json_and_junit(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(scratch)
    plain = write_case(scratch / "cases", "plain", None)
    assert run_in_process(str(plain), "--update")[0] == 0
    shutil.copytree(REPO / "rules", scratch / "same-rules")
    code, out, err = run_in_process(str(plain), "--rules", "same-rules", "--format", "json")
    assert code == 0 and err == "1 passed, 0 failed\n"
    assert [c["rules"] for c in json.loads(out)["cases"]] == ["same-rules"]
    code, out, _ = run_in_process(str(plain), "--format", "junit")
    prop = ET.fromstring(out).find("testsuite/testcase/properties/property")
    assert code == 0 and prop is not None and (prop.get("name"), prop.get("value")) == ("rules", "built-in")


def test_rules_option_must_be_a_directory(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(scratch)
    plain = write_case(scratch / "cases", "plain", None)
    code, out, err = run_in_process(str(plain), "--rules", "nope")
    assert (code, out) == (2, "") and "nope: rules directory not found" in err


# --- one golden-update switch; the header names its writer; expect: selection ------------------

def test_update_switch_in_the_environment_is_test_update(scratch: Path, monkeypatch: pytest.MonkeyPatch,
                                                         cli) -> None:
    case = write_case(scratch, "by-env", None)
    monkeypatch.setenv(casetest.UPDATE_ENV, "1")
    proc = cli("test", str(case))
    assert proc.returncode == 0 and re.search(r"^by-env\s+catalog\s+updated\s", proc.stdout, re.M), proc.stdout
    golden = (case / "expected.yaml").read_text(encoding="utf-8")
    assert f"# Written by `{casetest.TEST_UPDATE_WRITER}`;" in golden
    monkeypatch.setenv(casetest.UPDATE_ENV, "0")  # "0" is off
    (case / "expected.yaml").write_text("", encoding="utf-8")
    assert cli("test", str(case)).returncode == 1
    assert (case / "expected.yaml").read_text(encoding="utf-8") == ""
    assert casetest.UPDATE_ENV in cli("test", "--help").stdout


def test_the_header_names_the_writer_and_a_new_writer_alone_rewrites_nothing(scratch: Path) -> None:
    case = casetest.load_case(write_case(scratch, "writer", None))
    first = casetest.run_case(case, REPO, update=True, writer="pytest tests/test_fixture_cases.py --update-goldens")
    assert first.ok and first.updated, first.report()
    text = case.expected_path.read_text(encoding="utf-8")
    assert "# Written by `pytest tests/test_fixture_cases.py --update-goldens`;" in text
    again = casetest.run_case(case, REPO, update=True)  # gpustack-render test --update: same objects
    assert again.ok and not again.updated
    assert case.expected_path.read_text(encoding="utf-8") == text


def _catalog_names() -> list[str]:
    code, out, err = invoke("catalog", "fixtures/demo", "--format", "json")
    assert code == 0, err
    return [item["metadata"]["name"] for item in json.loads(out)["items"]]


def test_expect_selection_compares_only_the_selected_objects(scratch: Path) -> None:
    names = _catalog_names()
    assert len(names) >= 2
    chosen = names[0]
    case = casetest.load_case(write_case(scratch, "selected", None, expect={"names": [chosen]}))
    assert casetest.run_case(case, REPO, update=True).ok
    text = case.expected_path.read_text(encoding="utf-8")
    assert f"name: {chosen}\n" in text and all(f"name: {n}\n" not in text for n in names[1:])
    assert "Only the selected objects are compared (names " in text
    assert casetest.run_case(case, REPO).ok
    # inside the selection nothing is loosened: a changed field fails
    case.expected_path.write_text(text.replace("sliceable: false", "sliceable: true"), encoding="utf-8")
    changed = casetest.run_case(case, REPO)
    assert not changed.ok and any(f.startswith(f"changed: InstanceTypeFlavor/{chosen}") for f in changed.failures)
    # a golden object outside the selection is a definition error, not silently ignored
    other = names[1]
    case.expected_path.write_text(text + f"---\napiVersion: x/v1\nkind: InstanceTypeFlavor\nmetadata:\n  name: {other}\n",
                                  encoding="utf-8")
    outside = casetest.run_case(case, REPO)
    assert not outside.ok and "outside the case's expect selection" in outside.failures[0]


def test_expect_selection_reports_a_missing_object_of_a_selected_kind(scratch: Path) -> None:
    case = casetest.load_case(write_case(scratch, "kinds", None, expect={"kinds": ["InstanceTypeFlavor"]}))
    assert casetest.run_case(case, REPO, update=True).ok
    golden = case.expected_path.read_text(encoding="utf-8")
    assert golden.count("kind: InstanceTypeFlavor") == len(_catalog_names())
    ghost = "---\napiVersion: catalog.gpustack.ai/v1\nkind: InstanceTypeFlavor\nmetadata:\n  name: ghost\n"
    case.expected_path.write_text(golden + ghost, encoding="utf-8")
    missing = casetest.run_case(case, REPO)
    assert not missing.ok and any(f.startswith("missing: InstanceTypeFlavor/ghost") for f in missing.failures)


@pytest.mark.parametrize("expect, message", [
    ({}, "selects nothing in particular"),
    ([], "must be a mapping"),
    ({"kind": ["X"]}, "unknown field(s) kind"),
    ({"kinds": "ClusterQueue"}, "must be a list of strings"),
])
def test_expect_selection_is_checked(scratch: Path, expect: object, message: str) -> None:
    with pytest.raises(casetest.CaseDefinitionError, match=re.escape(message)):
        casetest.load_case(write_case(scratch, "bad", None, expect=expect))


def test_node_patches_selection_takes_names_only(scratch: Path) -> None:
    with pytest.raises(casetest.CaseDefinitionError, match="node-patches prints patch entries"):
        casetest.load_case(write_case(scratch, "np", None, command="node-patches", expect={"kinds": ["Node"]}))
    case = casetest.load_case(write_case(scratch, "np-names", None, command="node-patches",
                                         expect={"names": ["node-t4-*"]}))
    assert casetest.run_case(case, REPO, update=True).ok
    patches = [d for d in yaml.safe_load_all(case.expected_path.read_text(encoding="utf-8")) if d is not None][0]
    assert {entry["node"] for entry in patches} == {"node-t4-a", "node-t4-b"}  # not node-a10g
