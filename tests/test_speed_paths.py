"""The fast paths give exactly what the slow paths give.

Rendered templates are read by ``yamlio.load_simple_block`` instead of libyaml + PyYAML's
constructor whenever the text is in the block subset templates write; these tests draw documents
in and around that subset (raw plain scalars YAML 1.1 reads as other types, JSON values, quoted
keys, comments, anchors, continuation lines, odd indentation) and require the fast reader to give
the same data as PyYAML's safe loader, or to decline (``NotSimple``) so the caller falls back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_render.yamlio import (BulkLoader, NotSimple, StreamDumper, dump_yaml, dump_yaml_stream,
                                    load_simple_block, load_simple_stream)

WORDS = st.sampled_from(["y", "n", "yes", "No", "on", "OFF", "true", "False", "null", "~", ".inf", "-.inf", ".nan",
                         "0777", "0o17", "0x1F", "1_000", "1:20", "190:20:30", "1e3", "1.0e+3", "1.5", "-1",
                         "+12", "<<", "=", "2001-12-14", "Exists", "TryNextFlavor", "a b", "a - b", "-", "---",
                         "...", "a#b", "a #b", "x:y", "gpustack-operator", "0", "00", "-0", "0b101", "1__0"])
FREE = st.text(alphabet=st.sampled_from(list("aeynoftrux019.-+_:~<=# '\"!&*@`%,[]{}|>?/\\\t\u2028é")), max_size=10)
SCALARS = st.one_of(WORDS, FREE)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), SCALARS,
              st.floats(allow_nan=True, allow_infinity=True, width=32)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(SCALARS, inner, max_size=3)),
    max_leaves=8)


def _value_text(draw: Any) -> str:
    kind = draw(st.sampled_from(["plain", "json", "json-compact", "comment", "single"]))
    if kind == "plain":
        return draw(SCALARS)
    if kind == "single":
        return "'" + draw(SCALARS).replace("'", "''") + "'"
    if kind == "comment":
        return json.dumps(draw(SCALARS)) + " # note"
    value = draw(JSON_VALUES)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":") if kind == "json-compact" else None)


@st.composite
def documents(draw: Any, depth: int = 0, indent: int = 0) -> str:
    lines: list[str] = []
    pad = " " * indent
    for _ in range(draw(st.integers(1, 4))):
        key = draw(SCALARS)
        key_text = json.dumps(key, ensure_ascii=False) if draw(st.booleans()) else key
        shape = draw(st.sampled_from(["inline", "inline", "block", "list", "empty"] if depth < 2 else ["inline"]))
        if shape == "inline":
            lines.append(f"{pad}{key_text}: {_value_text(draw)}")
        elif shape == "empty":
            lines.append(f"{pad}{key_text}:")
        elif shape == "block":
            lines.append(f"{pad}{key_text}:")
            lines.append(draw(documents(depth + 1, indent + draw(st.sampled_from([1, 2, 4])))))
        else:
            lines.append(f"{pad}{key_text}:")
            step = draw(st.sampled_from([0, 2, 4]))
            for _ in range(draw(st.integers(1, 3))):
                if draw(st.booleans()):
                    lines.append(f"{pad}{' ' * step}- {_value_text(draw)}")
                else:
                    inner = draw(documents(depth + 1, indent + step + 2))
                    lines.append(f"{pad}{' ' * step}- {inner.lstrip(' ')}")
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from(["", "# a comment", f"{pad}  continued", "---", "  "])))
    return "\n".join(lines)


def _slow(text: str) -> Any:
    return yaml.load("---\n" + text + "\n", Loader=BulkLoader)


@settings(max_examples=1500, deadline=None)
@given(documents())
def test_fast_block_reader_reads_as_libyaml_or_declines(text: str) -> None:
    try:
        fast = load_simple_block(text)
    except NotSimple:
        return
    try:
        slow = _slow(text)
    except yaml.YAMLError as err:  # the fast reader must never accept what libyaml refuses
        pytest.fail(f"fast reader accepted text libyaml refuses ({err}):\n{text}")
    assert json.dumps(fast, sort_keys=False, default=repr) == json.dumps(slow, sort_keys=False, default=repr)
    assert fast == slow or repr(fast) == repr(slow)  # nan != nan


@settings(max_examples=500, deadline=None)
@given(st.lists(documents(), max_size=3), st.booleans())
def test_fast_stream_reader_reads_as_libyaml_or_declines(docs: list[str], leading: bool) -> None:
    """YAML snapshots: a ``---`` separated stream, read as libyaml reads it (empty documents dropped)."""
    text = ("---\n" if leading else "") + "\n---\n".join(docs) + "\n"
    try:
        fast = load_simple_stream(text)
    except NotSimple:
        return
    try:
        slow = [doc for doc in yaml.load_all(text, Loader=BulkLoader) if doc is not None]
    except yaml.YAMLError as err:
        pytest.fail(f"fast reader accepted text libyaml refuses ({err}):\n{text}")
    assert repr(fast) == repr(slow)


@pytest.mark.parametrize("text", [
    "a: 1e3", "a: [1e3]", "a: 0777", "a: on", "a: [NaN]", 'a: "\\/"', 'a: "\\x41"', "a: &x 1", "a: !!str 1",
    "a: |\n  text", "a:\n- 1", "a: b\n  c", '"k":1', "a: 'q'", "a: 'it''s'", "a: 'x' y", "- a\n-\n- b",
    "a: b: c", "a:b: c", "a: x[1]", "a: -", "? a\n: b", "a: 2001-12-14", "a: [1, 2]", "- - a\n  - b\n- c", "<<: {}", "a: {b: c}", "a: 1 # c",
])
def test_fast_block_reader_edge_cases(text: str) -> None:
    try:
        fast = load_simple_block(text)
    except NotSimple:
        return
    assert repr(fast) == repr(_slow(text))


JSON_OUTPUT = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), SCALARS,
              st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner),
                            st.dictionaries(st.one_of(SCALARS, st.integers(), st.booleans(), st.none()), inner,
                                            max_size=3)),
    max_leaves=12)


@settings(max_examples=500, deadline=None)
@given(JSON_OUTPUT)
def test_dump_json_is_byte_identical_to_the_stdlib(value: Any) -> None:
    from gpustack_render.yamlio import dump_json
    assert dump_json(value) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def test_dump_json_of_a_render_is_byte_identical_to_the_stdlib() -> None:
    from gpustack_render.yamlio import dump_json
    value = {"apiVersion": "v1", "kind": "List", "items": [
        {"metadata": {"name": "é", "labels": {}}, "spec": {"q": [1, True, None, "8Gi"], "empty": []}}]}
    assert dump_json(value) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _quoting_strings() -> Any:
    """The strategies of tests/test_yaml_quoting.py (the quoting rules' property test)."""
    from tests.test_yaml_quoting import STRINGS  # type: ignore[import-not-found]
    return STRINGS


YAML_OUTPUT_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), SCALARS,
                                st.text(max_size=8), st.just("a" * 130), st.just("line\nbreak"))
