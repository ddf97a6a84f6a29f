"""The semantic comparison of the case runner: objects by identity, patch entries by (node,
subresource), field by field, type-strict. Only the standard library is used."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from gpustack_render import k8s


def identity(obj: Any) -> tuple[str, str, str, str] | None:
    """(apiVersion group, kind, namespace, name); None when the object lacks one of them."""
    if not isinstance(obj, dict):
        return None
    api, kind, meta = obj.get("apiVersion"), obj.get("kind"), obj.get("metadata")
    if not isinstance(api, str) or not isinstance(kind, str) or not isinstance(meta, dict):
        return None
    name, namespace = meta.get("name"), meta.get("namespace", "")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    return k8s.identity(obj)


def describe(key: tuple[str, str, str, str]) -> str:
    group, kind, namespace, name = key
    where = f"{namespace}/{name}" if namespace else name
    return f"{kind}/{where} ({group or 'core'})"


def _type_name(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "map", type(None): "null"}.get(type(value), type(value).__name__)


def show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > 200:
        text = text[:197] + "..."
    return text


def _same(a: Any, b: Any) -> bool:
    """Type-strict equality (``True != 1``, ``1 != 1.0``, ``"1" != 1``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _join(path: str, key: Any) -> str:
    return k8s.join_field(path, key, "json")


def diff_values(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Field-by-field differences, one line each, paths like ``spec.labels["a/b"]``."""
    where = path or "(root)"
    if _same(expected, actual):
        return []
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines: list[str] = []
        for key in expected:
            sub = _join(path, key)
            if key not in actual:
                lines.append(f"{sub}: missing (expected {show(expected[key])})")
            else:
                lines += diff_values(expected[key], actual[key], sub)
        for key in actual:
            if key not in expected:
                lines.append(f"{_join(path, key)}: unexpected (got {show(actual[key])})")
        return lines
    if isinstance(expected, list) and isinstance(actual, list):
        lines = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            lines += diff_values(e, a, _join(path, i))
        for i in range(len(actual), len(expected)):
            lines.append(f"{_join(path, i)}: missing (expected {show(expected[i])})")
        for i in range(len(expected), len(actual)):
            lines.append(f"{_join(path, i)}: unexpected (got {show(actual[i])})")
        return lines
    if type(expected) is not type(actual):
        return [f"{where}: expected {_type_name(expected)} {show(expected)}, got {_type_name(actual)} {show(actual)}"]
    return [f"{where}: expected {show(expected)}, got {show(actual)}"]


def _index(items: Iterable[Any], key_of: Callable[[Any], Any], side: str, problems: list[str]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for pos, item in enumerate(items):
        key = key_of(item)
        if key is None:
            problems.append(f"{side} item {pos + 1} has no identity: {show(item)}")
        elif key in out:
            if not _same(out[key], item):
                problems.append(f"{side}: two different items with identity {key!r}")
            else:
                problems.append(f"{side}: item with identity {key!r} appears twice")
        else:
            out[key] = item
    return out


def compare_keyed(expected: list[Any], actual: list[Any], key_of: Callable[[Any], Any],
                   show_key: Callable[[Any], str]) -> list[str]:
    problems: list[str] = []
    want = _index(expected, key_of, "expected.yaml", problems)
    got = _index(actual, key_of, "output", problems)
    for key in sorted(k for k in want if k not in got):
        problems.append(f"missing: {show_key(key)}")
    for key in sorted(k for k in got if k not in want):
        problems.append(f"extra:   {show_key(key)}")
    for key in sorted(k for k in want if k in got):
        lines = diff_values(want[key], got[key])
        if lines:
            problems.append(f"changed: {show_key(key)}\n" + "\n".join(f"    {line}" for line in lines))
    return problems


def compare_objects(expected: list[Any], actual: list[Any]) -> list[str]:
    """Semantic comparison of two object lists; an empty result means equal."""
    return compare_keyed(expected, actual, identity, describe)


def string_fields(entry: Any, first: str, second: str) -> tuple[str, str] | None:
    """``(entry[first], entry[second])`` when ``entry`` is a mapping holding both as strings: the
    identity of a keyed entry (a patch's node and subresource, a Workload's namespace and name)."""
    if not isinstance(entry, dict):
        return None
    a, b = entry.get(first), entry.get(second)
    if not isinstance(a, str) or not isinstance(b, str):
        return None
    return a, b


def _patch_key(entry: Any) -> tuple[str, str] | None:
    return string_fields(entry, "node", "subresource")


def compare_patches(expected: list[Any], actual: list[Any]) -> list[str]:
    return compare_keyed(expected, actual, _patch_key, lambda k: f"node {k[0]} subresource {json.dumps(k[1])}")
