"""The fast snapshot readers give exactly what the readers before them gave.

JSON snapshot files are decoded from bytes by msgspec, the bulk kinds (Node, Devices, Namespace)
straight into their typed structs (``snapshot/fastjson.py``). These tests load the same files
through that path and through the old one (``json.loads`` + the kind's model, forced by
switching the fast reader off) and require the same Snapshot, or the same error messages, for
drawn objects around every way the fast path can differ: wrong types, coercions msgspec does
not do, missing names, duplicates (equal and different, formatted differently), foreign kinds,
nested Lists, and bytes json.loads and msgspec read differently (bad UTF-8 where msgspec does not
look, NaN, lone surrogates, duplicate keys).
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpustack_render.errors import UserError
from gpustack_render.k8s import QuantityError, parse_quantity
from gpustack_render.rules import load_rules
from gpustack_render.snapshot import fastjson, inputs, load_snapshot, yamlread

RULES = load_rules(None)
WORKER_GROUP = RULES.vocabulary.workerApiGroup
SETTINGS_NS, SETTINGS_NAME = RULES.settings.source


def _load(paths: list[str]) -> Any:
    """The Snapshot, or the exact error text."""
    try:
        snap = load_snapshot(paths, RULES.settings.source, WORKER_GROUP)
    except UserError as err:
        return ("error", str(err))
    return snap


def _load_both(paths: list[str], monkeypatch: pytest.MonkeyPatch, fast_reader: Any = fastjson) -> tuple[Any, Any]:
    """(fast, old) results of loading ``paths``: old with ``fast_reader`` (fastjson or yamlread)
    declining every file (yamlread: its text path too, so that libyaml reads every YAML file)."""
    yamlread._COMPOSED.clear()
    fast = _load(paths)
    with monkeypatch.context() as patch:
        patch.setattr(fast_reader, "read_items", lambda data, models: None)
        if fast_reader is yamlread:
            patch.setattr(yamlread, "_rapid_documents", lambda text: None)
        yamlread._COMPOSED.clear()
        old = _load(paths)
    return fast, old


def _used_fast(path: Path) -> bool:
    data = path.read_bytes()
    return fastjson.read_items(data, fastjson.fast_models_for(inputs.models(WORKER_GROUP))) is not None


# --- drawn objects ---------------------------------------------------------------------------------

def _mostly(valid: Any, invalid: Any) -> Any:
    """``valid`` about nine times in ten: most drawn files must be read, not refused."""
    return st.integers(0, 9).flatmap(lambda roll: invalid if roll == 0 else valid)


LABEL_VALUES = _mostly(st.sampled_from(["true", "8", "", "x", "Exists", "a b"]),
                       st.one_of(st.integers(-3, 10**20), st.booleans(), st.none(),
                                 st.floats(allow_nan=False, allow_infinity=False, width=32),
                                 st.lists(st.just("x"), max_size=1)))
QUANTITIES = _mostly(st.sampled_from(["8", "0", "110", "1844435235Ki", "64Gi", "3200k", "1.5", "500m", "012",
                                      "8Ki", "1e3"]),
                     st.one_of(st.sampled_from(["eight", "", "-1", "1Ki ", "9" * 30]), st.integers(-2, 10**19),
                               st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False, width=32)))
NAMES = _mostly(st.sampled_from(["node-a", "node-b", "gpu-1", "gpu-2", "gpu-3", "cpu-1", "cpu-2", "cpu-3"]),
                st.sampled_from(["", None, 7]))
INTS = _mostly(st.integers(0, 6), st.one_of(st.integers(-1, 6), st.booleans(), st.sampled_from([1.0, "2", None,
                                                                                                  10**20])))


@st.composite
def metadata(draw: Any) -> Any:
    meta: dict[str, Any] = {}
    name = draw(NAMES)
    if draw(st.integers(0, 30)):
        meta["name"] = name
    if draw(st.booleans()):
        meta["labels"] = draw(st.dictionaries(st.sampled_from(["a", "b/c", "kubernetes.io/os"]), LABEL_VALUES,
                                              max_size=3))
    if draw(st.integers(0, 3)) == 0:
        meta["annotations"] = draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(["n", "m"]), LABEL_VALUES,
                                                                         max_size=2)))
    if draw(st.integers(0, 5)) == 0:
        meta["deletionTimestamp"] = draw(st.sampled_from(["2024-01-01T00:00:00Z", None, 0]))
    if draw(st.integers(0, 6)) == 0:
        meta["namespace"] = draw(_mostly(st.sampled_from(["", "ns"]), st.just(3)))
    if draw(st.integers(0, 40)) == 0:
        return draw(st.sampled_from([None, "x", [], 5]))
    return meta


@st.composite
def node(draw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": draw(metadata())}
    shape = draw(st.integers(0, 6))
    if shape:
        capacity = draw(_mostly(st.dictionaries(st.sampled_from(["cpu", "memory", "x/y"]), QUANTITIES, max_size=3),
                                st.none()))
        obj["status"] = {"capacity": capacity, "nodeInfo": {"architecture": "amd64"}}
    elif draw(st.integers(0, 3)) == 0:
        obj["status"] = draw(st.sampled_from([None, [], "x"]))
    if draw(st.integers(0, 8)) == 0:
        obj["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}], "big": 10**30, "f": 1.5e300}
    return obj


@st.composite
def devices(draw: Any) -> dict[str, Any]:
    accelerator = st.fixed_dictionaries({"id": _mostly(st.just("GPU-0"), st.sampled_from(["", 3])), "index": INTS},
                                        optional={"status": st.fixed_dictionaries(
                                            {}, optional={"logicalSliced": st.fixed_dictionaries(
                                                {"count": INTS, "coresPercentageOvercommit": _mostly(
                                                    st.booleans(), st.sampled_from([1, None]))})})})
    group = st.fixed_dictionaries({"id": _mostly(st.sampled_from(["g0", "g1"]), st.just("")),
                                   "manufacturer": _mostly(st.sampled_from(["nvidia", "amd"]),
                                                           st.sampled_from(["", None]))},
                                  optional={"accelerators": st.lists(accelerator, max_size=2),
                                            "name": _mostly(st.just("A100"), st.just(5))})
    ledger_acc = st.fixed_dictionaries({"id": st.sampled_from(["GPU-0", "GPU-1"])}, optional={
        "mode": _mostly(st.sampled_from([0, 1, 4, 5, "Shared", "sliced"]), st.sampled_from([9, "bogus", True, None])),
        "allocated": INTS,
        "remaining": INTS, "allocatedProfiles": st.lists(st.fixed_dictionaries({"name": st.just("1g"),
                                                                                "count": INTS}), max_size=1)})
    ledger = st.fixed_dictionaries({"id": st.just("g0"), "manufacturer": st.just("nvidia")},
                                   optional={"accelerators": st.lists(ledger_acc, max_size=2)})
    obj: dict[str, Any] = {"apiVersion": f"{WORKER_GROUP}/v1", "kind": "Devices", "metadata": draw(metadata())}
    if draw(st.booleans()):
        obj["spec"] = {"groups": draw(st.lists(group, max_size=2))}
    if draw(st.booleans()):
        obj["status"] = {"groups": draw(st.lists(ledger, max_size=2))}
    return obj


@st.composite
def namespace(draw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": draw(metadata())}
    if draw(st.booleans()):
        obj["status"] = {"phase": draw(_mostly(st.sampled_from(["Active", "Terminating"]), st.sampled_from([3, None])))}
    return obj


@st.composite
def other(draw: Any) -> Any:
    """Kinds the fast reader hands back as dicts, and items that are not objects."""
    choice = draw(st.integers(0, 8))
    if choice == 0:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": SETTINGS_NAME, "namespace": SETTINGS_NS},
                "data": draw(st.dictionaries(st.sampled_from(["maxFlavorsPerGroup", "other"]), LABEL_VALUES,
                                             max_size=2))}
    if choice == 1:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": draw(metadata())}
    if choice == 2:
        return {"apiVersion": "v1", "kind": "NodeList", "items": draw(st.lists(node(), max_size=2))}
    if choice == 3 and draw(st.booleans()):
        return draw(st.sampled_from([None, "text", 5, []]))
    if choice == 4 and draw(st.booleans()):  # kind or apiVersion missing or of another type
        obj = draw(node())
        obj[draw(st.sampled_from(["apiVersion", "kind"]))] = draw(st.sampled_from([None, "", 5, ["Node"]]))
        return obj
    if choice == 5:
        return {"apiVersion": "v1beta1", "kind": "Node", "metadata": {"name": "node-a"}}  # the same identity
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
            "metadata": draw(metadata()), "spec": {"topologyName": "t"}}


OBJECTS = st.one_of(node(), node(), devices(), namespace(), other())


def _dump(value: Any, style: int) -> str:
    if style == 0:
        return json.dumps(value, indent=2)
    if style == 1:
        return json.dumps(value, separators=(",", ":"))
    return json.dumps(value, indent=4, sort_keys=True, ensure_ascii=False)


@st.composite
def files(draw: Any) -> list[str]:
    """The texts of one to three snapshot files: Lists, single objects, each formatted its way."""
    texts = []
    for _ in range(draw(st.integers(1, 3))):
        items = draw(st.lists(OBJECTS, max_size=5))
        if draw(st.integers(0, 4)) == 0 and items:
            doc: Any = items[0]  # one object alone
        else:
            doc = {"apiVersion": "v1", "kind": draw(st.sampled_from(["List", "List", "NodeList"])), "items": items,
                   "metadata": {"resourceVersion": ""}}
            if draw(st.integers(0, 30)) == 0:
                doc["items"] = draw(st.sampled_from([None, {"a": 1}, "x"]))
        texts.append(_dump(doc, draw(st.integers(0, 2))))
    return texts


def _write(tmp: Path, texts: list[str], suffix: str = ".json") -> list[str]:
    paths = []
    for index, text in enumerate(texts):
        path = tmp / f"f{index}{suffix}"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    return paths


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(texts=files())
def test_fast_json_reads_as_before(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                                   texts: list[str]) -> None:
    paths = _write(tmp_path_factory.mktemp("snap"), texts)
    fast, old = _load_both(paths, monkeypatch)
    event("refused" if isinstance(fast, tuple) else f"read, {min(len(fast.nodes), 2)}+ Nodes")
    assert fast == old


def test_the_drawn_files_take_the_fast_path(tmp_path: Path) -> None:
    """The property above compares something: a List of typed kinds is read by the fast reader,
    its Nodes arrive typed, and the bench snapshot's shape (a kubectl List) is what it reads."""
    doc = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}},
         "status": {"capacity": {"cpu": "8", "memory": "64Gi"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    items = fastjson.read_items(path.read_bytes(), fastjson.fast_models_for(inputs.models(WORKER_GROUP)))
    assert items is not None and all(isinstance(item, fastjson.TYPED) for item in items)
    snap = load_snapshot([str(path)], RULES.settings.source, WORKER_GROUP)
    assert isinstance(snap.nodes["n1"], inputs.Node)
    assert snap.nodes["n1"].status.capacity == {"cpu": Fraction(8), "memory": Fraction(64 << 30)}
    assert snap.namespaces == ["ns"] and snap.files[("Node", "n1")] == str(path)


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}},
        "status": {"capacity": {"cpu": "8"}}}


