"""The short composition of the stages; the only module that imports them all."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from gpustack_render.errors import Diagnostics, UserError
from gpustack_render.evaluate.build import Evaluation, evaluate, evaluate_catalog
from gpustack_render.evaluate.record import Records
from gpustack_render.render import Renderer
from gpustack_render.rules import Rules, load_rules
from gpustack_render.rules.settings import effective_settings, parse_overrides
from gpustack_render.snapshot import Snapshot, load_snapshot
from gpustack_render.timing import stage

if TYPE_CHECKING:
    from gpustack_render.admit.command import AdmitRequest, AdmitRun


@dataclass
class Context:
    rules: Rules
    snapshot: Snapshot
    settings: dict[str, bool]
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    _evaluation: Evaluation | None = None
    paths: tuple[str, ...] = ()  # the snapshot paths given, for warnings about the snapshot as a whole

    @property
    def evaluation(self) -> Evaluation:
        if self._evaluation is None:
            with stage("evaluate"):
                self._evaluation = evaluate(self.snapshot, self.rules, self.settings, self.diagnostics)
            self.diagnostics.extend(no_local_queue_warnings(self, self._evaluation))
        return self._evaluation

    _partial_evaluation: Evaluation | None = None

    @property
    def partial_evaluation(self) -> Evaluation:
        """What ``catalog`` and ``node-patches`` read: Nodes, flavors, pools and the catalog
        (stage 3 with the flavors, so every warning about a Node is given; no Topology, InstanceType
        or queue), or the full evaluation when one already ran."""
        if self._evaluation is not None:
            return self._evaluation
        if self._partial_evaluation is None:
            with stage("evaluate"):
                self._partial_evaluation = evaluate_catalog(self.snapshot, self.rules, self.settings,
                                                            self.diagnostics)
        return self._partial_evaluation

    _records: Records | None = None

    @property
    def records(self) -> Records:
        """``explain``: the evaluator's own decision records. The run that records is the evaluation
        (explain asks for it first); should a plain evaluation have run already, the recording one
        reports its warnings to nobody, so none is printed twice."""
        if self._records is None:
            records = Records()
            diag = self.diagnostics if self._evaluation is None else Diagnostics()
            with stage("evaluate"):
                self._evaluation = evaluate(self.snapshot, self.rules, self.settings, diag, records)
            self._records = records
        return self._records


def prepare(snapshot_paths: Sequence[str], sets: Sequence[str], rules_dir: Path | None,
            allow_empty: bool = False) -> Context:
    """Rules, snapshot and settings. A snapshot without Nodes is refused unless ``allow_empty``:
    rendering it gives the empty chain, which a pruning GitOps tool would apply by deleting every
    flavor, queue and NodeFeature of the cluster."""
    with stage("rules"):
        rules = load_rules(rules_dir)
    overrides = parse_overrides(sets, rules.settings.defaults)
    with stage("snapshot"):
        snapshot = load_snapshot(snapshot_paths, rules.settings.source, rules.vocabulary.workerApiGroup)
    settings = effective_settings(rules.settings.defaults, snapshot.settings, snapshot.settings_origin, overrides)
    ctx = Context(rules, snapshot, settings, paths=tuple(snapshot_paths))
    for file in snapshot.unused_files:
        ctx.diagnostics.warn(f"{file}: holds no object gpustack-render reads (Node, Devices, Namespace, "
                             f"InstanceType, the Kueue chain, Workloads, the settings object)")
    if not snapshot.node_objects and not allow_empty:
        raise UserError.single("the snapshot holds no Nodes; rendering it would give the empty chain, which a "
                               "pruning GitOps tool applies by deleting every flavor and queue (pass "
                               "--allow-empty if that is meant)", file=", ".join(snapshot_paths))
    return ctx


def no_local_queue_warnings(ctx: Context, evaluation: Evaluation) -> list[str]:
    """Queues rendered but no LocalQueue, because the snapshot has no Namespace that is not reserved
    (typically captured without Namespaces): applied, that prunes every LocalQueue of the cluster."""
    plan = evaluation.plan
    if plan.local_queues or not plan.cluster_queues:
        return []
    held = ", ".join(ctx.snapshot.namespaces)
    why = f"only reserved Namespaces ({held})" if held else "no Namespace"
    return [f"{', '.join(ctx.paths) or 'snapshot'}: the snapshot holds {why}, so no LocalQueue is rendered "
            f"for the {len(plan.cluster_queues)} ClusterQueue(s) (applied with pruning, the cluster's LocalQueues "
            f"would be deleted); capture the Namespaces too (`gpustack-render snapshot` does, or "
            f"`kubectl get namespaces -o yaml`)"]


def render_objects(ctx: Context, templates_dir: Path | None) -> list[dict[str, Any]]:
    """Every rendered object, with the per-kind metadata of ``rules/output.yaml`` added."""
    from gpustack_render.render.output_meta import apply_output_metadata, overridden_keys
    plan = ctx.evaluation.plan
    with stage("render"):
        objects = Renderer(templates_dir).render_plan(plan)
        if not ctx.rules.output:
            return objects
        ctx.diagnostics.extend(overridden_keys(objects, ctx.rules.output))
        return apply_output_metadata(objects, ctx.rules.output)


def removal_warnings(ctx: Context, objects: Sequence[dict[str, Any]]) -> list[str]:
    """``render``: warn when applying ``objects`` would remove more than half of the owned objects
    of a kind that the snapshot shows live (a partial snapshot, or a rule edit that matches nothing)."""
    from gpustack_render import diff
    if not ctx.snapshot.raw:
        return []
    policy = diff.DiffPolicy(ctx.rules.diff)
    current = list(ctx.snapshot.raw.values())
    removed = diff.removed_counts(objects, current, policy, set(ctx.snapshot.raw))
    return diff.half_removed_warnings(removed, diff.owned_counts(current, policy), "render") if removed else []


def render_catalog(ctx: Context, templates_dir: Path | None) -> dict[str, Any]:
    return Renderer(templates_dir).render_catalog(ctx.partial_evaluation.plan)


def node_patches(ctx: Context) -> list[dict[str, Any]]:
    from gpustack_render.emit.patches import node_patches as compute
    return compute(ctx.snapshot, ctx.rules, ctx.partial_evaluation, ctx.diagnostics)


def setting_sources(ctx: Context, sets: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Where each effective setting of ``ctx`` came from: default, the snapshot object, or ``--set``."""
    from gpustack_render.rules.settings import setting_sources as sources
    overrides = parse_overrides(sets, ctx.rules.settings.defaults)
    return sources(ctx.rules.settings.defaults, ctx.snapshot.settings, ctx.snapshot.settings_origin, overrides)


