"""``explain`` for the rendered Kueue chain: ResourceFlavor, InstanceType, LocalQueue, Topology,
AdmissionCheck (ClusterQueue: explain/queue.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from gpustack_render.evaluate.nodes import ARCH_LABEL, OS_LABEL
from gpustack_render.evaluate.plan import FlavorPlan, InstanceTypePlan
from gpustack_render.explain.base import Explainer, Report, show
from gpustack_render.explain.queue import Provenance, selection_of, stop_reason


# --- ResourceFlavor ------------------------------------------------------------------------------

def _cpu_annotations(x: Explainer) -> str:
    """The cpuDetail note's source annotations, shortened to their common start (``…/cpu-*``)."""
    import os
    keys = [*x.vocab.cpuAnnotations.detail.values(), *x.vocab.cpuAnnotations.cache.values()]
    common = os.path.commonprefix(keys) if keys else ""
    return f"{common}*" if len(keys) > 1 else ", ".join(keys)


def explain_flavor(x: Explainer, flavor: FlavorPlan) -> Report:
    kind_name = "accelerated" if flavor.accelerated else "cpu"
    report = Report("ResourceFlavor", flavor.name, template=x.template("ResourceFlavor"))
    values = {"gKey": flavor.gkey, "gManu": flavor.gmanu, "aKey": flavor.akey, "manufacturer": flavor.manufacturer,
              "os": flavor.os, "arch": flavor.arch, "count": flavor.count, "profile": flavor.profile}
    prov = _flavor_provenance(x, flavor, kind_name, values)
    prov.update(_note_provenance(x, flavor))
    x.attach_fields(report, x.render("ResourceFlavor", flavor), prov)
    key_fields = _grouping_section(x, report, flavor, kind_name, values)
    _contributors_section(x, report, flavor)
    _flavor_queues_section(x, report, flavor)
    report.facts.update(kind=kind_name, nodes=list(flavor.nodes), count=flavor.count, capacity=flavor.capacity,
                        groupingKey={k: values.get(k) for k in key_fields})
    x.settings_report(report, x.named("Grouping:flavor.cpu.pinCpuOnly", "Grouping:aware"))
    return report


def _flavor_provenance(x: Explainer, flavor: FlavorPlan, kind_name: str, values: dict[str, Any]) -> Provenance:
    """Where the flavor's name, labels and nodeLabels come from (its notes: ``_note_provenance``)."""
    rules = x.rules
    name_source = (rules.grouping.flavor_accelerated if flavor.accelerated else rules.grouping.flavor_cpu).name.source
    own = (x.akey_prefix + flavor.akey) if flavor.accelerated else x.vocab.generalGroupPrefix + flavor.gkey
    count_from = (f"label {x.akey_prefix}{flavor.akey}.count" if flavor.accelerated
                  else "status.capacity.cpu rounded up")
    contributors = [x.node_ref(n) for n in flavor.nodes]
    prov: Provenance = {
        ("metadata", "name"): [x.format_rule("Naming", ("resourceFlavor", kind_name), name_source, values)],
        ("metadata", "labels", own): [f"own key of the {kind_name} flavor"],
        ("metadata", "labels", f"{own}.count"): [f"per-Node count: {count_from} of the contributing Nodes"],
        ("metadata", "labels", f"{own}.capacity"): [f"capacity = {len(flavor.nodes)} contributing Node(s) x "
                                                    f"{flavor.count} = {flavor.capacity}", *contributors],
        ("metadata", "labels", x.vocab.acceleratableLabel): ["accelerated flavor" if flavor.accelerated else "CPU flavor"],
        ("metadata", "labels", OS_LABEL): [f"grouping key os: Node label {OS_LABEL}"],
        ("metadata", "labels", ARCH_LABEL): [f"grouping key arch: Node label {ARCH_LABEL}"],
        ("metadata", "labels", x.vocab.topologyProfile.label): [f"grouping key profile: the Nodes' converged {x.vocab.topologyProfile.label}"],
        ("metadata", "labels", x.vocab.queueType.key): ["fixed: marks a flavor built from Nodes "
                                                              "(what ClusterQueues select on)"],
        ("spec", "topologyName"): [x.format_rule("Naming", ("topology",), rules.naming.topology.source, values)],
        ("spec", "nodeLabels"): [f"pins the grouping key on the Nodes; rule {x.rule('Grouping', 'flavor', kind_name, 'key')}"],
        ("spec", "nodeLabels", rules.grouping.managed_key): [x.rule("Grouping", "managedLabel", "key")
                                                    + ": only managed Nodes"],
    }
    if flavor.accelerated:
        prov[("metadata", "labels", x.vocab.generalGroupPrefix + flavor.gkey)] = ["the paired CPU key (gKey) of the contributing "
                                                                      "Nodes"]
    if not flavor.accelerated and "Grouping:flavor.cpu.pinCpuOnly" in rules.conditions:
        prov[("spec", "nodeLabels", rules.grouping.cpu_only_key)] = [
            x.rule("Grouping", "flavor", "cpu", "pinCpuOnly") + f" {rules.describe('Grouping:flavor.cpu.pinCpuOnly')}",
            *x.settings_of("Grouping:flavor.cpu.pinCpuOnly")]
    return prov


