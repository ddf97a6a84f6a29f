"""Rule files built without pydantic's validators (issue 14, :mod:`gpustack_render.rules.plain`):
the fast path gives exactly the models pydantic gives, and declines everything else.

- every rule kind (and every model it nests) is read by the walker, so no built-in or deploy rule
  file pays for pydantic's validators;
- on the built-in and deploy rule files and on seeded structural edits of them (keys dropped,
  added or renamed, values swapped for odd scalars, lists emptied or doubled), whatever the walker
  builds is pydantic's model (types, values, order, fields set), and whatever pydantic rejects the
  walker declined;
- a fresh interpreter that loads the rules builds no pydantic validator and imports no plugin
  machinery (``importlib.metadata``), and an invalid file is still worded by pydantic's path;
- the walker refuses what it does not read (another constraint, config or validator) rather
  than skipping it.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ruamel.yaml.scalarint import ScalarInt

from gpustack_render import rulesyaml
from gpustack_render.rules import plain, schema

REPO = Path(__file__).resolve().parents[1]
RULE_FILES = sorted((REPO / "rules").glob("*.yaml")) + sorted((REPO / "deploy").glob("*/rules-*.yaml"))
ODD_VALUES: list[Any] = [0, -1, 1, 5, 99, True, False, None, "", "x", "abc\n", "nvidia", "NVIDIA", "Gi", "32Gb",
                         "-1", "1.5", "500m", 1.5, [], {}, ["a"], [1], {"a": 1}, {"fact": "x"}, {"setting": ""},
                         {"not": {"fact": "y"}}, ScalarInt(0), "Hold", "HoldAndDrain", "plan", "logical",
                         "render.gpustack.ai/v1alpha1", "wholeCard", "ab", "a" * 70]
ODD_KEYS = ["bogus", "not_", "not", "fact", "all", "", "kind", "when"]


def _documents() -> list[Any]:
    return [rulesyaml.load(path, str(path)) for path in RULE_FILES]


def _assert_same(mine: Any, theirs: Any, path: tuple[Any, ...] = ()) -> None:
    """The same value of the same types all the way down, models with the same fields set."""
    assert type(mine) is type(theirs), (path, type(mine), type(theirs))
    if isinstance(mine, BaseModel):
        assert mine.model_fields_set == theirs.model_fields_set, path
        assert list(vars(mine)) == list(vars(theirs)), path
        assert mine.__pydantic_extra__ == theirs.__pydantic_extra__, path
        assert mine.__pydantic_private__ == theirs.__pydantic_private__, path
        for name, value in vars(mine).items():
            _assert_same(value, vars(theirs)[name], path + (name,))
    elif isinstance(mine, dict):
        assert [(type(k), k) for k in mine] == [(type(k), k) for k in theirs], path
        for key in mine:
            _assert_same(mine[key], theirs[key], path + (key,))
    elif isinstance(mine, list):
        assert len(mine) == len(theirs), path
        for index, (a, b) in enumerate(zip(mine, theirs)):
            _assert_same(a, b, path + (index,))
    else:
        assert mine == theirs, (path, mine, theirs)


def _compare(data: Any, kind: str | None = None) -> str:
    """Both paths on ``data`` (as a file of ``kind``, by default its own): ``"plain"`` when the
    walker built pydantic's model, ``"declined"`` when it left valid data to pydantic,
    ``"invalid"`` when pydantic rejects it (and so did the walker)."""
    model = schema.RULE_KINDS[kind or data["kind"]]
    try:
        theirs: Any = model.model_validate(data)
    except ValidationError:
        theirs = None
    try:
        mine = plain.construct(model, data)
    except plain.Declined:
        return "declined" if theirs is not None else "invalid"
    assert theirs is not None, f"the walker accepted what pydantic rejects: {data!r}"
    _assert_same(mine, theirs)
    return "plain"


@pytest.mark.parametrize("kind", sorted(schema.RULE_KINDS))
def test_every_rule_kind_is_read_by_the_walker(kind: str) -> None:
    """A kind the walker cannot read would be validated by pydantic in every run again (~35 ms of
    start-up): extend rules/plain.py for what the schema now uses."""
    try:
        plain.construct(schema.RULE_KINDS[kind], {})
    except plain.Unsupported as err:
        pytest.fail(f"rules/plain.py does not read {err}")
    except plain.Declined:
        pass  # {} is not a valid file: declined, as it should be
    assert plain.supported(schema.RULE_KINDS[kind])


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rule_files_are_built_as_pydantic_builds_them(path: Path) -> None:
    data = rulesyaml.load(path, str(path))
    assert _compare(data) == "plain"


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_nodes(child, path + (key,)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.extend(_nodes(child, path + (index,)))
    return out


def _edited(rng: random.Random, doc: Any) -> Any:
    data = copy.deepcopy(doc)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        paths = [p for p in _nodes(data) if p]
        where = rng.choice(paths)
        parent = data
        for part in where[:-1]:
            parent = parent[part]
        last, choice = where[-1], rng.random()
        if choice < 0.45:
            parent[last] = copy.deepcopy(rng.choice(ODD_VALUES))
        elif choice < 0.6:
            del parent[last]
        elif choice < 0.75 and isinstance(parent, dict):
            parent[rng.choice(ODD_KEYS)] = parent.pop(last)  # renamed (or an existing key replaced)
        elif choice < 0.85 and isinstance(parent[last], list):
            parent[last] = parent[last] * rng.choice((0, 2))
        elif isinstance(parent, dict):
            parent[rng.choice(ODD_KEYS)] = copy.deepcopy(rng.choice(ODD_VALUES))
        else:
            parent.append(copy.deepcopy(parent[last]))
    return data


def test_seeded_edits_are_built_as_pydantic_builds_them_or_declined() -> None:
    rng = random.Random(1414)
    docs = _documents()
    seen = {"plain": 0, "declined": 0, "invalid": 0}
    for _ in range(int(os.environ.get("PLAIN_EXAMPLES", "1500"))):
        doc = rng.choice(docs)
        seen[_compare(_edited(rng, doc), doc["kind"])] += 1
    # every outcome is drawn, and the fast path takes most of the valid edits
    assert seen["plain"] > 100 and seen["invalid"] > 100 and seen["declined"] > 0, seen
    assert seen["plain"] > seen["declined"], seen


@pytest.mark.parametrize("value, outcome", [
    ({"fact": "x", "value": ScalarInt(7)}, "plain"), ({"fact": "x", "value": True}, "plain"),
    ({"fact": "x", "value": 1.0}, "declined"), ({"fact": "x", "value": "7"}, "plain"),
    ({"fact": "x", "operator": "Gt"}, "plain"), ({"fact": "x", "operator": "gt"}, "invalid"),
    ({"fact": ""}, "invalid"), ({"fact": "x", "bogus": 1}, "invalid"),
])
def test_scalar_readings_are_pydantics(value: dict[str, Any], outcome: str) -> None:
    """ScalarInt is read as the plain int pydantic gives; bool stays bool in ``int | str | bool``; a
    float (pydantic reads 1.0 as 1) is left to pydantic."""
    data = {"apiVersion": schema.API_VERSION, "kind": "Queues", "maxFlavorsPerGroup": 8,
            "deriveInstanceTypes": value, "quota": {"cpu": {"resource": "cpu", "nominalQuota": "1"},
                                                    "accelerated": {"resource": "x", "nominalQuota": "1"}},
            "admissionChecks": []}
    assert _compare(data) == outcome


def test_the_walker_declines_what_pydantic_reads_its_own_way() -> None:
    """Lax readings (a float for an int, a str subclass, ``not_`` by name, a pattern before a final
    newline) are left to pydantic, which gives its own result."""
    base = {"apiVersion": schema.API_VERSION, "kind": "Manufacturers", "unitsPerAccelerator": 100,
            "items": [{"name": "nvidia", "resourceBase": "nvidia.com"}]}
    assert _compare(base) == "plain"
    for edit in ({"unitsPerAccelerator": 100.0}, {"items": [{"name": "nvidia\n", "resourceBase": "r"}]},
                 {"items": [{"name": type("S", (str,), {})("nvidia"), "resourceBase": "r"}]}):
        data = {**base, **edit}
        with pytest.raises(plain.Declined):
            plain.construct(schema.ManufacturersRules, data)
    with pytest.raises(plain.Declined):
        plain.construct(schema.NotCondition, {"not_": {"fact": "x"}})
    assert schema.NotCondition.model_validate({"not_": {"fact": "x"}}).not_.fact == "x"  # pydantic reads it


class _Validated(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str

    @field_validator("name")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class _Multiple(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: Annotated[int, Field(multiple_of=2)]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str


@pytest.mark.parametrize("model", [_Validated, _Multiple, _Lenient], ids=lambda m: m.__name__)
def test_what_the_walker_does_not_read_is_refused_not_skipped(model: type[BaseModel]) -> None:
    assert not plain.supported(model)
    with pytest.raises(plain.Unsupported):
        plain.construct(model, {"name": "x", "count": 2})


def test_a_fresh_load_builds_no_validator_and_an_invalid_file_is_still_worded(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    for path in sorted((REPO / "rules").glob("*.yaml")):
        (rules / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    topology = rules / "topology.yaml"
    topology.write_text(topology.read_text(encoding="utf-8").replace("levels:", "levels: 5\nx:", 1),
                        encoding="utf-8")
    script = (
        "import json, sys\n"
        "from pydantic import BaseModel\n"
        "from gpustack_render.errors import UserError\n"
        "from gpustack_render.rules import schema, load_rules\n"
        "load_rules()\n"
        "models = [m for m in vars(schema).values() if isinstance(m, type) and issubclass(m, BaseModel)]\n"
        "built = sorted(m.__name__ for m in models if m.__pydantic_complete__)\n"
        "imported = sorted(m for m in ('importlib.metadata', 'pydantic.plugin._loader') if m in sys.modules)\n"
        "try:\n"
        f"    load_rules(__import__('pathlib').Path({str(rules)!r}))\n"
        "    problems = []\n"
        "except UserError as err:\n"
        "    problems = [p.format() for p in err.problems]\n"
        "print(json.dumps({'built': built, 'imported': imported, 'problems': problems}))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["built"] == [] and out["imported"] == []
    assert any("topology.yaml" in p and "expected a list" in p for p in out["problems"]), out["problems"]
