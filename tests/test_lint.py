"""`gpustack-render lint`: every problem of every rule file at once, compiler style, exit 0 / 1 / 2.

Each case copies ``rules/`` to a temporary directory, breaks it with a plain text edit and runs
``lint --rules COPY``. The expected line is found in the edited text, never hard-coded. Every case
is also rendered: ``render`` must refuse the same rules (exit 2) with the same lines on stderr.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from cli_invoke import CliResult, invoke

from gpustack_render.errors import UserError
from gpustack_render.rules.lint import lint_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"

# "<file>[:<line>:<col>]: error: [<path>: ]<message>" — and never a program prefix on lint's lines
_LINE = re.compile(r"^(?P<file>[^:\s]+)(?::(?P<line>\d+):(?P<col>\d+))?: error: (?:(?P<path>[A-Za-z0-9_.\-]+): )?"
                   r"(?P<msg>.+)$")
_SUMMARY = re.compile(r"^\d+ problems? in \d+ files? \(\d+ rule files? checked, rules: \S+\)$")
# pydantic's own wording must never reach the user
_PYDANTIC = re.compile(r"Input should|validation error|Field required|errors\.pydantic\.dev|type=|Extra inputs",
                       re.IGNORECASE)


def run_cli(*args: str) -> CliResult:
    """The CLI in process, from the repository root (tests/cli_invoke.py)."""
    return invoke(*args, cwd=REPO)


def copy_rules(tmp_path: Path) -> Path:
    dest = tmp_path / "rules"
    shutil.copytree(RULES, dest)
    return dest


def replace(rules: Path, name: str, old: str, new: str) -> int:
    """Replace the single occurrence of ``old`` in ``rules/name``; return the 1-based line of ``new``."""
    path = rules / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {name}"
    line = text.count("\n", 0, text.index(old)) + 1
    path.write_text(text.replace(old, new), encoding="utf-8")
    return line


@dataclass(frozen=True)
class Want:
    file: str | None          # None: the rules directory itself
    line: int | None
    message: str              # a substring of the message (hint included)
    path: str | None = None   # the rule path, when the problem has one


Edit = Callable[[Path], list[Want]]


def _yaml_syntax(r: Path) -> list[Want]:
    replace(r, "namespaces.yaml", "reserved: [gpustack-system, kube-system]",
                   "reserved: [gpustack-system, kube-system")
    return [Want("namespaces.yaml", None, "invalid YAML")]


def _unknown_key(r: Path) -> list[Want]:
    line = replace(r, "manufacturers.yaml", "    resourceBase: amd.com/gpu", "    resourceBaes: amd.com/gpu")
    return [Want("manufacturers.yaml", line, "unknown key 'resourceBaes' (did you mean 'resourceBase'?)",
                 "items.0.resourceBaes"),
            Want("manufacturers.yaml", None, "required key is missing", "items.0.resourceBase")]


def _missing_key(r: Path) -> list[Want]:
    replace(r, "queues.yaml", "maxFlavorsPerGroup: 64\n", "")
    return [Want("queues.yaml", None, "required key is missing", "maxFlavorsPerGroup")]


def _wrong_type(r: Path) -> list[Want]:
    line = replace(r, "queues.yaml", "maxFlavorsPerGroup: 64", "maxFlavorsPerGroup: many")
    return [Want("queues.yaml", line, "expected a whole number, got a string 'many'", "maxFlavorsPerGroup")]


def _wrong_type_list(r: Path) -> list[Want]:
    line = replace(r, "namespaces.yaml", "reserved: [gpustack-system, kube-system]", "reserved: gpustack-system")
    return [Want("namespaces.yaml", line, "expected a list", "reserved")]


def _unknown_tier(r: Path) -> list[Want]:
    line = replace(r, "presets.yaml", "{tier: large, prefixes: [l40s]}", "{tier: huge, prefixes: [l40s]}")
    return [Want("presets.yaml", line, "unknown tier 'huge'")]


def _unknown_fact(r: Path) -> list[Want]:
    line = replace(r, "queues.yaml", "- {fact: acceleratable}", "- {fact: acceleratabel}")
    return [Want("queues.yaml", line, "unknown fact 'acceleratabel' (did you mean 'acceleratable'?)")]


def _expression_syntax(r: Path) -> list[Want]:
    line = replace(r, "queues.yaml", 'nominalQuota: "capacity * M"', 'nominalQuota: "capacity * * M"')
    return [Want("queues.yaml", line, "expression syntax error", "quota.accelerated.nominalQuota")]


def _expression_variable(r: Path) -> list[Want]:
    line = replace(r, "queues.yaml", 'nominalQuota: "capacity * M"', 'nominalQuota: "capacity * N"')
    return [Want("queues.yaml", line, "unknown variable 'N' in expression", "quota.accelerated.nominalQuota")]


def _placeholder(r: Path) -> list[Want]:
    line = replace(r, "naming.yaml", '  cpu: "gpustack--{gKey}-{os}-{arch}-{count}c-{profile}"',
                   '  cpu: "gpustack--{gkey}-{os}-{arch}-{count}c-{profile}"')
    return [Want("naming.yaml", line, "unknown placeholder 'gkey' (did you mean 'gKey'?)", "resourceFlavor.cpu")]


def _bad_regex(r: Path) -> list[Want]:
    line = replace(r, "normalisation.yaml", "{regex: ' CPU$', replace: \"\"}", "{regex: ' CPU($', replace: \"\"}")
    return [Want("normalisation.yaml", line, "invalid regular expression")]


def _duplicate_manufacturer(r: Path) -> list[Want]:
    line = replace(r, "manufacturers.yaml", "  - name: mthreads\n", "  - name: metax\n")
    # and so mthreads is gone: its preset table refers to an unknown manufacturer (another file)
    return [Want("manufacturers.yaml", line, "duplicate manufacturer 'metax'", "items.6.name"),
            Want("presets.yaml", None, "unknown manufacturer 'mthreads'", "manufacturers.mthreads")]


def _duplicate_admission_check(r: Path) -> list[Want]:
    line = replace(r, "queues.yaml", "  - name: gpustack-model-deployment-joint",
                   "  - name: gpustack-node-devices")
    return [Want("queues.yaml", line, "duplicate admission check name 'gpustack-node-devices'",
                 "admissionChecks.1.name")]


def _duplicate_preset_prefix_in_row(r: Path) -> list[Want]:
    line = replace(r, "presets.yaml", "{tier: medium, prefixes: [mi250, mi250x]}",
                   "{tier: medium, prefixes: [mi250, mi250x, MI250]}")
    return [Want("presets.yaml", line, "duplicate preset prefix 'MI250' for manufacturer 'amd'",
                 "manufacturers.amd.1.prefixes.2")]


def _duplicate_preset_prefix_across_rows(r: Path) -> list[Want]:
    line = replace(r, "presets.yaml", "{tier: small, prefixes: [l4]}", "{tier: small, prefixes: [l4, t4]}")
    later = (r / "presets.yaml").read_text().splitlines().index("    - {tier: small, prefixes: [t4]}") + 1
    assert later > line
    return [Want("presets.yaml", later,
                 "duplicate preset prefix 't4' for manufacturer 'nvidia' (already listed in manufacturers.nvidia.6;")]


def _duplicate_reserved_namespace(r: Path) -> list[Want]:
    line = replace(r, "namespaces.yaml", "reserved: [gpustack-system, kube-system]",
                   "reserved: [gpustack-system, kube-system, gpustack-system]")
    return [Want("namespaces.yaml", line, "reserved namespace 'gpustack-system' is listed twice", "reserved.2")]


def _duplicate_capacity_family(r: Path) -> list[Want]:
    line = replace(r, "capacity.yaml", "  - name: partitioned", "  - name: sliced")
    return [Want("capacity.yaml", line, "duplicate capacity family name 'sliced'", "families.1.name")]


def _preset_unknown_manufacturer(r: Path) -> list[Want]:
    line = replace(r, "presets.yaml", "  cambricon:\n", "  kunlunxin:\n")
    return [Want("presets.yaml", line, "unknown manufacturer 'kunlunxin' (add it to the Manufacturers rules first)",
                 "manufacturers.kunlunxin")]


def _two_files_of_one_kind(r: Path) -> list[Want]:
    shutil.copy(r / "topology.yaml", r / "zz-topology.yaml")  # read after topology.yaml (sorted by name)
    return [Want("zz-topology.yaml", None, "rule kind Topology is already defined in", "kind")]


def _missing_kind(r: Path) -> list[Want]:
    """A full copy (inherit: false) lacking a kind; an overlay would inherit it."""
    (r / "namespaces.yaml").unlink()
    (r / "rules.yaml").write_text("apiVersion: render.gpustack.ai/v1alpha1\nkind: Rules\ninherit: false\n",
                                  encoding="utf-8")
    return [Want(None, None, "no rule file of kind Namespaces (rules.yaml says inherit: false)")]


def _unknown_rule_kind(r: Path) -> list[Want]:
    line = replace(r, "topology.yaml", "kind: Topology", "kind: Topologies")
    return [Want("topology.yaml", line, "unknown rule kind 'Topologies' (did you mean 'Topology'?)", "kind")]


def _fact_value_type(r: Path) -> list[Want]:
    line = replace(r, "grouping.yaml", "{fact: cpuCount, operator: Gt, value: 0}",
                   '{fact: cpuCount, operator: Gt, value: "0"}')
    return [Want("grouping.yaml", line, "value '0' does not fit fact 'cpuCount' (whole number) (write 0 without quotes)",
                 "flavor.cpu.contributes.all.2.value")]


def _fact_operator(r: Path) -> list[Want]:
    line = replace(r, "lifecycle.yaml", "{fact: currentStopPolicy, operator: Eq, value: Hold}",
                   "{fact: currentStopPolicy, operator: Gt, value: 3}")
    return [Want("lifecycle.yaml", line, "operator Gt does not fit fact 'currentStopPolicy'")]


def _replace_group_number(r: Path) -> list[Want]:
    line = replace(r, "normalisation.yaml", "{regex: ' CPU$', replace: \"\"}", "{regex: ' CPU$', replace: '\\9'}")
    return [Want("normalisation.yaml", line, "invalid replacement for this regex: invalid group reference 9",
                 "normalizeName.cruft.4.replace")]


def _replace_group_name(r: Path) -> list[Want]:
    line = replace(r, "manufacturers.yaml", "replace: '\\1g.\\2gb'", "replace: '\\1g.\\g<name>gb'")
    return [Want("manufacturers.yaml", line, "invalid replacement for this regex: unknown group name 'name' "
                 "(the regex has 2 group(s))")]


def _division_by_zero(r: Path) -> list[Want]:
    line = replace(r, "queues.yaml", 'nominalQuota: "capacity * M"', 'nominalQuota: "capacity / 0"')
    return [Want("queues.yaml", line, "expression 'capacity / 0' failed: division by zero for capacity=8",
                 "quota.accelerated.nominalQuota")]


def _not_whole(r: Path) -> list[Want]:
    line = replace(r, "capacity.yaml", 'value: "L * vram"}', 'value: "L * vram / 3"}')
    return [Want("capacity.yaml", line, "expression 'L * vram / 3' gave 5461.333333333333, not a whole number "
                 "for L=1, vram=16384")]


def _huge_power(r: Path) -> list[Want]:
    line = replace(r, "capacity.yaml", 'value: "P * M"}', 'value: "P ** M"}')
    return [Want("capacity.yaml", line, "expression 'P ** M' failed: 1 ** 1600000 is over the sandbox's size limit "
                 "for M=1600000, P=1")]


def _share_units_by_zero(r: Path) -> list[Want]:
    line = replace(r, "capacity.yaml", 'shareUnits: "M // 10"', 'shareUnits: "M // 0"')
    return [Want("capacity.yaml", line, "expression 'M // 0' failed: integer division or modulo by zero for M=1600000",
                 "fitLabels.shareUnits")]


def _flavor_format_collides(r: Path) -> list[Want]:
    line = replace(r, "naming.yaml", '  cpu: "gpustack--{gKey}-{os}-{arch}-{count}c-{profile}"',
                   '  cpu: "gpustack--generic"')
    return [Want("naming.yaml", line, "drops grouping key field(s) arch, count, gKey, os, profile",
                 "resourceFlavor.cpu")]


def _pool_format_collides(r: Path) -> list[Want]:
    line = replace(r, "naming.yaml", '    cpu: "gpustack--{gKey}-{os}-{arch}"', '    cpu: "gpustack--{gKey}-{os}"')
    return [Want("naming.yaml", line, "drops pool identity field(s) arch", "pool.whenAware.cpu")]


def _node_feature_format_collides(r: Path) -> list[Want]:
    line = replace(r, "naming.yaml", 'nodeFeature: "{node}-gpustack-worker"', 'nodeFeature: "gpustack-worker"')
    return [Want("naming.yaml", line, "must contain the placeholder {node}", "nodeFeature")]


CASES: dict[str, Edit] = {
    "fact-value-type": _fact_value_type,
    "fact-operator": _fact_operator,
    "regex-replace-group-number": _replace_group_number,
    "regex-replace-group-name": _replace_group_name,
    "expression-division-by-zero": _division_by_zero,
    "expression-not-whole": _not_whole,
    "expression-huge-power": _huge_power,
    "expression-share-units-by-zero": _share_units_by_zero,
    "format-flavors-collide": _flavor_format_collides,
    "format-pools-collide": _pool_format_collides,
    "format-node-features-collide": _node_feature_format_collides,
    "yaml-syntax": _yaml_syntax,
    "unknown-key": _unknown_key,
    "missing-key": _missing_key,
    "wrong-type-number": _wrong_type,
    "wrong-type-list": _wrong_type_list,
    "unknown-table-reference": _unknown_tier,
    "unknown-fact": _unknown_fact,
    "expression-syntax": _expression_syntax,
    "expression-variable": _expression_variable,
    "unknown-placeholder": _placeholder,
    "invalid-regex": _bad_regex,
    "duplicate-manufacturer": _duplicate_manufacturer,
    "duplicate-admission-check": _duplicate_admission_check,
    "duplicate-preset-prefix-in-entry": _duplicate_preset_prefix_in_row,
    "duplicate-preset-prefix-across-entries": _duplicate_preset_prefix_across_rows,
    "duplicate-reserved-namespace": _duplicate_reserved_namespace,
    "duplicate-capacity-family": _duplicate_capacity_family,
    "cross-file-preset-unknown-manufacturer": _preset_unknown_manufacturer,
    "cross-file-two-files-one-kind": _two_files_of_one_kind,
    "cross-file-missing-kind": _missing_kind,
    "unknown-rule-kind": _unknown_rule_kind,
}


@dataclass(frozen=True)
class Line:
    file: Path
    line: int | None
    col: int | None
    path: str | None
    message: str
    raw: str


def parse(stdout: str) -> tuple[list[Line], str]:
    """The problem lines and the summary line of lint's text output (every line must be one of them)."""
    rows = stdout.splitlines()
    assert rows, "lint printed nothing"
    *problems, summary = rows
    out = []
    for raw in problems:
        match = _LINE.match(raw)
        assert match, f"not a compiler-style problem line: {raw!r}"
        assert not _PYDANTIC.search(raw), f"pydantic wording leaked: {raw!r}"
        out.append(Line(Path(match["file"]), int(match["line"]) if match["line"] else None,
                        int(match["col"]) if match["col"] else None, match["path"], match["msg"], raw))
    return out, summary


