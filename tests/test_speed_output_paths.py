"""The render and write stages' newer shortcuts give exactly what the general ways give.

* Straight templates whose values are all strings, text maps or small scalars are rendered a field
  at a time (slots.Batch); anything else takes the item-at-a-time way, with the same objects and
  errors (the size limit names the first object over it).
* A render knows whether a float can be among its values (emit.Manifests.floats), so JSON output is
  written by orjson without looking for one; where one can be, the output is still json.dumps'.
* YAML: a word starting with a letter is judged plain by one expression built from the checks'
  parse (yamlio._first_characters: a superset of the first characters each check can match);
  the answer is the one every check gives, and the stream is the dumper's.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_render import render as render_module
from gpustack_render import yamlio
from gpustack_render.emit import Manifests, format_objects, may_hold_floats
from gpustack_render.errors import UserError
from gpustack_render.render import Renderer, slots

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"


@dataclass
class Plan:
    name: str
    label: Any = "v"
    count: Any = 1
    labels: Any = field(default_factory=lambda: {"b": "2", "a": "1"})


BODY = ("apiVersion: v1\nkind: Topology\nmetadata:\n  name: {{ obj.name | q }}\n  labels: {{ obj.labels | q }}\n"
        "  annotations:\n    z: \"1\"\n    b: {{ obj.label | q }}\nspec:\n  count: {{ obj.count | q }}\n")


def _renderer(tmp: Path, body: str = BODY) -> Renderer:
    shutil.copytree(TEMPLATES, tmp, dirs_exist_ok=True)
    (tmp / "Topology.yaml.j2").write_text(body, encoding="utf-8")
    return Renderer(tmp)


def _both(tmp: Path, items: list[Plan], body: str = BODY) -> tuple[str, str]:
    """The kind rendered through slots and through the real texts (repr, or the error)."""
    fast = _renderer(tmp, body)
    old = Renderer(tmp)
    old._slotted = dict.fromkeys(old._templates)  # type: ignore[assignment]

    def outcome(renderer: Renderer) -> str:
        with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1):
            try:
                return repr(renderer.render_kind("Topology", items))
            except UserError as err:
                return f"UserError: {err}"
            except Exception as err:  # what q or libyaml raises, raised the same both ways
                return f"{type(err).__name__}: {err}"
    return outcome(fast), outcome(old)


def test_a_kind_of_plain_fields_is_rendered_a_field_at_a_time(tmp_path: Path) -> None:
    """Not vacuous: the item-at-a-time way is not taken, and the objects are the texts' objects,
    each with its own mappings."""
    items = [Plan(f"n{i}", label=f"x{i}", count=i) for i in range(20)]
    with mock.patch.object(slots, "_render_straight", side_effect=AssertionError("item at a time")):
        fast, old = _both(tmp_path, items)
    assert fast == old
    renderer = _renderer(tmp_path / "again")
    with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1):
        objects = renderer.render_kind("Topology", items)
    assert objects[0]["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert list(objects[0]["metadata"]["annotations"]) == ["b", "z"]  # a fixed map written sorted
    assert objects[0]["metadata"]["labels"] is not objects[1]["metadata"]["labels"]


@pytest.mark.parametrize("values", [
    {"label": 1.5}, {"label": None}, {"label": True}, {"count": "7"}, {"labels": {"a": 1}},
    {"labels": {"k": "v", "x": None}}, {"label": ["a"]}, {"count": 10**30}, {"label": "\x85"},
    {"label": "\\/"}, {"label": "\x7f"}, {"label": "é"}, {"label": "\ud800"}, {"labels": "text"},
    {"label": float("nan")}, {"count": object()}, {"name": ""},
])
def test_any_field_that_is_not_plain_gives_what_the_texts_give(tmp_path: Path, values: dict[str, Any]) -> None:
    items = [Plan(f"n{i}") for i in range(6)]
    for key, value in values.items():
        setattr(items[3], key, value)
    fast, old = _both(tmp_path, items)
    assert fast == old


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "yes", "0777", "1e3", "~", "x y", "é", "\x7f", ""]),
                          st.one_of(st.integers(-5, 5), st.booleans(), st.none())), min_size=1, max_size=5))
def test_columns_of_strings_and_scalars_give_what_the_texts_give(tmp_path_factory: pytest.TempPathFactory,
                                                                 rows: list[tuple[str, Any]]) -> None:
    items = [Plan(f"n{i}", label=label, count=count) for i, (label, count) in enumerate(rows)]
    fast, old = _both(tmp_path_factory.mktemp("cols"), items)
    assert fast == old


def test_the_size_limit_names_the_first_object_over_it(tmp_path: Path) -> None:
    items = [Plan("a"), Plan("b", label="x" * 700), Plan("c", label="y" * 900)]
    renderer = _renderer(tmp_path)
    with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1), \
            mock.patch.object(render_module, "MAX_OBJECT_CHARS", 600):
        with pytest.raises(UserError) as caught:
            renderer.render_kind("Topology", items)
    real = len(Renderer(TEMPLATES).env.from_string(BODY).render(obj=items[1]))
    assert f"an object of {real:,} characters" in str(caught.value)


def _render(tmp: Path, body: str | None = None, min_items: int = 1) -> Manifests:
    from gpustack_render import pipeline
    directory = TEMPLATES
    if body is not None:
        shutil.copytree(TEMPLATES, tmp, dirs_exist_ok=True)
        (tmp / "NodeFeature.yaml.j2").write_text(body, encoding="utf-8")
        directory = tmp
    ctx = pipeline.prepare([str(ROOT / "fixtures" / "demo")], [], None)
    with mock.patch.object(render_module, "SLOT_MIN_ITEMS", min_items):
        return Renderer(directory).render_plan(ctx.evaluation.plan)


NODE_FEATURE = (TEMPLATES / "NodeFeature.yaml.j2").read_text(encoding="utf-8")


@pytest.mark.parametrize("min_items", [1, 1000])  # through slots, and read from the texts
@pytest.mark.parametrize("extra, floats", [
    ("", False),
    ("extra: {{ 1.5 | q }}\n", True),
    ("extra: 2.5\n", True),
    ("extra: {{ [1, {'a': 1.25}] | q }}\n", True),
    ("extra: {{ [1, {'a': 1e16}] | q }}\n", None),  # YAML 1.1 reads 1e+16 back as text
    ("extra: {{ (obj.name[:0] ~ 'nan') | float | q }}\n", None),  # NaN: YAML reads the plain word back as text
    ("extra: {{ {'k': (obj.name[:0] ~ '1.5') | float} | q }}\n", True),
    ("extra: {{ (2 ** 70) | q }}\n", False),
    ("extra: {{ '1.5' | q }}\nmore: 1e3\n", False),
])
def test_a_render_knows_whether_it_holds_a_float(tmp_path: Path, extra: str, floats: bool | None,
                                                min_items: int) -> None:
    objects = _render(tmp_path, NODE_FEATURE + extra, min_items)
    held = yamlio.has_float(list(objects))
    assert floats is None or held == floats
    assert may_hold_floats(objects) or not held  # never says "none" when there is one
    if min_items == 1 and floats is False:
        assert not objects.floats  # not vacuous: the shortcut is taken
    assert format_objects(objects, "json") == json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(objects)}, indent=2, ensure_ascii=False) + "\n"


def test_output_metadata_keeps_what_the_render_knows(tmp_path: Path) -> None:
    from gpustack_render.render.output_meta import apply_output_metadata
    from gpustack_render.rules import KindMetadata
    objects = _render(tmp_path)
    added = apply_output_metadata(objects, {"NodeFeature": KindMetadata(labels=(("team.example/a", "x"),))})
    assert isinstance(added, Manifests) and not added.floats
    assert may_hold_floats(list(objects))  # a plain list is looked through


def test_json_without_floats_is_the_stdlib_s() -> None:
    value = {"a": [1, "é", None, True, {"b": {}}], "c": 2 ** 63 - 1}
    assert yamlio.dump_json(value, floats=False) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    huge = {"n": 2 ** 70, 1: "x"}  # orjson refuses these; the stdlib writes them
    assert yamlio.dump_json(huge, floats=False) == json.dumps(huge, indent=2, ensure_ascii=False) + "\n"


def _checks() -> list[tuple[Any, bool]]:
    patterns: list[tuple[Any, bool]] = [(r, False) for r in yamlio._SPEC_NON_STRING]
    patterns += [(yamlio._WORDS_ANY_CASE, True), (yamlio._GO_TIMESTAMP, True)]
    patterns += [(r, False) for resolvers in yamlio._DUMPER_RESOLVERS.values() for _t, r in resolvers]
    return list(dict.fromkeys(patterns))


WORDS = ["y", "Y", "n", "N", "yes", "No", "on", "OFF", "true", "False", "null", "NULL", "~", ".inf", "-.Inf",
         ".nan", "0777", "0x1F", "0o17", "0b1", "1e3", "1_000", "1:20", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
         "<<", "=", "!", "&", "*", "", "nan", "inf", "Infinity", "nodes", "node-00004", "tRUE", "yES", "onion",
         "_1", "_", "a" * 129, "a" * 128, "...x", "x...", "e3", "E", "x1", "T", "Z", "b1", "o17", "Null-ish"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(WORDS), st.text(alphabet="aeinoflrstuyxYNTFONbBE01789._-+:~", max_size=8)))
def test_first_characters_are_a_superset(word: str) -> None:
    for regexp, whole in _checks():
        matched = regexp.fullmatch(word) if whole else regexp.match(word)
        first = yamlio._first_characters(regexp)
        if matched and first is not None:
            assert word[:1] in first, (regexp.pattern, word)


def test_first_characters_read_the_expressions() -> None:
    """Not vacuous: the number and timestamp expressions cannot start with a letter, the words can."""
    firsts = [yamlio._first_characters(regexp) for regexp, _whole in _checks()]
    letters = yamlio._ASCII_LETTERS
    assert sum(1 for f in firsts if f is not None and f.isdisjoint(letters)) >= 6
    assert yamlio._first_characters(re.compile("(?i:ab)|c+")) == frozenset("aAc")
    assert yamlio._first_characters(re.compile("x?y")) == frozenset("xy")
    assert yamlio._first_characters(re.compile("a|")) is None  # can match the empty string
    assert yamlio._first_characters(re.compile("[^a]")) is None


def _exact(value: str) -> bool:
    """What _plainly_plain answered before the one-expression shortcut."""
    if len(value) > 128 or not yamlio._PLAINLY_PLAIN.match(value) or value.startswith("..."):
        return False
    if yamlio.read_as_non_string(value):
        return False
    return not any(r.match(value) for _t, r in yamlio._DUMPER_RESOLVERS.get(value[0], [])
                   + yamlio._DUMPER_RESOLVERS.get(None, []))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.sampled_from(WORDS), st.text(alphabet="aeinoflrstuyYNTFOxb0123456789._-+:~/ ", max_size=10)))
def test_a_word_is_plain_exactly_when_every_check_says_so(word: str) -> None:
    with mock.patch.object(yamlio, "_LETTER_WORD", [yamlio._letter_word()]):
        assert yamlio._plainly_plain(word) == _exact(word)


def test_the_letter_shortcut_is_taken() -> None:
    fast = yamlio._letter_word()
    assert fast.match("node-00004") and fast.match("gpustack-system")
    assert not fast.match("yes") and not fast.match("No") and not fast.match("null") and not fast.match("1e3")


docs = st.recursive(st.one_of(st.sampled_from(WORDS[:40] + ["a", "b c", "x: y", "- z"]), st.integers(-3, 3),
                              st.booleans(), st.none()),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.sampled_from(["a", "b", "yes", "1", "k-y"]), inner,
                                                            max_size=3)), max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["apiVersion", "kind", "spec", "- x", "y"]), docs, min_size=1,
                                max_size=4), max_size=3))
def test_the_stream_is_the_dumper_s(documents: list[dict[str, Any]]) -> None:
    with mock.patch.object(yamlio, "_LETTER_WORD", [yamlio._letter_word()]):
        assert yamlio.dump_yaml_stream(documents) == yaml.dump_all(
            documents, Dumper=yamlio.StreamDumper, sort_keys=False, explicit_start=True, default_flow_style=False,
            allow_unicode=True, width=1 << 20)


LABELS = [{}, {"a": "1"}, {"b": "yes", "a": "0777"}, {"k": "x" * 200}, {"é": "日本", "z": ""}, {"n": "a: b"}]


def _batch_render(tmp: Path, names: list[str], labels: list[dict[str, str]], body: str = BODY) -> Manifests:
    """A render whose Topology kind is built from a batch (every field plain)."""
    from gpustack_render import pipeline
    renderer = _renderer(tmp, body)
    items = [Plan(name, label=label_value, count=index, labels=labels[index % len(labels)])
             for index, (name, label_value) in enumerate(zip(names, names[::-1]))]
    ctx = pipeline.prepare([str(ROOT / "fixtures" / "demo")], [], None)
    plan = ctx.evaluation.plan
    with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1), mock.patch.object(plan, "topologies", items):
        return renderer.render_plan(plan)


def _dumper(objects: list[Any]) -> str:
    return yaml.dump_all(objects, Dumper=yamlio.StreamDumper, sort_keys=False, explicit_start=True,
                         default_flow_style=False, allow_unicode=True, width=1 << 20)


@pytest.mark.parametrize("names", [
    [f"n{i}" for i in range(8)],
    ["yes", "no", "on", "0777", "1e3", "~", "null", "e"],
    ["a b", "#x", "x #y", "é", "-a", "a" * 150, "'q'", '"d"'],
    ["line\nbreak", "b", "c", "d"],  # a multi-line value: the whole stream is the dumper's
])
def test_objects_built_from_a_batch_are_written_as_the_emitter_writes_them(tmp_path: Path, names: list[str]) -> None:
    objects = _batch_render(tmp_path, names, LABELS)
    assert objects.documents  # not vacuous: the kind's objects are known with their writer
    text = format_objects(objects, "yaml")
    assert text == yamlio.dump_yaml_stream(list(objects)) == _dumper(list(objects))


def test_a_batch_document_is_not_walked(tmp_path: Path) -> None:
    objects = _batch_render(tmp_path, [f"n{i}" for i in range(8)], LABELS)
    known = sum(1 for obj in objects if id(obj) in objects.documents)
    assert all(id(obj) in objects.documents for obj in objects if obj["kind"] == "Topology") and known >= 8
    with mock.patch.object(yamlio, "_emit_document", wraps=yamlio._emit_document) as walked:
        format_objects(objects, "yaml")
    assert walked.call_count == len(objects) - known


def test_a_changed_object_is_written_the_general_way(tmp_path: Path) -> None:
    from gpustack_render.render.output_meta import apply_output_metadata
    from gpustack_render.rules import KindMetadata
    objects = _batch_render(tmp_path, [f"n{i}" for i in range(8)], LABELS)
    added = apply_output_metadata(objects, {"Topology": KindMetadata(annotations=(("team.example/a", "on"),))})
    assert isinstance(added, Manifests)
    assert format_objects(added, "yaml") == _dumper(list(added))
    assert "team.example/a: 'on'" in format_objects(added, "yaml")


@pytest.mark.parametrize("sample, holes", [
    ({"w0": "x"}, [("w0", 0, False)]),  # a key
    ({"a": ["w0"]}, [("w0", 0, False)]),  # a sequence item
    ({"a": [{"b": "w0"}]}, [("w0", 0, True)]),  # a mapping after a dash
    ({"a": "w0", "b": "w0"}, [("w0", 0, False)]),  # twice
    ({"a": "w0 w1"}, [("w0", 0, False)]),  # inside a scalar
])
def test_a_word_anywhere_but_a_mapping_value_has_no_writer(sample: dict[str, Any], holes: list[Any]) -> None:
    assert yamlio.document_writer(sample, holes) is None


def test_a_writer_fills_its_holes() -> None:
    write = yamlio.document_writer({"a": {"b": "w0", "c": "w1"}, "d": "w2"},
                                   [("w0", 0, False), ("w1", 1, True), ("w2", 2, False)])
    assert write is not None
    for row in [("yes", {"k": "v", "l": "on"}, 3), ("x", {}, None), ("", {"a: b": "1"}, True)]:
        doc = {"a": {"b": row[0], "c": row[1]}, "d": row[2]}
        assert write(row) == yamlio.dump_yaml(doc) == yaml.dump(doc, Dumper=yamlio.StreamDumper, sort_keys=False,
                                                                default_flow_style=False, allow_unicode=True,
                                                                width=1 << 20)


@pytest.mark.parametrize("names", [[f"n{i}" for i in range(8)], ["yes", "line\nbreak", "c", "d"]])
def test_an_output_directory_holds_what_the_emitter_writes(tmp_path: Path, names: list[str]) -> None:
    from gpustack_render.emit import file_name, write_directory
    objects = _batch_render(tmp_path / "t", names, LABELS)
    write_directory(objects, tmp_path / "out")
    for obj in objects:
        assert (tmp_path / "out" / file_name(obj)).read_text(encoding="utf-8") == yamlio.dump_yaml(obj)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("ab/\\\"\x7f\x00\x1f\n\t é\u2028\ud800\ue000")), max_size=6),
                min_size=1, max_size=4))
def test_strings_measured_in_bulk_are_judged_as_one_by_one(values: list[str]) -> None:
    texts = [slots._encode_string(value) for value in values]
    assert slots._plain_json_strings(texts) == all(slots._SIMPLE_TEXT_BAD.search(text) is None for text in texts)
