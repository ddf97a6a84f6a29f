"""``diff --against DIR`` reading a ``render -o`` directory on its fast path (issue 14):
:func:`gpustack_render.diff.current.read_current` must give exactly what
:func:`~gpustack_render.diff.manifests.read_manifests` gives (the same objects, the same
problems in the same order) for every directory, and take the desired objects themselves for the
files that hold their bytes. No timings are asserted.

Also ``compare`` on its shortcuts (keys of read-back desired objects known by id, only differing
keys sorted): the same changes as for copies of the objects.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from cli_invoke import invoke
from hypothesis import given
from hypothesis import strategies as st

from budget import budget
from gpustack_render import yamlio
from gpustack_render.snapshot import yamlread
from gpustack_render.diff import DiffPolicy, compare
from gpustack_render.diff.current import _NAME, _listed, read_current
from gpustack_render.errors import UserError
from gpustack_render.rules import load_rules
from gpustack_render.diff import manifests

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"


def _desired() -> list[dict[str, Any]]:
    code, out, err = invoke("render", str(DEMO), "--format", "json")
    assert code == 0, err
    return json.loads(out)["items"]


def _render_dir(tmp_path: Path, fmt: str = "yaml") -> Path:
    directory = tmp_path / f"prev-{fmt}"
    code, _, err = invoke("render", str(DEMO), "-o", str(directory), "--format", fmt)
    assert code == 0, err
    return directory


def _outcome(read: Callable[[], list[dict[str, Any]]]) -> tuple[str, Any]:
    """("objects", the objects) or ("problems", each problem formatted): what a reader ends with."""
    try:
        return "objects", read()
    except UserError as err:
        return "problems", [problem.format() for problem in err.problems]


def _same_as_read_manifests(directory: Path | str, desired: list[dict[str, Any]]) -> tuple[str, Any]:
    fast = _outcome(lambda: read_current(directory, desired))
    assert fast == _outcome(lambda: manifests.read_manifests(directory, desired))
    assert fast == _outcome(lambda: manifests.read_manifests(directory))  # nothing taken by bytes
    return fast


def _names(directory: Path) -> list[str]:
    return yamlread.parse_documents((directory / "kustomization.yaml").read_text(encoding="utf-8"), "k")[0]["resources"]


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_an_unchanged_directory_is_the_desired_objects_themselves(tmp_path: Path, fmt: str) -> None:
    directory = _render_dir(tmp_path, fmt)
    desired = _desired()
    assert _listed(directory / "kustomization.yaml") == _names(directory)  # the kustomization's fast reading
    kind, objects = _same_as_read_manifests(directory, desired)
    assert kind == "objects" and len(objects) == len(desired)
    assert all(any(obj is want for want in desired) for obj in objects)
    for spelling in (str(directory) + "/", str(directory / ".." / directory.name), Path(directory)):
        assert read_current(spelling, desired) == objects
    assert _outcome(lambda: read_current(directory, [])) == _outcome(lambda: manifests.read_manifests(directory))


def _edit(path: Path, change: Callable[[bytes], bytes]) -> None:
    path.write_bytes(change(path.read_bytes()))


def _reformatted(data: bytes) -> bytes:
    return json.dumps(yamlread.parse_documents(data.decode(), "x")[0], indent=4).encode() + b"\n"


BYTE_EDITS: dict[str, Callable[[bytes], bytes]] = {
    "comment": lambda data: data + b"# a comment\n",
    "crlf": lambda data: data.replace(b"\n", b"\r\n"),
    "cr": lambda data: data.replace(b"\n", b"\r"),
    "trailing space": lambda data: data.replace(b"\n", b" \n", 1),
    "bom": lambda data: b"\xef\xbb\xbf" + data,
    "no final newline": lambda data: data.rstrip(b"\n"),
    "document start": lambda data: b"---\n" + data,
    "other format": _reformatted,
}


@pytest.mark.parametrize("edit", sorted(BYTE_EDITS))
def test_a_file_that_differs_in_bytes_is_parsed(tmp_path: Path, edit: str) -> None:
    directory = _render_dir(tmp_path)
    desired = _desired()
    name = _names(directory)[1]
    _edit(directory / name, BYTE_EDITS[edit])
    kind, objects = _same_as_read_manifests(directory, desired)
    assert kind == "objects"
    parsed = [obj for obj in objects if not any(obj is want for want in desired)]
    assert len(parsed) == 1 and parsed[0] in desired


def test_files_holding_each_others_bytes_are_parsed_in_listed_order(tmp_path: Path) -> None:
    directory = _render_dir(tmp_path)
    desired = _desired()
    first, second = (directory / name for name in _names(directory)[:2])
    one, two = first.read_bytes(), second.read_bytes()
    first.write_bytes(two)
    second.write_bytes(one)
    kind, objects = _same_as_read_manifests(directory, desired)
    assert kind == "objects" and objects[:2] == [desired[1], desired[0]]


def _replace_with(path: Path, what: str) -> None:
    path.unlink()
    if what == "fifo":
        os.mkfifo(path)
    elif what == "directory":
        path.mkdir()
    elif what == "broken symlink":
        path.symlink_to(path.parent / "nowhere")
    elif what == "symlink":
        target = path.parent.parent / "elsewhere.yaml"
        path.symlink_to(target)


FILE_CASES: dict[str, Callable[[Path], None]] = {
    "missing": lambda path: path.unlink(),
    "fifo": lambda path: _replace_with(path, "fifo"),
    "directory": lambda path: _replace_with(path, "directory"),
    "broken symlink": lambda path: _replace_with(path, "broken symlink"),
    "invalid YAML": lambda path: path.write_text("a: [\n"),
    "invalid JSON": lambda path: path.write_text('{"a": '),
    "not UTF-8": lambda path: _edit(path, lambda data: data + b"# \xff\n"),
    "empty": lambda path: path.write_bytes(b""),
    "a scalar": lambda path: path.write_text("just words\n"),
    "no kind": lambda path: _edit(path, lambda data: data.replace(b"kind:", b"sort:", 1)),
    "no name": lambda path: _edit(path, lambda data: data.replace(b"  name:", b"  title:", 1)),
    "no apiVersion": lambda path: _edit(path, lambda data: data.replace(b"apiVersion:", b"version:", 1)),
    "a List": lambda path: path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        yamlread.parse_documents(path.read_text(), "x")[0]]})),
    "two documents": lambda path: _edit(path, lambda data: data + b"---\napiVersion: v1\nkind: ConfigMap\n"
                                                                  b"metadata:\n  name: other\n"),
    "a float": lambda path: _edit(path, lambda data: data + b"extra: 1.5\n"),
}


@pytest.mark.parametrize("case", sorted(FILE_CASES))
@pytest.mark.parametrize("position", [0, -1])
def test_any_other_file_reads_as_read_manifests_reads_it(tmp_path: Path, case: str, position: int) -> None:
    """Problems come from read_manifests itself, all of them, in its order (two files go wrong)."""
    directory = _render_dir(tmp_path)
    names = _names(directory)
    shutil.copy(directory / names[2], tmp_path / "elsewhere.yaml")
    FILE_CASES[case](directory / names[position])
    FILE_CASES["invalid YAML" if case != "invalid YAML" else "missing"](directory / names[3])
    _same_as_read_manifests(directory, _desired())
    (directory / names[3]).write_bytes((directory / names[4]).read_bytes())  # now only one goes wrong
    _same_as_read_manifests(directory, _desired())


def test_a_symlinked_file_with_the_same_bytes_is_taken(tmp_path: Path) -> None:
    directory = _render_dir(tmp_path)
    name = _names(directory)[0]
    shutil.copy(directory / name, tmp_path / "elsewhere.yaml")
    _replace_with(directory / name, "symlink")
    kind, objects = _same_as_read_manifests(directory, desired := _desired())
    assert kind == "objects" and objects[0] is desired[0]


KUSTOMIZATIONS: dict[str, Callable[[bytes, str], bytes]] = {
    # accepted: the list is read from its lines
    "comment before": lambda data, name: b"# by hand\n" + data,
    "key before": lambda data, name: b"namePrefix: x-\n" + data,
    "block scalar before": lambda data, name: data.replace(b"sortOptions:", b"note: |\n  hi\nsortOptions:", 1),
    "an anchor before": lambda data, name: data.replace(b"kind: Kustomization", b"kind: &k Kustomization", 1),
    "resources twice": lambda data, name: b"resources:\n- " + name.encode() + b"\n" + data,
    "resources twice, shorter last": lambda data, name: data + b"resources:\n- " + name.encode() + b"\n",
    "only resources": lambda data, name: b"resources:\n" + data.split(b"resources:\n", 1)[1],
    "a listed file missing": lambda data, name: data + b"- zz-missing.yaml\n",
    "listed twice": lambda data, name: data + b"- " + name.encode() + b"\n",
    # declined: read_manifests reads it
    "comment after": lambda data, name: data + b"# end\n",
    "comment on an item": lambda data, name: data.replace(b".yaml\n", b".yaml # c\n", 1),
    "key after": lambda data, name: data + b"namePrefix: x-\n",
    "crlf": lambda data, name: data.replace(b"\n", b"\r\n"),
    "bom": lambda data, name: b"\xef\xbb\xbf" + data,
    "flow list": lambda data, name: data.split(b"resources:\n")[0] + b"resources: [" + name.encode() + b"]\n",
    "quoted name": lambda data, name: data.replace(b"- " + name.encode(), b"- '" + name.encode() + b"'"),
    "./name": lambda data, name: data.replace(b"- " + name.encode(), b"- ./" + name.encode()),
    "indented items": lambda data, name: data.replace(b"\n- ", b"\n  - "),
    "trailing space": lambda data, name: data.replace(b"- " + name.encode() + b"\n", b"- " + name.encode() + b" \n"),
    "no final newline": lambda data, name: data.rstrip(b"\n"),
    "empty list": lambda data, name: data.split(b"resources:\n")[0] + b"resources: []\n",
    "null list": lambda data, name: data.split(b"resources:\n")[0] + b"resources:\n",
    "nested resources": lambda data, name: data.replace(b"sortOptions:\n", b"sortOptions:\n  resources:\n  - x.yaml\n", 1),
    "an open flow before": lambda data, name: data.replace(b"sortOptions:\n  order: fifo\n",
                                                           b"sortOptions: {order: fifo,\n  x: 1}\n", 1),
    "a document before": lambda data, name: b"a: 1\n---\n" + data,
    "document start": lambda data, name: b"---\n" + data,
    "a sequence root": lambda data, name: b"- a\n" + data,
    "not UTF-8": lambda data, name: data.replace(b"Kustomization", b"Kustomization\xff", 1),
    "a '.' item": lambda data, name: data + b"- .\n",
    "an upper-case name": lambda data, name: data + b"- ConfigMap.yaml\n",
    "a name YAML reads as a number": lambda data, name: data + b"- 1.5\n",
    "a name YAML reads as a boolean": lambda data, name: data + b"- yes\n",
}


@pytest.mark.parametrize("case", sorted(KUSTOMIZATIONS))
def test_every_kustomization_reads_as_read_manifests_reads_it(tmp_path: Path, case: str) -> None:
    directory = _render_dir(tmp_path)
    kustomization = directory / "kustomization.yaml"
    kustomization.write_bytes(KUSTOMIZATIONS[case](kustomization.read_bytes(), _names(directory)[0]))
    _same_as_read_manifests(directory, _desired())
    try:
        docs = yamlread.parse_documents(yamlio.read_text(kustomization, "k"), "k")
    except UserError:
        docs = []
    listed = _listed(kustomization)
    assert listed is None or listed == docs[0]["resources"]  # when it reads the list, it reads it right


def test_a_directory_without_a_kustomization_or_not_a_directory_reads_as_before(tmp_path: Path) -> None:
    directory = _render_dir(tmp_path)
    desired = _desired()
    (directory / "kustomization.yaml").unlink()
    _same_as_read_manifests(directory, desired)
    (directory / "kustomization.yaml").mkdir()
    _same_as_read_manifests(directory, desired)
    for path in (directory / _names_of(desired)[0], tmp_path / "missing"):
        _same_as_read_manifests(path, desired)


def _names_of(desired: list[dict[str, Any]]) -> list[str]:
    from gpustack_render.emit import file_name
    return [file_name(obj) for obj in desired]


NAMES = st.from_regex(rb"\A[a-z0-9][a-z0-9.-]{0,40}\.(?:yaml|yml|json)\Z").map(bytes.decode)


@budget(200, 3000)
@given(names=st.lists(NAMES, min_size=1, max_size=4))
def test_a_listed_line_is_read_as_exactly_that_file_name(names: list[str]) -> None:
    """Names of :data:`_NAME`'s form, listed one a line, read as exactly those names (no implicit
    type of YAML 1.1 ends in letters; no indicator, comment or ``: ``), by either path of the reader."""
    text = "apiVersion: v1\nresources:\n" + "".join(f"- {name}\n" for name in names)
    assert all(_NAME.fullmatch(name) for name in names)
    assert yamlread.parse_documents(text, "k") == [{"apiVersion": "v1", "resources": names}]
    import yaml
    assert yaml.load(text, Loader=yamlread.BulkLoader) == {"apiVersion": "v1", "resources": names}


def _policy() -> DiffPolicy:
    return DiffPolicy(load_rules().diff)


def test_compare_gives_the_same_changes_for_the_desired_objects_and_for_copies() -> None:
    desired = _desired()
    current = [desired[0], copy.deepcopy(desired[1])] + desired[4:]  # desired[3] is missing: added
    changed = copy.deepcopy(desired[2])
    changed["metadata"].setdefault("labels", {})["x.example/changed"] = "1"
    current.append(changed)
    gone = {"apiVersion": desired[0]["apiVersion"], "kind": desired[0]["kind"],
            "metadata": {"name": "gpustack-gone", **({"namespace": desired[0]["metadata"]["namespace"]}
                                                     if desired[0]["metadata"].get("namespace") else {})}}
    current.insert(0, gone)
    policy = _policy()
    fast = compare(desired, current, policy, set())
    slow = compare(copy.deepcopy(desired), copy.deepcopy(current), policy, set())
    assert [(c.action, c.key, c.fields) for c in fast] == [(c.action, c.key, c.fields) for c in slow]
    assert {c.action for c in fast} == {"added", "changed", "removed"}
    order = [policy.sort_key(c.key) for c in fast]
    assert order == sorted(order)


def test_compare_keeps_the_desired_order_of_kinds_the_rules_do_not_name() -> None:
    """Kinds outside rules/diff.yaml tie in the sort key; they come in the order they were rendered."""
    objects = [{"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "same"}}
               for kind in ("Zebra", "Apple", "Mango")]
    for desired in (objects, objects[::-1]):
        changes = compare(desired, [], _policy(), set())
        assert [c.key[1] for c in changes] == [obj["kind"] for obj in desired]


@pytest.mark.parametrize("value", [1.5, float("nan"), {1: "x"}, (1, 2), "text"])
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_only_what_reads_back_as_itself_is_taken(tmp_path: Path, value: Any, suffix: str) -> None:
    """A float (NaN reads back as another NaN), a non-string key (JSON writes it as a string) or a
    tuple (read back as a list) is never taken by bytes: the file is parsed, as read_manifests does."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": value}}
    from gpustack_render.emit import MANIFEST_FORMATS
    dump = dict(MANIFEST_FORMATS.values())[suffix]
    directory = tmp_path / "prev"
    directory.mkdir()
    (directory / f"configmap-a{suffix}").write_text(dump(obj), encoding="utf-8")
    (directory / "kustomization.yaml").write_text(yamlio.dump_yaml({"resources": [f"configmap-a{suffix}"]}))
    kind, objects = _same_as_read_manifests(directory, [obj]) if value == value else \
        ("objects", read_current(directory, [obj]))  # NaN != NaN: compared below, not with ==
    assert kind == "objects" and len(objects) == 1
    assert (objects[0] is obj) == (value == "text")


