"""-o DIR safety: only an earlier render may be replaced (the ``-o .`` footgun)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from cli_invoke import CliResult, invoke

REPO = Path(__file__).resolve().parents[1]


def render_to(target: Path, cwd: Path) -> CliResult:
    """``render fixtures/demo -o TARGET`` from ``cwd`` (``-o .`` must mean the case's folder)."""
    return invoke("render", REPO / "fixtures/demo", "-o", target, cwd=cwd)


@pytest.mark.parametrize("layout", ["foreign-manifest", "no-kustomization"])
def test_refuses_to_replace_a_directory_holding_manifests_it_did_not_write(tmp_path: Path, layout: str) -> None:
    target = tmp_path / "out"
    target.mkdir()
    if layout == "foreign-manifest":
        (target / "kustomization.yaml").write_text("resources: []\n")
        (target / "mine.yaml").write_text("x: 1\n")
    else:
        (target / "a.yaml").write_text("x: 1\n")
    before = sorted(p.name for p in target.iterdir())
    result = render_to(target, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "was not written by gpustack-render" in result.stderr and str(target) in result.stderr
    assert sorted(p.name for p in target.iterdir()) == before
    assert result.stdout == ""


@pytest.mark.parametrize("layout", ["notes-file", "dot-directory"])
def test_keeps_what_is_not_a_manifest(tmp_path: Path, layout: str) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "kustomization.yaml").write_text("resources: []\n")
    if layout == "notes-file":
        (target / "notes.txt").write_text("precious\n")
    else:
        (target / ".git").mkdir()
        (target / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    result = render_to(target, tmp_path)
    assert result.returncode == 0, result.stderr
    if layout == "notes-file":
        assert (target / "notes.txt").read_text() == "precious\n"
    else:
        assert (target / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    listed = yaml.safe_load((target / "kustomization.yaml").read_text())["resources"]
    assert "notes.txt" not in listed and ".git" not in listed and listed


def test_refuses_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    result = render_to(Path("."), tmp_path)
    assert result.returncode == 2
    assert "current directory" in result.stderr
    assert (tmp_path / "keep.txt").read_text() == "x"


def test_replaces_an_earlier_render_and_an_empty_directory(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    assert render_to(target, tmp_path).returncode == 0
    # a file an earlier render wrote (listed in its kustomization.yaml) that this render no longer has
    kustomization = yaml.safe_load((target / "kustomization.yaml").read_text())
    kustomization["resources"].append("clusterqueue-stale.yaml")
    (target / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    (target / "clusterqueue-stale.yaml").write_text("kind: ClusterQueue\n")
    assert render_to(target, tmp_path).returncode == 0
    assert not (target / "clusterqueue-stale.yaml").exists()
    assert (target / "kustomization.yaml").is_file()


def test_output_files_quote_names_yaml_reads_as_booleans(tmp_path: Path) -> None:
    """Every file of ``-o DIR`` (and its kustomization.yaml) goes through the quoting dumper: a
    Namespace named ``y`` or ``on`` stays a string for a YAML 1.1 reader (kubectl) and a 1.2 one."""
    import json
    import shutil

    import yaml
    from ruamel.yaml import YAML

    snapshot = tmp_path / "snapshot"
    shutil.copytree(REPO / "fixtures/demo", snapshot)
    namespaces = json.loads((snapshot / "namespaces.json").read_text(encoding="utf-8"))
    namespaces["items"] += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                             "status": {"phase": "Active"}} for name in ("y", "on")]
    (snapshot / "namespaces.json").write_text(json.dumps(namespaces), encoding="utf-8")
    target = tmp_path / "out"
    result = invoke("render", str(snapshot), "-o", str(target))
    assert result.exit_code == 0, result.stderr
    files = {p.name: p.read_text(encoding="utf-8") for p in target.iterdir()}
    for name in ("y", "on"):
        mine = [text for file, text in files.items() if file.startswith(f"localqueue-{name}-")]
        assert mine, f"no LocalQueue file for Namespace {name}: {sorted(files)}"
        for text in mine:
            assert f"namespace: '{name}'\n" in text, text
            assert yaml.safe_load(text)["metadata"]["namespace"] == name
            assert YAML(typ="safe").load(text)["metadata"]["namespace"] == name
    listed = yaml.safe_load(files["kustomization.yaml"])["resources"]
    assert all(isinstance(entry, str) for entry in listed) and sorted(listed) == sorted(set(files) - {"kustomization.yaml"})
