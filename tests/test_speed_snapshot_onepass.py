"""The one-call read of a JSON List of bulk kinds, and the item-wise read beside it, give what the
reader before them gave (``json.loads`` + the kind's model, forced by switching the fast
reader off), for the files where they part: bulk kinds only, other kinds last or in the middle, an
item the one call must not type (a foreign group, a refused field, a second ``kind`` key, not an
object), duplicates of one file read twice or from stdin, and mapped files.

``test_speed_snapshot.py`` draws files around every field; these tests pin the choices of the
new readers (which way a file is read, what a mapped file and the quantity cache do), each one
also checked against the old reader.
"""

from __future__ import annotations

import io
import json
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpustack_render.memo import Memo
from gpustack_render.rules import load_rules
from gpustack_render.snapshot import fastjson, inputs, yamlread
from test_speed_snapshot import _load, _load_both, _typed  # the fast reader against the old one

RULES = load_rules(None)
WORKER_GROUP = RULES.vocabulary.workerApiGroup
FAST = fastjson.fast_models_for(inputs.models(WORKER_GROUP))


def _node(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/os": "linux"},
                         "annotations": {"a": "1"}},
            "status": {"capacity": {"cpu": "8", "memory": "64Gi", "pods": "110"}}, **extra}


def _devices(name: str, mode: Any = 1) -> dict[str, Any]:
    return {"apiVersion": f"{WORKER_GROUP}/v1alpha1", "kind": "Devices", "metadata": {"name": name},
            "spec": {"groups": [{"id": "g0", "manufacturer": "nvidia",
                                 "accelerators": [{"id": "GPU-0", "index": 0}]}]},
            "status": {"groups": [{"id": "g0", "manufacturer": "nvidia",
                                   "accelerators": [{"id": "GPU-0", "mode": mode, "allocated": 1}]}]}}


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}, "status": {"phase": "Active"}}
FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"},
          "spec": {"topologyName": "t"}}
LOCAL_QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"clusterQueue": "c"}}


def _list(items: list[Any]) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2).encode()


def _which_way(data: bytes, monkeypatch: pytest.MonkeyPatch) -> str:
    """How :func:`fastjson.read_items` read ``data``: in one call, item by item after the one call
    failed, item by item at once (other kinds near the end: the one call is not tried), or not."""
    calls: list[str] = []
    one_call = fastjson._typed_list

    def counted(data: Any, models: Any) -> Any:
        found = one_call(data, models)
        calls.append("one call" if found is not None else "declined")
        return found

    with monkeypatch.context() as patch:
        patch.setattr(fastjson, "_typed_list", counted)
        items = fastjson.read_items(data, FAST)
    if items is None:
        return "not read"
    return {("one call",): "one call", ("declined",): "item by item", (): "item by item at once"}[tuple(calls)]


BULK = [_node("n1"), _devices("n1"), NAMESPACE, _node("n2")]
MANY = [_node(f"m{index}") for index in range(400)]  # more than the tail the reader looks at


@pytest.mark.parametrize("items, way", [
    (BULK, "one call"),
    (BULK + [FLAVOR, LOCAL_QUEUE], "item by item at once"),  # other kinds last, as `snapshot` writes them
    ([FLAVOR] + BULK, "item by item at once"),  # a small file is all tail
    (BULK[:2] + [FLAVOR] + BULK[2:], "item by item at once"),
    ([FLAVOR] + MANY, "item by item"),  # far from the end: the one call is tried, and fails at once
    (MANY[:200] + [LOCAL_QUEUE] + MANY, "item by item"),
    (BULK[:2] + [_node("n3", apiVersion="apps/v1")] + BULK[2:], "item by item"),  # a foreign group
    (BULK[:2] + [{**_node("n3"), "apiVersion": 5}] + BULK[2:], "item by item"),
    (BULK[:2] + [{**_node("n3"), "apiVersion": ""}] + BULK[2:], "item by item"),
    (BULK[:2] + [{**_node("n3"), "status": {"capacity": {"cpu": "eight"}}}] + BULK[2:], "item by item"),
    (BULK[:2] + [{**_node("n3"), "status": {"capacity": {"cpu": 8}}}] + BULK[2:], "one call"),  # a YAML number
    (BULK[:2] + [None, 5, "x", []] + BULK[2:], "item by item"),  # items that are not objects
    (BULK[:2] + [{"apiVersion": "v1", "kind": "List", "items": [_node("n4")]}] + BULK[2:], "item by item"),
    ([_devices("d1", "Shared"), _devices("d2", 5)], "one call"),  # a mode by name, converted
    ([_devices("d1", 6)], "item by item"),  # out of range: refused, and worded from the plain item
    ([_devices("d1", True)], "item by item"),
    ([], "one call"),
])
def test_lists_read_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, items: list[Any], way: str) -> None:
    path = tmp_path / "snap.json"
    path.write_bytes(_list(items))
    assert _which_way(path.read_bytes(), monkeypatch) == way
    fast, old = _load_both([str(path)], monkeypatch)
    assert fast == old


