"""Template mistakes are user errors (issue 24 point 1): an undefined attribute (with or without
``| q``), a filter on an undefined value and a template writing invalid YAML each give exit 2 and
one line ``template:line: Kind/name: cause``, naming the first object the template failed on, on
the few-objects path (the demo) and on the slotted one (a generated snapshot of 40 Nodes, whose
NodeFeatures and LocalQueues are rendered through slots). Before: exit 3 ``internal error:
TypeError: Object of type StrictUndefined is not JSON serializable``, or a line without the line
number and the object."""

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


def _templates(tmp_path: Path, name: str, old: str, new: str) -> tuple[Path, int]:
    """A copy of the built-in templates with ``old`` replaced once in ``name``; the line of ``new``."""
    dest = tmp_path / "templates"
    if not dest.exists():
        shutil.copytree(REPO / "templates", dest)
    path = dest / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (name, old)
    text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    marker = new.strip().splitlines()[-1]
    return dest, text[:text.index(marker)].count("\n") + 1


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
FLAVOR, NODE = "- name: {{ flavor.name | q }}", "node-name: {{ obj.node | q }}"
MISTAKES = {
    # id: (template, old text, new text, cause)
    "undefined-attribute-q": ("ClusterQueue.yaml.j2", FLAVOR, "- name: {{ flavor.nmae | q }}", NO_NMAE),
    "undefined-attribute": ("ClusterQueue.yaml.j2", FLAVOR, "- name: {{ flavor.nmae }}", NO_NMAE),
    "filter-on-undefined": ("ClusterQueue.yaml.j2", FLAVOR, "- name: {{ flavor.nmae | upper | q }}", NO_NMAE),
    "nodefeature-undefined-q": ("NodeFeature.yaml.j2", NODE, "node-name: {{ obj.nodee | q }}", NO_NODEE),
    "nodefeature-statement": ("NodeFeature.yaml.j2", NODE, "node-name: {% if obj %}{{ obj.nodee | q }}{% endif %}",
                              NO_NODEE),
    "localqueue-unwritable": ("LocalQueue.yaml.j2", "  name: {{ obj.name | q }}", "  name: {{ obj | q }}",
                              "template failed: the q filter cannot write a LocalQueuePlan: Object of type "
                              "LocalQueuePlan is not JSON serializable"),
    "arithmetic": ("ClusterQueue.yaml.j2", FLAVOR, "- name: {{ (flavor.name ~ (1 // 0)) | q }}",
                   "template failed: ZeroDivisionError: integer division or modulo by zero"),
    "operand-types": ("NodeFeature.yaml.j2", NODE, "node-name: {{ (obj.node + 1) | q }}",
                      "template failed: TypeError: can only concatenate str (not \"int\") to str"),
    "invalid-yaml": ("ClusterQueue.yaml.j2", "  namespaceSelector: {}\n", "  namespaceSelector: {}\n   bad: [x\n",
                     "template does not produce valid YAML: while parsing a block mapping; did not find "
                     "expected key (line 10, column 4 of the rendered object)"),
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
    assert err == [f"gpustack-render: error: {templates / name}:{line}: {_first_name(snapshot, kind)}: {cause}"]


def test_mistakes_in_two_templates_are_two_lines(tmp_path: Path, generated: Path) -> None:
    """One line per mistake: each broken template is reported once, in the same run."""
    _templates(tmp_path, "ClusterQueue.yaml.j2", FLAVOR, "- name: {{ flavor.nmae | q }}")
    templates, line = _templates(tmp_path, "NodeFeature.yaml.j2", NODE, "node-name: {{ obj.nodee | q }}")
    code, out, err = _render(templates, generated)
    assert (code, out) == (2, "")
    assert len(err) == 2, err
    assert re.match(re.escape(f"gpustack-render: error: {templates / 'NodeFeature.yaml.j2'}:{line}: NodeFeature/"), err[0])
    assert re.match(re.escape(f"gpustack-render: error: {templates / 'ClusterQueue.yaml.j2'}:") + r"\d+: ClusterQueue/",
                    err[1])


def test_an_error_of_this_package_under_a_template_stays_internal() -> None:
    """Only the template's own code makes a user error: an exception raised inside this package
    (here a filter that calls into gpustack_render.k8s with a bad value) stays a bug (exit 3)."""
    from gpustack_render.k8s import format_decimal_si
    from gpustack_render.pipeline import prepare
    from gpustack_render.render import Renderer
    plan = prepare([str(DEMO)], [], None).evaluation.plan
    renderer = Renderer(None)
    renderer.env.filters["q"] = lambda value: format_decimal_si(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        renderer.render_kind("ClusterQueue", plan.cluster_queues)