def validate_render(ctx: Context, templates_dir: Path | None, crds_dir: Path | None, strict: bool,
                    skip_schema: bool = False) -> Any:
    """``validate SNAPSHOT...``: the rendered objects against the CRDs of ``crds_dir`` (else those in
    the snapshot; none with ``skip_schema``), plus every queue plan the renderer refused."""
    from gpustack_render.validate.crd_schema import crds_from_objects, load_crd_dir
    from gpustack_render.validate import Outcome, validate_objects
    given = load_crd_dir(crds_dir) if crds_dir is not None and not skip_schema else None  # read once
    if given is not None:  # the templates first: their problems at file:line:col
        from gpustack_render.validate.template_schema import check_templates
        problems, notes = check_templates(templates_dir, given)
        if problems:
            return Outcome(lines=[p.format() for p in problems], notes=notes)
    objects = render_objects(ctx, templates_dir)
    refusals = [(q.name, q.refusal) for q in ctx.evaluation.plan.cluster_queues if q.refusal]
    if skip_schema:
        return validate_objects(objects, None, strict, refusals, skip_schema=True)
    crds = given if given is not None else crds_from_objects(ctx.snapshot.raw.values(), "snapshot")
    return validate_objects(objects, crds if crds.kinds else None, strict, refusals)


