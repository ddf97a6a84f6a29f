"""rapidyaml writes each parsed YAML document as compact JSON (``yamlread._json_of``): the values
are those of its indented JSON, the text is shorter. Compared on drawn block documents and on a
generated kubectl-style List; the readers' results against PyYAML are checked in test_speed_snapshot."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings

from test_speed_paths import documents as block_documents
from test_yaml_scan_thread import _kubectl_yaml

from gpustack_render.snapshot import yamlread


def _both(text: str) -> tuple[Any, Any] | None:
    """(indented, compact) JSON of every document of ``text`` as rapidyaml writes them; ``None``
    when rapidyaml refuses the text."""
    ryml = yamlread._engines().ryml
    try:
        tree = ryml.parse_in_arena(text.encode("utf-8"))
    except Exception:  # rapidyaml's own parse errors: nothing to compare
        return None
    root = tree.root_id()
    ids = list(ryml.children(tree, root)) if tree.is_stream(root) else [root]
    try:
        indented = [ryml.emit_json_malloc(tree, node).encode("utf-8") for node in ids]
    except Exception:  # rapidyaml's own emit errors (anchors, ...): the reader declines these too
        return None
    compact = [bytes(yamlread._json_of(tree, node, 16)) for node in ids]  # 16: the regrow path too
    return indented, compact


def _same_values(text: str) -> bool:
    both = _both(text)
    if both is None:
        return False
    indented, compact = both
    for wide, short in zip(indented, compact, strict=True):
        try:
            value = json.loads(wide)
        except ValueError:  # (rapidyaml writes some YAML, such as ``.nan``, as JSON no reader takes)
            continue
        assert json.loads(short) == value, text
        assert len(short) <= len(wide)
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=block_documents())
def test_compact_json_has_the_indented_values(text: str) -> None:
    event("compared" if _same_values(text) else "refused")


@pytest.mark.parametrize("text", [
    "a: 1\n", "- x\n- 'y z'\n", "k: \"tab\\there \\\"q\\\" \\u00e9\"\n", "e: {}\nf: []\ng: ''\n",
    "n: null\nt: true\nf: false\ni: -12\nx: 1.5\n", "a:\n  b:\n  - c: [1, 2]\n    d: {e: f}\n",
    "k: 'it''s'\nu: ünï ☃\n", "---\na: 1\n---\n- b\n", "key with spaces: v\n\"quoted key\": w\n",
])
def test_written_documents_are_compared(text: str) -> None:
    """Fixed documents the drawn ones may miss; each must be compared, not refused."""
    assert _same_values(text)


def test_a_kubectl_list_is_written_compact() -> None:
    text = _kubectl_yaml(30, seed=2)
    assert _same_values(text)
    indented, compact = _both(text) or ([], [])
    assert b"\n" not in compact[0] and len(compact[0]) * 3 < len(indented[0]) * 2


def test_emitter_errors_stay_off_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    """rapidyaml's JSON writer stops at 64 levels and prints why before raising (with a pointer
    that changes from run to run): the file is declined quietly, and the slow path reads it."""
    text = "".join(f"{'  ' * depth}k{depth}:\n" for depth in range(70)) + "  " * 70 + "leaf: 1\n"
    assert yamlread._engines().danger.search(text.encode()) is None  # (block nesting passes the scan)
    assert yamlread.read_items(bytearray(text, "utf-8"), lambda group, kind: None) is None
    assert capfd.readouterr().err == ""
