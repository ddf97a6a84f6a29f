"""Safe to apply: inputs that would make a pruning GitOps tool delete objects stop with exit 2 and
one clear line (empty snapshots, colliding names, templates that change identity or scope), the
template sandbox is bounded, user mistakes are never "internal error", and ``-o`` never deletes or
lists a file it did not write."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from cli_invoke import invoke

from gpustack_render import render as render_module

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo"
RULES = ROOT / "rules"
TEMPLATES = ROOT / "templates"


def cli(*args: object) -> tuple[int, str, str]:
    code, out, err = invoke(*args)
    return code, out, err


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line or line.startswith("gpustack-render: error")]


# --- empty or foreign snapshots -----------------------------------------------------------------

def _empty_inputs(tmp: Path) -> dict[str, Path]:
    (tmp / "empty.yaml").write_text("")
    (tmp / "emptydir").mkdir()
    (tmp / "readme").mkdir()
    (tmp / "readme" / "README.md").write_text("# snapshot goes here\n")
    (tmp / "deploy.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}))
    return {name: tmp / name for name in ("empty.yaml", "emptydir", "readme", "deploy.yaml")}


@pytest.mark.parametrize("case", ["empty.yaml", "emptydir", "readme", "deploy.yaml"])
@pytest.mark.parametrize("command", ["render", "node-patches", "catalog"])
def test_snapshot_without_nodes_is_refused(tmp_path: Path, case: str, command: str) -> None:
    path = _empty_inputs(tmp_path)[case]
    code, out, err = cli(command, path)
    assert code == 2
    assert out == ""
    errors = error_lines(err)
    assert len(errors) == 1 and "the snapshot holds no Nodes" in errors[0] and "--allow-empty" in errors[0]


def test_allow_empty_renders_the_empty_chain_and_names_unused_files(tmp_path: Path) -> None:
    path = _empty_inputs(tmp_path)["deploy.yaml"]
    code, out, err = cli("render", path, "--allow-empty")
    assert code == 0
    kinds = [doc["kind"] for doc in yaml.safe_load_all(out) if doc]
    assert kinds and set(kinds) == {"AdmissionCheck"}
    assert f"{path}: holds no object gpustack-render reads" in err


def test_a_file_contributing_nothing_is_named_beside_a_real_snapshot(tmp_path: Path) -> None:
    extra = tmp_path / "notes.yaml"
    extra.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x, namespace: default}\n")
    code, _, err = cli("render", DEMO, extra)
    assert code == 0
    assert f"warning: {extra}: holds no object gpustack-render reads" in err
    assert str(DEMO / "nodes.yaml") not in err


# --- identity: no two objects of one name, scope and kind kept ------------------------------------

def _rules_copy(tmp: Path, file: str, old: str, new: str) -> Path:
    rules = tmp / "rules"
    shutil.copytree(RULES, rules)
    text = (rules / file).read_text()
    assert old in text
    (rules / file).write_text(text.replace(old, new))
    return rules


def _templates_copy(tmp: Path, kind: str, old: str, new: str) -> Path:
    templates = tmp / "templates"
    shutil.copytree(TEMPLATES, templates)
    path = templates / f"{kind}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return templates


def test_pools_sharing_a_name_are_refused_naming_the_rule(tmp_path: Path) -> None:
    """A pool format without the pool identity's fields: refused at load (lint's rule), at its line."""
    rules = _rules_copy(tmp_path, "naming.yaml", '    accelerated: "gpustack--{aKey}-{os}-{arch}"',
                        '    accelerated: "gpustack--{os}-{arch}"')
    code, out, err = cli("render", DEMO, "--rules", rules)
    assert code == 2 and out == ""
    (line,) = error_lines(err)
    assert line.startswith(f"{rules / 'naming.yaml'}:17:")
    assert "pool.whenUnaware.accelerated" in line and "aKey" in line


def test_flavors_sharing_a_name_are_refused_naming_the_rule(tmp_path: Path) -> None:
    rules = _rules_copy(tmp_path, "naming.yaml", '  cpu: "gpustack--{gKey}-{os}-{arch}-{count}c-{profile}"',
                        '  cpu: "gpustack--generic"')
    code, out, err = cli("render", DEMO, "--rules", rules)
    assert code == 2 and out == ""
    (line,) = error_lines(err)
    assert line.startswith(f"{rules / 'naming.yaml'}:9:") and "resourceFlavor.cpu" in line


def _builder() -> "FlavorBuilder":
    from gpustack_render.errors import Diagnostics
    from gpustack_render.evaluate.flavors import FlavorBuilder
    from gpustack_render.rules import load_rules
    rules = load_rules(None)
    return FlavorBuilder(rules, dict(rules.settings.defaults), Diagnostics())


def test_flavor_names_are_claimed_once_per_grouping_key() -> None:
    """The run-time guard behind lint's format check: values can still collide (a '-' inside a
    field shifts the boundary between two fields), and two groups must never share one flavor."""
    from gpustack_render.errors import UserError
    builder = _builder()
    builder._claim_name("gpustack--a-b-c", ("c", ("a-b", "c")), False)
    builder._claim_name("gpustack--a-b-c", ("c", ("a-b", "c")), False)   # the same group again: fine
    with pytest.raises(UserError) as raised:
        builder._claim_name("gpustack--a-b-c", ("c", ("a", "b-c")), False)
    (problem,) = raised.value.problems
    assert problem.obj == "ResourceFlavor/gpustack--a-b-c" and "two flavor groups get the same name" in problem.message
    assert problem.file.endswith("naming.yaml:9")


def test_pools_are_claimed_once_per_identity() -> None:
    from gpustack_render.errors import UserError
    from gpustack_render.evaluate.chain import build_pools
    from gpustack_render.evaluate.plan import FlavorPlan
    from gpustack_render.rules import load_rules

    def flavor(name: str, akey: str, os: str) -> FlavorPlan:
        return FlavorPlan(name=name, accelerated=True, gkey="x", gmanu="x", akey=akey, manufacturer="nvidia",
                          os=os, arch="amd64", count=1, profile="p", topology_name="t", nodes=["n"])
    rules = load_rules(None)
    pools = build_pools([flavor("f1", "nvidia-a", "linux"), flavor("f2", "nvidia-b", "linux")], rules, False)
    assert len(pools) == 2
    # the built-in format keeps every field, yet a '-' inside a value shifts the boundary:
    # nvidia-a + linux-x and nvidia-a-linux + x both give gpustack--nvidia-a-linux-x-amd64
    with pytest.raises(UserError) as raised:
        build_pools([flavor("f1", "nvidia-a", "linux-x"), flavor("f2", "nvidia-a-linux", "x")], rules, False)
    (problem,) = raised.value.problems
    assert problem.obj == "ClusterQueue/gpustack--nvidia-a-linux-x-amd64"
    assert "two pools get the same name" in problem.message and "from ResourceFlavor/f2" in problem.message
    assert problem.file.endswith("naming.yaml:17")


def test_localqueue_template_without_namespace_is_refused(tmp_path: Path) -> None:
    templates = _templates_copy(tmp_path, "LocalQueue", '  namespace: "{{ obj.namespace }}"\n', "")
    code, out, err = cli("render", DEMO, "--templates", templates)
    assert code == 2 and out == ""
    (line,) = error_lines(err)
    assert "LocalQueue is namespaced" in line and "LocalQueue.yaml" in line


def test_localqueues_rendered_into_one_namespace_collide(tmp_path: Path) -> None:
    templates = _templates_copy(tmp_path, "LocalQueue", '  namespace: "{{ obj.namespace }}"',
                                '  namespace: "shared"')
    code, out, err = cli("render", DEMO, "--templates", templates)
    assert code == 2 and out == ""
    (line,) = error_lines(err)
    assert "rendered twice" in line and "LocalQueue/shared/" in line
    assert "namespace=default" in line and "namespace=team-a" in line


def test_a_template_cannot_change_its_kind(tmp_path: Path) -> None:
    templates = _templates_copy(tmp_path, "ClusterQueue", "kind: ClusterQueue", "kind: LocalQueue")
    code, out, err = cli("render", DEMO, "--templates", templates)
    assert code == 2 and out == ""
    (line,) = error_lines(err)
    assert "renders kind 'LocalQueue'; it must render ClusterQueue" in line


def test_cluster_scoped_kinds_carry_no_namespace(tmp_path: Path) -> None:
    templates = _templates_copy(tmp_path, "ResourceFlavor", "metadata:\n", 'metadata:\n  namespace: "default"\n')
    code, _, err = cli("render", DEMO, "--templates", templates)
    assert code == 2
    (line,) = error_lines(err)
    assert "ResourceFlavor is cluster-scoped" in line


# --- the template sandbox is bounded ---------------------------------------------------------------

@pytest.mark.parametrize("body, message", [
    ("\n  - $for: i in range(100000000)\n    $value: x", "over the sandbox's limit"),
    (""" '{{ "x" * 100000000 }}'""", "over the sandbox's limit"),
    (' "{{ 10 ** 100000 }}"', "over the sandbox's size limit"),
    ("""\n  - $for: i in range(3000)\n    $value: '{{ "y" * 1000 }}'""", "over the limit of 1,000,000"),
])
def test_template_limits(tmp_path: Path, body: str, message: str) -> None:
    templates = _templates_copy(tmp_path, "Topology", "kind: Topology\n", f"kind: Topology\nextra:{body}\n")
    code, out, err = cli("render", DEMO, "--templates", templates)
    assert code == 2 and out == ""
    (line,) = error_lines(err)
    assert "Topology.yaml:" in line and message in line


def test_template_time_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render_module, "TIME_BUDGET_S", 0.3)
    loop = "\n  - $for: i in range(9000)\n    $value:\n      - $for: j in range(9000) if j < 0\n        $value: 1"
    templates = _templates_copy(tmp_path, "Topology", "kind: Topology\n", f"kind: Topology\nextra:{loop}\n")
    code, _, err = cli("render", DEMO, "--templates", templates)
    assert code == 2
    (line,) = error_lines(err)
    assert "rendering took longer than" in line


# --- never "internal error" for user mistakes; internal errors exit 3 ------------------------------

def test_internal_error_is_one_line_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("kaputt")
    monkeypatch.setattr("gpustack_render.pipeline.render_objects", boom)
    code, out, err = cli("render", DEMO)
    assert code == 3 and out == ""
    assert err.strip().splitlines() == [
        "gpustack-render: error: internal error: RuntimeError: kaputt "
        "(run with --debug for a traceback and please report it)"]


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback_before_or_after_the_subcommand(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    def boom(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("kaputt")
    monkeypatch.setattr("gpustack_render.pipeline.render_objects", boom)
    args = ["--debug", "render", str(DEMO)] if where == "before" else ["render", str(DEMO), "--debug"]
    code, _, err = cli(*args)
    assert code == 3
    assert "Traceback (most recent call last)" in err and "RuntimeError: kaputt" in err


def test_debug_does_not_leak_into_the_next_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    cli("render", DEMO, "--debug")

    def boom(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("kaputt")
    monkeypatch.setattr("gpustack_render.pipeline.render_objects", boom)
    _, _, err = cli("render", DEMO)
    assert "Traceback" not in err


# --- -q, -v, --format yml ----------------------------------------------------------------------------

def test_quiet_silences_warnings_and_verbose_adds_timings(tmp_path: Path) -> None:
    extra = tmp_path / "other.yaml"
    extra.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x, namespace: default}\n")
    _, out_normal, err_normal = cli("render", DEMO, extra)
    assert "warning:" in err_normal
    _, out_quiet, err_quiet = cli("-q", "render", DEMO, extra)
    assert err_quiet == "" and out_quiet == out_normal
    _, out_verbose, err_verbose = cli("render", DEMO, extra, "-v")
    assert out_verbose == out_normal
    kinds = [doc["kind"] for doc in yaml.safe_load_all(out_normal) if doc]
    assert f"rendered {len(kinds)} objects (" in err_verbose and "from 4 Nodes" in err_verbose
    assert f"LocalQueue {kinds.count('LocalQueue')}" in err_verbose
    timing = [line for line in err_verbose.splitlines() if "timing:" in line]
    assert len(timing) == 1 and all(stage in timing[0] for stage in ("rules", "snapshot", "evaluate", "render"))


def test_format_yml_is_yaml() -> None:
    assert cli("render", DEMO, "--format", "yml")[1] == cli("render", DEMO)[1]
    assert cli("node-patches", DEMO, "--format", "yml")[1] == cli("node-patches", DEMO)[1]


# --- -o: exactly the files kustomization.yaml lists; other files kept, foreign manifests refused ----

def _listed(directory: Path) -> list[str]:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]


def test_output_dir_keeps_readme_and_dotfiles_and_lists_exactly_what_it_writes(tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    out.mkdir()
    (out / ".gitkeep").write_text("")
    (out / "README.md").write_text("# rendered by CI\n")
    assert cli("render", DEMO, "-o", out)[0] == 0
    assert cli("render", DEMO, "-o", out)[0] == 0   # and again over its own earlier render
    manifests = sorted(p.name for p in out.iterdir() if p.name not in ("kustomization.yaml", ".gitkeep", "README.md"))
    assert sorted(_listed(out)) == manifests
    docs = [doc for doc in yaml.safe_load_all(cli("render", DEMO)[1]) if doc]
    assert len(manifests) == len(docs)
    assert (out / "README.md").read_text() == "# rendered by CI\n" and (out / ".gitkeep").exists()


def test_output_dir_refuses_a_manifest_it_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    assert cli("render", DEMO, "-o", out)[0] == 0
    before = sorted(p.name for p in out.iterdir())
    (out / "extra-queue.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n")
    code, _, err = cli("render", DEMO, "-o", out)
    assert code == 2
    (line,) = error_lines(err)
    assert str(out / "extra-queue.yaml") in line and "was not written by gpustack-render" in line
    assert (out / "extra-queue.yaml").read_text().startswith("apiVersion: v1")
    assert sorted(p.name for p in out.iterdir()) == sorted(before + ["extra-queue.yaml"])


def test_output_dir_in_json(tmp_path: Path) -> None:
    out = tmp_path / "rendered"
    assert cli("render", DEMO, "-o", out, "--format", "json")[0] == 0
    listed = _listed(out)
    assert listed and all(name.endswith(".json") for name in listed)
    assert sorted(listed) == sorted(p.name for p in out.iterdir() if p.name != "kustomization.yaml")
    stream = [doc for doc in yaml.safe_load_all(cli("render", DEMO)[1]) if doc]
    assert [json.loads((out / name).read_text()) for name in listed] == stream


# --- a render that would remove most of a kind warns ---------------------------------------------

def test_render_warns_when_it_would_remove_more_than_half_of_a_kind(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(DEMO, snap)
    code, live, _ = cli("render", DEMO)
    assert code == 0
    (snap / "live.yaml").write_text(live)          # the snapshot shows the earlier render applied
    assert "would be removed" not in cli("render", snap)[2]
    rules = _rules_copy(tmp_path, "naming.yaml", '  cpu: "gpustack--{gKey}-{os}-{arch}-{count}c-{profile}"',
                        '  cpu: "cpu--{gKey}-{os}-{arch}-{count}c-{profile}"')
    code, _, err = cli("render", snap, "--rules", rules)
    assert code == 0
    cpu_flavors = [d for d in yaml.safe_load_all(live) if d and d["kind"] == "ResourceFlavor"
                   and d["metadata"]["name"].startswith("gpustack--") and "--" not in d["metadata"]["name"][10:]]
    owned = sum(1 for d in yaml.safe_load_all(live) if d and d["kind"] == "ResourceFlavor")
    assert 2 * len(cpu_flavors) > owned
    assert (f"warning: render: {len(cpu_flavors)} of {owned} owned ResourceFlavor objects would be removed "
            "(more than half)") in err
