"""The template language (render/tree.py, render/expr.py): every construct builds what its README
example says, an expression's value is exactly what the earlier text templates' ``q`` filter gave
after reading the text back, errors name ``file:line:col`` and the object, and the sandbox holds."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cli_invoke import REPO, invoke
from gpustack_render import yamlio
from gpustack_render.errors import UserError
from gpustack_render.render import _CONTEXT, _ENV, Renderer, load_template
from gpustack_render.sandbox import BoundedSandbox
from gpustack_render.render.tree import MAX_OBJECT_CHARS, build_all, compile_template
from gpustack_render.render.values import OMIT, Values
from gpustack_render.rulesyaml import parse
from gpustack_render.snapshot.yamlread import BulkLoader

DEMO = REPO / "fixtures" / "demo"


@dataclass
class Item:
    name: str = "n1"
    value: Any = "v"
    labels: Any = field(default_factory=dict)
    values: list[Any] = field(default_factory=list)
    _secret: str = "hidden"


def build(template: str, *items: Any, file: str = "T.yaml") -> list[dict[str, Any]]:
    builder = compile_template(parse(template, file), file, _ENV, _CONTEXT)
    return build_all(builder, list(items) or [Item()], file, "Topology")


def problems(template: str, *items: Any) -> list[str]:
    with pytest.raises(UserError) as raised:
        build(template, *items)
    return [p.format() for p in raised.value.problems]


HEAD = 'kind: Topology\nmetadata:\n  name: "{{ obj.name }}"\n'


# --- one example per construct (README "Templates") ----------------------------------------------

def test_a_whole_expression_takes_its_native_value() -> None:
    item = Item(value=7, labels={"b": "2", "a": "1"}, values=[True, None, ("x", 1.5)])
    (obj,) = build(HEAD + 'spec:\n  n: "{{ obj.value }}"\n  l: "{{ obj.values }}"\n  s: " {{ obj.name | upper }} "\n', item)
    assert obj["spec"] == {"n": 7, "l": [True, None, ["x", 1.5]], "s": "N1"}


def test_text_around_expressions_is_a_string() -> None:
    (obj,) = build(HEAD + 'spec:\n  s: "gpu-{{ obj.value }}-{{ obj.name }}"\n  t: "{{ obj.value }}{{ obj.value }}"\n',
                   Item(value=3))
    assert obj["spec"] == {"s": "gpu-3-n1", "t": "33"}


def test_omit_leaves_a_key_or_an_item_out() -> None:
    template = HEAD + 'spec:\n  a: "{{ obj.value or omit }}"\n  b: "{{ omit }}"\n  c: [1, "{{ omit }}", 2]\n'
    assert build(template, Item(value=""))[0]["spec"] == {"c": [1, 2]}
    assert build(template, Item(value="x"))[0]["spec"] == {"a": "x", "c": [1, 2]}


def test_if_else_value_and_for() -> None:
    template = HEAD + """spec:
  groups:
    $if: obj.values
    $value:
      - $for: v in obj.values if v != 2
        name: "{{ v }}"
    $else: none
  merged:
    $for: k, v in obj.labels | dictsort
    "p/{{ k }}": "{{ v }}"
  items:
    - first
    - $for: v in obj.values
      $value: "{{ v * 10 }}"
