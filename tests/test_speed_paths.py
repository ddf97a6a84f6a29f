"""The fast paths give exactly what the slow paths give.

YAML text is read by rapidyaml behind the pre-scan (``yamlread.documents``) instead of libyaml +
PyYAML's constructor whenever the scan proves the two agree; these tests draw documents in and
around kubectl's block style (raw plain scalars YAML 1.1 reads as other types, JSON values, quoted
keys, comments, anchors, continuation lines, odd indentation) and require rapidyaml to give the
same data as PyYAML's safe loader, or to decline so that libyaml reads the text.

Budget (tests/budget.py): hypothesis spends nearly all of these tests' time drawing examples, so
each property test runs a smaller fixed-seed budget (``GPUSTACK_RENDER_THOROUGH=1``: the full one,
random) and checks that it drew every shape, value form and scalar family of the grammar; next to
it, deterministic tables put every listed word in every value form and every shape, each run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from budget import Branches, budget
from hypothesis import given
from hypothesis import strategies as st

from gpustack_render.snapshot.yamlread import BulkLoader, _rapid_documents
from gpustack_render.yamlio import StreamDumper, dump_yaml, dump_yaml_stream

WORD_LIST = (["y", "n", "yes", "No", "on", "OFF", "true", "False", "null", "~", ".inf", "-.inf", ".nan",
                         "0777", "0o17", "0x1F", "1_000", "1:20", "190:20:30", "1e3", "1.0e+3", "1.5", "-1",
                         "+12", "<<", "=", "2001-12-14", "Exists", "TryNextFlavor", "a b", "a - b", "-", "---",
                         "...", "a#b", "a #b", "x:y", "gpustack-operator", "0", "00", "-0", "0b101", "1__0"])
WORDS = st.sampled_from(WORD_LIST)
FREE = st.text(alphabet=st.sampled_from(list("aeynoftrux019.-+_:~<=# '\"!&*@`%,[]{}|>?/\\\t\u2028é")), max_size=10)
SCALAR_KINDS = Branches()
SCALARS = SCALAR_KINDS.one_of(word=WORDS, free=FREE)
# What documents() drew (value forms, shapes, extra lines), for the budget's coverage check.
DRAWN: set[str] = set()
VALUE_FORMS = ("plain", "json", "json-compact", "comment", "single")
SHAPES = ("inline", "block", "list", "empty")
EXTRA_LINES = ("", "# a comment", "  continued", "---", "  ")
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), SCALARS,
              st.floats(allow_nan=True, allow_infinity=True, width=32)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(SCALARS, inner, max_size=3)),
    max_leaves=8)


def _value_text(draw: Any) -> str:
    kind = draw(st.sampled_from(VALUE_FORMS))
    DRAWN.add(f"value:{kind}")
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
        DRAWN.add(f"shape:{shape}")
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
            extra = draw(st.sampled_from(EXTRA_LINES))
            DRAWN.add(f"extra:{extra}")
            lines.append(pad + extra if extra == "  continued" else extra)
    return "\n".join(lines)


def _stream_same_or_declined(text: str) -> bool:
    """The same for a ``---`` separated stream, read as libyaml reads it (empty documents dropped)."""
    fast = _rapid_documents(text)
    if fast is None:
        return False
    try:
        slow = [doc for doc in yaml.load_all(text, Loader=BulkLoader) if doc is not None]
    except yaml.YAMLError as err:
        pytest.fail(f"fast reader accepted text libyaml refuses ({err}):\n{text}")
    assert repr(fast) == repr(slow), text
    return True


def _assert_grammar_drawn() -> None:
    """Every value form, shape and scalar family of documents() came up in the budget (each is drawn
    over a hundred times; the rarer extra lines are in every document of the tables below instead)."""
    wanted = {f"value:{v}" for v in VALUE_FORMS} | {f"shape:{s}" for s in SHAPES}
    assert wanted <= DRAWN, f"the example budget never drew {sorted(wanted - DRAWN)}"
    SCALAR_KINDS.assert_all_drawn()


def _reset_drawn() -> None:
    DRAWN.clear()
    SCALAR_KINDS.seen.clear()


def test_fast_stream_reader_reads_as_libyaml_or_declines() -> None:
    """YAML snapshots: a ``---`` separated stream, read as libyaml reads it (empty documents dropped)."""
    _reset_drawn()
    accepted: list[bool] = []

    @budget(100, 500)
    @given(st.lists(documents(), max_size=3), st.booleans())
    def check(docs: list[str], leading: bool) -> None:
        accepted.append(_stream_same_or_declined(("---\n" if leading else "") + "\n---\n".join(docs) + "\n"))
    check()
    _assert_grammar_drawn()
    # The pre-scan sends to libyaml every text with one YAML 1.1 word, odd int or float anywhere, which
    # this grammar draws in most documents (about 5 % pass); rapidyaml's own property tests, over
    # kubectl-shaped documents, are test_speed_snapshot's. Here: that what passes reads alike.
    assert sum(accepted) >= 3, "the fast reader declined nearly everything: the test checks nothing"


def _value_forms(word: str) -> list[str]:
    """``word`` as a value in every form documents() writes one (VALUE_FORMS, JSON in a list and a map)."""
    return [word, "'" + word.replace("'", "''") + "'", json.dumps(word) + " # note", json.dumps(word),
            json.dumps([word], separators=(",", ":")), json.dumps({word: [word, None, 1.5]})]


def _shapes(key: str, value: str) -> list[str]:
    """``key: value`` in every shape documents() writes (SHAPES, each indent and list step, EXTRA_LINES)."""
    quoted = json.dumps(key, ensure_ascii=False)
    texts = [f"{key}: {value}", f"{quoted}: {value}", f"{key}:", f"{key}:\n{quoted}: {value}"]
    texts += [f"top:\n{' ' * indent}{key}: {value}\n{' ' * indent}other: 1" for indent in (1, 2, 4)]
    texts += [f"top:\n{' ' * step}- {value}\n{' ' * step}- {key}: {value}\n{' ' * (step + 2)}more: x" for step in (0, 2, 4)]
    texts += [f"{key}: {value}\n{extra}" for extra in EXTRA_LINES]
    return texts


def _table_documents() -> list[str]:
    return [text for word in WORD_LIST for value in _value_forms(word) for text in _shapes(word, value)]


def test_fast_stream_reader_table_every_word_in_every_form_and_shape() -> None:
    texts = _table_documents()
    streams = [("---\n" if i % 2 else "") + f"{a}\n---\n{b}\n" + ("---\n" if i % 3 == 0 else "")
               for i, (a, b) in enumerate(zip(texts, texts[1:] + texts[:1]))]
    accepted = [_stream_same_or_declined(text) for text in streams]
    assert sum(accepted) >= len(streams) // 20, "the fast reader declined nearly everything: the test checks nothing"


JSON_KINDS = Branches()
JSON_OUTPUT = st.recursive(
    JSON_KINDS.one_of(none=st.none(), bool=st.booleans(), int=st.integers(-2**70, 2**70), float=st.floats(),
                      scalar=SCALARS, text=st.text(max_size=6)),
    lambda inner: JSON_KINDS.one_of(list=st.lists(inner, max_size=3), tuple=st.tuples(inner),
                                    dict=st.dictionaries(st.one_of(SCALARS, st.integers(), st.booleans(), st.none()),
                                                         inner, max_size=3)),
    max_leaves=12)


def test_dump_json_is_byte_identical_to_the_stdlib() -> None:
    from gpustack_render.yamlio import dump_json
    JSON_KINDS.seen.clear()

    @budget(200, 500)
    @given(JSON_OUTPUT)
    def check(value: Any) -> None:
        assert dump_json(value) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    check()
    JSON_KINDS.assert_all_drawn()


def test_dump_json_of_a_render_is_byte_identical_to_the_stdlib() -> None:
    from gpustack_render.yamlio import dump_json
    value = {"apiVersion": "v1", "kind": "List", "items": [
        {"metadata": {"name": "é", "labels": {}}, "spec": {"q": [1, True, None, "8Gi"], "empty": []}}]}
    assert dump_json(value) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def _quoting_tests() -> Any:
    """tests/test_yaml_quoting.py: the quoting rules' strategies and tables."""
    import test_yaml_quoting
    return test_yaml_quoting