def test_the_one_call_types_every_item_as_the_item_wise_read(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _list(BULK + [_devices("d1", "sliced")])
    one_call = fastjson.read_items(data, FAST)
    with monkeypatch.context() as patch:
        patch.setattr(fastjson, "_typed_list", lambda data, models: None)
        item_wise = fastjson.read_items(data, FAST)
    assert one_call == item_wise and one_call is not None
    assert [type(item) for item in one_call] == [inputs.Node, inputs.Devices, inputs.Namespace,
                                                 inputs.Node, inputs.Devices]
    assert one_call[0].status.capacity == {"cpu": Fraction(8), "memory": Fraction(64 << 30), "pods": Fraction(110)}
    assert one_call[-1].status.groups[0].accelerators[0].mode == 3


def test_without_fast_models_every_item_is_plain() -> None:
    """``fast_models`` decides what is typed; the one call's structs are not handed on without it."""
    data = _list(BULK)
    assert fastjson.read_items(data, lambda group, kind: None) == json.loads(data)["items"]
    assert fastjson.read_list(json.dumps(BULK).encode(), lambda group, kind: None) == BULK


@pytest.mark.parametrize("text", [
    # a second kind key: json.loads keeps the last; the union must not type it as the first
    b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n9"}, "kind": "Node"}',
    b'{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n9"}, "kind": "Pod"}',
    b'{"kind": "Node", "metadata": {"name": "n9"}, "apiVersion": "v1", "apiVersion": "apps/v1"}',
    b'{"kind": "Node", "metadata": {"name": "n9"}, "apiVersion": "apps/v1", "apiVersion": "v1"}',
    b'{"apiVersion": "v1", "metadata": {"name": "n9"}}',  # no kind
])
def test_duplicate_and_missing_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes) -> None:
    data = b'{"apiVersion": "v1", "kind": "List", "items": [' + json.dumps(_node("n1")).encode() + b", " \
        + text + b"]}"
    path = tmp_path / "snap.json"
    path.write_bytes(data)
    fast, old = _load_both([str(path)], monkeypatch)
    assert fast == old
    items = fastjson.read_items(data, FAST)
    assert items is not None
    plain = json.loads(text)
    typed = plain.get("kind") == "Node" and plain.get("apiVersion") == "v1" and text.count(b'"kind"') == 1
    assert isinstance(items[1], fastjson.TYPED) is typed
    if not typed:
        assert items[1] == plain


@pytest.mark.parametrize("doc", [_node("n1"), {"apiVersion": "v1", "kind": "List", "items": BULK}])
def test_a_file_read_twice_is_the_same_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, doc: Any) -> None:
    """A duplicate identity compares the texts read again; a file that is one object is its whole
    (mapped) text. Found by differential fuzzing: a mapped whole file once compared as unequal."""
    path = tmp_path / "snap.json"
    path.write_bytes(json.dumps(doc, indent=4).encode())
    fast, old = _load_both([str(path), str(path)], monkeypatch)
    assert fast == old and not isinstance(fast, tuple) and "n1" in fast.nodes
    changed = tmp_path / "other.json"
    changed.write_bytes(json.dumps(_node("n1", spec={"unschedulable": True})).encode())
    fast, old = _load_both([str(path), str(changed)], monkeypatch)
    assert fast == old and isinstance(fast, tuple)
    assert f"{changed}: Node/n1: conflicts with a different object of the same identity in {path}" in fast[1]


def test_stdin_duplicates_read_the_kept_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stdin cannot be read again: its bytes are kept for a duplicate's text."""
    path = tmp_path / "snap.json"
    path.write_bytes(_list([_node("n1"), NAMESPACE]))
    text = _list([_node("n1", spec={"x": 1}), NAMESPACE])
    results = []
    for fast in (True, False):
        with monkeypatch.context() as patch:
            patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
            if not fast:
                patch.setattr(fastjson, "read_items", lambda data, models: None)
            results.append(_load(["-", str(path)]))
    assert results[0] == results[1]
    assert results[0] == ("error", f"error: {path}: Node/n1: conflicts with a different object of the same "
                                   f"identity in <stdin>")


def test_snapshot_files_are_mapped_and_read_alike(tmp_path: Path) -> None:
    json_file = tmp_path / "a.json"
    json_file.write_bytes(b"  \n" + _list(BULK))
    mapped = fastjson.map_file(json_file)
    assert mapped is not None and bytes(mapped) == json_file.read_bytes()
    assert fastjson.read_items(mapped, FAST) == fastjson.read_items(json_file.read_bytes(), FAST)
    yaml_file = tmp_path / "b.yaml"
    yaml_file.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n"
                         "  metadata:\n    name: ns\n")
    mapped = fastjson.map_file(yaml_file)
    assert mapped is not None and fastjson.read_items(mapped, FAST) is None
    by_map, by_bytes = yamlread.read_items(mapped, FAST), yamlread.read_items(yaml_file.read_bytes(), FAST)
    assert by_map is not None and by_map == by_bytes
    (tmp_path / "c.json").write_bytes(b"")
    assert fastjson.map_file(tmp_path / "c.json") is None
    assert fastjson.map_file(tmp_path) is None  # a directory: not mapped (the caller reports it)