"""
    (full,) = build(template, Item(values=[1, 2, 3], labels={"z": "1", "a": "2"}))
    assert full["spec"] == {"groups": [{"name": 1}, {"name": 3}], "merged": {"p/a": "2", "p/z": "1"},
                            "items": ["first", 10, 20, 30]}
    (empty,) = build(template, Item())
    assert empty["spec"] == {"groups": "none", "merged": {}, "items": ["first"]}


def test_the_data_maps_are_sorted_strings() -> None:
    (obj,) = build(HEAD.replace('"\n', '"\n  labels:\n    z: "{{ obj.value }}"\n    a: x\n')
                   + 'spec:\n  nodeLabels: "{{ obj.labels }}"\n', Item(value=1, labels={"b": 2, "a": "x"}))
    assert list(obj["metadata"]["labels"].items()) == [("a", "x"), ("z", "1")]
    assert list(obj["spec"]["nodeLabels"].items()) == [("a", "x"), ("b", "2")]


def test_the_built_in_templates_compile_and_render_the_demo_golden() -> None:
    result = invoke("render", str(DEMO))
    assert result.exit_code == 0 and result.stdout == (REPO / "tests/golden/demo-render.yaml").read_text()


# --- a value is what q's JSON read back gave ----------------------------------------------------

AWKWARD = ["\x85", "\u2028", "\ufeff", "\t", "\x00", "\x7f", '"', "'", ": ", " #", "- ", "---", "{}", "[]", "&a",
           "~", "null", "yes", "on", "0777", "1e3", "1:20", "2001-12-14", ".inf", "<<", "", " ", "é", "\U0001f600"]
texts = st.one_of(st.sampled_from(AWKWARD), st.text(max_size=8).filter(lambda t: not any(0xd800 <= ord(c) < 0xe000
                                                                                         for c in t)))
scalars = st.one_of(texts, st.integers(min_value=-10**30, max_value=10**30), st.booleans(), st.none(),
                    st.floats(allow_nan=True), st.sampled_from([0.0, -0.0, 1e16, 1.5, 1e-7, float("inf")]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner),
                                                        st.dictionaries(texts, inner, max_size=3)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(value=values)
def test_a_value_is_its_json_read_back(value: Any) -> None:
    """Where the text read back at all: a YAML line break (NEL, LS, PS) in a string was folded into a
    space and a control character refused; a value now keeps them (the JSON writer escapes them)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=isinstance(value, dict))
    assume(not any(c in text for c in "\x85\u2028\u2029"))
    try:
        expected = yaml.load("v: " + text, Loader=BulkLoader)["v"]
    except yaml.YAMLError:
        assume(False)
    got = Values().data(value)
    assert repr(got) == repr(expected) and json.dumps(got) == json.dumps(expected)


def test_omit_only_stands_for_a_whole_value() -> None:
    (line,) = problems(HEAD + 'spec:\n  v: "{{ [omit] }}"\n')
    assert "T.yaml:5:6: error: Topology/n1: template failed: omit stands for a whole value" in line
    assert Values().native(OMIT) is OMIT


# --- mistakes: file:line:col, the object, one line per mistake ----------------------------------

def test_a_failing_expression_names_its_place_and_first_object_once() -> None:
    lines = problems(HEAD + 'spec:\n  v: "{{ obj.value.x.y }}"\n  w: "{{ obj.nothing ~ 1 }}"\n',
                     Item(name="a"), Item(name="b"), Item(name="c"))
    assert lines == [
        "T.yaml:5:6: error: Topology/a: template failed: 'str object' has no attribute 'x' (and 2 more Topology objects)",
    ]


def test_every_compile_mistake_is_reported_at_its_place() -> None:
    lines = problems(HEAD + 'spec:\n  a: "{{ obj.name ) }}"\n  b: "{{ obj | nofilter }}"\n  c:\n    $bogus: 1\n'
                     '  d: "{% if x %}y{% endif %}"\n  e:\n    - $for: nothing here\n')
    assert [line.split(": error: ")[0] for line in lines] == ["T.yaml:5:6", "T.yaml:6:6", "T.yaml:8:5", "T.yaml:9:6",
                                                              "T.yaml:11:13"]
    assert "syntax error" in lines[0] and "no filter named 'nofilter'" in lines[1] and "unknown directive" in lines[2]
    assert "statements are not supported" in lines[3] and "$for must read" in lines[4]


def test_a_value_that_is_not_data_is_refused() -> None:
    (line,) = problems(HEAD + 'spec:\n  v: "{{ obj }}"\n')
    assert "T.yaml:5:6" in line and "the value is a Item, not data" in line


def test_the_size_limit_holds_for_loops() -> None:
    (line,) = problems(HEAD + "spec:\n  v:\n    - $for: i in range(2000)\n      $value: '{{ \"y\" * 1000 }}'\n")
    assert f"over the limit of {MAX_OBJECT_CHARS:,}" in line