def _note_provenance(x: Explainer, flavor: FlavorPlan) -> Provenance:
    """Where each note annotation comes from: the first contributing Node's labels or annotations, or
    the grouping key."""
    first = flavor.nodes[0] if flavor.nodes else ""
    node = x.snapshot.nodes.get(first)
    annotations = (node.metadata.annotations or {}) if node else {}
    prov: Provenance = {}
    for note, value in flavor.notes.items():
        path = ("metadata", "annotations", x.vocab.notePrefix + note)
        if note == "cpuDetail":
            why = [x.node_ref(first, f"annotations {_cpu_annotations(x)}")]
            if flavor.accelerated:
                why.extend(x.settings_of("Grouping:aware"))
            prov[path] = why
        elif note == "product" and not flavor.accelerated:
            product = x.vocab.cpuAnnotations.product
            prov[path] = [x.node_ref(first, f"annotation {product}={show(annotations.get(product, ''))}")]
        elif note == "family" and not flavor.accelerated:
            prov[path] = [x.node_ref(first, f"annotation {x.vocab.cpuAnnotations.family}")]
        elif note in ("product", "family", "memory", "cores"):
            prov[path] = [x.node_ref(first, f"label {x.akey_prefix}{flavor.akey}.{note}")]
        elif note == "manufacturer":
            prov[path] = ["the aKey up to its first '-'" if flavor.accelerated else "gManu: the gKey up to its first '-'"]
        else:
            prov[path] = [{"acceleratable": "the flavor kind (accelerated or CPU)", "generalGroup": "the gKey",
                           "acceleratorGroup": "the aKey", "topologyProfile": "the profile"}.get(
                note, f"{note}: from the grouping key")]
    return prov


def _grouping_section(x: Explainer, report: Report, flavor: FlavorPlan, kind_name: str,
                      values: dict[str, Any]) -> tuple[str, ...]:
    """The grouping key and contribution rule; returns the key's fields."""
    rules = x.rules
    group = report.section(f"Grouping ({kind_name} flavor)")
    key_fields = (rules.grouping.flavor_accelerated if flavor.accelerated else rules.grouping.flavor_cpu).key
    group.add("grouping key: " + ", ".join(f"{k}={show(values.get(k))}" for k in key_fields),
              x.rule("Grouping", "flavor", kind_name, "key"))
    group.add(f"a Node contributes when {rules.describe(f'Grouping:flavor.{kind_name}.contributes')}",
              x.rule("Grouping", "flavor", kind_name, "contributes"))
    return key_fields


def _contributors_section(x: Explainer, report: Report, flavor: FlavorPlan) -> None:
    """The contributing Nodes, and a NOTE when spec.nodeLabels also select Nodes that do not contribute."""
    first = flavor.nodes[0] if flavor.nodes else ""
    nodes = report.section(f"Contributing Nodes: capacity {flavor.capacity} = {len(flavor.nodes)} Node(s) x count "
                           f"{flavor.count}")
    for name in flavor.nodes:
        nodes.add(name, x.node_ref(name))
    if first:
        nodes.add(f"notes come from {first} (the contributing Node with the smallest name)")
    selects = x.decision(f"ResourceFlavor/{flavor.name}", "flavor.nodeLabels")
    assert selects is not None, flavor.name  # every rendered flavor records what its nodeLabels select
    matching: list[str] = selects.result
    if matching != sorted(flavor.nodes):
        extra = sorted(set(matching) - set(flavor.nodes))
        nodes.add(f"NOTE: spec.nodeLabels also select managed Node(s) that do not contribute: {', '.join(extra)} "
                  f"(a queue with this flavor is refused: OverlappingSelectors / NonConservedQuota)")


