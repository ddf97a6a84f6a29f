"""Compiling the Lifecycle kind: stop-policy rules, saved policies and back-fill warnings."""

from __future__ import annotations

from typing import Any

from gpustack_render.rules import schema
from gpustack_render.rules.compiler import Compiler, Loc
from gpustack_render.rules.expressions import always
from gpustack_render.rules.model import (LifecycleMarkers, LifecycleRules, LifecycleWarningRule, SavedStopPolicyRule,
                                         StopPolicyRule)


def compile_lifecycle(c: Compiler, lifecycle: schema.LifecycleRules) -> LifecycleRules:
    m = lifecycle.markers
    return LifecycleRules(_stop_policy(c, lifecycle), _save(c, lifecycle), _warnings(c, lifecycle),
                          LifecycleMarkers(m.emptyPlanHold, m.savedStopPolicy, m.savedWhenUnset, m.inactiveHold))


def _stop_policy(c: Compiler, lifecycle: schema.LifecycleRules) -> tuple[StopPolicyRule, ...]:
    """The first rule whose ``when`` holds decides, so only the last may have none (the default)."""
    rules = []
    for i, rule in enumerate(lifecycle.stopPolicy):
        loc: Loc = ("stopPolicy", i)
        if rule.name in [r.name for r in lifecycle.stopPolicy[:i]]:
            c.fail("Lifecycle", loc + ("name",), f"duplicate rule name '{rule.name}'")
        when = c.cond("Lifecycle", loc + ("when",), rule.when, "lifecycle") if rule.when else always
        if rule.when is None and i != len(lifecycle.stopPolicy) - 1:
            c.fail("Lifecycle", loc + ("name",), f"rule '{rule.name}' has no 'when' but is not last",
                   "the rules after it could never apply")
        origin = c.origin("Lifecycle", loc + ("name",))  # the rule's file:line for explain
        rules.append(StopPolicyRule(rule.name, when or always, rule.stopPolicy, rule.groups,
                                    _marked_annotations(c, loc, rule, lifecycle.markers),
                                    rule.saveStopPolicy, origin))
    if lifecycle.stopPolicy[-1].when is not None:
        c.fail("Lifecycle", ("stopPolicy", len(lifecycle.stopPolicy) - 1, "when"),
               "the last stopPolicy rule must have no 'when' (the default)")
    return tuple(rules)


def _save(c: Compiler, lifecycle: schema.LifecycleRules) -> tuple[SavedStopPolicyRule, ...]:
    rules = []
    for i, saved in enumerate(lifecycle.save):
        loc: Loc = ("save", i)
        when = c.cond("Lifecycle", loc + ("when",), saved.when, "lifecycle") if saved.when else always
        origin = c.origin("Lifecycle", loc + ("name",))
        rules.append(SavedStopPolicyRule(saved.name, when or always, saved.stopPolicy,
                                         _marked_annotations(c, loc, saved, lifecycle.markers), origin))
    return tuple(rules)


def _warnings(c: Compiler, lifecycle: schema.LifecycleRules) -> tuple[LifecycleWarningRule, ...]:
    rules = []
    for i, warning in enumerate(lifecycle.warnings):
        loc: Loc = ("warnings", i)
        when = c.cond("Lifecycle", loc + ("when",), warning.when, "lifecycle")
        message = c.fmt("Lifecycle", loc + ("message",), warning.message, {"queue", "instanceType"})
        if when and message:
            rules.append(LifecycleWarningRule(warning.name, when, message, c.origin("Lifecycle", loc + ("name",))))
    return tuple(rules)


def _marked_annotations(c: Compiler, loc: Loc, rule: Any,
                        markers: schema.LifecycleMarkers) -> tuple[tuple[str, str], ...]:
    """A rule's annotations: its ``mark`` entries name markers (defined once, in ``markers``) and set
    them to "true". A marker key written out under ``annotations`` is refused: changing the marker
    would leave that copy behind, and the renderer's own hold would then read as an admin's."""
    marker_keys = {getattr(markers, name): name for name in ("emptyPlanHold", "savedStopPolicy", "inactiveHold")}
    for key in rule.annotations:
        if key in marker_keys:
            c.fail("Lifecycle", loc + ("annotations", key), f"'{key}' is the {marker_keys[key]} marker",
                   f"reference it by name: mark: [{marker_keys[key]}]", at_key=True)
    marked = {getattr(markers, name): "true" for name in rule.mark}
    return tuple(sorted({**rule.annotations, **marked}.items()))
