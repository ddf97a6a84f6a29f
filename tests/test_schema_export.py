"""JSON Schemas of the rule files (`gpustack-render schema`, checked in under schemas/).

The checked-in schemas must equal freshly generated ones (regenerate with
`gpustack-render schema -o schemas`), every rule file must name its kind's schema on its first line
and validate against it, and the schemas must reject what the rule loader rejects for shape.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cli_invoke import invoke
from ruamel.yaml import YAML

from gpustack_render.rules import schema
from gpustack_render.rules import export as schema_export
from gpustack_render.errors import UserError
from gpustack_render.rules import load_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
SCHEMAS = REPO / "schemas"
RULE_FILES = sorted(RULES.glob("*.yaml"))


def load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / schema_export.file_name(kind)).read_text()))


def test_checked_in_schemas_are_up_to_date() -> None:
    problems = schema_export.compare(SCHEMAS)
    assert not problems, "\n".join(problems) + "\nregenerate: gpustack-render schema -o schemas"
    assert sorted(p.name for p in SCHEMAS.glob("*.schema.json")) == sorted(schema_export.generate())


def test_one_valid_schema_per_kind() -> None:
    assert set(schema_export.generate()) == {schema_export.file_name(k) for k in schema.FILE_KINDS}
    for kind in schema.FILE_KINDS:
        document = json.loads((SCHEMAS / schema_export.file_name(kind)).read_text())
        jsonschema.Draft202012Validator.check_schema(document)
        assert document["$schema"] == schema_export.DIALECT
        assert document["properties"]["kind"]["const"] == kind
        assert document["additionalProperties"] is False


@pytest.mark.parametrize("path", RULE_FILES, ids=[p.name for p in RULE_FILES])
def test_rule_file_names_its_schema_and_validates(path: Path) -> None:
    data = load(path)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first == schema_export.MODELINE.format(file=schema_export.file_name(data["kind"])), first
    ref = (path.parent / first.split("$schema=", 1)[1]).resolve()
    assert ref == (SCHEMAS / schema_export.file_name(data["kind"])).resolve() and ref.is_file()
    errors = sorted(validator(data["kind"]).iter_errors(data), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


# (file, old, new): edits the rule loader refuses for their shape; the schema must refuse them too
SHAPE_ERRORS = {
    "unknown-key": ("manufacturers.yaml", "    resourceBase: amd.com/gpu", "    resourceBaes: amd.com/gpu"),
    "wrong-type": ("queues.yaml", "maxFlavorsPerGroup: 64", "maxFlavorsPerGroup: many"),
    "missing-key": ("queues.yaml", "maxFlavorsPerGroup: 64\n", ""),
    "not-a-list": ("namespaces.yaml", "reserved: [gpustack-system, kube-system]", "reserved: gpustack-system"),
    "bad-enum": ("capacity.yaml", "population: logical", "population: some"),
    "empty-string": ("naming.yaml", 'topology: "gpustack-{profile}"', 'topology: ""'),
    "unknown-condition": ("grouping.yaml", "stampWhen: {not: {setting: node-management-manual}}",
                          "stampWhen: {nicht: {setting: node-management-manual}}"),
    "condition-extra-key": ("grouping.yaml", "- {fact: hasOsArch}\n        - {fact: cpuCount",
                            "- {fact: hasOsArch, setting: x}\n        - {fact: cpuCount"),
    "bad-operator": ("grouping.yaml", "operator: Gt, value: 0}\n        - any", "operator: Greater, value: 0}\n        - any"),
    "number-not-positive": ("manufacturers.yaml", "unitsPerAccelerator: 1600000", "unitsPerAccelerator: 0"),
    "bad-manufacturer-name": ("manufacturers.yaml", "  - name: amd\n", "  - name: AMD Inc\n"),
}


@pytest.mark.parametrize("edit", list(SHAPE_ERRORS.values()), ids=list(SHAPE_ERRORS))
def test_schema_rejects_what_the_loader_rejects(tmp_path: Path, edit: tuple[str, str, str]) -> None:
    name, old, new = edit
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    text = (rules / name).read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} in {name}"
    (rules / name).write_text(text.replace(old, new), encoding="utf-8")
    data = load(rules / name)
    assert list(validator(data["kind"]).iter_errors(data)), f"schema accepts {new!r}"
    with pytest.raises(UserError) as err:
        load_rules(rules)
    assert any(p.file.endswith(name) for p in err.value.problems)


def test_cli_check_write_and_print(tmp_path: Path) -> None:
    check = invoke("schema", "--check")
    assert check.returncode == 0 and check.stdout.endswith("schemas up to date\n"), check.stdout + check.stderr
    out = tmp_path / "out"
    written = invoke("schema", "-o", str(out))
    assert written.returncode == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(schema_export.generate())
    for path in out.iterdir():
        assert path.read_text() == (SCHEMAS / path.name).read_text()
    target = out / schema_export.file_name("Naming")
    target.write_text(target.read_text().replace('"minLength": 1', '"minLength": 2', 1))
    (out / "gone.schema.json").write_text("{}")
    stale = invoke("schema", "--check", "-o", str(out))
    assert stale.returncode == 1
    assert "naming.schema.json: stale" in stale.stdout and "gone.schema.json: no rule kind" in stale.stdout
    printed = json.loads(invoke("schema").stdout)
    assert sorted(printed) == sorted(schema_export.generate())
    assert printed["naming.schema.json"] == json.loads((SCHEMAS / "naming.schema.json").read_text())


def test_schema_is_visible_in_help() -> None:
    assert "schema" in invoke("--help").stdout


# --- schema -o DIR --rules RULESDIR: the editor link survives copying rules/ (in-process) ---------

def schema_in_process(*args: str) -> tuple[int, str, str]:
    # from the test's working directory (tmp_path): relative --rules/-o must never reach the repo's rules/
    result = invoke("schema", *args, cwd=Path.cwd())
    return result.exit_code, result.stdout, result.stderr


def test_rules_copied_elsewhere_are_relinked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GitOps layout: rules in gitops/gpustack/rules, schemas in gitops/schemas. Each file's first
    line then points at ../../schemas/<kind>.schema.json (relative, resolvable from the file), and
    nothing else in the file changes."""
    repo = tmp_path / "gitops"
    rules = repo / "gpustack" / "rules"
    shutil.copytree(RULES, rules)
    no_link = rules / "topology.yaml"
    no_link.write_text(no_link.read_text(encoding="utf-8").partition("\n")[2], encoding="utf-8")  # link removed
    monkeypatch.chdir(repo)
    code, _, err = schema_in_process("-o", "schemas", "--rules", "gpustack/rules")
    assert code == 0, err
    assert f"linked {len(RULE_FILES)} rule file(s) in gpustack/rules to schemas" in err
    for original in RULE_FILES:
        copied = rules / original.name
        first, _, rest = copied.read_text(encoding="utf-8").partition("\n")
        kind = load(original)["kind"]
        assert first == f"# yaml-language-server: $schema=../../schemas/{schema_export.file_name(kind)}"
        assert (copied.parent / first.split("=", 1)[1]).resolve().is_file()
        assert rest == original.read_text(encoding="utf-8").partition("\n")[2]
    assert schema_in_process("-o", "schemas", "--rules", "gpustack/rules", "--check")[0] == 0
    assert load_rules(rules) is not None  # still valid rules


def test_check_reports_rule_files_linked_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(RULES, tmp_path / "rules")
    monkeypatch.chdir(tmp_path)
    assert schema_in_process("-o", "schemas")[0] == 0
    code, out, _ = schema_in_process("-o", "schemas", "--rules", "rules", "--check")
    assert code == 0, out  # the built-in ../schemas/ link is right for rules/ beside schemas/
    assert schema_in_process("-o", "elsewhere", "--rules", "rules")[0] == 0
    code, out, _ = schema_in_process("-o", "schemas", "--rules", "rules", "--check")
    assert code == 1
    assert "rules/naming.yaml: its schema link does not point at schemas" in out


def test_rules_option_needs_an_output_directory() -> None:
    code, out, err = schema_in_process("--rules", str(RULES))
    assert (code, out) == (2, "") and "--rules needs -o DIR" in err
