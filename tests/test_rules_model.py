"""The compiled :class:`Rules` hold no raw rule-file model: every value the stages can reach from it
is a frozen dataclass or a plain value, so no stage depends on the pydantic shape of a rule file."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Iterator

import msgspec
import pytest
from pydantic import BaseModel

from gpustack_render.rules import Rules, load_rules, schema


def _walk(value: Any, path: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """Every value reachable from ``value`` through dataclass fields, mappings (keys and values) and
    tuples, lists and sets, with its path (for the failure message)."""
    yield path, value
    if isinstance(value, (str, int, float, bool, bytes)) or value is None:
        return
    if id(value) in seen:  # shared values (one NameFormat in two fields) are walked once
        return
    seen.add(id(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _walk(getattr(value, field.name), f"{path}.{field.name}", seen)
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            yield from _walk(getattr(value, name), f"{path}.{name}", seen)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(key, f"{path}[key {key!r}]", seen)
            yield from _walk(item, f"{path}[{key!r}]", seen)
    elif isinstance(value, (tuple, list, set, frozenset)):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]", seen)


def _problems(root: Any) -> list[str]:
    out = []
    for path, value in _walk(root, "Rules", set()):
        if isinstance(value, BaseModel):
            out.append(f"{path}: a pydantic model ({type(value).__name__})")
        elif dataclasses.is_dataclass(value) and not isinstance(value, type) \
                and not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            out.append(f"{path}: a dataclass that is not frozen ({type(value).__name__})")
        elif isinstance(value, msgspec.Struct) and not type(value).__struct_config__.frozen:
            out.append(f"{path}: a record that is not frozen ({type(value).__name__})")
    return out


@pytest.fixture(scope="module")
def rules() -> Rules:
    return load_rules()


def test_no_pydantic_model_and_only_frozen_dataclasses_reachable(rules: Rules) -> None:
    assert _problems(rules) == []


def test_the_walk_reaches_the_compiled_kinds(rules: Rules) -> None:
    """The walk is not vacuous: it goes into the fields that held raw models before."""
    paths = {path for path, _ in _walk(rules, "Rules", set())}
    for wanted in ("Rules.naming.displayNameMaxLength", "Rules.normalisation.gKey.manufacturer.label",
                   "Rules.presets.cpuPool.cpu", "Rules.vocabulary.queueType.key", "Rules.diff.owned.namePrefixes",
                   "Rules.capacity.fit_populations.slicedMaxFreeUnits"):
        assert wanted in paths
    assert any(path.startswith("Rules.normalisation.normalizeName.cruft[") for path in paths)
    assert any(path.startswith("Rules.conditions[") for path in paths)


def test_the_check_finds_a_model_and_a_mutable_dataclass() -> None:
    """The checker itself: a pydantic model deep in a mapping, and a non-frozen dataclass, are found."""
    @dataclasses.dataclass
    class Loose:
        inner: Any

    @dataclasses.dataclass(frozen=True)
    class Holder:
        items: Mapping[str, Any]

    model = schema.SettingsSource(namespace="ns", name="n")
    problems = _problems(Holder({"a": (Loose(model),)}))
    assert problems == ["Rules.items['a'][0]: a dataclass that is not frozen (Loose)",
                        "Rules.items['a'][0].inner: a pydantic model (SettingsSource)"]


def test_conditions_keep_what_explain_shows(rules: Rules) -> None:
    """A condition compiled at load keeps its text and its verdict twin; an entry without one is
    always true (as the rule file means it)."""
    assert rules.describe("Queues:admissionChecks.999.when") == "always"
    assert rules.verdict("Queues:admissionChecks.999.when")({}, {}).value is True
    entry = "Grouping:aware"
    assert entry in rules.conditions
    settings = dict(rules.settings.defaults)
    assert rules.verdict(entry)({}, settings).value == rules.is_aware(settings)