YAML_OUTPUT = st.recursive(
    YAML_OUTPUT_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(SCALARS, st.text(max_size=4), st.integers(), st.booleans()),
                                            inner, max_size=4)),
    max_leaves=16)


def _slow_yaml(value: Any) -> str:
    return yaml.dump(value, Dumper=StreamDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 20)


@settings(max_examples=800, deadline=None)
@given(YAML_OUTPUT)
def test_dump_yaml_is_byte_identical_to_the_dumper(value: Any) -> None:
    assert dump_yaml(value) == _slow_yaml(value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.one_of(SCALARS, st.text(max_size=4)), YAML_OUTPUT, min_size=1, max_size=4),
                max_size=3))
def test_dump_yaml_stream_is_byte_identical_to_the_dumper(docs: list[Any]) -> None:
    slow = yaml.dump_all(docs, Dumper=StreamDumper, sort_keys=False, explicit_start=True, default_flow_style=False,
                         allow_unicode=True, width=1 << 20)
    assert dump_yaml_stream(docs) == slow


def test_dump_yaml_quotes_the_quoting_tests_strings() -> None:
    """Every string of the quoting rules' strategies, as key and value, in one document."""
    from hypothesis import find  # noqa: F401  (hypothesis is there: the strategies below draw from it)
    strings = _quoting_strings()

    @settings(max_examples=400, deadline=None)
    @given(st.dictionaries(strings, strings, max_size=8), st.lists(strings, max_size=4))
    def check(mapping: dict[str, str], items: list[str]) -> None:
        value = {"mapping": mapping, "items": items, "nested": [{"k": items}, mapping]}
        assert dump_yaml(value) == _slow_yaml(value)
    check()


def test_shared_objects_keep_their_anchors() -> None:
    shared = {"a": "b"}
    value = {"x": shared, "y": shared, "z": [[], []]}
    assert dump_yaml(value) == _slow_yaml(value)
    assert "&id001" in dump_yaml(value)
