"""A large kubectl List is pre-scanned a run of items at a time, in a thread, one run ahead of
rapidyaml's parse (``yamlread._Scans``).

Only the order of the work changes: every run is scanned before it is parsed, so the file is read
exactly as when the whole file is scanned first, and a file the scan rejects is declined before the
rejected text is parsed. These tests lower the size at which the thread is used to 0, so every
drawn text takes that path, and compare it with PyYAML and with the whole file scanned first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bench_generator import load_generator
from test_speed_paths import documents as block_documents
from test_speed_snapshot import OBJECTS, _load_both, _yaml_same_or_declined
from test_yaml_quoting import STRINGS, TRICKY_VALUES

from gpustack_render.snapshot import yamlread

NO_MODELS = lambda group, kind: None  # noqa: E731  (every item untyped)


@pytest.fixture
def threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlread, "_THREADED_SCAN", 0)


def _kubectl_yaml(nodes: int, seed: int) -> str:
    """As the benchmark writes the YAML form (through JSON: no object shared, so no anchors)."""
    doc = json.loads(json.dumps(load_generator().generate(nodes, 3, seed=seed)))
    return yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(text=block_documents())
def test_threaded_scan_reads_block_documents_as_pyyaml_or_declines(threaded: None, text: str) -> None:
    event("read" if _yaml_same_or_declined(text) else "declined")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(scalar=st.one_of(STRINGS, st.sampled_from(TRICKY_VALUES)),
       where=st.sampled_from(["k: {}", "{}: v", "- {}", "items:\n- a: {}", "k: [{}]", "k: &a {}\nj: *a"]))
def test_threaded_scan_declines_what_the_scan_rejects(threaded: None, scalar: str, where: str) -> None:
    """A file the scan rejects after rapidyaml has read it is still declined (or read as PyYAML does)."""
    text = where.format(scalar)
    threaded_result = yamlread.read_items(bytearray(text, "utf-8"), NO_MODELS)
    scanned_first = None if yamlread._engines().danger.search(text.encode()) else threaded_result
    assert threaded_result == scanned_first, text
    event("read" if _yaml_same_or_declined(text) else "declined")


def test_a_rejected_list_is_declined_after_its_parse(threaded: None) -> None:
    """A kubectl List whose last item holds a YAML 1.1 word (``on``, true to PyYAML): parsed in
    runs, then declined; the same List without it is read."""
    text = _kubectl_yaml(20, seed=5)
    head, tail = text.split("\nmetadata:\n  resourceVersion: ''\n")
    assert tail == ""
    word = "- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: on\n"
    clean, rejected = (bytearray(f"{head}\n{item}metadata:\n  resourceVersion: ''\n", "utf-8")
                       for item in ("", word))
    assert yamlread._list_chunks(rejected) is not None
    assert yamlread.read_items(clean, NO_MODELS) is not None
    assert yamlread.read_items(rejected, NO_MODELS) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_threaded_and_scanned_first_read_a_generated_snapshot_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    seed: int) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(_kubectl_yaml(150, seed))
    first = yamlread.read_items(bytearray(path.read_bytes()), NO_MODELS)
    assert first is not None, "the generated kubectl-style List should take the fast path"
    monkeypatch.setattr(yamlread, "_THREADED_SCAN", 0)
    assert yamlread.read_items(bytearray(path.read_bytes()), NO_MODELS) == first
    fast, old = _load_both([str(path)], monkeypatch, yamlread)
    assert fast == old


def test_a_scan_that_raises_is_our_bug_not_a_decline() -> None:
    class Broken:
        def search(self, data: Any) -> Any:
            raise MemoryError("drawn")

    scans = yamlread._Scans(Broken())
    try:
        scans.ask(bytearray(b"a: b\n"))
        with pytest.raises(RuntimeError, match="pre-scan did not finish"):
            scans.clean()
    finally:
        scans.close()


@pytest.mark.parametrize("threads", [True, False], ids=["thread", "no-thread"])
def test_runs_are_scanned_in_order(monkeypatch: pytest.MonkeyPatch, threads: bool) -> None:
    """Verdicts come back in the order asked, with a thread or (a container out of threads:
    ``Thread.start`` raises RuntimeError) without one."""
    import threading

    if not threads:
        def refuse(self: threading.Thread) -> None:
            raise RuntimeError("can't start new thread")
        monkeypatch.setattr(threading.Thread, "start", refuse)
    scans = yamlread._Scans(yamlread._engines().danger)
    try:
        verdicts = []
        for text in (b"a: b\n", b"a: yes\n", b"- x\n", b"k: 0777\n"):
            scans.ask(bytearray(text))
            verdicts.append(scans.clean())
    finally:
        scans.close()
    assert verdicts == [True, False, True, False]


def test_a_rejected_run_is_never_parsed(threaded: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text the scan rejects does not reach rapidyaml: deep flow nesting costs it ~500 bytes of
    memory a byte (8 MB of ``[``: 4 GB), where the scan rejects it at once."""
    text = _kubectl_yaml(10, seed=4)
    head, tail = text.split("\nmetadata:\n  resourceVersion: ''\n")
    deep = "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: deep\n  data:\n    a: " + "[" * 5000 + "\n"
    data = bytearray(f"{head}\n{deep}metadata:\n  resourceVersion: ''\n", "utf-8")
    parsed: list[bytes] = []
    real = yamlread._json_documents

    def watch(chunk: bytearray, tree: Any = None) -> Any:
        parsed.append(bytes(chunk))
        return real(chunk, tree)

    monkeypatch.setattr(yamlread, "_json_documents", watch)
    monkeypatch.setattr(yamlread, "_CHUNK", 1 << 10)  # many runs: the deep one comes last
    assert yamlread.read_items(data, NO_MODELS) is None
    assert parsed and not any(b"[[[" in chunk for chunk in parsed)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(items=st.lists(st.one_of(OBJECTS, st.just("# a comment line"), st.just("-")), max_size=8),
       chunk=st.integers(1, 400), tail=st.booleans())
def test_lists_scanned_run_by_run_read_as_whole(threaded: None, monkeypatch: pytest.MonkeyPatch, items: list[Any],
                                                chunk: int, tail: bool) -> None:
    """A column-0 List cut into runs anywhere, each run scanned apart, reads as PyYAML reads the
    whole file (the scan's matches never span lines, and runs are whole lines)."""
    lines = ["apiVersion: v1", "items:"]
    for item in items:
        if isinstance(item, str):
            lines.append(item)
        elif isinstance(item, (dict, list)) and item:
            lines.append(yaml.dump([item], Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False,
                                   width=1 << 20).rstrip("\n"))
    lines += ["kind: List", "metadata:", "  resourceVersion: ''"] if tail else ["kind: List"]
    monkeypatch.setattr(yamlread, "_CHUNK", chunk)
    event("read" if _yaml_same_or_declined("\n".join(lines) + "\n") else "declined")


def test_no_scan_thread_is_left_when_a_copy_fails(threaded: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's copy that fails (memory, Ctrl-C) ends the scan thread too, first run included."""
    import threading

    def no_memory(data: Any) -> Any:
        raise MemoryError("drawn")

    data = bytearray(_kubectl_yaml(5, seed=6), "utf-8")
    before = set(threading.enumerate())
    monkeypatch.setattr(yamlread, "memoryview", no_memory, raising=False)
    for _ in range(3):
        with pytest.raises(MemoryError):
            yamlread.read_items(data, NO_MODELS)
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=5)
        assert not thread.is_alive(), "a scan thread was left waiting"
