"""Import time of an ordinary command (issue 14): what a demo render imports and builds, checked in a
fresh interpreter through ``sys.modules`` and pydantic's own completeness flag. No timings are
asserted: what is checked is that the lazy paths stay lazy and give what the eager ones gave.

- a demo render imports none of the libraries only other commands use (jsonpatch, deepdiff,
  kubernetes, jsonschema, celpy) and not difflib, which only a "did you mean" suggestion needs;
- the rule-file models are built on first use (``defer_build``): importing them builds no
  validator, loading valid rules builds none either (``rules/plain.py``), an invalid file builds
  its kind's validator only, and a nested model validated on its own still builds and checks as
  before;
- the compiled-rule records are frozen, hashable and compare by identity (``eq=False``).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from pydantic import BaseModel, ValidationError

from gpustack_render.errors import did_you_mean
from gpustack_render.rules import expressions, kinds, lifecycle, model, naming

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
NOT_ON_RENDER = ("jsonpatch", "deepdiff", "kubernetes", "jsonschema", "celpy", "difflib")


def _fresh(script: str) -> str:
    """Run ``script`` in a new interpreter (nothing imported by other tests), return its stdout."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_demo_render_imports_nothing_only_other_commands_need() -> None:
    script = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from gpustack_render.cli import main\n"
        f"result = CliRunner().invoke(main, ['render', {str(DEMO)!r}])\n"
        "print(json.dumps({'code': result.exit_code, 'docs': result.output.count('\\n---\\n') + 1,\n"
        "                  'modules': sorted({m.split('.')[0] for m in sys.modules})}))\n")
    out = json.loads(_fresh(script))
    assert out["code"] == 0
    assert out["docs"] > 10  # the render really ran: the demo's whole chain was written
    assert "pydantic" in out["modules"]  # the check can see a module the render does import
    assert sorted(set(out["modules"]) & set(NOT_ON_RENDER)) == []


def test_rule_file_models_are_built_on_first_use_only() -> None:
    script = (
        "import json\n"
        "from pydantic import BaseModel\n"
        "from gpustack_render.rules import schema, load_rules\n"
        "models = sorted({m for m in vars(schema).values() if isinstance(m, type)\n"
        "                 and issubclass(m, BaseModel) and m.__module__ == schema.__name__}, key=lambda m: m.__name__)\n"
        "built_at_import = [m.__name__ for m in models if m.__pydantic_complete__]\n"
        "load_rules()\n"
        "built = [m.__name__ for m in models if m.__pydantic_complete__]\n"
        "kinds = sorted(m.__name__ for m in schema.RULE_KINDS.values())\n"
        "print(json.dumps({'import': built_at_import, 'load': built, 'kinds': kinds, 'all': len(models)}))\n")
    out = json.loads(_fresh(script))
    assert out["import"] == []
    assert out["load"] == []  # valid rule files are built by rules/plain.py, without validators
    assert len(out["kinds"]) == len(schema_kinds()) and out["all"] > len(out["kinds"])


def schema_kinds() -> list[str]:
    from gpustack_render.rules import schema
    return sorted(schema.RULE_KINDS)


def test_an_invalid_rule_file_builds_its_kinds_validator_only() -> None:
    """What the walker declines is validated by pydantic: that kind's validator is built then."""
    script = (
        "import json\n"
        "from gpustack_render.rules import schema, read\n"
        "doc = read.Document('Topology', 'f', {'apiVersion': schema.API_VERSION, 'kind': 'Topology', 'levels': 5})\n"
        "problems = []\n"
        "read.validate(doc, problems)\n"
        "built = sorted(m.__name__ for m in schema.RULE_KINDS.values() if m.__pydantic_complete__)\n"
        "print(json.dumps({'built': built, 'messages': [p.message for p in problems]}))\n")
    out = json.loads(_fresh(script))
    assert out == {"built": ["TopologyRules"], "messages": ["expected a list, got a number 5"]}


def test_a_nested_rule_model_validated_on_its_own_still_checks() -> None:
    """A deferred model builds when first used directly (export, tests), with its forward references
    (``Condition`` is recursive) resolved as when it was built at import."""
    from gpustack_render.rules import schema
    value = schema.AllCondition.model_validate({"all": [{"not": {"any": [{"fact": "x"}, {"setting": "y"}]}}]})
    assert isinstance(value.all[0], schema.NotCondition)
    assert isinstance(value.all[0].not_, schema.AnyCondition)
    with pytest.raises(ValidationError) as err:
        schema.AllCondition.model_validate({"all": [{"not": {"fact": ""}}]})
    assert err.value.errors()[0]["loc"] == ("all", 0, "not", "not", "fact", "fact")


def _records() -> list[type]:
    return [cls for module in (model, expressions, kinds, lifecycle, naming) for cls in vars(module).values()
            if isinstance(cls, type) and (dataclasses.is_dataclass(cls) or issubclass(cls, msgspec.Struct))
            and cls.__module__ == module.__name__]


def _frozen_eq(cls: type) -> tuple[bool, bool]:
    if issubclass(cls, msgspec.Struct):
        return cls.__struct_config__.frozen, cls.__struct_config__.eq
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    return params.frozen, params.eq


# Records compared as values (the Output rules' per-kind metadata is compared with what a test or an
# override expects): they keep their generated __eq__/__hash__.
VALUE_RECORDS = {"KindMetadata"}


def test_compiled_rule_records_are_frozen_and_compare_by_identity() -> None:
    records = _records()
    assert len(records) > 40 and VALUE_RECORDS <= {cls.__name__ for cls in records}
    assert sum(issubclass(cls, msgspec.Struct) for cls in records) >= 39  # rules/model.py: created in C
    for cls in records:
        frozen, eq = _frozen_eq(cls)
        assert frozen, cls.__name__
        if cls.__name__ in VALUE_RECORDS:
            assert eq, cls.__name__
            continue
        assert not eq, f"{cls.__name__}: compiled-rule records are eq=False (never compared; see rules/model.py)"
        if not issubclass(cls, msgspec.Struct):
            assert cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__, cls.__name__
        assert not issubclass(cls, BaseModel)


def test_a_record_stays_immutable_and_hashable() -> None:
    one = model.PresetTier(cpu="4", ram="8Gi")
    other = model.PresetTier(cpu="4", ram="8Gi")
    with pytest.raises(AttributeError):
        one.cpu = "8"  # type: ignore[misc]
    assert {one: 1}[one] == 1 and one != other and one == one and hash(one) != hash(other)
    assert msgspec.structs.astuple(one) == msgspec.structs.astuple(other) == ("4", "8Gi")
    assert repr(one) == "PresetTier(cpu='4', ram='8Gi')"  # as the dataclass printed it
    metadata = model.KindMetadata(labels=(("a", "b"),))
    assert metadata == model.KindMetadata(labels=(("a", "b"),)) and hash(metadata) == hash(model.KindMetadata(labels=(("a", "b"),)))


def test_did_you_mean_still_suggests() -> None:
    assert did_you_mean("Nmae", ["Name", "Other"]) == "did you mean 'Name'?"
    assert did_you_mean("name", ["Name"]) == "did you mean 'Name'?"
    assert did_you_mean("zzz", ["Name"]) == ""
