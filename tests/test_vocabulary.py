"""Issue 11.1: the operator's vocabulary is rule data, and settings reach the code only by reference.

- The package's string constants (docstrings excluded) hold no operator literal: no label or
  annotation domain, name prefix, system namespace, profile format or setting name. The scan is an
  AST walk of every module (f-string parts included), so a literal cannot hide in an expression.
- The new rule entries are checked by ``lint`` (file:line:col): rules/vocabulary.yaml's keys, the
  profile format, lifecycle markers referenced by name, the fixed generic pool group.
- Consistent edits of ``rules/`` are valid: renaming a setting in settings.yaml and in every rule that
  references it (and in ``--set``) renders the same output; changing a marker or the LocalQueue
  format in its one place changes what the code writes and recognises.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml

from gpustack_render.rules import load_rules
from gpustack_render.errors import UserError

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "gpustack_render"
RULES = REPO / "rules"
DEMO = REPO / "fixtures" / "demo"

FIXED_PATTERNS = (r"gpustack\.ai", r"gpustack-(system|fnv64|settings|operator)", r"gpustack--", r"\bfnv64-")
# The renderer's own names (its rule files' apiVersion and its JSON Schemas' $id base) share the
# domain but are not the operator's vocabulary: a rule file cannot say which apiVersion rule files have.
OWN_NAMES = frozenset({"render.gpustack.ai/v1alpha1", "https://gpustack.ai/schemas/render/"})


def _setting_names() -> list[str]:
    return sorted(yaml.safe_load((RULES / "settings.yaml").read_text(encoding="utf-8"))["defaults"])


def vocabulary_pattern() -> re.Pattern[str]:
    names = [re.escape(name) for name in _setting_names()]
    return re.compile("|".join((*FIXED_PATTERNS, *names)))


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants: a docstring may name a key to explain the code."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def string_constants(root: Path) -> Iterator[tuple[str, int, str]]:
    """(file, line, value) of every string constant of the package's modules, docstrings excluded."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                yield str(path.relative_to(root.parent)), node.lineno, node.value


def vocabulary_hits(root: Path) -> list[str]:
    pattern = vocabulary_pattern()
    return [f"{file}:{line}: {value!r}" for file, line, value in string_constants(root)
            if value not in OWN_NAMES and pattern.search(value)]


def test_no_operator_literal_in_the_package() -> None:
    hits = vocabulary_hits(PACKAGE)
    assert not hits, "operator vocabulary in Python (move it to rules/ or the template):\n" + "\n".join(hits)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The scan is not vacuous: constants, f-string parts and setting names are found, docstrings
    and the renderer's own apiVersion are not."""
    (tmp_path / "mod.py").write_text(
        '"""Module doc naming topology.gpustack.ai/profile."""\n'
        'A = "feature.gpustack.ai/acceleratable"\n'
        'B = f"{1}gpustack--{2}"\n'
        'C = "instance-type-derived-from-node"\n'
        'D = "render.gpustack.ai/v1alpha1"\n'
        'def f():\n    """Doc: gpustack-system."""\n    return "fnv64-" + "x"\n', encoding="utf-8")
    found = [value for _, _, value in string_constants(tmp_path)]
    pattern = vocabulary_pattern()
    hits = [v for v in found if v not in OWN_NAMES and pattern.search(v)]
    assert sorted(hits) == sorted(["feature.gpustack.ai/acceleratable", "gpustack--",
                                   "instance-type-derived-from-node", "fnv64-"])


# --- lint checks of the new entries ---------------------------------------------------------------

@pytest.fixture
def rules_copy(tmp_path: Path) -> Path:
    target = tmp_path / "rules"
    shutil.copytree(RULES, target)
    return target


