"""`gpustack-render test [PATH...] [--update] [--format text|json|junit]`: rule test cases run in-process
through the pipeline, with the semantics of the pytest fixture driver (gpustack_render/casetest.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpustack_render import casetest

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "fixtures" / "cases"
CASE_DIRS = casetest.case_dirs(CASES)
_FINAL = re.compile(r"^\d+ passed, \d+ failed$")


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpustack_render", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


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


def test_project_cases_pass() -> None:
    proc = run_cli("test")
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


@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=[d.name for d in CASE_DIRS])
def test_inprocess_equals_subprocess(case_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process invoker prints what the CLI prints: same exit code, stdout and stderr."""
    monkeypatch.chdir(REPO)
    argv = casetest.command_argv(casetest.load_case(case_dir), REPO)
    assert casetest.inprocess_invoker(argv, REPO) == casetest.subprocess_invoker(argv, REPO)


def test_failing_case_shows_differences_and_exits_1(scratch: Path) -> None:
    ok = run_cli("catalog", "fixtures/demo", "--format", "json")
    items = json.loads(ok.stdout)["items"]
    good = "".join("---\n" + json.dumps(item) + "\n" for item in items)
    items[0]["spec"]["generalGroup"] = "something-else"
    bad = "".join("---\n" + json.dumps(item) + "\n" for item in items)
    write_case(scratch, "a-good", good)
    write_case(scratch, "b-bad", bad)
    proc = run_cli("test", str(scratch))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"^a-good\s+catalog\s+pass\s", proc.stdout, re.M)
    assert re.search(r"^b-bad\s+catalog\s+FAIL\s", proc.stdout, re.M)
    assert "FAIL b-bad: case b-bad" in proc.stdout
    assert "changed: InstanceTypeFlavor/gpustack--generic" in proc.stdout
    assert 'spec.generalGroup: expected "something-else", got "generic"' in proc.stdout
    assert proc.stdout.splitlines()[-1] == "1 passed, 1 failed" and len(final_lines(proc.stdout)) == 1


def test_update_rewrites_goldens_then_passes(scratch: Path) -> None:
    case = write_case(scratch, "fresh", None)
    rel = str(case)
    first = run_cli("test", rel)
    assert first.returncode == 1 and "expected.yaml: missing" in first.stdout
    updated = run_cli("test", rel, "--update")
    assert updated.returncode == 0, updated.stdout
    assert re.search(r"^fresh\s+catalog\s+updated\s", updated.stdout, re.M)
    assert "updated 1 golden file(s)" in updated.stdout
    golden = (case / "expected.yaml").read_text(encoding="utf-8")
    assert golden.startswith("# Golden for fixtures case 'fresh'") and "kind: InstanceTypeFlavor" in golden
    again = run_cli("test", rel)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "1 passed, 0 failed"
    assert "updated" not in again.stdout


def test_update_never_hides_a_wrong_exit_code(scratch: Path) -> None:
    case = write_case(scratch, "wrong-exit", "", expectExitCode=2)
    proc = run_cli("test", str(case), "--update")
    assert proc.returncode == 1 and "exit code 0, expected 2" in proc.stdout
    assert (case / "expected.yaml").read_text(encoding="utf-8") == ""


def test_expected_error_case_with_stderr(scratch: Path) -> None:
    case = write_case(scratch, "bad-set", "", expectExitCode=2, set=["nope=true"],
                      expectStderr=["nope: unknown setting"])
    proc = run_cli("test", str(case))
    assert proc.returncode == 0, proc.stdout


def test_case_with_its_own_rules(scratch: Path) -> None:
    rules = scratch / "my-rules"
    shutil.copytree(REPO / "rules", rules)
    text = (rules / "naming.yaml").read_text(encoding="utf-8")
    (rules / "naming.yaml").write_text(text.replace('cpu: "gpustack--generic"', 'cpu: "cpu--generic"'), "utf-8")
    case = write_case(scratch, "renamed", None, rules="../my-rules")
    rel = str(case)
    assert run_cli("test", rel, "--update").returncode == 0
    assert "name: cpu--generic" in (case / "expected.yaml").read_text(encoding="utf-8")
    assert run_cli("test", rel).returncode == 0


def test_broken_case_yaml_is_a_failed_case_not_a_crash(scratch: Path) -> None:
    write_case(scratch, "ok", None)
    (scratch / "typo").mkdir()
    (scratch / "typo" / "case.yaml").write_text("description: x\nsnapshot: [nope.yaml]\n", encoding="utf-8")
    proc = run_cli("test", str(scratch))
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    assert re.search(r"^typo\s+render\s+FAIL\s", proc.stdout, re.M)
    assert "'nope.yaml' does not exist" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "0 passed, 2 failed"


def test_several_paths_and_a_single_case_folder() -> None:
    one, two = CASE_DIRS[0], CASE_DIRS[1]
    proc = run_cli("test", str(one.relative_to(REPO)), str(two.relative_to(REPO)), str(one.relative_to(REPO)))
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "2 passed, 0 failed"


def test_missing_or_empty_path_is_a_usage_error(tmp_path: Path) -> None:
    missing = run_cli("test", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such case directory" in missing.stderr
    empty = run_cli("test", str(tmp_path))
    assert empty.returncode == 2 and "no test cases found" in empty.stderr
    elsewhere = run_cli("test", cwd=tmp_path)  # default fixtures/cases does not exist there
    assert elsewhere.returncode == 2 and "fixtures/cases" in elsewhere.stderr


def test_json_format() -> None:
    proc = run_cli("test", "--format", "json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert (data["passed"], data["failed"]) == (len(CASE_DIRS), 0)
    assert [c["name"] for c in data["cases"]] == [d.name for d in CASE_DIRS]
    assert all(c["result"] == "pass" and c["failures"] == [] for c in data["cases"])
    assert proc.stderr.strip() == f"{len(CASE_DIRS)} passed, 0 failed"


def test_junit_format(scratch: Path) -> None:
    write_case(scratch, "missing-golden", None)
    proc = run_cli("test", str(scratch), "--format", "junit")
    assert proc.returncode == 1
    root = ET.fromstring(proc.stdout)
    suite = root.find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("1", "1")
    case = suite.find("testcase")
    assert case is not None and case.get("name") == "missing-golden"
    failure = case.find("failure")
    assert failure is not None and "expected.yaml: missing" in (failure.get("message") or "") + (failure.text or "")
    assert proc.stderr.strip() == "0 passed, 1 failed"


def test_case_runner_module_reexports_the_package_runner() -> None:
    sys.path.insert(0, str(REPO / "tests"))
    try:
        import case_runner
    finally:
        sys.path.pop(0)
    assert case_runner.run_case is casetest.run_case
    assert case_runner.load_case is casetest.load_case
    assert case_runner._header is casetest._header  # private helpers too
    assert case_runner.run_case.__kwdefaults__["invoker"] is casetest.subprocess_invoker  # pytest: the real CLI


def test_test_is_visible_in_help() -> None:
    assert re.search(r"^\s+test\s", run_cli("--help").stdout, re.M)


# --- test --rules DIR: which rules each case ran with (in-process) --------------------------------

def run_in_process(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from gpustack_render.cli import main
    result = CliRunner().invoke(main, ["test", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


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
