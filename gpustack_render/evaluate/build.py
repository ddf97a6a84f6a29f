"""The composition of stage 3 and stage 4 into one :class:`Plan`."""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Callable, Mapping

from gpustack_render.errors import Diagnostics, Problem, UserError
from gpustack_render.evaluate.chain import (build_admission_checks, report_finalizing_flavors, build_catalog, build_local_queues,
                                            build_pools, build_topologies, derive_instance_types)
from gpustack_render.evaluate.flavors import FlavorBuilder
from gpustack_render.evaluate.nodes import NodeEvaluator, NodeFacts, NodeShape, ShapeGroup
from gpustack_render.k8s import valid_label_value, valid_qualified_name
from gpustack_render.snapshot.inputs import InstanceTypeSpec
from gpustack_render.evaluate.plan import NodeFeaturePlan, Plan
from gpustack_render.evaluate.presets import PresetMatcher
from gpustack_render.evaluate.record import Recorder
from gpustack_render.evaluate.queues import NodeMatcher, QueueBuilder
from gpustack_render.rules import Rules
from gpustack_render.snapshot import Snapshot
from gpustack_render.snapshot.place import NodeLabelPlaces


@dataclass
class Evaluation:
    plan: Plan
    node_facts: list[NodeFacts]


def evaluate(snapshot: Snapshot, rules: Rules, settings: Mapping[str, bool], diag: Diagnostics,
             recorder: Recorder | None = None) -> Evaluation:
    """Stages 3 and 4. ``recorder`` (``explain`` only) receives each decision as it is made."""
    plan = Plan()
    flavors = FlavorBuilder(rules, settings, diag, recorder)
    nodes, facts_list, groups = _stage3(snapshot, rules, settings, diag, recorder, plan.node_features, flavors)
    aware = rules.is_aware(settings)
    plan.flavors = flavors.flavors()
    plan.topologies, missing = build_topologies([g.first for g in groups], rules, snapshot, diag, recorder)
    for flavor in plan.flavors:
        existing = snapshot.resource_flavors.get(flavor.name)
        if existing and existing.spec.topologyName and existing.spec.topologyName != flavor.topology_name:
            diag.warn(f"ResourceFlavor/{flavor.name}: the cluster has topologyName "
                      f"{existing.spec.topologyName}, rendered {flavor.topology_name}; Kueue cannot change it: "
                      f"delete and re-create the flavor")
    plan.admission_checks = build_admission_checks(rules)
    pools = build_pools(plan.flavors, rules, aware)
    presets = PresetMatcher(rules, nodes.names)
    if rules.queues.derive_instance_types({}, settings):
        plan.instance_types = derive_instance_types(pools, rules, snapshot, aware, presets, recorder)
    queues = QueueBuilder(rules, settings, snapshot, plan.flavors, NodeMatcher(groups, plan.flavors),
                          missing, diag, recorder)
    sources = {it.name: (it.general_group, it.accelerator_group, it.acceleratable, it.os, it.arch, False, False)
               for it in plan.instance_types}
    for deleting, types in ((False, snapshot.instance_types), (True, snapshot.deleted_instance_types)):
        for name, it in types.items():
            invalid = _instance_type_label_problems(name, it.spec, rules)
            if invalid:  # the API server would reject the queue; upstream leaves it uncreated too
                diag.extend(f"{snapshot.files.get(('InstanceType', name), '')}: {p.obj}: {p.path}: {p.message}; "
                            f"its ClusterQueue is not rendered" for p in invalid)
                continue
            if deleting and name not in snapshot.cluster_queues:
                continue  # Kueue already removed the queue of a deleted InstanceType: nothing to render
            spec = it.spec
            sources[name] = (spec.generalGroup or rules.grouping.generic_group, spec.acceleratorGroup, spec.acceleratable,
                             spec.os, spec.arch, spec.inactive, deleting)
    plan.cluster_queues = [queues.build(name, *sources[name]) for name in sorted(sources)]
    report_finalizing_flavors(plan, snapshot, rules, diag)
    plan.local_queues = build_local_queues([q.name for q in plan.cluster_queues], rules, snapshot)
    plan.catalog = build_catalog(pools, snapshot, aware)
    return Evaluation(plan, facts_list)


def evaluate_catalog(snapshot: Snapshot, rules: Rules, settings: Mapping[str, bool], diag: Diagnostics) -> Evaluation:
    """Stage 3, the flavors and the pools: all that ``catalog`` and ``node-patches`` read (the plan
    holds the flavors and the catalog, as :func:`evaluate` gives them). Every warning about a Node
    (its labels, its flavors) is given as :func:`evaluate` gives it; Topologies, InstanceTypes and
    queues are not built, so their warnings — about objects these commands do not print — are not."""
    flavors = FlavorBuilder(rules, settings, diag)
    _, facts, _ = _stage3(snapshot, rules, settings, diag, None, None, flavors)
    aware = rules.is_aware(settings)
    plan = Plan(flavors=flavors.flavors())
    plan.catalog = build_catalog(build_pools(plan.flavors, rules, aware), snapshot, aware)
    return Evaluation(plan, facts)