@pytest.mark.parametrize("run", [1, 2, 3, 7])
def test_utf8_of_a_mapping_is_checked_across_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: int) -> None:
    """A mapping is checked a run at a time: a character cut by a run's end is still valid, a bad
    byte in any run is found, as ``bytes.decode`` says."""
    monkeypatch.setattr(fastjson, "_ASCII_RUN", run)
    for text, valid in ((b'{"a": "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"}', True), (b'{"a": "ok", "b": "\xff"}', False),
                        (b'{"a": "\xc3"}', False), (b'{"a": "ascii only"}', True)):
        path = tmp_path / "t.json"
        path.write_bytes(text)
        mapped = fastjson.map_file(path)
        assert mapped is not None and fastjson.is_utf8(mapped) is valid is fastjson.is_utf8(text)
        mapped.close()


def test_the_quantity_cache_keeps_no_refusal_and_stays_bounded() -> None:
    cache = Memo(inputs._quantity_text, 4)
    for _ in range(2):
        with pytest.raises(ValueError):
            cache["eight"]
    assert "eight" not in cache
    for index in range(10):
        assert cache[f"{index}Ki"] == Fraction(index * 1024)
        assert len(cache) <= 4
    assert cache["1.5"] == Fraction(3, 2) and cache["500m"] == Fraction(1, 2)


def test_read_list_types_a_run_in_one_call_or_item_by_item() -> None:
    """yamlread hands runs of a List's items to read_list: the same items either way."""
    bulk = json.dumps(BULK).encode()
    mixed = json.dumps(BULK + [FLAVOR]).encode()
    typed = fastjson.read_list(bulk, FAST)
    assert typed is not None and all(isinstance(item, fastjson.TYPED) for item in typed)
    found = fastjson.read_list(mixed, FAST)
    assert found is not None and found[:-1] == typed and found[-1] == FLAVOR
    assert fastjson.read_list(b"[1, ", FAST) is None
    assert fastjson.read_list(b'{"a": 1}', FAST) is None


def test_a_typed_object_keeps_its_api_version_and_equals_the_slow_paths() -> None:
    """The structs carry apiVersion (its group decides the kind); msgspec.convert of the dict the
    slow path reads gives the same struct, so Snapshots compare equal whichever way was taken."""
    node = _node("n1")
    decoded = msgspec.json.decode(json.dumps(node).encode(), type=inputs.Node)
    assert decoded == msgspec.convert(node, inputs.Node) and decoded.apiVersion == "v1"


# --- items of other kinds: msgspec's untyped decode stands in for json.loads ---------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _outcome(read: Any, text: bytes) -> Any:
    try:
        return _typed(read(text))
    except (ValueError, RecursionError) as err:
        return ("refused", type(err).__name__)


@pytest.mark.parametrize("text", [
    b"-0", b"-0.0", b"0e0", b"1E+2", b"1e-7", b"0.1000000000000000055511151231257827", b"1e-400", b"5e-324",
    b"2.2250738585072011e-308", b"1.7976931348623157e308", b"1.7976931348623159e308", b"-1e400",
    b"123456789012345678901234567890", b"-9223372036854775809", b"18446744073709551616",
    b"123456789012345678901234567890.5", b"1" + b"0" * 5000, b"NaN", b"[Infinity, -Infinity]",
    b'{"a": 1, "b": 2, "a": 3}', b'"\\u0000\\ud83d\\ude00\\u00e9\\/"', b'"\\ud800"', b'{"k": "\\udc00x"}',
    b'{"a": [1, {"b": null, "c": true, "d": false}], "e": ""}', b"[" * 400 + b"]" * 400,
    b"[" * 600 + b"]" * 600, b"[" * 2000 + b"]" * 2000, "é ü €".encode(),
])
def test_plain_reads_as_json_loads(text: bytes) -> None:
    assert _outcome(fastjson.plain, text) == _outcome(json.loads, text)


@settings(max_examples=300, deadline=None)
@given(number=st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                        st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
                        st.integers().map(str)))
def test_plain_reads_numbers_as_json_loads(number: str) -> None:
    text = ('{"n": ' + number + ', "l": [' + number + "]}").encode()
    assert _outcome(fastjson.plain, text) == _outcome(json.loads, text)


def test_plain_refuses_nesting_where_json_loads_does() -> None:
    """msgspec nests a few levels deeper than json.loads before it refuses: at the first depth
    json.loads refuses (found here, called through one frame as plain calls it), plain must refuse
    too."""
    def through_a_frame(text: bytes) -> Any:
        return json.loads(text)

    def refuses(read: Any, depth: int) -> bool:
        try:
            read(b"[" * depth + b"]" * depth)
        except RecursionError:
            return True
        return False

    depth = 100
    while not refuses(through_a_frame, depth):
        depth += 1
    assert refuses(fastjson.plain, depth) and not refuses(fastjson.plain, depth - 50)