def check(rules: Path, lines: list[Line], wants: list[Want]) -> None:
    for want in wants:
        target = rules.resolve() if want.file is None else (rules / want.file).resolve()
        found = [ln for ln in lines if ln.file.resolve() == target and want.message in ln.message
                 and (want.path is None or ln.path == want.path)]
        assert found, f"no problem {want} in:\n" + "\n".join(ln.raw for ln in lines)
        if want.line is not None:
            assert any(ln.line == want.line for ln in found), \
                f"{want.message!r} reported at {[ln.line for ln in found]}, want line {want.line}"


def test_builtin_rules_are_clean() -> None:
    proc = run_cli("lint")
    files = [p for p in RULES.iterdir() if p.suffix in (".yaml", ".yml")]
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stdout + proc.stderr
    assert proc.stdout == f"{len(files)} rule files OK (rules: built-in)\n"


def test_explicit_rules_directory_is_clean() -> None:
    proc = run_cli("lint", "--rules", "rules")
    assert proc.returncode == 0 and proc.stdout.endswith("rule files OK (rules: rules)\n"), proc.stdout + proc.stderr


@pytest.mark.parametrize("edit", list(CASES.values()), ids=list(CASES))
def test_lint_reports_the_problem(tmp_path: Path, edit: Edit) -> None:
    rules = copy_rules(tmp_path)
    wants = edit(rules)
    proc = run_cli("lint", "--rules", str(rules))
    assert proc.returncode == 1, f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
    assert proc.stderr == "" and "Traceback" not in proc.stdout
    lines, summary = parse(proc.stdout)
    assert _SUMMARY.match(summary), summary
    check(rules, lines, wants)
    # render refuses the same rules, exit 2, with the same problem lines on stderr
    render = run_cli("render", "fixtures/demo", "--rules", str(rules))
    assert render.returncode == 2 and render.stdout == ""
    assert sorted(ln.raw for ln in lines) == sorted(render.stderr.splitlines())


