"""Invalid rules and templates are a usage error (cli-contract.md: exit 2, no traceback).

Each case copies ``rules/`` to a temporary directory, breaks it with a plain text edit, runs
``render --rules COPY fixtures/demo`` and checks: exit code 2, nothing on stdout, no traceback, and
a compiler-style diagnostic ``<file>:<line>:<col>: error: <path>: <message>`` (an optional
``gpustack-render: `` program prefix is allowed) naming the edited file and the edited line. The
expected line is found in the edited text, never hard-coded.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from cli_invoke import CliResult, invoke

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
TEMPLATES = REPO / "templates"
DEMO = REPO / "fixtures" / "demo"

# "<prog>: <file>[:<line>[:<col>]]: error: [<path>: ]<message>"
_DIAG = re.compile(r"^(?:gpustack-render: )?(?P<loc>\S+?): error: (?:(?P<path>[A-Za-z0-9_.\-]+): )?(?P<msg>.+)$")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Diag:
    file: Path
    line: int | None
    col: int | None
    path: str | None
    message: str
    raw: str


def parse_diag(raw: str) -> Diag:
    match = _DIAG.match(raw)
    assert match, f"stderr line is not '<file>:<line>:<col>: error: <path>: <message>': {raw!r}"
    loc = match["loc"]
    col = line = None
    parts = loc.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        file, line, col = parts[0], int(parts[1]), int(parts[2])
    elif len(parts) >= 2 and parts[-1].isdigit():
        file, line = loc.rsplit(":", 1)[0], int(parts[-1])
    else:
        file = loc
    return Diag(Path(file), line, col, match["path"], match["msg"], raw)


def run_cli(*args: str) -> CliResult:
    """The CLI in process, from the repository root (tests/cli_invoke.py)."""
    return invoke(*args, cwd=REPO)


def run_failing(*args: str) -> list[Diag]:
    """Run a command that must fail as a usage error; return its parsed diagnostics."""
    proc = run_cli(*args)
    assert proc.returncode == 2, f"exit {proc.returncode}, want 2\nstdout:\n{proc.stdout[:2000]}\n" \
                                 f"stderr:\n{proc.stderr}"
    assert proc.stdout == "", f"stdout must be empty on a usage error, got:\n{proc.stdout[:2000]}"
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, "no diagnostic on stderr"
    return [parse_diag(line) for line in lines]


def copy_rules(tmp_path: Path) -> Path:
    dest = tmp_path / "rules"
    shutil.copytree(RULES, dest)
    return dest


def line_of(text: str, marker: str, occurrence: int = 1) -> int:
    """1-based number of the line holding the ``occurrence``-th ``marker``."""
    pos = -1
    for _ in range(occurrence):
        pos = text.index(marker, pos + 1)
    return text.count("\n", 0, pos) + 1


def replace(rules: Path, name: str, old: str, new: str) -> str:
    """Replace the single occurrence of ``old`` in ``rules/name``; return the edited text."""
    path = rules / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {name}"
    text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return text


def append(rules: Path, name: str, extra: str) -> str:
    path = rules / name
    text = path.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        text += "\n"
    text += extra
    path.write_text(text, encoding="utf-8")
    return text


@dataclass(frozen=True)
class Expect:
    """One diagnostic that must be printed. ``file`` None means the rules directory itself."""

    file: str | None
    line: int | None
    message: tuple[str, ...]          # substrings of the message (hint included)
    path: str | None = None           # exact rule path, when the problem has one


@dataclass(frozen=True)
class Case:
    edit: Callable[[Path], list[Expect]]
    edited: tuple[str, ...] = field(default=())   # files the edit touches (others must stay quiet)


def check(rules: Path, diags: list[Diag], expects: list[Expect], edited: tuple[str, ...]) -> None:
    rules_resolved = rules.resolve()
    for diag in diags:
        if diag.line is not None:
            assert diag.col is not None, f"a positioned diagnostic needs <line>:<col>: {diag.raw}"
        # a diagnostic names either the rules directory itself or one of the edited files
        if diag.file.resolve() != rules_resolved:
            assert diag.file.resolve().parent == rules_resolved, diag.raw
            assert diag.file.name in edited, f"diagnostic about a file that was not edited: {diag.raw}"
    for want in expects:
        target = rules_resolved if want.file is None else rules_resolved / want.file
        found = [d for d in diags if d.file.resolve() == target
                 and all(s in (d.message if want.path else f"{d.path}: {d.message}") for s in want.message)
                 and (want.path is None or d.path == want.path)]
        assert found, f"no diagnostic for {want}\ngot:\n" + "\n".join(d.raw for d in diags)
        if want.line is not None:
            assert any(d.line == want.line for d in found), \
                f"want line {want.line} for {want}, got:\n" + "\n".join(d.raw for d in found)


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------


def _placeholder(rules: Path) -> list[Expect]:
    text = replace(rules, "naming.yaml", 'cpu: "gpustack--{gKey}-{os}-{arch}-{count}c-{profile}"',
                   'cpu: "gpustack--{gkey}-{os}-{arch}-{count}c-{profile}"')
    return [Expect("naming.yaml", line_of(text, "{gkey}"), ("unknown placeholder 'gkey'", "did you mean 'gKey'"),
                   "resourceFlavor.cpu")]


def _filter(rules: Path) -> list[Expect]:
    text = replace(rules, "naming.yaml", "{clusterQueue|fnv64a}", "{clusterQueue|fnv64}")
    return [Expect("naming.yaml", line_of(text, "|fnv64}"), ("unknown filter 'fnv64'", "did you mean 'fnv64a'"),
                   "localQueue")]


def _unknown_key(rules: Path) -> list[Expect]:
    text = replace(rules, "manufacturers.yaml", "    publishProfile:", "    publishProfiles:")
    return [Expect("manufacturers.yaml", line_of(text, "publishProfiles:"),
                   ("unknown key 'publishProfiles'", "did you mean 'publishProfile'"), "items.8.publishProfiles")]


def _unknown_top_key(rules: Path) -> list[Expect]:
    text = replace(rules, "queues.yaml", "maxFlavorsPerGroup: 64", "maxFlavorsPerGroup: 64\nmaxFlavoursPerGroup: 8")
    return [Expect("queues.yaml", line_of(text, "maxFlavoursPerGroup"),
                   ("unknown key 'maxFlavoursPerGroup'", "did you mean 'maxFlavorsPerGroup'"), "maxFlavoursPerGroup")]


def _string_for_list(rules: Path) -> list[Expect]:
    text = replace(rules, "namespaces.yaml", "reserved: [gpustack-system, kube-system]", "reserved: gpustack-system")
    return [Expect("namespaces.yaml", line_of(text, "reserved:"), ("expected a list",), "reserved")]


def _string_for_levels(rules: Path) -> list[Expect]:
    text = replace(rules, "topology.yaml", "levels:\n  - kubernetes.io/hostname", "levels: kubernetes.io/hostname")
    return [Expect("topology.yaml", line_of(text, "levels:"), ("expected a list",), "levels")]


def _string_for_int(rules: Path) -> list[Expect]:
    text = replace(rules, "manufacturers.yaml", "unitsPerAccelerator: 1600000", "unitsPerAccelerator: lots")
    return [Expect("manufacturers.yaml", line_of(text, "unitsPerAccelerator"), ("expected a whole number",),
                   "unitsPerAccelerator")]


def _yaml_syntax(rules: Path) -> list[Expect]:
    text = replace(rules, "namespaces.yaml", "kind: Namespaces", "kind: Namespaces: oops")
    return [Expect("namespaces.yaml", line_of(text, "oops"), ("invalid YAML",))]


def _yaml_tab(rules: Path) -> list[Expect]:
    text = replace(rules, "topology.yaml", "  - kubernetes.io/hostname", "\t- kubernetes.io/hostname")
    return [Expect("topology.yaml", line_of(text, "\t-"), ("invalid YAML",))]


def _unknown_fact(rules: Path) -> list[Expect]:
    text = replace(rules, "grouping.yaml", "{fact: cpuCount, operator: Gt, value: 0}",
                   "{fact: cpuCnt, operator: Gt, value: 0}")
    return [Expect("grouping.yaml", line_of(text, "cpuCnt"), ("unknown fact 'cpuCnt'", "did you mean 'cpuCount'"),
                   "flavor.cpu.contributes.all.2.fact")]


def _unknown_setting(rules: Path) -> list[Expect]:
    text = replace(rules, "grouping.yaml", "stampWhen: {not: {setting: node-management-manual}}",
                   "stampWhen: {not: {setting: node-managment-manual}}")
    return [Expect("grouping.yaml", line_of(text, "node-managment-manual"),
                   ("unknown setting 'node-managment-manual'", "did you mean 'node-management-manual'"),
                   "managedLabel.stampWhen.not.setting")]


def _unknown_setting_in_queues(rules: Path) -> list[Expect]:
    text = replace(rules, "queues.yaml", "{setting: instance-type-derived-from-node}",
                   "{setting: instance-type-derived}")
    return [Expect("queues.yaml", line_of(text, "instance-type-derived}"), ("unknown setting 'instance-type-derived'",),
                   "admissionChecks.0.when.all.1.setting")]


def _unknown_condition(rules: Path) -> list[Expect]:
    text = replace(rules, "grouping.yaml", "stampWhen: {not: {setting: node-management-manual}}",
                   "stampWhen: {nott: {setting: node-management-manual}}")
    return [Expect("grouping.yaml", line_of(text, "nott"), ("did you mean 'not'",), "managedLabel.stampWhen")]


def _expr_syntax(rules: Path) -> list[Expect]:
    text = replace(rules, "queues.yaml", 'nominalQuota: "capacity * M"', 'nominalQuota: "capacity * * M"')
    return [Expect("queues.yaml", line_of(text, "capacity * * M"), ("syntax error",), "quota.accelerated.nominalQuota")]


def _expr_variable(rules: Path) -> list[Expect]:
    text = replace(rules, "queues.yaml", 'nominalQuota: "capacity * M"', 'nominalQuota: "capacity * units"')
    return [Expect("queues.yaml", line_of(text, "capacity * units"), ("unknown variable 'units'",),
                   "quota.accelerated.nominalQuota")]


def _unknown_tier(rules: Path) -> list[Expect]:
    text = replace(rules, "presets.yaml", "{tier: small, prefixes: [t4]}", "{tier: tiny, prefixes: [t4]}")
    return [Expect("presets.yaml", line_of(text, "tier: tiny"), ("unknown tier 'tiny'",),
                   "manufacturers.nvidia.9.tier")]


def _unknown_by_tier(rules: Path) -> list[Expect]:
    text = replace(rules, "presets.yaml", "by: {32gb: medium}", "by: {32gb: meduim}")
    return [Expect("presets.yaml", line_of(text, "meduim"), ("unknown tier 'meduim'", "did you mean 'medium'"),
                   "manufacturers.nvidia.10.by.32gb")]


def _preset_unknown_manufacturer(rules: Path) -> list[Expect]:
    text = replace(rules, "presets.yaml", "  mthreads:\n", "  mthread:\n")
    return [Expect("presets.yaml", line_of(text, "  mthread:"), ("unknown manufacturer 'mthread'",),
                   "manufacturers.mthread")]


def _levels_not_hostname_last(rules: Path) -> list[Expect]:
    text = append(rules, "topology.yaml", "  - topology.kubernetes.io/zone\n")
    return [Expect("topology.yaml", line_of(text, "topology.kubernetes.io/zone"), ("kubernetes.io/hostname",),
                   "levels.1")]


def _levels_duplicate(rules: Path) -> list[Expect]:
    text = replace(rules, "topology.yaml", "levels:\n  - kubernetes.io/hostname",
                   "levels:\n  - topology.kubernetes.io/zone\n  - topology.kubernetes.io/zone\n"
                   "  - kubernetes.io/hostname")
    # the entry that repeats an earlier one is the one to point at
    return [Expect("topology.yaml", line_of(text, "topology.kubernetes.io/zone", occurrence=2), ("unique",))]


def _levels_empty(rules: Path) -> list[Expect]:
    text = replace(rules, "topology.yaml", "levels:\n  - kubernetes.io/hostname", "levels: []")
    return [Expect("topology.yaml", line_of(text, "levels:"), ("must not be empty",), "levels")]


def _duplicate_manufacturer(rules: Path) -> list[Expect]:
    text = append(rules, "manufacturers.yaml", "  - name: nvidia\n    resourceBase: nvidia.com/gpu\n")
    return [Expect("manufacturers.yaml", line_of(text, "  - name: nvidia", occurrence=2),
                   ("duplicate manufacturer 'nvidia'",), "items.9.name")]


def _bad_resource_base(rules: Path) -> list[Expect]:
    text = replace(rules, "manufacturers.yaml", "resourceBase: hygon.com/dcu", "resourceBase: dcu")
    return [Expect("manufacturers.yaml", line_of(text, "resourceBase: dcu"), ("not a valid extended resource name",),
                   "items.3.resourceBase")]


def _missing_kind(rules: Path) -> list[Expect]:
    """A full copy (inherit: false) lacking a kind; an overlay inherits it (tests/test_overlay.py)."""
    (rules / "queues.yaml").unlink()
    (rules / "rules.yaml").write_text("apiVersion: render.gpustack.ai/v1alpha1\nkind: Rules\ninherit: false\n",
                                      encoding="utf-8")
    return [Expect(None, None, ("no rule file of kind Queues", "rules.yaml says inherit: false"))]


def _duplicate_kind(rules: Path) -> list[Expect]:
    # files are read in name order, so the copy (sorting after namespaces.yaml) is the duplicate
    text = (rules / "namespaces.yaml").read_text(encoding="utf-8")
    (rules / "z-namespaces.yaml").write_text(text, encoding="utf-8")
    return [Expect("z-namespaces.yaml", line_of(text, "kind: Namespaces"), ("Namespaces", "/namespaces.yaml"),
                   "kind")]


def _bad_regex(rules: Path) -> list[Expect]:
    text = replace(rules, "manufacturers.yaml", "'^([0-9]+)g([0-9]+)gb$'", "'^([0-9]+g([0-9]+)gb$'")
    return [Expect("manufacturers.yaml", line_of(text, "'^([0-9]+g([0-9]+)gb$'"), ("invalid regular expression",))]


def _bad_cruft_regex(rules: Path) -> list[Expect]:
    text = replace(rules, "normalisation.yaml", "{regex: ' CPU$', replace: \"\"}", "{regex: ' CPU$(', replace: \"\"}")
    return [Expect("normalisation.yaml", line_of(text, "' CPU$('"), ("invalid regular expression",),
                   "normalizeName.cruft.4")]


def _api_version(rules: Path) -> list[Expect]:
    text = replace(rules, "settings.yaml", "apiVersion: render.gpustack.ai/v1alpha1",
                   "apiVersion: render.gpustack.ai/v1beta1")
    return [Expect("settings.yaml", line_of(text, "apiVersion:"), ("render.gpustack.ai/v1alpha1",), "apiVersion")]


def _unknown_kind(rules: Path) -> list[Expect]:
    text = replace(rules, "namespaces.yaml", "kind: Namespaces", "kind: Namespace")
    return [Expect("namespaces.yaml", line_of(text, "kind: Namespace"), ("Namespace", "did you mean 'Namespaces'"),
                   "kind")]  # the kind Namespaces itself is inherited (an overlay)


def _unknown_grouping_field(rules: Path) -> list[Expect]:
    text = replace(rules, "grouping.yaml", "key: [gKey, aKey, os, arch, count, profile]",
                   "key: [gKey, aKey, os, arch, count, profile, colour]")
    return [Expect("grouping.yaml", line_of(text, "colour"), ("unknown grouping field 'colour'",),
                   "flavor.accelerated.key.6")]


CASES: dict[str, Case] = {
    "naming-unknown-placeholder": Case(_placeholder, ("naming.yaml",)),
    "naming-unknown-filter": Case(_filter, ("naming.yaml",)),
    "manufacturers-unknown-key": Case(_unknown_key, ("manufacturers.yaml",)),
    "queues-unknown-top-level-key": Case(_unknown_top_key, ("queues.yaml",)),
    "namespaces-string-for-list": Case(_string_for_list, ("namespaces.yaml",)),
    "topology-string-for-list": Case(_string_for_levels, ("topology.yaml",)),
    "manufacturers-string-for-int": Case(_string_for_int, ("manufacturers.yaml",)),
    "yaml-syntax-mapping-value": Case(_yaml_syntax, ("namespaces.yaml",)),
    "yaml-syntax-tab": Case(_yaml_tab, ("topology.yaml",)),
    "grouping-unknown-fact": Case(_unknown_fact, ("grouping.yaml",)),
    "grouping-unknown-setting": Case(_unknown_setting, ("grouping.yaml",)),
    "grouping-unknown-condition-key": Case(_unknown_condition, ("grouping.yaml",)),
    "grouping-unknown-key-field": Case(_unknown_grouping_field, ("grouping.yaml",)),
    "queues-unknown-setting": Case(_unknown_setting_in_queues, ("queues.yaml",)),
    "queues-expression-syntax": Case(_expr_syntax, ("queues.yaml",)),
    "queues-expression-unknown-variable": Case(_expr_variable, ("queues.yaml",)),
    "presets-unknown-tier": Case(_unknown_tier, ("presets.yaml",)),
    "presets-unknown-by-tier": Case(_unknown_by_tier, ("presets.yaml",)),
    "presets-unknown-manufacturer": Case(_preset_unknown_manufacturer, ("presets.yaml",)),
    "topology-last-not-hostname": Case(_levels_not_hostname_last, ("topology.yaml",)),
    "topology-duplicate-level": Case(_levels_duplicate, ("topology.yaml",)),
    "topology-no-levels": Case(_levels_empty, ("topology.yaml",)),
    "manufacturers-duplicate": Case(_duplicate_manufacturer, ("manufacturers.yaml",)),
    "manufacturers-bad-resource-base": Case(_bad_resource_base, ("manufacturers.yaml",)),
    "missing-kind": Case(_missing_kind, ()),
    "duplicate-kind": Case(_duplicate_kind, ("z-namespaces.yaml", "namespaces.yaml")),
    "manufacturers-bad-publish-regex": Case(_bad_regex, ("manufacturers.yaml",)),
    "normalisation-bad-cruft-regex": Case(_bad_cruft_regex, ("normalisation.yaml",)),
    "settings-bad-api-version": Case(_api_version, ("settings.yaml",)),
    "namespaces-unknown-kind": Case(_unknown_kind, ("namespaces.yaml",)),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_invalid_rules_are_a_usage_error(tmp_path: Path, case: Case) -> None:
    rules = copy_rules(tmp_path)
    expects = case.edit(rules)
    diags = run_failing("render", "--rules", str(rules), "fixtures/demo")
    check(rules, diags, expects, case.edited)


@pytest.mark.parametrize("command", ["render", "catalog"])
def test_invalid_rules_fail_every_command(tmp_path: Path, command: str) -> None:
    rules = copy_rules(tmp_path)
    expects = _expr_variable(rules)
    check(rules, run_failing(command, "--rules", str(rules), "fixtures/demo"), expects, ("queues.yaml",))


def test_missing_rules_directory(tmp_path: Path) -> None:
    diags = run_failing("render", "--rules", str(tmp_path / "nope"), "fixtures/demo")
    assert any("nope" in d.raw for d in diags)


# --------------------------------------------------------------------------------------------
# all problems at once
# --------------------------------------------------------------------------------------------

TWO_BROKEN: dict[str, tuple[Callable[[Path], list[Expect]], Callable[[Path], list[Expect]]]] = {
    "naming-placeholder+queues-variable": (_placeholder, _expr_variable),
    "namespaces-type+manufacturers-key": (_string_for_list, _unknown_key),
    "grouping-fact+presets-tier": (_unknown_fact, _unknown_tier),
    # a shape error in one file must not hide a meaning error in another
    "namespaces-type+naming-placeholder": (_string_for_list, _placeholder),
    "manufacturers-key+queues-syntax": (_unknown_key, _expr_syntax),
}


@pytest.mark.parametrize("edits", list(TWO_BROKEN.values()), ids=list(TWO_BROKEN))
def test_all_problems_are_reported_at_once(tmp_path: Path, edits: tuple[Callable[[Path], list[Expect]], ...]) -> None:
    rules = copy_rules(tmp_path)
    expects = [want for edit in edits for want in edit(rules)]
    edited = tuple({want.file for want in expects if want.file})
    diags = run_failing("render", "--rules", str(rules), "fixtures/demo")
    check(rules, diags, expects, edited)
    assert len({d.file for d in diags if d.line is not None}) >= 2


def test_every_problem_of_one_file_is_reported(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    expects = _unknown_fact(rules) + _unknown_setting(rules)
    diags = run_failing("render", "--rules", str(rules), "fixtures/demo")
    check(rules, diags, expects, ("grouping.yaml",))


# --------------------------------------------------------------------------------------------
# templates (--templates)
# --------------------------------------------------------------------------------------------


def copy_templates(tmp_path: Path) -> Path:
    dest = tmp_path / "templates"
    shutil.copytree(TEMPLATES, dest)
    return dest


def replace_template(templates: Path, name: str, old: str, new: str) -> str:
    path = templates / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {name}"
    text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return text


def run_template_failure(templates: Path, *extra: str) -> str:
    """Run render with --templates that must fail; return stderr. Template problems follow the
    general bad-input format (inputs.md §10), so only the named file (and line) is checked here."""
    proc = run_cli("render", *extra, "--templates", str(templates), "fixtures/demo")
    assert proc.returncode == 2, f"exit {proc.returncode}, want 2\nstderr:\n{proc.stderr}"
    assert proc.stdout == "", proc.stdout[:2000]
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert all("error" in line for line in proc.stderr.splitlines() if line.strip()), proc.stderr
    return proc.stderr


def template_lines(stderr: str, path: Path) -> list[int | None]:
    """For every mention of ``path`` in stderr, the line number following it (None when absent)."""
    return [int(m[1]) if m[1] else None for m in re.finditer(re.escape(str(path)) + r"(?::(\d+))?", stderr)]


@pytest.mark.parametrize("name", ["Topology.yaml", "ResourceFlavor.yaml", "ClusterQueue.yaml"])
def test_template_syntax_error_is_a_usage_error(tmp_path: Path, name: str) -> None:
    templates = copy_templates(tmp_path)
    text = replace_template(templates, name, "kind: ", "kind: \"{{ obj.name ) }}\"\nignored: ")
    stderr = run_template_failure(templates)
    mentions = template_lines(stderr, templates / name)
    assert mentions, f"the broken template is not named:\n{stderr}"
    assert "syntax" in stderr
    assert line_of(text, "obj.name )") in mentions, f"line of the error not reported:\n{stderr}"


def test_template_unclosed_block_is_a_usage_error(tmp_path: Path) -> None:
    templates = copy_templates(tmp_path)
    path = templates / "LocalQueue.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "status: \"{% if obj %}\"\n", encoding="utf-8")
    stderr = run_template_failure(templates)
    assert template_lines(stderr, path), stderr


def test_template_errors_in_two_templates_are_both_reported(tmp_path: Path) -> None:
    templates = copy_templates(tmp_path)
    replace_template(templates, "Topology.yaml", "kind: ", "kind: \"{{ obj.name ) }}\"\nignored: ")
    replace_template(templates, "LocalQueue.yaml", "kind: ", "kind: \"{% endif %}\"\nignored: ")
    stderr = run_template_failure(templates)
    assert template_lines(stderr, templates / "Topology.yaml"), stderr
    assert template_lines(stderr, templates / "LocalQueue.yaml"), stderr


UNSAFE = {
    "obj-class-mro": "obj.__class__.__mro__",
    "obj-init-globals": "obj.__init__.__globals__",
    "str-subclasses": "''.__class__.__mro__[1].__subclasses__()",
    "lipsum-globals": "lipsum.__globals__",
    "cycler-init-globals": "cycler.__init__.__globals__",
    "list-class": "obj.levels.__class__",
    "format-attr": "'{0.__class__}'.format(obj)",
}


@pytest.mark.parametrize("expr", list(UNSAFE.values()), ids=list(UNSAFE))
def test_template_sandbox_blocks_unsafe_access(tmp_path: Path, expr: str) -> None:
    templates = copy_templates(tmp_path)
    replace_template(templates, "Topology.yaml", '  name: "{{ obj.name }}"\n',
                     '  name: "{{ obj.name }}"\n  annotations:\n    leak: "{{ (' + expr.replace('"', '\\"') + ') | string }}"\n')
    proc = run_cli("render", "--format", "json", "--templates", str(templates), "fixtures/demo")
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 0:
        # rendered: the value must not leak Python internals into the output
        for marker in ("<class", "<function", "<module", "__builtins__", "gpustack_render", "TopologyPlan"):
            assert marker not in proc.stdout, f"sandbox leaked {marker!r} via {expr}"
    else:
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        assert template_lines(proc.stderr, templates / "Topology.yaml"), proc.stderr


def test_raw_unsafe_expression_without_filters(tmp_path: Path) -> None:
    """The literal ``{{ obj.__class__.__mro__ }}`` in a label value."""
    templates = copy_templates(tmp_path)
    replace_template(templates, "Topology.yaml", "    resource.gpustack.ai/type: topology\n",
                     "    resource.gpustack.ai/type: topology\n    leak: \"{{ obj.__class__.__mro__ }}\"\n")
    proc = run_cli("render", "--format", "json", "--templates", str(templates), "fixtures/demo")
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2 or ("<class" not in proc.stdout), proc.stdout[:2000]
    if proc.returncode == 2:
        assert proc.stdout == "" and str(templates / "Topology.yaml") in proc.stderr


def test_missing_templates_directory(tmp_path: Path) -> None:
    proc = run_cli("render", "--templates", str(tmp_path / "nope"), "fixtures/demo")
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert str(tmp_path / "nope") in proc.stderr


def test_missing_template_file_is_the_built_in_one(tmp_path: Path) -> None:
    """--templates is an overlay: a kind the directory has no template of renders with the built-in one."""
    templates = copy_templates(tmp_path)
    (templates / "InstanceType.yaml").unlink()
    proc = run_cli("render", "--templates", str(templates), "fixtures/demo")
    assert proc.returncode == 0 and proc.stdout == run_cli("render", "fixtures/demo").stdout, proc.stderr


# --------------------------------------------------------------------------------------------
# exact lines: quantities checked at load, unknown keys at the key's own column (in-process)
# --------------------------------------------------------------------------------------------


def position_of(text: str, marker: str) -> tuple[int, int]:
    """1-based line and column of the single occurrence of ``marker`` in ``text``."""
    assert text.count(marker) == 1, f"{marker!r} occurs {text.count(marker)} times"
    start = text.index(marker)
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


def cli_in_process(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from gpustack_render.cli import main
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


_QUANTITY_HINT = "(a Kubernetes quantity, like 8, 500m or 32Gi)"

QUANTITY_EDITS: dict[str, tuple[str, str, str, str]] = {
    # id: (old text, new text, marker of the bad value, expected "path: message")
    "tier-ram": ('small: {cpu: "8", ram: 32Gi}', 'small: {cpu: "8", ram: 32Gb}', "32Gb",
                 f'tiers.small.ram: "32Gb" is not a valid quantity {_QUANTITY_HINT}'),
    "local-storage": ("localStorage: 100Gi", "localStorage: 100 Gi", "100 Gi",
                      f'localStorage: "100 Gi" is not a valid quantity {_QUANTITY_HINT}'),
    "cpu-pool-cpu": ('cpuPool: {cpu: "1", ram: 2Gi}', 'cpuPool: {cpu: "one", ram: 2Gi}', '"one"',
                     f'cpuPool.cpu: "one" is not a valid quantity {_QUANTITY_HINT}'),
    "fallback-negative": ('fallback: {cpu: "4", ram: 16Gi}', 'fallback: {cpu: "4", ram: "-16Gi"}', '"-16Gi"',
                          'fallback.ram: "-16Gi" must not be negative'),
    "tier-unquoted-number": ('large: {cpu: "12", ram: 128Gi}', "large: {cpu: 12, ram: 128Gi}", "12,",
                             'tiers.large.cpu: expected a string, got a number 12 (quote it: "12")'),
}


@pytest.mark.parametrize("edit", list(QUANTITY_EDITS.values()), ids=list(QUANTITY_EDITS))
def test_rule_quantity_is_checked_at_load(tmp_path: Path, edit: tuple[str, str, str, str]) -> None:
    old, new, marker, message = edit
    rules = copy_rules(tmp_path)
    text = replace(rules, "presets.yaml", old, new)
    line, col = position_of(text, marker)
    want = f"{rules / 'presets.yaml'}:{line}:{col}: error: {message}"
    code, out, err = cli_in_process("render", "fixtures/demo", "--rules", str(rules))
    assert (code, out) == (2, ""), err
    assert err.splitlines() == [want]
    code, out, err = cli_in_process("lint", "--rules", str(rules))
    assert code == 1 and err == "", out
    assert out.splitlines()[0] == want


def test_valid_quantity_spellings_are_accepted(tmp_path: Path) -> None:
    """Any Kubernetes spelling passes: decimal exponents, milli-CPUs, binary and decimal suffixes."""
    rules = copy_rules(tmp_path)
    replace(rules, "presets.yaml", 'small: {cpu: "8", ram: 32Gi}', 'small: {cpu: "8000m", ram: 32G}')
    replace(rules, "presets.yaml", "localStorage: 100Gi", 'localStorage: "1e11"')
    code, out, err = cli_in_process("lint", "--rules", str(rules))
    assert code == 0 and err == "", out


def test_unknown_key_is_reported_at_the_key(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    text = replace(rules, "manufacturers.yaml", "    resourceBase: amd.com/gpu", "    resourceBaes: amd.com/gpu")
    line, col = position_of(text, "resourceBaes")
    flow = replace(rules, "presets.yaml", 'cpuPool: {cpu: "1", ram: 2Gi}', 'cpuPool: {cpu: "1", ram: 2Gi, gpu: "1"}')
    flow_line, flow_col = position_of(flow, "gpu:")
    code, out, _ = cli_in_process("lint", "--rules", str(rules))
    lines = out.splitlines()
    assert code == 1
    assert f"{rules / 'manufacturers.yaml'}:{line}:{col}: error: items.0.resourceBaes: unknown key 'resourceBaes' " \
           f"(did you mean 'resourceBase'?)" in lines, out
    assert f"{rules / 'presets.yaml'}:{flow_line}:{flow_col}: error: cpuPool.gpu: unknown key 'gpu' (did you mean 'cpu'?)" in lines, out


# --------------------------------------------------------------------------------------------
# arithmetic that fails on the snapshot's data: a rule error, never an internal error
# --------------------------------------------------------------------------------------------

def test_arithmetic_failing_on_the_data_is_a_rule_error_at_its_line(tmp_path: Path) -> None:
    """``capacity // (capacity - 4)`` passes lint's sample inputs but divides by zero for the demo's
    flavors of capacity 4: render exits 2 with one rule error naming the file:line:col, the rule path,
    the expression and the input values; nothing on stdout."""
    from click.testing import CliRunner

    from gpustack_render.cli import main
    rules = copy_rules(tmp_path)
    replace(rules, "queues.yaml", 'nominalQuota: "capacity"}', 'nominalQuota: "capacity // (capacity - 4)"}')
    text = (rules / "queues.yaml").read_text(encoding="utf-8")
    line = line_of(text, "capacity // (capacity - 4)")
    col = text.splitlines()[line - 1].index('"capacity //') + 1
    assert CliRunner().invoke(main, ["lint", "--rules", str(rules)]).exit_code == 0
    result = CliRunner().invoke(main, ["render", str(DEMO), "--rules", str(rules)])
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr == (f"{rules / 'queues.yaml'}:{line}:{col}: error: quota.cpu.nominalQuota: expression "
                             f"'capacity // (capacity - 4)' failed: integer division or modulo by zero for "
                             f"capacity=4\n")
