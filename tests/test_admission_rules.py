"""rules/admission.yaml (rule kind Admission): Kueue's resource transformations and quota-check
strategy, derived per manufacturer from the rules that spell each resource, and Kueue's int64
accounting of a PodSet's quota usage (admission.md §3; Kueue pkg/workload applyResourceTransformations)."""

from __future__ import annotations

import re
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from gpustack_render.errors import UserError
from gpustack_render.rules import load_rules
from gpustack_render.rules.admission import AdmissionRule, Transformation, quota_usage

REPO = Path(__file__).resolve().parents[1]
RULES = load_rules(None)
M = RULES.manufacturers.units_per_accelerator
F = Fraction


def test_defaults_derived_for_every_manufacturer() -> None:
    table = RULES.admission.transformations
    assert RULES.admission.strategy == "IgnoreUndeclared" and not RULES.admission.strict
    for manufacturer in RULES.manufacturers.by_name.values():
        base = manufacturer.resource_base
        credits = RULES.queues.quota_accelerated.resource.render({"manufacturer": manufacturer.name})
        assert table[base] == Transformation(base, "Replace", {credits: M}, None, "Admission:transformations.0")
        assert table[f"{base}.shared"].outputs == {credits: M // 10}
        assert (table[f"{base}.sliced.units"].outputs, table[f"{base}.sliced.units"].multiply_by) == \
            ({credits: 1}, f"{base}.sliced")
        for drained in ("sliced", "sliced.cores-percentage", "sliced.memory-percentage", "sliced.memory-mib"):
            assert (table[f"{base}.{drained}"].outputs, table[f"{base}.{drained}"].strategy) == ({}, "Replace")
        assert f"{base}.partitioned.units" not in table  # counts as itself
    assert len(RULES.admission.credits) == len(RULES.manufacturers.by_name)


G = "nvidia.com/gpu"
C = "credits.gpustack.ai/nvidia"
USAGE_CASES = [
    ("whole cards: M credits each", {G: F(2)}, 1, {C: 2 * M}),
    ("shared cards: M/10 each", {f"{G}.shared": F(3)}, 2, {C: 2 * 3 * (M // 10)}),
    ("sliced units x sliced cards (multiplyBy)", {f"{G}.sliced": F(2), f"{G}.sliced.units": F(400000)}, 1,
     {C: 800000}),
    ("units without a .sliced request: not multiplied", {f"{G}.sliced.units": F(400000)}, 1, {C: 400000}),
    ("the other .sliced keys are drained", {f"{G}.sliced": F(1), f"{G}.sliced.units": F(1),
                                           f"{G}.sliced.memory-mib": F(4096), f"{G}.sliced.cores-percentage": F(50)},
     1, {C: 1}),
    ("cards of two kinds add up", {G: F(1), f"{G}.shared": F(1)}, 1, {C: M + M // 10}),
    ("cpu in milli-units, rounded up per Pod before the count", {"cpu": F(1, 10000)}, 3, {"cpu": 3}),
    ("memory rounded up to whole bytes", {"memory": F(3, 2)}, 2, {"memory": 4}),
    ("untransformed resources count as themselves", {"cpu": F(2), "example.com/x": F(5)}, 1,
     {"cpu": 2000, "example.com/x": 5}),
    ("a fractional card is rounded up before the factor", {G: F(1, 2)}, 1, {C: M}),
]


@pytest.mark.parametrize("requests, count, usage", [c[1:] for c in USAGE_CASES], ids=[c[0] for c in USAGE_CASES])
def test_quota_usage(requests: dict[str, Fraction], count: int, usage: dict[str, int]) -> None:
    assert quota_usage(requests, count, RULES.admission) == usage


def test_retain_keeps_the_input_multiplied() -> None:
    """Kueue's Retain keeps the input (after multiplyBy) beside its outputs."""
    rule = AdmissionRule("Strict", {"a": Transformation("a", "Retain", {"c": 10}, "b")})
    assert quota_usage({"a": F(2), "b": F(3)}, 1, rule) == {"a": 6, "b": 3, "c": 60}
    assert rule.strict


def _rules_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "rules"
    shutil.copytree(REPO / "rules", dest)
    return dest


def _problems(rules: Path) -> list[str]:
    with pytest.raises(UserError) as err:
        load_rules(rules)
    return [p.format() for p in err.value.problems]


def _write(rules: Path, body: str) -> None:
    (rules / "admission.yaml").write_text("apiVersion: render.gpustack.ai/v1alpha1\nkind: Admission\n" + body)


BAD = [
    ("input and family both", "quotaCheckStrategy: Strict\ntransformations:\n  - {input: resourceBase, family: sliced}\n",
     r"admission\.yaml:5:5: error: transformations\.0: needs exactly one of input or family"),
    ("an unknown family", "quotaCheckStrategy: Strict\ntransformations:\n  - {family: slicd}\n",
     r"admission\.yaml:5:\d+: error: transformations\.0\.family: unknown capacity family 'slicd'.*sliced"),
    ("an input twice", "quotaCheckStrategy: Strict\ntransformations:\n  - {input: sharedCards}\n"
                       "  - {input: sharedCards}\n",
     r"admission\.yaml:6:\d+: error: transformations\.1\.input: sharedCards is already transformed"),
    ("credits over an unknown variable", "quotaCheckStrategy: Strict\ntransformations:\n"
                                         "  - {input: sharedCards, credits: 'N // 10'}\n",
     r"admission\.yaml:5:\d+: error: transformations\.0\.credits: .*N"),
    ("an unknown strategy", "quotaCheckStrategy: Lenient\n",
     r"admission\.yaml:3:\d+: error: quotaCheckStrategy: .*IgnoreUndeclared"),
]


@pytest.mark.parametrize("body, pattern", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_lint_errors_at_file_line_col(tmp_path: Path, body: str, pattern: str) -> None:
    rules = _rules_copy(tmp_path)
    _write(rules, body)
    problems = _problems(rules)
    assert any(re.search(pattern, p) for p in problems), problems


def test_strict_strategy_and_no_transformations(tmp_path: Path) -> None:
    rules = _rules_copy(tmp_path)
    _write(rules, "quotaCheckStrategy: Strict\n")
    loaded = load_rules(rules).admission
    assert loaded.strict and dict(loaded.transformations) == {}
    assert quota_usage({G: F(1)}, 2, loaded) == {G: 2}


def test_kueues_own_name_of_the_strict_strategy(tmp_path: Path) -> None:
    """Kueue's Configuration calls admission.md's Strict BlockUndeclared: both read as Strict."""
    rules = _rules_copy(tmp_path)
    _write(rules, "quotaCheckStrategy: BlockUndeclared\n")
    loaded = load_rules(rules).admission
    assert loaded.strict and loaded.strategy == "Strict"


def test_a_rules_directory_without_the_kind_gets_the_defaults(tmp_path: Path) -> None:
    rules = _rules_copy(tmp_path)
    (rules / "admission.yaml").unlink()
    assert load_rules(rules).admission == RULES.admission


def test_renamed_vocabulary_renames_the_table(tmp_path: Path) -> None:
    """The credits resource and the .sliced/.shared suffixes come from Queues and Capacity: renamed
    there, the transformations follow (the rule file names none of them)."""
    rules = _rules_copy(tmp_path)
    for path in rules.glob("*.yaml"):
        text = path.read_text().replace("render.gpustack.ai", "\0").replace("gpustack.ai", "acme.example")
        text = text.replace("\0", "render.gpustack.ai").replace(".shared", ".split")
        path.write_text(text)
    table = load_rules(rules).admission.transformations
    assert table[f"{G}.split"].outputs == {"credits.acme.example/nvidia": M // 10}
    assert f"{G}.shared" not in table
    assert "gpustack" not in (REPO / "rules" / "admission.yaml").read_text().replace("render.gpustack.ai/", "")


def test_entries_used_point_at_the_rule_file() -> None:
    """explain cites the transformations a PodSet's requests went through, by their rule origins."""
    from gpustack_render.rules.admission import entries_used
    used = entries_used({f"{G}.sliced": F(1), f"{G}.sliced.units": F(5), "cpu": F(1)}, RULES.admission)
    assert used == ["Admission:transformations.2", "Admission:transformations.3"]
    assert all(RULES.origins[e].rsplit(":", 1)[0].endswith("rules/admission.yaml") for e in used)
    assert entries_used({"cpu": F(1)}, RULES.admission) == []