YAML_KINDS = Branches()
YAML_OUTPUT_SCALARS = YAML_KINDS.one_of(none=st.none(), bool=st.booleans(), int=st.integers(-2**70, 2**70),
                                        scalar=SCALARS, text=st.text(max_size=8), long=st.just("a" * 130),
                                        linebreak=st.just("line\nbreak"))
YAML_OUTPUT = st.recursive(
    YAML_OUTPUT_SCALARS,
    lambda inner: YAML_KINDS.one_of(list=st.lists(inner, max_size=3),
                                    dict=st.dictionaries(st.one_of(SCALARS, st.text(max_size=4), st.integers(),
                                                                   st.booleans()), inner, max_size=4)),
    max_leaves=16)


def _slow_yaml(value: Any) -> str:
    return yaml.dump(value, Dumper=StreamDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 20)


def _slow_yaml_stream(docs: list[Any]) -> str:
    return yaml.dump_all(docs, Dumper=StreamDumper, sort_keys=False, explicit_start=True, default_flow_style=False,
                         allow_unicode=True, width=1 << 20)


def test_dump_yaml_is_byte_identical_to_the_dumper() -> None:
    YAML_KINDS.seen.clear()

    @budget(250, 800)
    @given(YAML_OUTPUT)
    def check(value: Any) -> None:
        assert dump_yaml(value) == _slow_yaml(value)
    check()
    YAML_KINDS.assert_all_drawn()