def _stage3(snapshot: Snapshot, rules: Rules, settings: Mapping[str, bool], diag: Diagnostics,
            recorder: Recorder | None, node_features: list[NodeFeaturePlan] | None,
            flavors: FlavorBuilder | None) -> tuple[NodeEvaluator, list[NodeFacts], list[ShapeGroup]]:
    """Every Node's facts in name order, with its NodeFeature (into ``node_features``) and its flavors
    (into ``flavors``) when asked; the Nodes' problems raised together once all were seen. Also the
    Nodes grouped by shape (:meth:`NodeEvaluator.evaluate_all`).

    Per Node, in name order, its own warnings come first, then its flavors' (as when each Node was
    added on its own). The flavors are decided once per shape, their warnings kept and given per
    Node; should deciding them fail (two flavor groups of one name), the Nodes are added one by one
    instead, so that the error comes after exactly the warnings it came after before."""
    problems: list[Problem] = []
    diag.place = NodeLabelPlaces(snapshot.files)  # a warning about a Node's labels names its file and line
    nodes = NodeEvaluator(rules, settings, diag, recorder)
    all_nodes = snapshot.nodes
    facts_list, groups = nodes.evaluate_all(sorted(all_nodes.items(), key=itemgetter(0)))
    flavor_warnings: dict[NodeShape, tuple[str, ...]] = {}
    one_by_one = flavors is not None and recorder is not None
    if flavors is not None and not one_by_one:
        try:
            for group in groups:
                shape = group.first.shape
                assert shape is not None
                warned = flavors.add_shape(group.first, all_nodes[group.first.name], group.names[1:])
                if warned:
                    flavor_warnings[shape] = warned
        except UserError:
            flavors.reset()
            flavor_warnings.clear()
            one_by_one = True
    if one_by_one or flavor_warnings or any(group.first.reports for group in groups):
        report, files = nodes.report, snapshot.files
        add_node = flavors.add_node if flavors is not None and one_by_one else None
        for facts in facts_list:  # per Node in name order: its own warnings, then its flavors'
            report(facts, problems, files)
            if add_node is not None:
                add_node(facts, all_nodes[facts.name])
            elif flavor_warnings:
                shape = facts.shape
                for warning in flavor_warnings.get(shape, ()) if shape is not None else ():
                    diag.warn(f"Node/{facts.name}: {warning}")
    if node_features is not None:
        node_features.extend(_node_features(rules, facts_list, groups))
    if problems:
        raise UserError(problems)
    return nodes, facts_list, groups


def _node_features(rules: Rules, facts_list: list[NodeFacts], groups: list[ShapeGroup]) -> list[NodeFeaturePlan]:
    """Each Node's NodeFeature, in name order: its labels are its shape's, sorted by key once per
    shape (each NodeFeature gets its own copy)."""
    feature_name, namespace = _node_feature_namer(rules), rules.vocabulary.nodeFeatureNamespace
    if any(group.first.shape is None for group in groups):  # recorded: no shapes
        return [NodeFeaturePlan(feature_name(f.name), namespace, f.name, dict(sorted(f.feature_labels.items())))
                for f in facts_list]
    labels_of = {group.first.shape: dict(group.first.shape.feature_sorted) for group in groups}  # type: ignore[union-attr]
    return [NodeFeaturePlan(feature_name(f.name), namespace, f.name, labels_of[f.shape].copy()) for f in facts_list]


def _node_feature_namer(rules: Rules) -> Callable[[str], str]:
    """The Naming ``nodeFeature`` format as a function of the Node name. The usual format has one
    placeholder without a filter: then it is the literal text around the name (no dict, no loop per
    Node); any other format renders as written."""
    name_format = rules.naming.node_feature
    parts = name_format.parts
    if len(parts) == 2 and parts[0][1] == "node" and parts[0][2] is None and parts[1][1] is None:
        before, after = parts[0][0], parts[1][0]
        return lambda name: f"{before}{name}{after}"
    return lambda name: name_format.render({"node": name})


def _instance_type_label_problems(name: str, spec: InstanceTypeSpec, rules: Rules) -> list[Problem]:
    """The queue labels built from an InstanceType's groups must be valid label keys and values.

    The accelerator group makes a label only on an acceleratable InstanceType (stage4-chain.md §2.2),
    so the group of one that is not acceleratable is never a key and cannot make its queue invalid."""
    problems = []
    accelerator_group = spec.acceleratorGroup if spec.acceleratable else ""
    checks = (("spec.acceleratorGroup", accelerator_group, rules.normalisation.aKey.labelPrefix),
              ("spec.generalGroup", spec.generalGroup, rules.vocabulary.generalGroupPrefix))
    for path, group, prefix in checks:
        if group and not valid_qualified_name(prefix + group):
            problems.append(Problem(f"{group!r} does not make a valid label key {prefix}{group}",
                                    obj=f"InstanceType/{name}", path=path))
    for path, value in (("spec.os", spec.os), ("spec.arch", spec.arch)):
        if not valid_label_value(value):
            problems.append(Problem(f"{value!r} is not a valid label value", obj=f"InstanceType/{name}", path=path))
    return problems