# --- the sandbox ---------------------------------------------------------------------------------

@pytest.mark.parametrize("expression", ["obj.__class__", "obj._secret", "obj.name.__class__.__mro__",
                                        "lipsum.__globals__", "'{0.__class__}'.format(obj)"])
def test_the_sandbox_holds_in_template_values(expression: str) -> None:
    lines = problems(HEAD + 'spec:\n  v: "{{ (' + expression.replace('"', '\\"') + ') | string | length }}"\n'
                     '  w: "{{ (' + expression + ').x }}"\n') if "format" not in expression else \
        problems(HEAD + 'spec:\n  v: "{{ ' + expression + ' }}"\n')
    assert lines and all("T.yaml:" in line for line in lines)


def test_sandbox_field_reads_match_the_sandbox() -> None:
    env = BoundedSandbox()
    plain = __import__("jinja2.sandbox", fromlist=["SandboxedEnvironment"]).SandboxedEnvironment()
    for expression in ("obj.name", "obj._secret", "obj.__class__", "obj.nothing"):
        source = "{{ " + expression + " }}"
        assert env.from_string(source).render(obj=Item()) == plain.from_string(source).render(obj=Item())


# --- one speed for every construct: a filter, a conditional, a loop build through the one builder --

@pytest.mark.parametrize("old, new", [
    ('name: "{{ obj.name }}"', 'name: "{{ obj.name | trim }}"'),
    ('name: "{{ obj.name }}"', 'name: "{{ obj.name if obj.name else omit }}"'),
    ('labels: "{{ obj.labels }}"', 'labels:\n    $for: k, v in obj.labels | dictsort\n    "{{ k }}": "{{ v }}"'),
])
def test_edited_templates_render_the_same_objects(tmp_path: Path, old: str, new: str) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(REPO / "templates", templates)
    path = templates / "NodeFeature.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    assert invoke("render", str(DEMO), "--templates", str(templates)).stdout == \
        (REPO / "tests/golden/demo-render.yaml").read_text()


def test_a_template_is_compiled_once_per_text() -> None:
    path = REPO / "templates" / "NodeFeature.yaml"
    assert load_template(path) is load_template(path)
    assert Renderer()._builders["NodeFeature"] is load_template(path)


def test_the_emitter_writes_what_the_dumper_writes_for_labels() -> None:
    doc = {"a": {f"k{i}": v for i, v in enumerate(["on", "x", "1", "é", "- y"])}, "b": [{"c": "d"}]}
    assert yamlio.dump_yaml(doc) == yamlio._slow_dump(doc)


# --- templates checked against the CRDs (lint --templates --crds, validate --crds) ----------------

SHARED_CRDS = REPO.parent / "shared" / "crds"


def _crds() -> Path:
    if not (SHARED_CRDS / "kueue").is_dir():
        pytest.skip(f"the shared CRDs are not at {SHARED_CRDS} (the template CRD checks need them)")
    return SHARED_CRDS


def _edited(tmp_path: Path, kind: str, old: str, new: str) -> Path:
    templates = tmp_path / "templates"
    shutil.copytree(REPO / "templates", templates)
    path = templates / f"{kind}.yaml"
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    return templates


@pytest.mark.parametrize("kind, old, new, expected", [
    ("ClusterQueue", "  namespaceSelector: {}\n", "  namespaceSelector: {}\n  cohortNmae: x\n",
     ":10:3: error: spec.cohortNmae: unknown field: the CRD has no 'cohortNmae' here (did you mean 'cohortName'?)"),
    ("ResourceFlavor", "    - operator: Exists", "    - operator: 5",
     ":14:17: error: spec.tolerations[0].operator: wrong type: the CRD wants string, the template writes an integer"),
    ("Topology", '      nodeLabel: "{{ level }}"', "      $if: level",
     ":10:7: error: spec.levels[0]: missing required field 'nodeLabel'"),
    ("ClusterQueue", "whenCanPreempt: MayStopSearch", "whenCanPreempt: Sometimes",
     ":12:21: error: spec.flavorFungibility.whenCanPreempt: 'Sometimes' is not one of the CRD's values"),
])
def test_lint_checks_templates_against_the_crds(tmp_path: Path, kind: str, old: str, new: str, expected: str) -> None:
    templates = _edited(tmp_path, kind, old, new)
    result = invoke("lint", "--templates", str(templates), "--crds", str(_crds()))
    assert result.exit_code == 1, result.output
    (line,) = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert line.startswith(str(templates / f"{kind}.yaml") + expected), line
    validated = invoke("validate", str(DEMO), "--templates", str(templates), "--crds", str(_crds()))
    assert validated.exit_code == 1 and validated.stdout.splitlines() == [line], validated.output