def _flavor_queues_section(x: Explainer, report: Report, flavor: FlavorPlan) -> None:
    """The ClusterQueues that quota the flavor, or select it but render no plan with it."""
    queues = report.section("ClusterQueues")
    found = False
    for queue in x.plan.cluster_queues:
        entry = next((f for f in queue.flavors if f.name == flavor.name), None)
        if entry is not None:
            queues.add(f"ClusterQueue/{queue.name}: nominalQuota {entry.resource}={entry.nominal_quota}")
            found = True
        elif flavor.name in selection_of(x, queue.name).result:
            queues.add(f"ClusterQueue/{queue.name} selects it but renders no plan with it: "
                       + (queue.refusal or stop_reason(x, queue)))
            found = True
    if not found:
        queues.add("no ClusterQueue selects it")


# --- InstanceType --------------------------------------------------------------------------------

def preset_trace(x: Explainer, name: str) -> tuple[str | None, list[str], list[str]]:
    """(tier or None for the fallback, explanation lines, origins) — stage4-chain.md §4.3 matching, as
    the evaluator's PresetMatcher recorded it for the derived InstanceType ``name``."""
    decision = x.decision(f"InstanceType/{name}", "preset")
    assert decision is not None, name
    presets = x.rules.presets
    manufacturer = decision.input("manufacturer")
    rows = presets.manufacturers.get(manufacturer) or ()
    # the matcher's flat entries are the rows' prefixes in order (rules/compile.py)
    entries = [(i, j, prefix) for i, row in enumerate(rows) for j, prefix in enumerate(row.prefixes)]
    lines: list[str] = []
    for step in decision.steps:
        kind = step["step"]
        if kind == "table":
            if not step["hasTable"]:
                return None, [f"no preset table for manufacturer {show(manufacturer)}: fallback"], [
                    x.rule("UnitResourcePresets", "manufacturers")]
            return None, ["the product is empty: fallback"], []
        if kind == "tokens":
            lines.append(f"product {show(step['product'])} normalised to {show(step['normalised'])}, "
                         f"tokens {step['tokens']}")
        elif kind == "ignored":
            lines.append(f"leading tokens {step['dropped']} ignored -> {step['tokens']}")
        elif kind == "match":
            i, j, prefix = entries[step["index"]]
            origins = [x.rule("UnitResourcePresets", "manufacturers", manufacturer, i, "prefixes", j, value=prefix)]
            if step["by"] is not None:
                by_token = next(k for k in rows[i].by if k.lower() == step["by"])
                lines.append(f"prefix {show(prefix)} (manufacturers.{manufacturer}.{i}) matches; token "
                             f"{show(by_token)} overrides its tier {rows[i].tier} -> {step['tier']}")
                return step["tier"], lines, origins + [x.rule("UnitResourcePresets", "manufacturers", manufacturer,
                                                              i, "by", by_token)]
            lines.append(f"prefix {show(prefix)} (manufacturers.{manufacturer}.{i}) matches: tier {step['tier']}")
            return step["tier"], lines, origins
    lines.append("no entry matches: fallback")
    return None, lines, [x.rule("UnitResourcePresets", "manufacturers", manufacturer)]


def explain_instance_type(x: Explainer, name: str) -> Report:
    derived = next((it for it in x.plan.instance_types if it.name == name), None)
    if derived is None:
        return _snapshot_instance_type(x, name)
    report = Report("InstanceType", name, template=x.template("InstanceType"))
    recorded = x.decision(f"InstanceType/{name}", "preset")  # the pool's flavors, as the evaluator used them
    by_name = {f.name: f for f in x.plan.flavors}
    pool_flavors = [by_name[n] for n in recorded.input("flavors")] if recorded is not None else []
    first = by_name.get(recorded.input("firstFlavor")) if recorded is not None else None
    accel = derived.acceleratable
    tier, lines, preset_origins = preset_trace(x, name) if accel else (None, [], [])
    prov = _instance_type_provenance(x, derived, first, tier, preset_origins)
    x.attach_fields(report, x.render("InstanceType", derived), prov)
    section = report.section("Pool")
    section.add(f"derived because {x.named_one('Queues:deriveInstanceTypes')} is true and the snapshot has no "
                f"InstanceType/{name}", *x.settings_of("Queues:deriveInstanceTypes"))
    if pool_flavors:
        for flavor in pool_flavors:
            section.add(f"flavor {flavor.name} (count {flavor.count}, capacity {flavor.capacity})")
        if first is not None:
            section.add(f"first flavor (count ascending, then name): {first.name}; it supplies product and manufacturer")
    if accel:
        preset = report.section("Unit-resource preset")
        for line in lines:
            preset.add(line)
        chosen = x.rules.presets.tiers[tier] if tier else x.rules.presets.fallback
        preset.add(f"unitResources cpu={show(chosen.cpu)}, ram={show(chosen.ram)}"
                   + (f" (tier {tier})" if tier else " (fallback)"))
    report.facts.update(pool=[f.name for f in pool_flavors], tier=tier,
                        displayName=derived.display_name)
    x.settings_report(report, x.named("Queues:deriveInstanceTypes", "Grouping:aware"))
    return report


