"""Helpers added while making the package type-check (mypy): they keep the lenient reading the
inline expressions they replaced had."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_render.diff.report import _pair
from gpustack_render.k8s import mapping_field


def test_mapping_field_returns_the_mapping_itself() -> None:
    inner = {"name": "a"}
    obj = {"metadata": inner}
    assert mapping_field(obj, "metadata") is inner  # not a copy: callers read it in place


@pytest.mark.parametrize("value", [None, [], ["name"], "text", 3, True])
def test_mapping_field_treats_a_non_mapping_as_empty(value: Any) -> None:
    assert mapping_field({"spec": value}, "spec") == {}


def test_mapping_field_missing_key_is_empty() -> None:
    assert mapping_field({}, "spec") == {}


@pytest.mark.parametrize(("before", "after", "cell"), [
    ("2", "2", "2"),
    ("1", "3", "1 → 3"),
    (None, "3", "— → 3"),
    ("3", None, "3 → —"),
    ("", "", ""),
    ("a|b", "a|b", "a\\|b"),
])
def test_pair_cells(before: str | None, after: str | None, cell: str) -> None:
    assert _pair(before, after) == cell
