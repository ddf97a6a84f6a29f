"""Imports run forward only along the pipeline (DEVELOPERS.md promise 4, issue 22 point 5).

Every ``import`` of the package in the package (module level and inside functions) is read with
``ast``; each module belongs to a unit (``gpustack_render.rules.read`` to ``rules``, a top-level module
to itself). A unit may import units of its own layer or of a lower one, never of a higher one, and the
units' import graph has no cycle (so of snapshot and rules one may use the other, not both ways).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpustack_render"

# Lowest first. The features sit beside each other above the pipeline's stages; ``pipeline`` composes
# them all; the case runner runs whole commands through the pipeline; the CLI parses arguments.
LAYERS: list[set[str]] = [
    {"errors", "k8s", "memo", "timing", "yamlscalars", "yamlio", "rulesyaml", "sandbox", "tables", "__init__"},
    {"snapshot", "rules"},
    {"evaluate"},
    {"render"},
    {"emit", "diff"},
    {"pin", "validate", "explain", "views", "admit"},
    {"pipeline"},
    {"casetest"},
    {"cli"},
    {"__main__"},
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(["gpustack_render", *parts])


def imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The package's modules this module's code imports (relative imports resolved)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name.startswith("gpustack_render"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[:len(module.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "gpustack_render":
                out.update(f"gpustack_render.{alias.name}" for alias in node.names)
            elif target.startswith("gpustack_render."):
                out.add(target)
    return out


def unit_edges(root: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) → the imports making that edge, as ``module -> module``."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        for target in imported(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py"):
            src, dst = unit_of(module), unit_of(target)
            if src != dst:
                edges.setdefault((src, dst), []).append(f"{module} -> {target}")
    return edges


def backward(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    return sorted(line for (src, dst), lines in edges.items()
                  if RANK.get(dst, len(LAYERS)) > RANK.get(src, len(LAYERS)) for line in lines)


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Each strongly connected set of more than one unit (Tarjan), sorted."""
    graph: dict[str, set[str]] = {}
    for src, dst in edges:
        graph.setdefault(src, set()).add(dst)
        graph.setdefault(dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for nxt in sorted(graph[unit]):
            if nxt not in index:
                visit(nxt)
                low[unit] = min(low[unit], low[nxt])
            elif nxt in stack:
                low[unit] = min(low[unit], index[nxt])
        if low[unit] == index[unit]:
            members = []
            while True:
                member = stack.pop()
                members.append(member)
                if member == unit:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return sorted(found)


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert units - set(RANK) == set(), "a new unit needs its place in LAYERS"


def test_no_import_against_the_pipeline() -> None:
    assert backward(unit_edges()) == []


def test_no_import_cycle() -> None:
    assert cycles(unit_edges()) == []


def test_the_walk_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    """The walk itself: an import inside a function, a relative one and ``from package import unit``
    are all edges; a backward one and a cycle are reported."""
    pkg = tmp_path / "gpustack_render"
    (pkg / "rules").mkdir(parents=True)
    (pkg / "render").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rules" / "__init__.py").write_text("def f():\n    from gpustack_render.render import x\n")
    (pkg / "render" / "__init__.py").write_text("from ..rules import y\n")
    (pkg / "snapshot.py").write_text("from gpustack_render import rules\n")
    (pkg / "k8s.py").write_text("import gpustack_render.snapshot\n")
    edges = unit_edges(pkg)
    assert set(edges) == {("rules", "render"), ("render", "rules"), ("snapshot", "rules"), ("k8s", "snapshot")}
    assert backward(edges) == ["gpustack_render.k8s -> gpustack_render.snapshot",
                               "gpustack_render.rules -> gpustack_render.render"]
    assert cycles(edges) == [["render", "rules"]]