def test_compare_of_the_desired_objects_themselves_is_what_copies_give() -> None:
    """The whole-render shortcut (each current object the desired one itself, in order) gives no
    change only when the copies give none: a kind outside the rules is still added, two desired
    objects with one identity and different contents still fail."""
    desired = _desired()
    policy = _policy()
    assert compare(desired, list(desired), policy, set()) == compare(desired, copy.deepcopy(desired), policy, set()) == []
    foreign = desired + [{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}]
    assert [(c.action, c.key[1]) for c in compare(foreign, list(foreign), policy, set())] == [("added", "Widget")]
    twin = copy.deepcopy(desired[0])
    twin.setdefault("spec", {})["x.example"] = "other"
    twins = desired + [twin]
    for current in (list(twins), copy.deepcopy(twins)):
        with pytest.raises(UserError, match="appears twice"):
            compare(twins, current, policy, set())


def _stream(tmp_path: Path) -> Path:
    code, out, err = invoke("render", str(DEMO))
    assert code == 0, err
    path = tmp_path / "prev.yaml"
    path.write_text(out, encoding="utf-8")
    return path


def _documents(data: bytes) -> list[bytes]:
    return [b"---\n" + part for part in data.split(b"---\n")[1:]]


STREAM_EDITS: dict[str, Callable[[bytes], bytes]] = {
    "unchanged": lambda data: data,
    "first document edited": lambda data: data.replace(b"\n", b"\n# c\n", 2),
    "last document edited": lambda data: data[:-1] + b"x\n",
    "a document dropped": lambda data: b"".join(_documents(data)[1:]),
    "two documents swapped": lambda data: b"".join([*_documents(data)[1::-1], *_documents(data)[2:]]),
    "a document more": lambda data: data + b"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    "a document twice": lambda data: data + _documents(data)[-1],
    "a document before": lambda data: b"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n" + data,
    "the first document twice": lambda data: _documents(data)[0] + data,
    "crlf": lambda data: data.replace(b"\n", b"\r\n"),
    "no final newline": lambda data: data[:-1],
    "comment after": lambda data: data + b"# end\n",
    "explicit end": lambda data: data + b"...\n",
    "no first marker": lambda data: data[4:],
    "marker with a space": lambda data: b"--- \n" + data[4:],
    "invalid last document": lambda data: data + b"---\na: [\n",
    "JSON": lambda data: json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        doc for doc in yamlread.parse_documents(data.decode(), "x")]}).encode(),
}