def edit(rules: Path, name: str, old: str, new: str) -> None:
    path = rules / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {name}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def lint_lines(cli: Callable[..., object], rules: Path) -> tuple[int, list[str]]:
    result = cli("lint", "--rules", rules)
    return result.exit_code, result.stdout.splitlines() + result.stderr.splitlines()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("name", "old", "new", "message"), [
    ("vocabulary.yaml", "acceleratableLabel: feature.gpustack.ai/acceleratable",
     "acceleratableLabel: feature.gpustack.ai/bad key", "not a valid label or annotation key"),
    ("vocabulary.yaml", "notePrefix: note.gpustack.ai/", "notePrefix: not a/prefix/", "not a valid label or annotation key"),
    ("vocabulary.yaml", 'format: "fnv64-{levels|fnv64a}"', 'format: "fnv64-static"',
     "must contain the placeholder {levels}"),
    ("vocabulary.yaml", 'format: "fnv64-{levels|fnv64a}"', 'format: "{level|fnv64a}"', "unknown placeholder 'level'"),
    ("vocabulary.yaml", "  queue: instancetypes", "  queue: nodes", "must differ from queueType.flavor"),
    ("vocabulary.yaml", "nodeFeatureNamespace: gpustack-system", "nodeFeatureNamespace: Not_A_Namespace",
     "not a valid namespace"),
    ("lifecycle.yaml", "    mark: [emptyPlanHold]", '    annotations: {topology.gpustack.ai/empty-plan-hold: "true"}',
     "reference it by name: mark: [emptyPlanHold]"),
    ("grouping.yaml", 'whenUnaware: {generalGroup: generic, acceleratorGroup: "{aKey}"}',
     'whenUnaware: {generalGroup: "{gManu}", acceleratorGroup: "{aKey}"}', "must be a fixed name without placeholders"),
    ("grouping.yaml", "aware: {setting: instance-type-aware-cpu-manufacturer}",
     "aware: {setting: instance-type-aware-cpu-manufacturr}", "unknown setting"),
], ids=["label-key", "note-prefix", "profile-no-levels", "profile-placeholder", "queue-type-values", "namespace",
        "marker-copy", "generic-group", "aware-setting"])
def test_lint_checks_new_entries(cli: Callable[..., object], rules_copy: Path, name: str, old: str, new: str,
                                 message: str) -> None:
    edit(rules_copy, name, old, new)
    code, lines = lint_lines(cli, rules_copy)
    assert code == 2 or code == 1, lines
    located = [ln for ln in lines if re.match(rf"{re.escape(str(rules_copy / name))}:\d+:\d+: error: ", ln)]
    assert any(message in ln for ln in located), lines


def test_builtin_rules_lint_clean(cli: Callable[..., object]) -> None:
    code, lines = lint_lines(cli, RULES)
    assert code == 0, lines


# --- consistent edits of rules/ are valid ---------------------------------------------------------

def rename_setting(rules: Path, old: str, new: str) -> None:
    """Rename a setting everywhere the rules name it (settings.yaml and every referencing rule)."""
    count = 0
    for path in rules.glob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        count += text.count(old)
        path.write_text(text.replace(old, new), encoding="utf-8")
    assert count >= 2, f"{old} is named {count} time(s) in the rules"


@pytest.mark.parametrize(("setting", "value", "command"), [
    ("instance-type-aware-cpu-manufacturer", "true", "render"),
    ("instance-type-aware-cpu-manufacturer", "true", "catalog"),
    ("instance-type-derived-from-node", "false", "render"),
    ("instance-type-mixed-on-node", "false", "render"),
])
def test_renamed_setting_renders_the_same(cli: Callable[..., object], rules_copy: Path, setting: str, value: str,
                                          command: str) -> None:
    original = cli(command, DEMO, "--set", f"{setting}={value}")
    rename_setting(rules_copy, setting, "renamed-" + setting)
    renamed = cli(command, DEMO, "--rules", rules_copy, "--set", f"renamed-{setting}={value}")
    assert original.exit_code == 0, original.stderr  # type: ignore[attr-defined]
    assert (renamed.exit_code, renamed.stdout) == (0, original.stdout), renamed.stderr  # type: ignore[attr-defined]
    default = cli(command, DEMO)
    assert default.stdout != original.stdout  # type: ignore[attr-defined]  # the setting matters here