def _list_text(items: list[Any], **dump: Any) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, **dump)


@pytest.mark.parametrize("text, fast", [
    # bad UTF-8 in a field msgspec skips: json.loads's reader refused the file; still refused
    (_list_text([{**NODE, "spec": {"x": "@@"}}]).encode().replace(b"@@", b"\xff\xfe"), False),
    (_list_text([{**NODE, "spec": {"x": float("nan")}}]).encode(), False),  # NaN: json.loads only
    (_list_text([{**NODE, "spec": {"x": "\ud800"}}]).encode(), False),  # a lone surrogate escape
    (_list_text([NODE]).encode() + b" x", False),  # trailing garbage
    (b"\xef\xbb\xbf" + _list_text([NODE]).encode(), False),  # a BOM: not JSON to either reader
    (_list_text([NODE]).encode().replace(b'"cpu": "8"', b'"cpu": "8", "cpu": "9"'), True),  # last key wins
    (_list_text([NODE]).encode().replace(b'"name": "n1"', b'"name": "n0", "name": "n1"'), True),
    (_list_text([NODE, NODE]).encode(), True),  # the same object twice
    (_list_text([NODE, json.loads(json.dumps(NODE).replace('"8"', '"9"'))]).encode(), True),  # a conflict
    (("[" + json.dumps(NODE) + "]").encode(), False),  # a top-level array
    (json.dumps(NODE, indent=3).encode(), True),  # one object alone
    (_list_text([{**NODE, "metadata": {"name": "é-ü", "labels": {"a": "ü"}}}], ensure_ascii=False).encode(), True),
    (_list_text([NODE]).encode().replace(b"\n", b"\r\n"), True),
])
def test_json_edge_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes, fast: bool) -> None:
    for suffix in (".json", ".yaml"):
        path = tmp_path / f"snap{suffix}"
        path.write_bytes(text)
        assert _used_fast(path) is fast
        result, old = _load_both([str(path)], monkeypatch)
        assert result == old