def test_all_problems_of_all_files_at_once(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    edits = (_unknown_key, _placeholder, _duplicate_admission_check, _duplicate_reserved_namespace,
             _preset_unknown_manufacturer, _unknown_fact, _duplicate_preset_prefix_in_row)
    wants = [want for edit in edits for want in edit(rules)]
    proc = run_cli("lint", "--rules", str(rules))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines, summary = parse(proc.stdout)
    check(rules, lines, wants)
    assert len(lines) == len(wants), proc.stdout
    files = {w.file for w in wants}
    assert summary == f"{len(wants)} problems in {len(files)} files (" \
                      f"{len(list(rules.glob('*.yaml')))} rule files checked, rules: {rules})"


def test_a_shape_error_does_not_hide_meaning_errors_elsewhere(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    wants = _wrong_type(rules) + _placeholder(rules) + _yaml_syntax(rules)
    lines, _ = parse(run_cli("lint", "--rules", str(rules)).stdout)
    check(rules, lines, wants)


def test_json_format(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    wants = _placeholder(rules) + _duplicate_reserved_namespace(rules)
    proc = run_cli("lint", "--rules", str(rules), "--format", "json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["ok"] is False and len(data["files"]) == len(list(rules.glob("*.yaml")))
    assert len(data["problems"]) == len(wants)
    by_message = {p["message"]: p for p in data["problems"]}
    placeholder = next(p for m, p in by_message.items() if "unknown placeholder" in m)
    assert (Path(placeholder["file"]).name, placeholder["line"], placeholder["path"]) == \
        ("naming.yaml", wants[0].line, "resourceFlavor.cpu")
    assert placeholder["hint"] == "did you mean 'gKey'?"
    assert placeholder["text"].endswith("unknown placeholder 'gkey' (did you mean 'gKey'?)")
    assert data["rules"] == str(rules)
    clean = json.loads(run_cli("lint", "--format", "json").stdout)
    assert clean["ok"] is True and clean["problems"] == [] and clean["rules"] == "built-in"


def test_missing_rules_directory_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("lint", "--rules", str(tmp_path / "nope"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "rules directory not found" in proc.stderr and "nope" in proc.stderr


def test_lint_is_visible_in_help() -> None:
    assert "lint" in run_cli("--help").stdout


# --- no pydantic wording, no crash, whatever the edit -------------------------------------------

_VALUES = ([], {}, 7, "x", None, True, [1, 2], {"foo": 1}, "{zz}", "a *", 1.5)


def _paths(node: object, path: tuple = ()):  # type: ignore[type-arg]
    if isinstance(node, dict):
        for key, value in node.items():
            yield path + (key,)
            yield from _paths(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield path + (i,)
            yield from _paths(value, path + (i,))


@pytest.mark.parametrize("seed", range(3))
def test_mutated_rules_give_clean_messages(tmp_path: Path, seed: int) -> None:
    """Random wrong values and deleted keys in random rule files: always problems, never a crash,
    never pydantic's own messages, always compiler style."""
    from ruamel.yaml import YAML
    yaml = YAML()
    rng = random.Random(seed)
    files = sorted(RULES.glob("*.yaml"))
    for trial in range(25):
        rules = tmp_path / f"r{trial}"
        shutil.copytree(RULES, rules)
        victim = rng.choice(files)
        data = yaml.load(victim.read_text(encoding="utf-8"))
        path = rng.choice([p for p in _paths(data) if p[0] not in ("apiVersion", "kind")])
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict) and rng.random() < 0.2:
            del parent[path[-1]]
        else:
            parent[path[-1]] = rng.choice(_VALUES)
        with open(rules / victim.name, "w", encoding="utf-8") as out:
            yaml.dump(data, out)
        try:
            result = lint_rules(rules)
        except UserError as err:  # only a missing directory may raise
            pytest.fail(f"lint raised for {victim.name} {path}: {err}")
        for problem in result.problems:
            text = problem.format()
            assert not _PYDANTIC.search(text), f"{victim.name} {path}: {text}"
            assert _LINE.match(text), text


def test_broken_builtin_rules_still_report_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linting the built-in directory itself (a source checkout, no git involved): a shape error in
    one file must not hide the meaning errors of the others (each intact kind is compiled on its own)."""
    import gpustack_render.rules.lint as lint_module
    import gpustack_render.rules as rules_module
    rules = copy_rules(tmp_path)
    monkeypatch.setattr(rules_module, "default_rules_dir", lambda: rules)
    monkeypatch.setattr(lint_module, "default_rules_dir", lambda: rules)
    monkeypatch.chdir(tmp_path)
    wants = _wrong_type(rules) + _placeholder(rules) + _unknown_tier(rules)
    result = lint_rules(None)
    assert result.rules_dir == Path("rules")
    lines = [Line(Path(p.file), p.line, p.column, p.path, p.message + (f" ({p.hint})" if p.hint else ""), p.format())
             for p in result.problems]
    check(Path("rules"), lines, wants)
    assert not any("@HEAD" in line.raw for line in lines)



# --- which rules were checked (in-process) --------------------------------------------------------

def lint_in_process(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from gpustack_render.cli import main
    result = CliRunner().invoke(main, ["lint", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_lint_names_the_rules_it_checked(tmp_path: Path) -> None:
    """A clean lint of the wrong directory must be visible: the summary names built-in or the directory."""
    rules = copy_rules(tmp_path)
    count = len(list(rules.glob("*.yaml")))
    assert lint_in_process() == (0, f"{count} rule files OK (rules: built-in)\n", "")
    assert lint_in_process("--rules", str(rules)) == (0, f"{count} rule files OK (rules: {rules})\n", "")
    line = replace(rules, "queues.yaml", "maxFlavorsPerGroup: 64", "maxFlavorsPerGroup: many")
    code, out, _ = lint_in_process("--rules", str(rules))
    assert code == 1
    assert out.splitlines() == [
        f"{rules / 'queues.yaml'}:{line}:21: error: maxFlavorsPerGroup: expected a whole number, got a string 'many'",
        f"1 problem in 1 file ({count} rule files checked, rules: {rules})"]