def test_dump_yaml_stream_is_byte_identical_to_the_dumper() -> None:
    YAML_KINDS.seen.clear()

    @budget(100, 300)
    @given(st.lists(st.dictionaries(st.one_of(SCALARS, st.text(max_size=4)), YAML_OUTPUT, min_size=1, max_size=4),
                    max_size=3))
    def check(docs: list[Any]) -> None:
        assert dump_yaml_stream(docs) == _slow_yaml_stream(docs)
    check()
    YAML_KINDS.assert_all_drawn()


def _table_strings() -> list[str]:
    quoting = _quoting_tests()
    return sorted(set(WORD_LIST) | set(quoting.TRICKY_VALUES) | set(quoting.PLAIN)) + ["a" * 130, "line\nbreak", "é"]


def test_dump_yaml_table_every_listed_string_as_key_and_value() -> None:
    """Deterministic: each listed word, tricky and plain string, as key, value and list item, nested."""
    for text in _table_strings():
        for value in ({text: text}, {"k": [text, {text: [text]}]}, [text, None, True, 1], {"m": {text: {}}}):
            assert dump_yaml(value) == _slow_yaml(value), repr(value)
            assert dump_yaml_stream([value, {"k": text}]) == _slow_yaml_stream([value, {"k": text}]), repr(value)


def test_dump_yaml_quotes_the_quoting_tests_strings() -> None:
    """Every string family of the quoting rules' strategies, as key and value, in one document."""
    quoting = _quoting_tests()
    quoting.STRING_KINDS.seen.clear()

    @budget(150, 400)
    @given(st.dictionaries(quoting.STRINGS, quoting.STRINGS, max_size=8), st.lists(quoting.STRINGS, max_size=4))
    def check(mapping: dict[str, str], items: list[str]) -> None:
        value = {"mapping": mapping, "items": items, "nested": [{"k": items}, mapping]}
        assert dump_yaml(value) == _slow_yaml(value)
    check()
    quoting.STRING_KINDS.assert_all_drawn()


def test_shared_objects_keep_their_anchors() -> None:
    shared = {"a": "b"}
    value = {"x": shared, "y": shared, "z": [[], []]}
    assert dump_yaml(value) == _slow_yaml(value)
    assert "&id001" in dump_yaml(value)