def pin_workloads(ctx: Context, workload_paths: Sequence[str]) -> list[Any]:
    """``pin``: the Workloads of ``workload_paths`` as the fit-pin webhook would leave them (fit-pin.md);
    the queue chain resolves against the rendered plan plus the snapshot's own objects."""
    from gpustack_render.pin import QueueChain, pin_all
    from gpustack_render.pin.demand import ResourceClassifier
    from gpustack_render.pin.workloads import read_workloads
    workloads = read_workloads(workload_paths, ResourceClassifier(ctx.rules))
    chain = QueueChain.build(ctx.evaluation.plan, ctx.snapshot)
    return pin_all(workloads, ctx.rules, chain, ctx.settings)


def fit_node_labels(ctx: Context, converged: bool = False) -> dict[str, dict[str, str]]:
    """Each snapshot Node's labels once its ``node-patches`` fit-label patch is applied: stale fit
    labels removed, the desired ones set; Nodes ``node-patches`` leaves alone (a snapshot captured
    without Devices) keep their labels as they are. ``converged``: starting from the converged
    labels (the rendered NodeFeature's applied, as ``admit --chain rendered`` sees the Nodes)."""
    from gpustack_render.evaluate.capacity import CapacityEvaluator
    from gpustack_render.emit.patches import uncaptured_devices
    evaluator = CapacityEvaluator(ctx.rules, ctx.diagnostics)
    skipped = set(uncaptured_devices(ctx.snapshot, ctx.evaluation, evaluator))
    out: dict[str, dict[str, str]] = {}
    nodes, all_devices = ctx.snapshot.nodes, ctx.snapshot.devices
    for facts in ctx.evaluation.node_facts:
        name = facts.name
        node = nodes[name]
        labels = dict(facts.converged if converged else node.metadata.labels or {})
        out[name] = labels
        if name in skipped:
            continue
        for key in evaluator.owned_in(facts.label_keys, False):  # the stale fit labels go (each is there)
            labels.pop(key, None)
        devices = all_devices.get(name)
        if facts.managed and devices is not None:  # (the capacity is decided too: it warns as node-patches does)
            labels.update(evaluator.desired_parts(node, devices, facts)[1])
    return out


def admit_preview(ctx: Context, workload_paths: Sequence[str], chain: str, reserve: dict[str, Any],
                  templates_dir: Path | None = None, rendered: list[dict[str, Any]] | None = None) -> Any:
    """``admit``: Kueue's admission replayed over the snapshot's Workloads (and ``workload_paths``')
    with the rendered chain, the live one, or both (``compare``): the JSON document of admission.md §9.
    ``rendered``: the render's objects, when the caller has them already (``diff --admission``)."""
    from gpustack_render.admit import run_preview
    return run_preview(ctx, workload_paths, chain, reserve,
                       lambda: rendered if rendered is not None else render_objects(ctx, templates_dir),
                       lambda: fit_node_labels(ctx, converged=True))


def admit_command(request: AdmitRequest, state: dict[str, Any]) -> AdmitRun:
    """``admit`` from its options' values to its output text, notes and exit code, for the CLI and
    the in-process case runner alike. The prepared context goes under ``state["ctx"]``, as every
    command body keeps it, so the error handler still shows its warnings when a run stops on bad input."""
    from gpustack_render.admit.command import check_inputs, outcome
    amounts = check_inputs(request)
    # (nothing is applied: a snapshot without Nodes just places no Pods, so no --allow-empty guard)
    ctx = state["ctx"] = prepare(request.snapshot, request.sets, request.rules_dir, allow_empty=True)
    return outcome(admit_preview(ctx, request.workloads, request.chain, amounts, request.templates_dir), request)
