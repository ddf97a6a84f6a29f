"""Typed facts (issue 11.3): the one table of facts (``expressions.FACTS``) says exactly what the engine
computes where each condition is read, and ``lint`` rejects an operator or value that does not fit.

The runtime check wraps every compiled condition of the built-in rules with a spy, renders the demo
snapshot and the lifecycle cases, and compares what each condition was given with the table: the
same fact names per scope, each value of the declared type (and of the declared values).
"""

from __future__ import annotations

import gc
import shutil
from pathlib import Path
from typing import Any, Callable

import msgspec
import pytest
from click.testing import CliRunner

import gpustack_render.pipeline as pipeline
from gpustack_render.cli import main
from gpustack_render.rules import Rules, load_rules
from gpustack_render.rules.expressions import FACTS, SCOPES, facts_in
from gpustack_render.rules.lint import lint_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
CASES = REPO / "fixtures" / "cases"
# The demo, and cases whose queues exist, drain, hold and restore (every lifecycle fact takes several values).
LIFECYCLE_CASES = ("drain", "drain-restore", "admission-check-inactive", "inactive", "admin-hold")


def _snapshots() -> list[list[str]]:
    import yaml
    out = [[str(REPO / "fixtures" / "demo")]]
    for case in sorted(CASES.iterdir()):
        if case.is_dir() and any(word in case.name for word in LIFECYCLE_CASES):
            spec = yaml.safe_load((case / "case.yaml").read_text(encoding="utf-8"))
            paths = spec.get("snapshot") if isinstance(spec, dict) else None
            if isinstance(paths, list) and all(isinstance(x, str) for x in paths):
                out.append([str(case / x) for x in paths])
    return out


_PY_TYPES = {"bool": (bool,), "int": (int,), "str": (str,)}


def _spy(seen: dict[str, list[dict[str, Any]]], scope: str, fn: Callable[..., bool]) -> Callable[..., bool]:
    def spy(facts: Any, settings: Any) -> bool:
        seen.setdefault(scope, []).append(dict(facts))
        return fn(facts, settings)
    return spy


def spied_rules(rules: Rules, seen: dict[str, list[dict[str, Any]]]) -> Rules:
    """The rules with every compiled condition recording the facts it is given, by scope."""
    cpu, accel = rules.grouping.flavor_cpu, rules.grouping.flavor_accelerated
    replace = msgspec.structs.replace  # Rules and its records are frozen: a spied copy
    return replace(
        rules,
        grouping=replace(
            rules.grouping,
            managed_stamp_when=_spy(seen, "node", rules.grouping.managed_stamp_when),
            cpu_only_when=_spy(seen, "node", rules.grouping.cpu_only_when),
            flavor_cpu=replace(cpu, contributes=_spy(seen, "flavor", cpu.contributes),
                               pin_cpu_only=cpu.pin_cpu_only and _spy(seen, "flavor", cpu.pin_cpu_only)),
            flavor_accelerated=replace(accel, contributes=_spy(seen, "accelerator", accel.contributes))),
        queues=replace(rules.queues, admission_checks=tuple(
            replace(a, when=_spy(seen, "queue", a.when)) for a in rules.queues.admission_checks)),
        lifecycle=replace(
            rules.lifecycle,
            stop_policy=tuple(replace(r, when=_spy(seen, "lifecycle", r.when)) for r in rules.lifecycle.stop_policy),
            save=tuple(replace(r, when=_spy(seen, "lifecycle", r.when)) for r in rules.lifecycle.save),
            warnings=tuple(replace(r, when=_spy(seen, "lifecycle", r.when)) for r in rules.lifecycle.warnings)))