def test_the_built_in_templates_match_the_crds() -> None:
    result = invoke("lint", "--crds", str(_crds()))
    assert result.exit_code == 0 and "OK" in result.stdout, result.output
    assert "InstanceType.yaml: no CRD" in result.stderr  # the gpustack CRDs are not among the shared ones


def test_an_object_edited_after_rendering_is_written_with_its_edit() -> None:
    """One YAML writer, writing each object from its own content (no row kept beside it): an edit
    made after rendering is in the YAML output as it is in the JSON output."""
    from gpustack_render.cli.common import prepare
    from gpustack_render.emit import format_objects
    objects = Renderer().render_plan(prepare((str(DEMO),), (), None).evaluation.plan)
    first_yaml = format_objects(objects, "yaml")
    node_features = [o for o in objects if o["kind"] == "NodeFeature"]
    node_features[0]["metadata"]["labels"]["edited"] = "after"
    node_features[1]["spec"]["labels"] = {"only": "this"}
    text = format_objects(objects, "yaml")
    assert text != first_yaml and "    edited: after\n" in text and "  labels:\n    only: this\n" in text
    assert list(yaml.safe_load_all(text)) == json.loads(format_objects(objects, "json"))["items"]


def test_one_writer_writes_a_float_too(tmp_path: Path) -> None:
    """One YAML writer: a float (which libyaml's dumper used to write for the whole stream) is written
    by the block emitter, as libyaml writes it, and -v names no choice of writer."""
    templates = _edited(tmp_path, "LocalQueue", '  clusterQueue: "{{ obj.cluster_queue }}"',
                        '  clusterQueue: "{{ obj.cluster_queue }}"\n  weight: 1.5')
    result = invoke("-v", "render", str(DEMO), "--templates", str(templates))
    assert result.exit_code == 0 and "  weight: 1.5\n" in result.stdout
    assert result.stdout == yaml.dump_all(list(yaml.safe_load_all(result.stdout)), Dumper=yamlio.StreamDumper,
                                          sort_keys=False, explicit_start=True, default_flow_style=False,
                                          allow_unicode=True, width=1 << 20)
    assert "libyaml" not in result.stderr and "emitter" not in result.stderr


def test_a_whole_expression_with_a_comment_is_checked_as_the_renderer_reads_it(tmp_path: Path) -> None:
    """The CRD check reads a value as the compiler does (jinja2's parse): ``{# ... #}{{ 300 }}`` is one
    whole expression, so it takes the expression's native value, an integer, and is not a string
    written into an integer field."""
    templates = _edited(tmp_path, "ResourceFlavor", "    - operator: Exists",
                        '    - operator: Exists\n      tolerationSeconds: "{# seconds #}{{ 300 }}"')
    result = invoke("lint", "--templates", str(templates), "--crds", str(_crds()))
    assert result.exit_code == 0 and "OK" in result.stdout, result.output
    rendered = invoke("render", str(DEMO), "--templates", str(templates))
    assert rendered.exit_code == 0 and "tolerationSeconds: 300\n" in rendered.stdout, rendered.output
    interpolated = _edited(tmp_path / "2", "ResourceFlavor", "    - operator: Exists",
                           '    - operator: Exists\n      tolerationSeconds: "{{ 300 }}s"')
    result = invoke("lint", "--templates", str(interpolated), "--crds", str(_crds()))
    assert result.exit_code == 1 and "wrong type: the CRD wants integer, the template writes a string" in result.stdout