def test_duplicates_formatted_differently_are_the_same_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raw texts differ but the objects are equal (key order, spacing, 1 and 1.0): no conflict; a
    real difference is a conflict naming the first file, as before."""
    first = tmp_path / "a.json"
    second = tmp_path / "b.json"
    third = tmp_path / "c.json"
    node = {**NODE, "spec": {"n": 1}}
    first.write_text(_list_text([node]), encoding="utf-8")
    second.write_text(_list_text([{**node, "spec": {"n": 1.0}}], indent=1, sort_keys=True), encoding="utf-8")
    third.write_text(_list_text([{**node, "spec": {"n": 2}}]), encoding="utf-8")
    fast, old = _load_both([str(first), str(second)], monkeypatch)
    assert fast == old and not isinstance(fast, tuple)
    fast, old = _load_both([str(first), str(third)], monkeypatch)
    assert fast == old
    assert isinstance(fast, tuple) and f"{third}: Node/n1: conflicts with a different object of the same identity " \
        f"in {first}" in fast[1]


def test_typed_errors_keep_their_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Node its model refuses is worded from the plain item, with its line, as before."""
    bad = json.loads(json.dumps(NODE))
    bad["status"]["capacity"]["cpu"] = "eight"
    path = tmp_path / "nodes.json"
    path.write_text(_list_text([NODE, {**bad, "metadata": {"name": "n2"}}], indent=2), encoding="utf-8")
    fast, old = _load_both([str(path)], monkeypatch)
    assert fast == old
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "eight" in text)
    assert fast == ("error", f'error: {path}:{line}: Node/n2: status.capacity.cpu: "eight" is not a '
                             f'valid quantity')