def test_renamed_setting_is_named_by_explain(cli: Callable[..., object], rules_copy: Path) -> None:
    rename_setting(rules_copy, "instance-type-aware-cpu-manufacturer", "split-per-cpu")
    out = cli("explain", "cq/gpustack--nvidia-tesla-t4-linux-amd64", DEMO, "--rules", rules_copy, "--format", "json")
    assert out.exit_code == 0, out.stderr  # type: ignore[attr-defined]
    text = out.stdout  # type: ignore[attr-defined]
    assert "split-per-cpu" in text and "instance-type-aware-cpu-manufacturer" not in text
    json.loads(text)


def test_renamed_workload_fit_setting_still_switches_the_pin(cli: Callable[..., object], rules_copy: Path) -> None:
    rename_setting(rules_copy, "workload-fit-affinity", "fit-pin")
    args = ("pin", REPO / "fixtures/pin/workloads", "--snapshot", DEMO, "--rules", rules_copy, "--format", "patch")
    on, off = cli(*args), cli(*args, "--set", "fit-pin=false")
    assert on.exit_code == 0 and off.exit_code == 0, (on.stderr, off.stderr)  # type: ignore[attr-defined]
    assert any(entry["patch"] for entry in json.loads(on.stdout))  # type: ignore[attr-defined]
    assert not any(entry["patch"] for entry in json.loads(off.stdout))  # type: ignore[attr-defined]
    assert "setting fit-pin is false" in off.stderr  # type: ignore[attr-defined]


def test_marker_changed_in_its_one_place(rules_copy: Path) -> None:
    edit(rules_copy, "lifecycle.yaml", "inactiveHold: topology.gpustack.ai/inactive-hold",
         "inactiveHold: example.com/inactive")
    rules = load_rules(rules_copy)
    written = {key for rule in (*rules.lifecycle.stop_policy, *rules.lifecycle.save) for key, _ in rule.annotations}
    assert "example.com/inactive" in written and "topology.gpustack.ai/inactive-hold" not in written


def test_local_queue_test_follows_the_format(rules_copy: Path) -> None:
    builtin = load_rules(RULES)
    assert builtin.naming.local_queue_pattern is not None
    assert builtin.naming.local_queue_pattern.match(builtin.naming.local_queue.render({"clusterQueue": "cq"}))
    assert not builtin.naming.local_queue_pattern.match("team-queue")
    edit(rules_copy, "naming.yaml", 'localQueue: "gpustack-fnv64-{clusterQueue|fnv64a}"',
         'localQueue: "lq.{clusterQueue|fnv64a}"')
    rules = load_rules(rules_copy)
    assert rules.naming.local_queue_pattern is not None
    assert rules.naming.local_queue_pattern.match(rules.naming.local_queue.render({"clusterQueue": "cq"}))
    assert not rules.naming.local_queue_pattern.match(builtin.naming.local_queue.render({"clusterQueue": "cq"}))
    assert not rules.naming.local_queue_pattern.match("lqx0123")  # the format's '.' is a literal


def test_profile_format_check_follows_the_format(rules_copy: Path) -> None:
    builtin = load_rules(RULES)
    assert builtin.vocabulary.profile_pattern is not None and builtin.vocabulary.profile_pattern.pattern == "^fnv64-[0-9a-f]{16}$"
    edit(rules_copy, "vocabulary.yaml", 'format: "fnv64-{levels|fnv64a}"', 'format: "tp-{levels|fnv64a}"')
    rules = load_rules(rules_copy)
    assert rules.vocabulary.profile_pattern is not None and rules.vocabulary.profile_pattern.match("tp-0123456789abcdef")
    assert not rules.vocabulary.profile_pattern.match("fnv64-0123456789abcdef")


def test_vocabulary_file_is_required(rules_copy: Path) -> None:
    """In a full copy (inherit: false); an overlay inherits the built-in Vocabulary (tests/test_overlay.py)."""
    (rules_copy / "vocabulary.yaml").unlink()
    (rules_copy / "rules.yaml").write_text("apiVersion: render.gpustack.ai/v1alpha1\nkind: Rules\ninherit: false\n",
                                           encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_rules(rules_copy)
    assert any("no rule file of kind Vocabulary" in p.message for p in err.value.problems)
