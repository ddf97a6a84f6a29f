"""Template mistakes are user errors (issue 24 point 1): an undefined attribute, a filter on an
undefined value, an error of the template's own expressions and a value that is not data each give
exit 2 and one line ``template:line:col: error: Kind/name: cause``, naming the first object the
template failed on, for a few objects (the demo) and for many (a generated snapshot of 40 Nodes):
every object is built by the template's one compiled builder. Before issue 24: exit 3 ``internal
error: TypeError: Object of type StrictUndefined is not JSON serializable``, or a line without the
line number and the object."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Sequence

import pytest
from click.testing import CliRunner

from bench_generator import load_generator
from gpustack_render.cli import main

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo"


def _templates(tmp_path: Path, name: str, old: str, new: str) -> tuple[Path, str]:
    """A copy of the built-in templates with ``old`` replaced once in ``name``; ``line:col`` of the
    value ``new`` writes (its last line's value, where the template's reader places it)."""
    dest = tmp_path / "templates"
    if not dest.exists():
        shutil.copytree(REPO / "templates", dest)
    path = dest / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (name, old)
    text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    marker = new.strip().splitlines()[-1]
    start = text.index(marker)
    line = text[:start].count("\n") + 1
    line_text = text.splitlines()[line - 1]
    column = line_text.index(": ", line_text.index(marker)) + 3
    return dest, f"{line}:{column}"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snapshot") / "nodes.json"
    path.write_text(json.dumps(load_generator().generate(40, 3, seed=3)), encoding="utf-8")
    return path


def _render(templates: Path, snapshot: Path) -> tuple[int, str, list[str]]:
    result = CliRunner().invoke(main, ["render", str(snapshot), "--templates", str(templates)])
    return result.exit_code, result.stdout, result.stderr.splitlines()


def _first_name(snapshot: Path, kind: str) -> str:
    """The first object of ``kind`` the template is given (plan order) is the one named."""
    from gpustack_render.pipeline import prepare
    plan = prepare([str(snapshot)], [], None).evaluation.plan
    items: dict[str, Sequence[Any]] = {"ClusterQueue": plan.cluster_queues, "NodeFeature": plan.node_features,
                                       "LocalQueue": plan.local_queues}
    first = items[kind][0]
    return f"{kind}/{first.namespace}/{first.name}" if getattr(first, "namespace", "") else f"{kind}/{first.name}"


NO_NMAE = "template failed: 'gpustack_render.evaluate.plan.QueueFlavorQuota object' has no attribute 'nmae'"
NO_NODEE = "template failed: 'gpustack_render.evaluate.plan.NodeFeaturePlan object' has no attribute 'nodee'"
FLAVOR, NODE = 'name: "{{ flavor.name }}"', 'node-name: "{{ obj.node }}"'
MISTAKES = {
    # id: (template, old text, new text, cause)
    "undefined-attribute": ("ClusterQueue.yaml", FLAVOR, 'name: "{{ flavor.nmae }}"', NO_NMAE),
    "filter-on-undefined": ("ClusterQueue.yaml", FLAVOR, 'name: "{{ flavor.nmae | upper }}"', NO_NMAE),
    "nodefeature-undefined": ("NodeFeature.yaml", NODE, 'node-name: "{{ obj.nodee }}"', NO_NODEE),
    "nodefeature-interpolated": ("NodeFeature.yaml", NODE, 'node-name: "n-{{ obj.nodee }}"', NO_NODEE),
    "localqueue-not-data": ("LocalQueue.yaml", '  name: "{{ obj.name }}"', '  name: "{{ obj }}"',
                            "template failed: the value is a LocalQueuePlan, not data (a string, number, boolean, "
                            "null, mapping or list)"),
    "arithmetic": ("ClusterQueue.yaml", FLAVOR, 'name: "{{ flavor.name ~ (1 // 0) }}"',
                   "template failed: ZeroDivisionError: integer division or modulo by zero"),
    "operand-types": ("NodeFeature.yaml", NODE, 'node-name: "{{ obj.node + 1 }}"',
                      "template failed: TypeError: can only concatenate str (not \"int\") to str"),
}


@pytest.mark.parametrize("where", ["demo", "generated"])
@pytest.mark.parametrize("mistake", list(MISTAKES), ids=list(MISTAKES))
def test_a_template_mistake_is_one_user_error_at_its_line(tmp_path: Path, generated: Path, mistake: str,
                                                          where: str) -> None:
    name, old, new, cause = MISTAKES[mistake]
    templates, line = _templates(tmp_path, name, old, new)
    snapshot = DEMO if where == "demo" else generated
    kind = name.split(".")[0]
    code, out, err = _render(templates, snapshot)
    assert (code, out) == (2, ""), err
    assert len(err) == 1, err  # one line for all the objects it fails on, naming the first
    assert re.fullmatch(re.escape(f"{templates / name}:{line}: error: {_first_name(snapshot, kind)}: {cause}")
                        + rf"( \(and \d+ more {kind} objects\))?", err[0]), err


def test_mistakes_in_two_templates_are_two_lines(tmp_path: Path, generated: Path) -> None:
    """One line per mistake: each broken template is reported once, in the same run."""
    _templates(tmp_path, "ClusterQueue.yaml", FLAVOR, 'name: "{{ flavor.nmae }}"')
    templates, line = _templates(tmp_path, "NodeFeature.yaml", NODE, 'node-name: "{{ obj.nodee }}"')
    code, out, err = _render(templates, generated)
    assert (code, out) == (2, "")
    assert len(err) == 2, err
    assert re.match(re.escape(f"{templates / 'NodeFeature.yaml'}:{line}: error: NodeFeature/"), err[0])
    assert re.match(re.escape(f"{templates / 'ClusterQueue.yaml'}:") + r"\d+:\d+: error: ClusterQueue/", err[1])


def test_a_statement_in_a_value_is_refused_at_its_place(tmp_path: Path) -> None:
    """{% %} has no place in a YAML template ($if and $for do its work): one line, before rendering."""
    templates, line = _templates(tmp_path, "NodeFeature.yaml", NODE, 'node-name: "{% if obj %}x{% endif %}"')
    code, out, err = _render(templates, DEMO)
    assert (code, out) == (2, "") and len(err) == 1, err
    assert err[0].startswith(f"{templates / 'NodeFeature.yaml'}:{line}: error: ") and "statements are not" in err[0]


def test_an_error_of_this_package_under_a_template_stays_internal() -> None:
    """Only the template's own code makes a user error: an exception raised inside this package
    (here a filter that calls into gpustack_render.k8s with a bad value) stays a bug (exit 3)."""
    from gpustack_render.k8s import format_decimal_si
    from gpustack_render.pipeline import prepare
    from gpustack_render.render import _ENV
    from gpustack_render.render.tree import build_all
    plan = prepare([str(DEMO)], [], None).evaluation.plan
    _ENV.filters["broken_by_us"] = lambda value: format_decimal_si(None)  # type: ignore[arg-type]
    try:
        from test_templates import build  # noqa: F401 (the compiling helper)
        template = 'kind: ClusterQueue\nmetadata:\n  name: "{{ obj.name | broken_by_us }}"\n'
        with pytest.raises(TypeError):
            build(template, *plan.cluster_queues)
    finally:
        del _ENV.filters["broken_by_us"]
    assert build_all