def test_stdin_json(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    text = _list_text([NODE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    fast = _load(["-"])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    monkeypatch.setattr(fastjson, "read_items", lambda data, models: None)
    old = _load(["-"])
    assert fast == old and isinstance(fast.nodes["n1"], inputs.Node)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.from_regex(r"[0-9]{1,22}(Ki|Mi|Gi|Ti|Pi|Ei|K|k|M|i|)", fullmatch=True),
                      st.text(alphabet="0123456789KMGTPEim.+-e ٣²", max_size=8)))
def test_quantity_shortcut_is_parse_quantity(text: str) -> None:
    inputs._QUANTITIES.clear()
    try:
        expected: Any = parse_quantity(text)
    except QuantityError as err:
        expected = ("error", str(err))
    try:
        got: Any = inputs._QUANTITIES[text]
    except ValueError as err:
        got = ("error", str(err))
    assert got == expected and type(got) is type(expected)


# --- YAML snapshots: rapidyaml behind the YAML 1.1 pre-scan ---------------------------------------

from test_speed_paths import documents as block_documents  # noqa: E402  (the block-YAML strategy)
from test_yaml_quoting import STRINGS, TRICKY_VALUES  # noqa: E402

import yaml  # noqa: E402

BulkLoader = yamlread.BulkLoader


def _typed(value: Any) -> Any:
    """``value`` with every scalar's type made part of it (``1``, ``1.0`` and ``True`` differ)."""
    if isinstance(value, dict):
        return ("map", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("seq", [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


def _fast_yaml(text: str) -> list[Any] | None:
    return yamlread.read_items(bytearray(text, "utf-8"), lambda group, kind: None)


def _top_items(documents: list[Any]) -> list[Any]:
    """Documents with each top-level ``*List`` replaced by its items, as the readers hand them on."""
    out: list[Any] = []
    for doc in documents:
        listed = isinstance(doc, dict) and isinstance(doc.get("kind"), str) and doc["kind"].endswith("List") \
            and isinstance(doc.get("items"), list)
        out.extend(doc["items"] if listed else [doc])
    return out


def _yaml_same_or_declined(text: str) -> bool:
    """rapidyaml behind the pre-scan gives PyYAML's (BulkLoader) documents for ``text``, types
    included, or declines; it never accepts what PyYAML refuses. True when it read it."""
    fast = _fast_yaml(text)
    if fast is None:
        return False
    try:
        slow = _top_items([doc for doc in yaml.load_all(text, Loader=BulkLoader) if doc is not None])
    except yaml.YAMLError as err:
        pytest.fail(f"the fast YAML path accepted text PyYAML refuses ({err}):\n{text}")
    assert _typed(fast) == _typed(slow), text
    return True


def test_rapidyaml_is_installed() -> None:
    """Without it every YAML snapshot is read by libyaml (correct, far slower): say so loudly."""
    assert yamlread._engines().ryml is not None, "rapidyaml (import ryml) is not installed"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=block_documents())
def test_fast_yaml_reads_block_documents_as_pyyaml_or_declines(text: str) -> None:
    event("read" if _yaml_same_or_declined(text) else "declined")


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scalar=st.one_of(STRINGS, st.sampled_from(TRICKY_VALUES)),
       where=st.sampled_from(["k: {}", "{}: v", "- {}", "a:\n- {}\n- x", "a:\n  {}: 1", "- {}: 1", "---\n{}",
                              "k: {} # c", "k:   {}", "-   {}", "a:\n  {}", "a: x\n  {}", "k: [{}]", "k: {{{}: 1}}",
                              "? {}\n: 1", "k: !!str {}", "k: &a {}\nj: *a", "k: '{}'", "k: \"{}\"", "{} : v"]))
def test_fast_yaml_reads_dangerous_scalars_as_pyyaml_or_declines(scalar: str, where: str) -> None:
    text = where.format(scalar.replace("'", "''") if "'{}'" in where else scalar)
    event("read" if _yaml_same_or_declined(text) else "declined")


@pytest.mark.parametrize("value", TRICKY_VALUES)
def test_every_scalar_yaml_1_1_reads_apart_is_declined_or_equal(value: str) -> None:
    for text in (f"k: {value}\n", f"{value}: v\n", f"- {value}\n", f"k:\n  - {value}\n"):
        _yaml_same_or_declined(text)


KUBECTL_NODE = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      node.alpha.kubernetes.io/ttl: "0"
      flannel.alpha.coreos.com/public-ip: 10.20.0.1
    creationTimestamp: "2024-10-25T14:23:56Z"
    labels:
      kubernetes.io/arch: amd64
      kubernetes.io/hostname: gpu-1
      nvidia.com/gpu.count: "8"
      feature.node.kubernetes.io/cpu-model.family: '72'
    name: gpu-1
    uid: 73b532e4-fa4a-4888-8afe-41b4d085cd51
  spec:
    podCIDR: 10.128.0.0/24
    taints:
    - effect: NoSchedule
      key: nvidia.com/gpu
  status:
    capacity:
      cpu: "192"
      memory: 1844435235Ki
      nvidia.com/gpu: "8"
      pods: "110"
    nodeInfo:
      kernelVersion: 5.15.0-125-generic
      cpuAffinity: 0-47,48-95
    conditions: []
    images: {}
    count: 8
    flag: true
    nothing: null
    empty:
- apiVersion: v1
  kind: Namespace
  metadata:
    name: team-a
  status:
    phase: Active
"""


def test_kubectl_style_yaml_takes_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The property tests above compare something on kubectl's own style: this file is read by
    rapidyaml, gives PyYAML's documents, and the Snapshot of the old reader."""
    assert _yaml_same_or_declined(KUBECTL_NODE)
    path = tmp_path / "nodes.yaml"
    path.write_text(KUBECTL_NODE, encoding="utf-8")
    monkeypatch.setattr(yamlread, "read_items", _counted(yamlread.read_items, calls := []))
    fast, old = _load_both([str(path)], monkeypatch, yamlread)
    assert calls == [True] and not isinstance(fast, tuple) and fast == old
    assert isinstance(fast.nodes["gpu-1"], inputs.Node) and fast.namespaces == ["team-a"]


def _counted(function: Any, calls: list[bool]) -> Any:
    def wrapper(data: bytearray, models: Any) -> Any:
        result = function(data, models)
        calls.append(result is not None)
        return result
    return wrapper


def _yaml_dump(value: Any, style: int) -> str:
    if style == 0:
        return yaml.dump(value, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False, width=1 << 20)
    if style == 1:
        return yaml.dump(value, Dumper=yaml.CSafeDumper, sort_keys=True, default_flow_style=False, indent=4)
    return "---\n" + yaml.dump(value, Dumper=yaml.CSafeDumper, default_flow_style=None) + "---\n"


@st.composite
def yaml_files(draw: Any) -> list[str]:
    texts = []
    for _ in range(draw(st.integers(1, 2))):
        items = draw(st.lists(OBJECTS, max_size=4))
        doc: Any = {"apiVersion": "v1", "kind": "List", "items": items}
        texts.append(_yaml_dump(doc, draw(st.integers(0, 2))))
    return texts


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(texts=yaml_files())
def test_fast_yaml_snapshots_read_as_before(tmp_path_factory: pytest.TempPathFactory,
                                            monkeypatch: pytest.MonkeyPatch, texts: list[str]) -> None:
    paths = _write(tmp_path_factory.mktemp("snap"), texts, ".yaml")
    fast = _load_both(paths, monkeypatch, yamlread)
    event("refused" if isinstance(fast[0], tuple) else "read")
    assert fast[0] == fast[1]


def test_rapidyaml_errors_stay_off_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    """rapidyaml prints a parse error before raising it; the slow path words errors, once."""
    assert yamlread.read_items(bytearray(b"a:\n  b: 1\n c: 2\n"), lambda group, kind: None) is None
    assert capfd.readouterr().err == ""


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(items=st.lists(st.one_of(OBJECTS, st.just("# a comment line"), st.just("-")), max_size=8),
       chunk=st.integers(1, 400), tail=st.booleans())
def test_lists_read_in_chunks_read_as_whole(monkeypatch: pytest.MonkeyPatch, items: list[Any], chunk: int,
                                            tail: bool) -> None:
    """A column-0 List cut into runs of items anywhere reads as PyYAML reads the whole file."""
    lines = ["apiVersion: v1", "items:"]
    for item in items:
        if isinstance(item, str):
            lines.append(item)  # a comment between items, or an empty (null) item
        elif item is None or not isinstance(item, (dict, list)) or not item:
            continue
        else:
            lines.append(yaml.dump([item], Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False,
                                   width=1 << 20).rstrip("\n"))
    lines += ["kind: List", "metadata:", "  resourceVersion: ''"] if tail else ["kind: List"]
    text = "\n".join(lines) + "\n"
    monkeypatch.setattr(yamlread, "_CHUNK", chunk)
    if len(lines) > 4 and lines[2].startswith("-"):  # items open the block: the layout read in runs
        assert yamlread._list_chunks(bytearray(text, "utf-8")) is not None
    event("read" if _yaml_same_or_declined(text) else "declined")


@pytest.mark.parametrize("text", [
    "", "\n", "# only a comment\n", "---\n", "---\n---\n", "just a scalar\n", "- a\n- b\n",
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n",  # one object alone
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n",
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\r\n",  # CR: the old reader
    "\ufeffapiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n",  # BOM
    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n"
    "  status:\n    capacity:\n      cpu: eight\n",  # an error with its line
    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n"
    "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n    labels:\n      a: b\n",  # a conflict
    "apiVersion: v1\nkind: NotAList\nitems:\n- a\nmetadata:\n  name: x\n",  # items, but an object itself
    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n"
    "    labels:\n      on: yes\n",  # YAML 1.1 words: the old reader
    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n"
    "    labels:\n      a: 'b\n        c'\n",  # a multi-line quoted scalar
    "apiVersion: v1\nkind: List\nitems:\n-\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n",
    "a:\n  b: 1\n c: 2\n",  # bad indentation: the old reader's message
    "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n",
])
def test_odd_yaml_files_read_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "snap.yaml"
    path.write_bytes(text.encode("utf-8"))
    fast, old = _load_both([str(path)], monkeypatch, yamlread)
    assert fast == old


_NODE_WITH = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    {key}: {value}\n"


@pytest.mark.parametrize("char", ["\x80", "\x85", "\x9f", "\ufeff", "\u2028", "\u2029", "\t", "\x7f"])
@pytest.mark.parametrize("where", ["plain", "quoted", "key"])
def test_control_and_break_characters_are_declined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, char: str,
                                                   where: str) -> None:
    """C1 controls (NEL among them), the BOM, U+2028/2029, tabs and DEL: PyYAML refuses them or reads
    them as line breaks, rapidyaml keeps them in the scalar. The pre-scan must send the file to the old
    reader (RE2 reads the pattern's class as code points, not bytes), which gives today's result."""
    value = {"plain": f"x{char}y", "quoted": f'"x{char}y"', "key": "v"}[where]
    key = f"x{char}y" if where == "key" else "a"
    text = _NODE_WITH.format(key=key, value=value)
    assert _fast_yaml(text) is None
    path = tmp_path / "snap.yaml"
    path.write_bytes(text.encode("utf-8"))
    fast, old = _load_both([str(path)], monkeypatch, yamlread)
    assert fast == old