def test_every_scope_gets_exactly_its_declared_facts_of_their_declared_types(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    monkeypatch.setattr(pipeline, "load_rules", lambda rules_dir=None: spied_rules(load_rules(rules_dir), seen))
    snapshots = _snapshots()
    assert len(snapshots) > 3, snapshots
    for snapshot in snapshots:
        result = CliRunner().invoke(main, ["render", *snapshot, "--allow-empty"])
        gc.enable()
        assert result.exit_code in (0, 2), result.stderr  # a case snapshot may be meant to fail
    assert set(seen) == set(SCOPES), f"scopes never evaluated: {set(SCOPES) - set(seen)}"
    for scope, calls in seen.items():
        for facts in calls:
            assert set(facts) == facts_in(scope), f"{scope}: engine gives {sorted(facts)}, table says " \
                                                  f"{sorted(facts_in(scope))}"
            for name, value in facts.items():
                fact = FACTS[name]
                assert isinstance(value, _PY_TYPES[fact.type]) and not (fact.type == "int" and isinstance(value, bool)), \
                    f"{scope}: {name}={value!r} is not {fact.type}"
                if fact.values:
                    assert value in fact.values, f"{name}={value!r} not among {fact.values}"


def test_every_fact_has_a_type_a_scope_and_a_meaning() -> None:
    for name, fact in FACTS.items():
        assert fact.name == name and fact.type in ("bool", "int", "str")
        assert fact.scopes and fact.scopes <= set(SCOPES), name
        assert fact.meaning and "\n" not in fact.meaning, name
        assert not fact.values or fact.type == "str", name


def _lint_with(tmp_path: Path, name: str, old: str, new: str) -> list[str]:
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    path = rules / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    return [p.format() for p in lint_rules(rules).problems]


def _line_col(tmp_path: Path, name: str, marker: str, occurrence: int = 0) -> tuple[int, int]:
    """1-based line and column of ``marker`` in the edited file (never hard-coded)."""
    lines = (tmp_path / "rules" / name).read_text(encoding="utf-8").splitlines()
    hits = [(i + 1, ln.index(marker) + 1) for i, ln in enumerate(lines) if marker in ln]
    return hits[occurrence]


@pytest.mark.parametrize("name, old, new, marker, message", [
    ("grouping.yaml", "{fact: cpuCount, operator: Gt, value: 0}", '{fact: cpuCount, operator: Gt, value: "0"}',
     '"0"', "value '0' does not fit fact 'cpuCount' (whole number) (write 0 without quotes)"),
    ("lifecycle.yaml", "{fact: currentStopPolicy, operator: Eq, value: Hold}",
     "{fact: currentStopPolicy, operator: Gt, value: 3}", "Gt",
     "operator Gt does not fit fact 'currentStopPolicy'"),
    ("lifecycle.yaml", "{fact: currentStopPolicy, operator: Eq, value: HoldAndDrain}",
     "{fact: currentStopPolicy, operator: Eq, value: HoldAndDrian}", "HoldAndDrian",
     "value 'HoldAndDrian' is not a possible value of fact 'currentStopPolicy' (one of \"\", \"None\", \"Hold\", "
     "\"HoldAndDrain\") (did you mean 'HoldAndDrain'?)"),
    ("lifecycle.yaml", "{fact: currentStopPolicy, operator: Eq, value: HoldAndDrain}",
     "{fact: currentStopPolicy, operator: Eq, value: 3}", "3}", "value 3 does not fit fact 'currentStopPolicy'"),
    ("grouping.yaml", "- {fact: hasOsArch}\n        - {fact: cpuCount",
     "- {fact: hasOsArch, operator: Gt, value: 0}\n        - {fact: cpuCount", "Gt, value: 0}",
     "operator Gt does not fit fact 'hasOsArch' (true/false)"),
    ("grouping.yaml", "stampWhen: {not: {setting: node-management-manual}}", "stampWhen: {fact: managed}",
     "managed}", "fact 'managed' is not known here (known here: cpuCount, hasAccelerator)"),
    ("queues.yaml", "- {fact: acceleratable}", "- {fact: inactive}", "inactive",
     "fact 'inactive' is not known here (known here: acceleratable)"),
])
def test_lint_rejects_a_condition_that_does_not_fit_its_fact(tmp_path: Path, name: str, old: str, new: str,
                                                              marker: str, message: str) -> None:
    problems = _lint_with(tmp_path, name, old, new)
    line, col = _line_col(tmp_path, name, marker)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{tmp_path / 'rules' / name}:{line}:{col}: error: "), problems
    assert message in problems[0], problems


def test_a_fitting_value_of_every_type_is_accepted(tmp_path: Path) -> None:
    """Eq on a bool fact with a bool, a str-enum value, an int comparison: all clean."""
    problems = _lint_with(tmp_path, "lifecycle.yaml", "- {not: {fact: inactive}}\n",
                          "- {all: [{fact: inactive, operator: Eq, value: false}, "
                          "{fact: currentStopPolicy, operator: Ne, value: \"\"}, {fact: savedStopPolicy, "
                          "operator: Eq, value: anything}]}\n")
    assert problems == []
