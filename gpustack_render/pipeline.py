"""The short composition of the stages; the only module that imports them all."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from gpustack_render.errors import Diagnostics
from gpustack_render.evaluate.build import Evaluation, evaluate
from gpustack_render.render import Renderer
from gpustack_render.rules import Rules, load_rules
from gpustack_render.settings import effective_settings, parse_overrides
from gpustack_render.snapshot import Snapshot, load_snapshot


@dataclass
class Context:
    rules: Rules
    snapshot: Snapshot
    settings: dict[str, bool]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    _evaluation: Evaluation | None = None

    @property
    def evaluation(self) -> Evaluation:
        if self._evaluation is None:
            self._evaluation = evaluate(self.snapshot, self.rules, self.settings, self.diagnostics)
        return self._evaluation


def prepare(snapshot_paths: Sequence[str], sets: Sequence[str], rules_dir: Path | None) -> Context:
    rules = load_rules(rules_dir)
    overrides = parse_overrides(sets, rules.setting_defaults)
    snapshot = load_snapshot(snapshot_paths, rules.settings_source)
    settings = effective_settings(rules.setting_defaults, snapshot.settings, snapshot.settings_origin, overrides)
    return Context(rules, snapshot, settings)


def render_objects(ctx: Context, templates_dir: Path | None) -> list[dict[str, Any]]:
    renderer = Renderer(templates_dir)
    return renderer.render_plan(ctx.evaluation.plan)


def render_catalog(ctx: Context, templates_dir: Path | None) -> dict[str, Any]:
    return Renderer(templates_dir).render_catalog(ctx.evaluation.plan)


def node_patches(ctx: Context) -> list[dict[str, Any]]:
    from gpustack_render.patches import node_patches as compute
    return compute(ctx.snapshot, ctx.rules, ctx.evaluation, ctx.diagnostics)
