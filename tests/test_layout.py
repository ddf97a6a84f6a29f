"""The package layout of issue 13.2: one module for the Kubernetes grammar (names, keys, values,
identity, field paths), features that never import the pipeline or the command line, and one error
handler shared by the commands and the in-process case runner."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from cli_invoke import invoke
from gpustack_render import casetest, k8s, pipeline
from gpustack_render.errors import EXIT_INTERNAL

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "gpustack_render"
DEMO = REPO / "fixtures" / "demo"


# --- k8s: one grammar ------------------------------------------------------------------------------

@pytest.mark.parametrize("check", [k8s.dns_label, k8s.dns_subdomain, k8s.qualified_name, k8s.label_value])
def test_a_trailing_newline_is_never_a_valid_name_key_or_value(check: object) -> None:
    """Go's ``$`` is the end of the text; Python's ``$`` also matched before a final newline (the
    drift between the two former copies of these patterns)."""
    assert check("abc") is None  # type: ignore[operator]
    assert check("abc\n") is not None  # type: ignore[operator]


def test_the_yes_no_helpers_agree_with_the_messages() -> None:
    for key in ("a", "example.com/a", "a/b/c", "/a", "Example.com/a", "a" * 64, "x/" + "a" * 63, "ab\n"):
        assert k8s.valid_qualified_name(key) is (k8s.qualified_name(key) is None), key
    for value in ("", "a", "a-", "-a", "a.b_c", "a" * 63, "a" * 64, "a\n"):
        assert k8s.valid_label_value(value) is (k8s.label_value(value) is None), value
    assert not k8s.LABEL_NAME.match("ab\n") and k8s.LABEL_NAME.match("A.b-c_9")
    assert k8s.QUALIFIED_KEY.match("nvidia.com/gpu") and not k8s.QUALIFIED_KEY.match("nvidia.com/gpu\n")
    assert not k8s.QUALIFIED_KEY.match("Nvidia.com/gpu")


def test_identity_is_group_kind_namespace_name() -> None:
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
           "metadata": {"namespace": "team-a", "name": "q"}}
    assert k8s.identity(obj) == ("kueue.x-k8s.io", "LocalQueue", "team-a", "q")
    assert k8s.identity({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}) == ("", "Node", "", "n")
    assert k8s.identity({}) == ("", "", "", "")
    assert k8s.label(k8s.identity(obj)) == "LocalQueue/team-a/q"
    assert casetest.identity({"kind": "X"}) is None  # the case runner refuses incomplete objects first


@pytest.mark.parametrize("style, expected", [
    ("quoted", 'spec.resourceGroups[0].x-y["nvidia.com/gpu"]["a\\"b"]'),
    ("json", 'spec.resourceGroups[0]["x-y"]["nvidia.com/gpu"]["a\\"b"]'),
    ("dotted", 'spec.resourceGroups[0].x-y.nvidia.com/gpu.a"b'),
])
def test_one_field_path_joiner_three_key_styles(style: k8s.KeyStyle, expected: str) -> None:
    parts = ["spec", "resourceGroups", 0, "x-y", "nvidia.com/gpu", 'a"b']
    assert k8s.field_path(parts, style) == expected
    path = ""
    for part in parts:
        path = k8s.join_field(path, part, style)
    assert path == expected


# --- imports flow forward ---------------------------------------------------------------------------

def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "gpustack_render":
                found |= {f"gpustack_render.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_features_never_import_the_pipeline_or_the_command_line() -> None:
    composers = {PACKAGE / "pipeline.py", PACKAGE / "__main__.py", PACKAGE / "casetest" / "__init__.py"}
    offenders = []
    for path in _modules():
        if path in composers or (PACKAGE / "cli") in path.parents:
            continue
        bad = {m for m in _imports(path) if m in ("gpustack_render.pipeline", "gpustack_render.cli")
               or m.startswith("gpustack_render.cli.")}
        offenders += [f"{path.relative_to(REPO)}: {m}" for m in sorted(bad)]
    assert offenders == []


def test_the_name_grammar_has_one_home() -> None:
    """The DNS-1123 label pattern is written once, in k8s.py."""
    copies = [p.relative_to(REPO) for p in _modules()
              if "[-a-z0-9]*[a-z0-9]" in p.read_text(encoding="utf-8")]
    assert copies == [Path("gpustack_render/k8s.py")]


# --- one error handler ------------------------------------------------------------------------------

def test_the_case_runner_reports_a_bug_like_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(pipeline, "render_objects", boom)
    code, out, err = casetest.inprocess_invoker(["gpustack-render", "render", "fixtures/demo"], REPO)
    cli = invoke("render", "fixtures/demo")
    assert code == cli.exit_code == EXIT_INTERNAL
    assert out == cli.stdout == ""
    assert err == cli.stderr
    assert "internal error: RuntimeError: boom" in err
