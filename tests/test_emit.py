"""-o DIR safety: only an earlier render may be replaced (the ``-o .`` footgun)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def render_to(target: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpustack_render", "render", str(REPO / "fixtures/demo"),
                           "-o", str(target)], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("layout", ["foreign-file", "subdirectory", "no-kustomization"])
def test_refuses_to_replace_a_directory_that_is_not_a_render(tmp_path: Path, layout: str) -> None:
    target = tmp_path / "out"
    target.mkdir()
    if layout == "foreign-file":
        (target / "kustomization.yaml").write_text("resources: []\n")
        (target / "notes.txt").write_text("precious\n")
    elif layout == "subdirectory":
        (target / "kustomization.yaml").write_text("resources: []\n")
        (target / ".git").mkdir()
    else:
        (target / "a.yaml").write_text("x: 1\n")
    before = sorted(p.name for p in target.iterdir())
    result = render_to(target, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "refusing to replace" in result.stderr and str(target) in result.stderr
    assert sorted(p.name for p in target.iterdir()) == before
    assert result.stdout == ""


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
    from click.testing import CliRunner
    from ruamel.yaml import YAML

    from gpustack_render.cli import main
    snapshot = tmp_path / "snapshot"
    shutil.copytree(REPO / "fixtures/demo", snapshot)
    namespaces = json.loads((snapshot / "namespaces.json").read_text(encoding="utf-8"))
    namespaces["items"] += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                             "status": {"phase": "Active"}} for name in ("y", "on")]
    (snapshot / "namespaces.json").write_text(json.dumps(namespaces), encoding="utf-8")
    target = tmp_path / "out"
    result = CliRunner().invoke(main, ["render", str(snapshot), "-o", str(target)], catch_exceptions=False)
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