@pytest.mark.parametrize("piece", [1, 3, 256])
@pytest.mark.parametrize("edit", sorted(STREAM_EDITS))
def test_a_printed_stream_reads_as_read_manifests_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          edit: str, piece: int) -> None:
    """``render`` > FILE: the desired objects themselves when FILE is exactly that stream, compared
    piece by piece from the end (pieces of 1, 3 and all objects); anything else read as before."""
    from gpustack_render.diff import current
    monkeypatch.setattr(current, "_PIECE", piece)
    path = _stream(tmp_path)
    path.write_bytes(STREAM_EDITS[edit](path.read_bytes()))
    desired = _desired()
    kind, objects = _same_as_read_manifests(path, desired)
    taken = kind == "objects" and all(obj is want for obj, want in zip(objects, desired)) and len(objects) == len(desired)
    assert taken == (edit == "unchanged")


@pytest.mark.parametrize("value", [1.5, (1, 2), {1: "x"}])
def test_a_stream_of_objects_that_would_not_read_back_is_parsed(tmp_path: Path, value: Any) -> None:
    desired = _desired()
    odd = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "odd"}, "data": {"x": value}}
    path = tmp_path / "prev.yaml"
    path.write_text(yamlio.dump_yaml_stream([*desired, odd]), encoding="utf-8")
    objects = read_current(path, [*desired, odd])
    assert objects == manifests.read_manifests(path) and objects[-1] is not odd
