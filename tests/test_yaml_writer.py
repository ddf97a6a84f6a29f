"""The one YAML writer (``yamlio.dump_yaml`` / ``dump_yaml_stream``) against libyaml's dumper.

The block emitter writes every document itself, asking libyaml only for a scalar's text; libyaml's
own ``dump_all`` with :class:`StreamDumper` (what the tool wrote before the emitter, and for the
documents it declined until issue 22) is kept here as the test oracle, never as a code path. The
cases are the ones the emitter used to hand over whole: floats, multi-line strings (every libyaml
line break), long and multi-line keys, keys that are not strings, shared objects (anchors and
aliases, an object inside itself), sets, dates, bytes, and roots that are a list or a scalar.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_render import yamlio
from gpustack_render.yamlio import StreamDumper, dump_json, dump_yaml, dump_yaml_stream, has_float


def oracle_stream(docs: list[Any]) -> str:
    return yaml.dump_all(docs, Dumper=StreamDumper, sort_keys=False, explicit_start=True,
                         default_flow_style=False, allow_unicode=True, width=1 << 20)


def oracle(doc: Any) -> str:
    return yaml.dump(doc, Dumper=StreamDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 20)


def same(*docs: Any) -> None:
    for doc in docs:
        assert dump_yaml(doc) == oracle(doc), repr(doc)
    assert dump_yaml_stream(list(docs)) == oracle_stream(list(docs)), repr(docs)


BREAKS = ["a\nb", "a\n\nb", "\n", "x\n", " lead\nx", "tail \nx", "a\u2028b", "\u2028", "a\u2029b", "a\x85b",
          "a\r\nb", "a\rb", "x\u2028\ny", "é\nü", "a\tb\nc", "'\n'", '"\n"']


def test_multi_line_strings_at_every_depth_and_place() -> None:
    for text in BREAKS:
        same({"k": text}, {"a": {"b": {"k": text}}}, {"a": [text, [text, {"k": [text]}]]}, [text], text,
             {"a": {"labels": {"k1": text, "k2": "v", "k3": "w", "k4": "x"}}})


def test_floats_and_other_scalars() -> None:
    floats = [1.5, 0.0, -0.0, 1e20, 1e-7, 3.0, math.inf, -math.inf, math.nan, 1e16, 123456789.125]
    same({"f": floats, "g": {"x": 2.5}}, *floats)
    same({"d": datetime.date(2020, 1, 2), "t": datetime.datetime(2020, 1, 2, 3, 4, 5, 6),
          "z": datetime.datetime(2020, 1, 2, tzinfo=datetime.timezone.utc)},
         {"b": b"\x00\x01binary" * 20, "n": {"b": [b"x"]}}, b"root bytes", datetime.date(1999, 12, 31),
         {"big": 1 << 80, "neg": -3, "t": True, "f": False, "none": None}, None, 7, True, "", "plain", "yes")


def test_long_multi_line_and_non_string_keys() -> None:
    long = "k" * 130
    same({long: 1}, {long: {"a": 1, "b": [2]}}, {"a": {long: [1, {"x": 2}]}}, {long: "v\nw"},
         {"k\nj": 1, "k": 2}, {"é" * 50: 1}, {1: "a", None: "b", 2.5: "c", True: "d", "": "e"},
         {(1, 2): "tuple key", (): "empty", "x": {(3,): [4]}}, [{long: {long: long}}],
         {datetime.date(2020, 1, 1): 1})


def test_sets_tuples_and_empty_collections() -> None:
    same({"s": {1, 2}, "e": set(), "t": (1, (2, 3)), "u": ()}, {1, 2}, set(), [set(), {3}, [{4}]], (1, 2),
         {"a": {}, "b": [], "c": [{}, [], [[]], {"d": {}}]}, [], {})


def test_shared_objects_get_the_dumpers_anchors() -> None:
    shared = {"a": "b"}
    items = [1, 2]
    day = datetime.date(2020, 1, 1)
    empty: dict[str, Any] = {}
    doc = {"p": shared, "q": [items, shared, items], "r": {"s": shared, "e": empty, "f": [empty, empty]},
           "d": day, day: day}
    same(doc, [shared, shared], {"x": [items], "y": items}, [doc, doc], {"l": [[items, items]]})
    assert "&id001" in dump_yaml(doc) and "*id002" in dump_yaml(doc)
    # anchors are named by the order their second use is met: here the list's before the mapping's
    later = {"first": shared, "then": [items, items], "again": shared}
    same(later)
    # after a long key's ? or :, an anchored sequence is not indented; a tuple key met again is an alias
    pair, long = (1, 2), "k" * 130
    same({long: items, "x": items}, {pair: 0, "x": [pair], "y": {pair: pair}}, {long: [items, items]},
         [{long: shared, "b": shared}], {"a": {long: [[items, items]]}})
    # shared across documents only: no anchors
    assert "&" not in dump_yaml_stream([{"a": shared}, {"a": shared}])
    same({"a": shared}, {"b": shared})


def test_an_object_inside_itself() -> None:
    node: dict[str, Any] = {"name": "a"}
    node["self"] = node
    loop: list[Any] = []
    loop.append(loop)
    same(node, loop, {"x": loop}, [node])


def test_unwritable_values_raise_what_the_dumper_raises() -> None:
    class Text(str):
        pass
    for value in ({"k": object()}, {"k": frozenset({1})}, {"k": Text("x")}, [Text("x")]):
        try:
            oracle(value)
        except yaml.YAMLError as err:
            expected: type[Exception] = type(err)
        else:  # pragma: no cover - the oracle writes it: so must we
            assert dump_yaml(value) == oracle(value)
            continue
        try:
            dump_yaml(value)
        except yaml.YAMLError as err:
            assert type(err) is expected
        else:
            raise AssertionError(f"{value!r} was written")


def test_deep_nesting_raises_recursion_error() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = {"k": deep}
    try:
        dump_yaml(deep)
    except RecursionError:
        pass
    else:
        raise AssertionError("no RecursionError")


def test_shapes_the_writers_were_not_generated_from() -> None:
    """Generated writers are per key sequence: kinds that share top-level keys, values of another type
    than the example's (a collection where a string was, a labels block that is not one), all by
    the same writer, every object from its own content."""
    base = {"apiVersion": "v1", "kind": "K", "metadata": {"name": "a", "labels": {"a": "1", "b": "2", "c": "3",
                                                                                  "d": "4"}}, "spec": {"x": "y"}}
    variants = [base,
                {**base, "metadata": {"name": "b", "annotations": {"n": "x\ny"}}},
                {**base, "metadata": {"name": ["list"], "labels": {"a": 1, "b": 2.5, "c": None, "d": True}}},
                {**base, "metadata": {"name": "c", "labels": {}}},
                {**base, "metadata": {"name": "d", "labels": "text"}},
                {**base, "metadata": {"name": "e", "labels": ["x"]}},
                {**base, "metadata": {"name": "f", "labels": {"a": "1", "b": "2", "c": "3", "d": {"e": "f"}}}},
                {**base, "kind": {"nested": 1}, "spec": {"x": (1, 2)}},
                {**base, "kind": datetime.date(2020, 1, 1)},
                {**base, "spec": {"x": {"k" * 130: "long"}}},
                {**base, "spec": {"x": math.nan}}]
    same(*variants)
    same(*reversed(variants))
    # a document written in one step by its writer, then one of its shape holding a mapping twice
    inner = {"k": "1"}
    labels = {"a": "1", "b": "2", "c": "3", "d": "4"}
    same({"a": {"k": "1"}, "b": {"k": "1"}}, {"a": inner, "b": inner}, {"a": {"k": "1"}, "b": {"k": "1"}},
         {"l": dict(labels), "m": dict(labels)}, {"l": labels, "m": labels}, {"a": inner, "b": {"k": inner}})
    assert "&id001" in dump_yaml_stream([{"a": {"k": "1"}, "b": {"k": "1"}}, {"a": inner, "b": inner}])
    for _ in range(3):  # each writer kept, moved first or generated again: the text never changes
        assert dump_yaml_stream(variants) == oracle_stream(variants)


def test_libyaml_is_asked_for_scalars_only(monkeypatch: Any) -> None:
    """One writer: libyaml writes a scalar (in a one-entry probe mapping, or a scalar document), never
    a document of ours, whatever it holds."""
    asked: list[Any] = []
    real_dump, real_dump_all = yaml.dump, yaml.dump_all

    def dump(data: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(data)
        return real_dump(data, *args, **kwargs)

    def dump_all(documents: Any, *args: Any, **kwargs: Any) -> Any:
        asked.extend(documents)
        return real_dump_all(documents, *args, **kwargs)

    monkeypatch.setattr(yaml, "dump", dump)
    monkeypatch.setattr(yaml, "dump_all", dump_all)
    shared = {"a": "b"}
    docs = [{"weight": 1.5, "when": datetime.date(2020, 1, 1), "text": "a\nb", "k" * 130: [1.5], "p": shared,
             "q": shared, "s": {1}}, [1.25, {"x": 2.5}], "scalar", 3.5]
    text = dump_yaml_stream(docs)
    monkeypatch.undo()
    assert text == oracle_stream(docs)
    collections = (dict, list, tuple, set)
    for data in asked:
        inner = list(data.items())[0] if type(data) is dict and len(data) == 1 else (None, data)
        assert not any(type(part) in collections for part in inner), f"libyaml wrote {data!r}"


SCALARS = st.one_of(st.text(max_size=6), st.sampled_from(BREAKS + ["k" * 130, "yes", "1e3", "~", "- x", "null"]),
                    st.integers(), st.floats(), st.booleans(), st.none(),
                    st.dates(), st.binary(max_size=8))
KEYS = st.one_of(st.text(max_size=4), st.sampled_from(["k" * 130, "a\nb", "on"]), st.integers(), st.none())


def _values() -> st.SearchStrategy[Any]:
    return st.recursive(SCALARS, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=4),
        st.tuples(inner, inner), st.frozensets(st.integers(), max_size=2).map(set)), max_leaves=14)


@settings(max_examples=300, deadline=None)
@given(st.lists(_values(), max_size=3), st.booleans(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
def test_random_documents_match_the_dumper(docs: list[Any], share: bool, inner: dict[str, int]) -> None:
    if share:  # an object shared inside a document
        docs.append({"a": inner, "b": [inner, {"c": inner}]})
    assert dump_yaml_stream(docs) == oracle_stream(docs)
    for doc in docs:
        assert dump_yaml(doc) == oracle(doc)


# --- JSON: one writer (orjson), byte-identical to json.dumps(indent=2, ensure_ascii=False) ----------

def json_oracle(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


class Text(str):
    pass


class Number(int):
    pass


class Real(float):
    pass


class Mapping(dict):  # type: ignore[type-arg]
    pass


def test_json_values_orjson_writes_otherwise() -> None:
    values: list[Any] = [
        {"f": [1.5, 1e16, 1e-7, 0.0, -0.0, math.nan, math.inf, -math.inf, 123456789.125]},
        {"big": [1 << 64, -(1 << 63) - 1, 1 << 63, (1 << 63) - 1, -(1 << 63), 10 ** 30]},
        {1: "int key", None: "null key", True: "bool key", 2.5: "float key", 1e16: "e", "s": {3: [4]}},
        {"sub": [Text("t"), Number(7), Real(2.5), Mapping(a=Text("b")), (1, 2.5)], Text("k"): Mapping()},
        [], {}, "plain", 1.5, 1 << 70, None, [{"a": [[{"b": 1.0}]]}],
        {"true": None, True: None, "k": [{"1": 1, 1: {"x": [1.5]}}]},  # keys json writes twice
    ]
    for value in values:
        assert dump_json(value) == json_oracle(value), repr(value)
    assert dump_json({"a": 1 << 70, 5: "x"}, floats=False) == json_oracle({"a": 1 << 70, 5: "x"})
    for bad in ({"k": object()}, {(1, 2): "tuple key"}, {"k": {1, 2}}):
        try:
            json_oracle(bad)
        except TypeError:
            pass
        else:  # pragma: no cover
            raise AssertionError(repr(bad))
        try:
            dump_json(bad)
        except TypeError:
            continue
        raise AssertionError(f"{bad!r} was written")


def test_json_has_one_writer(monkeypatch: Any) -> None:
    """The stdlib's encoder is never asked: a float, a big int or an int key is written by orjson."""
    def refuse(*_args: Any, **_kwargs: Any) -> str:
        raise AssertionError("json.dumps called")
    value = {"f": 1e16, "i": 1 << 70, 3: "int key", "n": math.nan}
    expected = json_oracle(value)
    monkeypatch.setattr(json, "dumps", refuse)
    assert dump_json(value) == expected


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(st.text(max_size=4), st.integers(), st.booleans(), st.none(),
                                                      st.floats(allow_nan=False)), inner, max_size=3)),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_random_json_matches_the_stdlib(value: Any) -> None:
    expected = json_oracle(value)
    assert dump_json(value) == expected
    if not has_float(value):  # the caller's word that there is none
        assert dump_json(value, floats=False) == expected