def _snapshot_instance_type(x: Explainer, name: str) -> Report:
    """An InstanceType of the snapshot: create-only, so never rendered; its spec as the snapshot has it."""
    report = Report("InstanceType", name, rendered=False, source_file=x.file_of("InstanceType", name))
    section = report.section("Not rendered")
    deleting = name in x.snapshot.deleted_instance_types
    section.add(f"InstanceType/{name} is in the snapshot" + (" and being deleted" if deleting else "")
                + ": InstanceTypes are create-only, an existing one is never rendered or changed; its "
                  "ClusterQueue still follows its spec", x.snap_ref("InstanceType", name))
    it = (x.snapshot.deleted_instance_types if deleting else x.snapshot.instance_types)[name]
    raw = next((obj for (group, kind, _, n), obj in x.snapshot.raw.items()
                if kind == "InstanceType" and n == name), None)
    raw_spec = (raw or {}).get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else msgspec.structs.asdict(it.spec)
    for key, value in spec.items():
        section.add(f"spec.{key}: {show(value)}")
    if not x.rules.queues.derive_instance_types({}, x.settings):  # type: ignore[misc]
        section.add(f"{x.named_one('Queues:deriveInstanceTypes')} is false: no InstanceType is derived",
                    *x.settings_of("Queues:deriveInstanceTypes"))
    x.settings_report(report, x.named("Queues:deriveInstanceTypes"))
    return report


def _instance_type_provenance(x: Explainer, derived: InstanceTypePlan, first: FlavorPlan | None, tier: str | None,
                              preset_origins: list[str]) -> Provenance:
    """Where a derived InstanceType's name, groups, displayName and unitResources come from: the
    pool's first flavor, the naming and grouping rules, the preset match."""
    rules = x.rules
    aware = rules.is_aware(x.settings)
    accel = derived.acceleratable
    kind_name = "accelerated" if accel else "cpu"
    split = "whenAware" if aware else "whenUnaware"
    values = {"gKey": first.gkey if first else "", "gManu": first.gmanu if first else "",
              "aKey": first.akey if first else "", "manufacturer": first.manufacturer if first else "",
              "os": derived.os, "arch": derived.arch}
    product = first.notes.get("product", "") if first else ""
    if not accel:
        display_why = [x.rule("Naming", "unawareCpuDisplayName", value=rules.naming.unawareCpuDisplayName)] if not aware \
            else [f"the first flavor's product note {show(product)}" if product else "the pool's generalGroup (no product)"]
    else:
        display_why = [f"the first flavor's product note {show(product)}" if product
                       else "the pool's acceleratorGroup (the first flavor has no product)"]
    display_why.append(x.rule("Naming", "displayNameMaxLength") + f": cut to {rules.naming.displayNameMaxLength}")
    unit_why = ([x.rule("UnitResourcePresets", "cpuPool")] if not accel else
                [f"tier {tier}: " + x.rule("UnitResourcePresets", "tiers", tier)] + preset_origins if tier else
                [x.rule("UnitResourcePresets", "fallback")] + preset_origins)
    return {
        ("metadata", "name"): [x.format_rule("Naming", ("pool", split, kind_name),
                                             rules.naming.pool[(aware, accel)].source, values),
                               *x.settings_of("Grouping:aware")],
        ("metadata", "labels"): ["marks an InstanceType derived from Nodes (create-only)"],
        ("spec", "displayName"): display_why,
        ("spec", "generalGroup"): [x.format_rule("Grouping", ("pool", split, "generalGroup"),
                                                 rules.grouping.pool_identity[aware][0].source, values)],
        ("spec", "acceleratorGroup"): [x.format_rule("Grouping", ("pool", split, "acceleratorGroup"),
                                                     rules.grouping.pool_identity[aware][1].source, values)],
        ("spec", "acceleratable"): ["the pool is accelerated" if accel else "the pool is a CPU pool"],
        ("spec", "os"): ["the pool's os (its flavors' Node label kubernetes.io/os)"],
        ("spec", "arch"): ["the pool's arch (its flavors' Node label kubernetes.io/arch)"],
        ("spec", "unitResources"): unit_why,
        ("spec", "localStorage"): [x.rule("UnitResourcePresets", "localStorage", value=rules.presets.localStorage)],
    }


