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

from gpustack_render.yamlio import BulkLoader, NotSimple, load_simple_block

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
    kind = draw(st.sampled_from(["plain", "json", "json-compact", "comment"]))
    if kind == "plain":
        return draw(SCALARS)
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


@pytest.mark.parametrize("text", [
    "a: 1e3", "a: [1e3]", "a: 0777", "a: on", "a: [NaN]", 'a: "\\/"', 'a: "\\x41"', "a: &x 1", "a: !!str 1",
    "a: |\n  text", "a:\n- 1", "a: b\n  c", '"k":1', "a: 'q'", "<<: {}", "a: {b: c}", "a: 1 # c",
])
def test_fast_block_reader_edge_cases(text: str) -> None:
    try:
        fast = load_simple_block(text)
    except NotSimple:
        return
    assert repr(fast) == repr(_slow(text))
