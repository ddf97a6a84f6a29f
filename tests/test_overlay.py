"""``--rules DIR`` and ``--templates DIR`` are overlays over the built-in rules and templates
(issue 24, point 2): a file replaces the built-in one of its kind only, ``rules.yaml`` with
``inherit: false`` turns inheritance off, and a directory holding no rule file (or no template) is
one error — for a snapshot directory, one saying it looks like a snapshot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from cli_invoke import CliResult, invoke

from gpustack_render.rules import schema

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
TEMPLATES = REPO / "templates"
DEMO = "fixtures/demo"
NO_INHERIT = f"apiVersion: {schema.API_VERSION}\nkind: Rules\ninherit: false\n"
TOPOLOGY_NAME = 'topology: "gpustack-{profile}"'


def _renamed_naming(target: Path) -> Path:
    """``target/naming.yaml``: the built-in Naming rules with the Topology name format changed."""
    target.mkdir(parents=True, exist_ok=True)
    text = (RULES / "naming.yaml").read_text(encoding="utf-8")
    assert TOPOLOGY_NAME in text
    (target / "naming.yaml").write_text(text.replace(TOPOLOGY_NAME, 'topology: "topo-{profile}"'), encoding="utf-8")
    return target


def _ok(result: CliResult) -> str:
    assert result.exit_code == 0, result.stdout + result.stderr
    return result.stdout


def test_one_rule_file_overlays_the_built_in_rules(tmp_path: Path) -> None:
    overlay = _renamed_naming(tmp_path / "overlay")
    full = tmp_path / "full"
    shutil.copytree(RULES, full)
    _renamed_naming(full)
    out = _ok(invoke("render", DEMO, "--rules", overlay))
    # Exactly what a full copy with the same edit renders, and the edit took effect.
    assert out == _ok(invoke("render", DEMO, "--rules", full))
    assert "name: topo-fnv64-" in out and out != _ok(invoke("render", DEMO))


def test_a_file_replaces_its_kind_whatever_its_name(tmp_path: Path) -> None:
    overlay = _renamed_naming(tmp_path / "overlay")
    (overlay / "naming.yaml").rename(overlay / "my-names.yml")
    assert "name: topo-fnv64-" in _ok(invoke("render", DEMO, "--rules", overlay))
    # Two files of one kind are still an error (one replaces the built-in file, not both).
    shutil.copyfile(RULES / "naming.yaml", overlay / "naming.yaml")
    result = invoke("render", DEMO, "--rules", overlay)
    assert result.exit_code == 2 and result.stdout == "" and "rule kind Naming is already defined" in result.stderr


def test_lint_says_which_kinds_came_from_where(tmp_path: Path) -> None:
    overlay = _renamed_naming(tmp_path / "overlay")
    lines = _ok(invoke("lint", "--rules", overlay)).splitlines()
    built_in_kinds = sorted({yaml.safe_load(p.read_text(encoding="utf-8"))["kind"]
                             for p in RULES.iterdir() if p.suffix == ".yaml"} - {"Naming"})
    assert lines == [f"{overlay}: Naming (naming.yaml)", f"built-in: {', '.join(built_in_kinds)}",
                     f"1 rule file OK (rules: {overlay}; {len(built_in_kinds)} kinds built-in)"]
    data = json.loads(_ok(invoke("lint", "--rules", overlay, "--format", "json")))
    # The inherited kinds are the built-in files' kinds, whatever they are (a new kind is inherited).
    assert data["kinds"] == {**{kind: "built-in" for kind in built_in_kinds}, "Naming": str(overlay / "naming.yaml")}
    assert set(data["kinds"]) == set(schema.RULE_KINDS)
    # A full copy inherits nothing: the summary line is as before.
    count = sum(1 for p in RULES.iterdir() if p.suffix == ".yaml")
    assert _ok(invoke("lint", "--rules", RULES)) == f"{count} rule files OK (rules: {RULES})\n"


def test_inherit_false_makes_the_directory_a_full_copy(tmp_path: Path) -> None:
    overlay = _renamed_naming(tmp_path / "overlay")
    (overlay / "rules.yaml").write_text(NO_INHERIT, encoding="utf-8")
    result = invoke("render", DEMO, "--rules", overlay)
    assert result.exit_code == 2 and result.stdout == ""
    missing = [line for line in result.stderr.splitlines() if "no rule file of kind" in line]
    assert len(missing) == len(schema.RULE_KINDS) - len(schema.OPTIONAL_KINDS) - 1, result.stderr
    assert all(line.endswith("(rules.yaml says inherit: false)") for line in missing), result.stderr
    # A full copy with the switch renders; the switch is checked like any rule file.
    full = tmp_path / "full"
    shutil.copytree(RULES, full)
    (full / "rules.yaml").write_text(NO_INHERIT, encoding="utf-8")
    assert _ok(invoke("render", DEMO, "--rules", full)) == _ok(invoke("render", DEMO))
    (full / "rules.yaml").write_text(NO_INHERIT.replace("inherit: false", "inherit: nope"), encoding="utf-8")
    result = invoke("lint", "--rules", full)
    assert result.exit_code == 1 and f"{full}/rules.yaml:3:10: error: inherit: expected true or false" \
        in result.stdout, result.stdout


SNAPSHOT_DIR_COMMANDS = {
    "render": ["render", DEMO, "--rules", DEMO],
    "diff": ["diff", DEMO, "--rules", DEMO],
    "lint": ["lint", "--rules", DEMO],
    "explain": ["explain", "ClusterQueue/x", DEMO, "--rules", DEMO],
    "summary": ["summary", DEMO, "--rules", DEMO],
    "validate": ["validate", DEMO, "--rules", DEMO, "--skip-schema"],
    "pin": ["pin", "fixtures/pin/workloads", "--snapshot", DEMO, "--rules", DEMO],
    "catalog": ["catalog", DEMO, "--rules", DEMO],
    "node-patches": ["node-patches", DEMO, "--rules", DEMO],
    "test": ["test", "fixtures/cases/demo-catalog", "--rules", DEMO],
    "schema": ["schema", "-o", "{tmp}", "--rules", DEMO],
}


@pytest.mark.parametrize("name", list(SNAPSHOT_DIR_COMMANDS))
def test_a_snapshot_directory_as_rules_is_one_error(name: str, tmp_path: Path) -> None:
    args = [str(tmp_path) if a == "{tmp}" else a for a in SNAPSHOT_DIR_COMMANDS[name]]
    result = invoke(*args)
    assert (result.exit_code, result.stdout) == (2, ""), result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"gpustack-render: error: {DEMO}: no rule file in this directory: it holds Kubernetes objects "
        "(Devices, Namespace, Node) and looks like a cluster snapshot; pass it as SNAPSHOT, and --rules a "
        f"directory of rule files (apiVersion {schema.API_VERSION})"], result.stderr


def test_a_directory_without_rule_files_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("rules go here\n", encoding="utf-8")
    result = invoke("render", DEMO, "--rules", tmp_path)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"gpustack-render: error: {tmp_path}: no rule file in this directory (a rule file is " \
        f"a *.yaml file with apiVersion {schema.API_VERSION}; an overlay holds only the kinds it changes)\n"
    # A broken rule file is still a rule file: its own problem is reported, where it is.
    (tmp_path / "naming.yaml").write_text(f"apiVersion: {schema.API_VERSION}\nkind: Naming\nnames: [\n",
                                          encoding="utf-8")
    result = invoke("render", DEMO, "--rules", tmp_path)
    assert result.exit_code == 2 and result.stderr.startswith(f"{tmp_path}/naming.yaml:") \
        and "invalid YAML" in result.stderr, result.stderr


def _local_queue_overlay(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    text = (TEMPLATES / "LocalQueue.yaml").read_text(encoding="utf-8")
    anchor = '  name: "{{ obj.name }}"\n'
    assert anchor in text
    (target / "LocalQueue.yaml").write_text(text.replace(anchor, anchor + "  labels:\n    team: platform\n"),
                                               encoding="utf-8")
    return target


def test_one_template_overlays_the_built_in_templates(tmp_path: Path) -> None:
    overlay = _local_queue_overlay(tmp_path / "templates")
    docs = list(yaml.safe_load_all(_ok(invoke("render", DEMO, "--templates", overlay))))
    builtin = list(yaml.safe_load_all(_ok(invoke("render", DEMO))))
    assert len(docs) == len(builtin) and any(d["kind"] == "LocalQueue" for d in docs)
    for doc, before in zip(docs, builtin):
        if doc["kind"] == "LocalQueue":
            assert doc["metadata"].pop("labels") == {"team": "platform"}
        assert doc == before, doc["kind"]


def test_a_directory_without_templates_is_one_error(tmp_path: Path) -> None:
    result = invoke("render", DEMO, "--templates", DEMO)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"gpustack-render: error: {DEMO}: no template in this directory (a template is " \
        "<Kind>.yaml, for example NodeFeature.yaml; an overlay holds only the ones it changes)\n"
    # A misspelt template name would be ignored silently in an overlay: it is an error.
    (tmp_path / "ClusterQueues.yaml").write_text("{}\n", encoding="utf-8")
    result = invoke("render", DEMO, "--templates", tmp_path)
    assert result.exit_code == 2 and result.stderr == (
        f"gpustack-render: error: {tmp_path}/ClusterQueues.yaml: no rendered kind has this template name "
        "(templates are <Kind>.yaml) (did you mean 'ClusterQueue.yaml'?)\n"), result.stderr


@pytest.mark.parametrize("name", ["naming.json", "naming.YAML"])
def test_a_rule_file_that_is_not_read_is_an_error_not_a_built_in_kind(name: str, tmp_path: Path) -> None:
    """A rule file under a name the reader skips (JSON, an upper-case suffix) would leave its kind to
    the built-in rules in an overlay, silently: it is one error naming the file, alone or beside
    rule files that are read (and never "looks like a snapshot")."""
    overlay = _renamed_naming(tmp_path / "overlay")
    data = yaml.safe_load((overlay / "naming.yaml").read_text(encoding="utf-8"))
    (overlay / "naming.yaml").unlink()
    (overlay / name).write_text(json.dumps(data, indent=2) if name.endswith(".json") else yaml.safe_dump(data),
                                encoding="utf-8")
    wanted = [f"gpustack-render: error: {overlay / name}: not read as a rule file (rule files are named *.yaml "
              "or *.yml), so its kind would come from the built-in rules; rename it to naming.yaml"]
    for args in (["render", DEMO, "--rules", overlay], ["lint", "--rules", overlay]):
        result = invoke(*args)
        assert (result.exit_code, result.stdout, result.stderr.splitlines()) == (2, "", wanted), result.stderr
    shutil.copyfile(RULES / "queues.yaml", overlay / "queues.yaml")   # beside a rule file that is read
    result = invoke("render", DEMO, "--rules", overlay)
    assert (result.exit_code, result.stdout, result.stderr.splitlines()) == (2, "", wanted), result.stderr
    # Renamed as it says, it takes effect.
    (overlay / name).rename(overlay / "naming.yaml")
    assert "name: topo-fnv64-" in _ok(invoke("render", DEMO, "--rules", overlay))



@pytest.mark.parametrize("name", ["LocalQueue.yml", "LocalQueue.j2", "LocalQueue.yaml.jinja", "LocalQueue.yaml.j2"])
def test_a_template_under_a_misspelt_suffix_is_an_error(name: str, tmp_path: Path) -> None:
    """A template named for a kind but not <Kind>.yaml is not read: alone, or beside a template
    that is, it is an error naming it (was: ignored, the built-in template rendered, exit 0)."""
    overlay = _local_queue_overlay(tmp_path / "templates")
    (overlay / "LocalQueue.yaml").rename(overlay / name)
    wanted = [f"gpustack-render: error: {overlay / name}: not read as a template (templates are named "
              "<Kind>.yaml) (did you mean 'LocalQueue.yaml'?)"]
    result = invoke("render", DEMO, "--templates", overlay)
    assert (result.exit_code, result.stdout, result.stderr.splitlines()) == (2, "", wanted), result.stderr
    shutil.copyfile(TEMPLATES / "ClusterQueue.yaml", overlay / "ClusterQueue.yaml")
    result = invoke("render", DEMO, "--templates", overlay)
    assert (result.exit_code, result.stdout, result.stderr.splitlines()) == (2, "", wanted), result.stderr
    # Files that are no template of a kind stay unread (a helper, an editor's backup).
    (overlay / name).rename(overlay / "LocalQueue.yaml")
    (overlay / "_helpers.j2").write_text("{% macro x() %}{% endmacro %}\n", encoding="utf-8")
    (overlay / "LocalQueue.yaml.orig").write_text("old\n", encoding="utf-8")
    assert "team: platform" in _ok(invoke("render", DEMO, "--templates", overlay))


def test_a_compact_json_snapshot_as_rules_says_it_looks_like_a_snapshot(tmp_path: Path) -> None:
    """A snapshot directory holding one-line JSON (``kubectl get ... -o json | jq -c``): the kinds are
    found all the same, so the error says it looks like a snapshot (was the plain 'no rule file')."""
    items = [doc for name in ("nodes.yaml", "devices.yaml") for doc in
             yaml.safe_load_all((REPO / DEMO / name).read_text(encoding="utf-8")) if doc]
    (tmp_path / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
                                           encoding="utf-8")
    result = invoke("render", DEMO, "--rules", tmp_path)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"gpustack-render: error: {tmp_path}: no rule file in this directory: it holds Kubernetes objects "
        "(Devices, Node) and looks like a cluster snapshot; pass it as SNAPSHOT, and --rules a directory of rule "
        f"files (apiVersion {schema.API_VERSION})"], result.stderr


def test_schemas_written_beside_the_rules_are_no_unread_rule_files(tmp_path: Path) -> None:
    """``schema -o DIR --rules DIR`` puts the JSON Schemas (which name the apiVersion) beside the rule
    files: they are not rule files in the wrong format, and the overlay renders."""
    overlay = _renamed_naming(tmp_path / "overlay")
    result = invoke("schema", "-o", overlay, "--rules", overlay)
    assert result.exit_code == 0, result.stderr
    assert (overlay / "naming.schema.json").is_file()
    assert "name: topo-fnv64-" in _ok(invoke("render", DEMO, "--rules", overlay))


def test_the_missing_kind_error_names_the_file_that_holds_the_switch(tmp_path: Path) -> None:
    """Any file name holds the switch: the error names the one that says inherit: false."""
    overlay = _renamed_naming(tmp_path / "overlay")
    (overlay / "00-full-copy.yaml").write_text(NO_INHERIT, encoding="utf-8")
    result = invoke("render", DEMO, "--rules", overlay)
    missing = [line for line in result.stderr.splitlines() if "no rule file of kind" in line]
    assert result.exit_code == 2 and missing, result.stderr
    assert all(line.endswith("(00-full-copy.yaml says inherit: false)") for line in missing), result.stderr


@pytest.mark.parametrize("command", ["render", "diff", "lint", "validate"])
def test_the_help_says_rules_and_templates_are_overlays(command: str) -> None:
    """--help is where an admin looks first: it says what a partial directory does."""
    result = invoke(command, "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split()).replace("built- in", "built-in")  # click wraps at a hyphen
    assert "--rules DIRECTORY Rules directory, an overlay over the built-in rules" in text, text
    assert "inherit: false" in text
    if command != "lint":
        assert "--templates DIRECTORY Templates directory, an overlay over the built-in templates" in text, text