# --- LocalQueue, Topology, AdmissionCheck --------------------------------------------------------

def explain_local_queue(x: Explainer, item: Any) -> Report:
    rules = x.rules
    report = Report("LocalQueue", item.name, namespace=item.namespace, template=x.template("LocalQueue"))
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [x.format_rule("Naming", ("localQueue",), rules.naming.local_queue.source,
                                           {"clusterQueue": item.cluster_queue})],
        ("metadata", "namespace"): [x.snap_ref("Namespace", item.namespace, "live and not reserved"),
                                    x.rule("Namespaces", "reserved", value=sorted(rules.namespaces.reserved))],
        ("metadata", "annotations"): [f"the ClusterQueue it feeds: ClusterQueue/{item.cluster_queue}"],
        ("spec", "clusterQueue"): [f"ClusterQueue/{item.cluster_queue} (one LocalQueue per rendered ClusterQueue and "
                                   f"live, non-reserved Namespace)"],
    }
    x.attach_fields(report, x.render("LocalQueue", item), prov)
    section = report.section("Why")
    section.add(f"ClusterQueue/{item.cluster_queue} is rendered; Namespace {item.namespace} is live and not reserved",
                x.rule("Namespaces", "reserved"))
    reserved = sorted(ns for ns in rules.namespaces.reserved)
    section.add(f"reserved namespaces (never get LocalQueues): {', '.join(reserved)}")
    report.facts.update(clusterQueue=item.cluster_queue)
    return report


def _topology_decision(x: Explainer, item: Any) -> tuple[str, bool]:
    """(the profile a rendered Topology is for, whether its levels are the configured ones rather
    than the snapshot's), as the evaluator recorded them when it planned the Topologies."""
    decision = x.decision(f"Topology/{item.name}", "topology")
    if decision is None:  # every rendered Topology is planned, and recorded, by build_topologies
        raise AssertionError(f"no recorded topology decision for Topology/{item.name}")
    return str(decision.input("profile")), decision.input("levelsFrom") == "configured"


def explain_topology(x: Explainer, item: Any) -> Report:
    rules = x.rules
    report = Report("Topology", item.name, template=x.template("Topology"))
    profile, configured = _topology_decision(x, item)
    levels_from = ([x.rule("Topology", "levels", value=list(rules.topology.levels)) + " (hash to the profile)"]
                   if configured else [x.snap_ref("Topology", item.name, "spec.levels (hash to the profile; the "
                                                                         "configured levels do not)")])
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [x.format_rule("Naming", ("topology",), rules.naming.topology.source, {"profile": profile})],
        ("spec", "levels"): levels_from,
    }
    x.attach_fields(report, x.render("Topology", item), prov)
    section = report.section(f"Nodes with profile {profile}")
    for facts in sorted(x.facts.values(), key=lambda f: f.name):
        if facts.profile != profile:
            continue
        own = (x.snapshot.nodes[facts.name].metadata.labels or {}).get(x.vocab.topologyProfile.label)
        section.add(f"{facts.name}: " + ("its own label" if own else "computed from the topology levels"),
                    x.node_ref(facts.name))
    report.facts.update(profile=profile, levels=list(item.levels))
    return report


def explain_admission_check(x: Explainer, item: Any) -> Report:
    rules = x.rules
    report = Report("AdmissionCheck", item.name, template=x.template("AdmissionCheck"))
    index = next(i for i, c in enumerate(rules.queues.admission_checks) if c.name == item.name)
    prov: dict[Any, list[str]] = {
        ("metadata", "name"): [x.rule("Queues", "admissionChecks", index, "name", value=item.name)],
        ("spec", "controllerName"): [x.rule("Queues", "admissionChecks", index, "controllerName",
                                            value=item.controller_name)],
    }
    x.attach_fields(report, x.render("AdmissionCheck", item), prov)
    section = report.section("ClusterQueues")
    when = rules.describe(f"Queues:admissionChecks.{index}.when")
    section.add(f"applies to a queue when {when} and the snapshot does not show it Active=False",
                x.rule("Queues", "admissionChecks", index))
    users = [q.name for q in x.plan.cluster_queues if item.name in q.admission_checks]
    for name in users:
        section.add(f"ClusterQueue/{name}")
    if not users:
        section.add("no rendered ClusterQueue carries it")
    return report
