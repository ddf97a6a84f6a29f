"""A large YAML file is pre-scanned in a thread while rapidyaml parses it (``fastyaml._scanned_meanwhile``).

Only the order of the work changes: the file is read exactly as when the scan runs first, and a
file the scan rejects is declined although it was parsed. These tests lower the size at which the
thread is used to 0, so every drawn text takes that path, and compare it with PyYAML and with the
scan run first.
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
from test_speed_snapshot import _load_both, _yaml_same_or_declined
from test_yaml_quoting import STRINGS, TRICKY_VALUES

from gpustack_render.snapshot import fastyaml

NO_MODELS = lambda group, kind: None  # noqa: E731  (every item untyped)


@pytest.fixture
def threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastyaml, "_THREADED_SCAN", 0)


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
    threaded_result = fastyaml.read_items(bytearray(text, "utf-8"), NO_MODELS)
    scanned_first = None if fastyaml._engines().danger.search(text.encode()) else threaded_result
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
    assert fastyaml._list_chunks(rejected) is not None
    assert fastyaml.read_items(clean, NO_MODELS) is not None
    assert fastyaml.read_items(rejected, NO_MODELS) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_threaded_and_scanned_first_read_a_generated_snapshot_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    seed: int) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(_kubectl_yaml(150, seed))
    first = fastyaml.read_items(bytearray(path.read_bytes()), NO_MODELS)
    assert first is not None, "the generated kubectl-style List should take the fast path"
    monkeypatch.setattr(fastyaml, "_THREADED_SCAN", 0)
    assert fastyaml.read_items(bytearray(path.read_bytes()), NO_MODELS) == first
    fast, old = _load_both([str(path)], monkeypatch, fastyaml)
    assert fast == old


def test_a_scan_that_raises_is_our_bug_not_a_decline() -> None:
    class Broken:
        def search(self, data: Any) -> Any:
            raise MemoryError("drawn")

    with pytest.raises(RuntimeError, match="pre-scan did not finish"):
        with fastyaml._scanned_meanwhile(Broken(), b"a: b\n"):
            pass


@pytest.mark.parametrize("text, clean", [(b"a: b\n", True), (b"a: yes\n", False)])
def test_without_a_thread_the_scan_runs_first(monkeypatch: pytest.MonkeyPatch, text: bytes, clean: bool) -> None:
    """A container out of threads (``Thread.start`` raises RuntimeError) still reads the file."""
    import threading

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with fastyaml._scanned_meanwhile(fastyaml._engines().danger, text) as passed:
        pass
    assert passed() is clean
