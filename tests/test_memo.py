"""The process-wide memos: bounded, keyed by content, never serving a stale result."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpustack_render.memo import Bounded, content_key
from gpustack_render.rules import load_rules
from gpustack_render.rules.resources import default_rules_dir


def test_bounded_pushes_out_the_oldest_entry_only_for_a_new_key() -> None:
    memo: Bounded[str, int] = Bounded(2)
    memo["a"], memo["b"] = 1, 2
    memo["a"] = 3  # a known key: nothing pushed out
    assert memo == {"a": 3, "b": 2}
    memo["c"] = 4
    assert memo == {"b": 2, "c": 4}


def test_content_key_changes_with_the_bytes_and_is_none_when_unreadable(tmp_path: Path) -> None:
    file = tmp_path / "a.yaml"
    file.write_text("x: 1\n")
    first = content_key(tmp_path, [file])
    file.write_text("x: 2\n")
    assert first is not None and content_key(tmp_path, [file]) != first
    assert content_key(tmp_path, [tmp_path / "missing.yaml"]) is None


def test_load_rules_is_shared_until_a_file_changes(tmp_path: Path) -> None:
    rules_dir = tmp_path / "rules"
    shutil.copytree(default_rules_dir(), rules_dir)
    first = load_rules(rules_dir)
    assert load_rules(rules_dir) is first
    settings = rules_dir / "settings.yaml"
    settings.write_text(settings.read_text() + "\n# an edit\n")
    assert load_rules(rules_dir) is not first
