"""Stage 4 (stage4-chain.md): pools, InstanceTypes, ClusterQueues, LocalQueues, Topologies,
AdmissionChecks and the catalog, from the flavors and the converged Node view."""

from __future__ import annotations

from typing import Any, Mapping

from gpustack_render.errors import Diagnostics, UserError
from gpustack_render.evaluate.nodes import ARCH_LABEL, OS_LABEL, NodeFacts, profile_of_levels
from gpustack_render.evaluate.plan import (AdmissionCheckPlan, CatalogItemPlan, FlavorPlan, InstanceTypePlan,
                                           LocalQueuePlan, Plan, PoolPlan, TopologyPlan)
from gpustack_render.evaluate.presets import PresetMatcher
from gpustack_render.evaluate.record import Decision, Recorder
from gpustack_render.rules import Rules
from gpustack_render.snapshot import Snapshot


def flavor_order(flavor: FlavorPlan) -> tuple[int, str]:
    """Small nodes fill first: per-node count ascending, then name (§2.4 step 3)."""
    return flavor.count, flavor.name


def build_topologies(facts: list[NodeFacts], rules: Rules, snapshot: Snapshot, diag: Diagnostics,
                     recorder: Recorder | None = None) -> tuple[list[TopologyPlan], set[str]]:
    """One Topology per distinct live profile; returns also the profiles that cannot be rendered."""
    configured = list(rules.topology.levels)
    configured_profile = profile_of_levels(rules, configured)
    plans, missing = [], set()
    for profile in sorted({f.profile for f in facts}):
        name = rules.naming.topology.render({"profile": profile})
        levels: list[str] | None = configured if profile == configured_profile else None
        existing = snapshot.topologies.get(name)
        if levels is None and existing is not None:
            theirs = [lvl.nodeLabel for lvl in existing.spec.levels]
            if theirs and profile_of_levels(rules, theirs) == profile:
                levels = theirs
        if recorder is not None:
            recorder.record(f"Topology/{name}", Decision(
                "topology", levels, "Topology:levels", rules.origins.get("Topology:levels", ""),
                (("profile", profile), ("configuredProfile", configured_profile),
                 ("levelsFrom", "configured" if profile == configured_profile else "snapshot" if levels else ""))))
        if levels is None:
            diag.warn(f"Topology/{name}: no topology levels hash to profile {profile}; it cannot be rendered "
                      f"and queues with flavors of that profile are refused (MissingTopology)")
            missing.add(profile)
            continue
        plans.append(TopologyPlan(name, levels))
    return plans, missing


def build_pools(flavors: list[FlavorPlan], rules: Rules, aware: bool) -> list[PoolPlan]:
    pools: dict[str, PoolPlan] = {}
    general_fmt, accel_fmt = rules.grouping.pool_identity[aware]
    for flavor in flavors:
        fields = {"gKey": flavor.gkey, "gManu": flavor.gmanu, "aKey": flavor.akey,
                  "manufacturer": flavor.manufacturer, "os": flavor.os, "arch": flavor.arch}
        name = rules.naming.pool[(aware, flavor.accelerated)].render(fields)
        pool = pools.get(name)
        general, accelerator = general_fmt.render(fields), accel_fmt.render(fields) if flavor.accelerated else ""
        if pool is None:
            pool = pools[name] = PoolPlan(
                name=name, accelerated=flavor.accelerated, general_group=general, accelerator_group=accelerator,
                os=flavor.os, arch=flavor.arch,
                catalog_name=rules.naming.catalog[(aware, flavor.accelerated)].render(fields))
        elif _pool_identity(pool) != (flavor.accelerated, general, accelerator, flavor.os, flavor.arch):
            _pool_collision(rules, aware, pool, flavor, (flavor.accelerated, general, accelerator, flavor.os, flavor.arch))
        pool.flavors.append(flavor)
    for pool in pools.values():
        pool.flavors.sort(key=flavor_order)
    return sorted(pools.values(), key=lambda p: p.name)


def _pool_identity(pool: PoolPlan) -> tuple[bool, str, str, str, str]:
    return pool.accelerated, pool.general_group, pool.accelerator_group, pool.os, pool.arch


def _pool_collision(rules: Rules, aware: bool, pool: PoolPlan, flavor: FlavorPlan,
                    identity: tuple[bool, str, str, str, str]) -> None:
    """Two pools that share a name would share one ClusterQueue and InstanceType: the second pool's
    queue, InstanceType and LocalQueues would silently vanish from the render."""
    rule = f"pool.{'whenAware' if aware else 'whenUnaware'}.{'accelerated' if flavor.accelerated else 'cpu'}"
    words = ("accelerated", "general group", "accelerator group", "os", "arch")
    first = ", ".join(f"{w}={v}" for w, v in zip(words, _pool_identity(pool)) if v != "")
    second = ", ".join(f"{w}={v}" for w, v in zip(words, identity) if v != "")
    raise UserError.single(f"two pools get the same name ({first}; and {second}, from ResourceFlavor/{flavor.name}); "
                           f"the name format {rule} must keep every field of the pool identity",
                           file=rules.origins.get(f"Naming:{rule}", ""), obj=f"ClusterQueue/{pool.name}")


def derive_instance_types(pools: list[PoolPlan], rules: Rules, snapshot: Snapshot, aware: bool,
                          presets: PresetMatcher, recorder: Recorder | None = None) -> list[InstanceTypePlan]:
    existing = set(snapshot.instance_types) | set(snapshot.deleted_instance_types)
    naming, out = rules.naming, []
    for pool in pools:
        if not pool.flavors or pool.name in existing:
            continue
        first = pool.flavors[0]
        product = first.notes.get("product", "")
        if not pool.accelerated and not aware:
            display = naming.unawareCpuDisplayName
        else:
            display = product or (pool.accelerator_group if pool.accelerated else pool.general_group)
        steps: list[dict[str, Any]] | None = [] if recorder is not None else None
        cpu, ram = presets.unit_resources(pool.accelerated, first.manufacturer, product, steps)
        if recorder is not None:
            recorder.record(f"InstanceType/{pool.name}", Decision(
                "preset", (cpu, ram), inputs=(("manufacturer", first.manufacturer), ("product", product),
                                              ("firstFlavor", first.name), ("flavors", [f.name for f in pool.flavors])),
                steps=tuple(steps or ())))
        out.append(InstanceTypePlan(
            name=pool.name, display_name=display[:naming.displayNameMaxLength],
            general_group=pool.general_group, accelerator_group=pool.accelerator_group,
            acceleratable=pool.accelerated, os=pool.os, arch=pool.arch, unit_cpu=cpu, unit_ram=ram,
            local_storage=rules.presets.localStorage))
    return out


def build_local_queues(queue_names: list[str], rules: Rules, snapshot: Snapshot) -> list[LocalQueuePlan]:
    namespaces = [ns for ns in snapshot.namespaces if ns not in rules.namespaces.reserved]
    return [LocalQueuePlan(rules.naming.local_queue.render({"clusterQueue": q}), ns, q)
            for ns in namespaces for q in queue_names]


def build_admission_checks(rules: Rules) -> list[AdmissionCheckPlan]:
    return [AdmissionCheckPlan(c.name, c.controller_name) for c in rules.queues.admission_checks]


def build_catalog(pools: list[PoolPlan], snapshot: Snapshot, aware: bool) -> list[CatalogItemPlan]:
    merged: dict[str, list[PoolPlan]] = {}
    for pool in pools:
        if pool.flavors:
            merged.setdefault(pool.catalog_name, []).append(pool)
    items = []
    for name, group in sorted(merged.items()):
        flavors = sorted((f for p in group for f in p.flavors), key=flavor_order)
        first, pool = flavors[0], group[0]
        notes = first.notes
        if pool.accelerated:
            sliceable = _sliceable(pool.accelerator_group, [n for f in flavors for n in f.nodes], snapshot)
            manufacturer = notes.get("manufacturer", "")
            product, family = notes.get("product", ""), notes.get("family", "")
        else:
            sliceable = False
            manufacturer = notes.get("manufacturer", "") if aware else pool.general_group  # the fixed group
            product, family = (notes.get("product", ""), notes.get("family", "")) if aware else ("", "")
        items.append(CatalogItemPlan(
            name=name, general_group=pool.general_group, accelerator_group=pool.accelerator_group,
            acceleratable=pool.accelerated, manufacturer=manufacturer, product=product, family=family,
            memory=notes.get("memory", "") if pool.accelerated else "",
            cores=notes.get("cores", "") if pool.accelerated else "", sliceable=sliceable))
    return items


def _sliceable(akey: str, nodes: list[str], snapshot: Snapshot) -> bool:
    for node in nodes:
        devices = snapshot.devices.get(node)
        if devices is None:
            continue
        for group in devices.spec.groups:
            if f"{group.manufacturer}-{group.id}" != akey:
                continue
            for card in group.accelerators:
                status = card.status
                partitioned = status.physicalSliced is not None and status.physicalSliced.count > 0
                if not partitioned and status.logicalSliced is not None and status.logicalSliced.count > 0:
                    return True
    return False


def queue_labels(general_group: str, accelerator_group: str, acceleratable: bool, os: str, arch: str,
                 aware: bool, rules: Rules) -> dict[str, str]:
    """§2.2: a ClusterQueue's labels, keys from the Vocabulary (the fixed generic group makes none)."""
    vocab = rules.vocabulary
    assert vocab is not None
    labels = {vocab.acceleratableLabel: "true" if acceleratable else "false", vocab.queueType.key: vocab.queueType.queue}
    if os:
        labels[OS_LABEL] = os
    if arch:
        labels[ARCH_LABEL] = arch
    if acceleratable and accelerator_group:
        labels[rules.normalisation.aKey.labelPrefix + accelerator_group] = "true"
    if aware and general_group and general_group != rules.grouping.generic_group:
        labels[vocab.generalGroupPrefix + general_group] = "true"
    return dict(sorted(labels.items()))


def flavor_selector(labels: Mapping[str, str], rules: Rules) -> dict[str, str]:
    """§2.4 step 1: the pairs a flavor's metadata.labels must contain to be selected."""
    vocab, akey_prefix = rules.vocabulary, rules.normalisation.aKey.labelPrefix
    keep = {OS_LABEL, ARCH_LABEL, vocab.acceleratableLabel}
    prefixes = (vocab.generalGroupPrefix, akey_prefix)
    selector = {k: v for k, v in labels.items() if k in keep or (k.startswith(prefixes) and v == "true")}
    selector[vocab.queueType.key] = vocab.queueType.flavor
    return selector


def report_finalizing_flavors(plan: Plan, snapshot: Snapshot, rules: Rules, diag: Diagnostics) -> None:
    """A ResourceFlavor the snapshot holds but no Node feeds any more is not rendered (Kueue finalizes
    it once no queue references it); say which queues lose it. A queue draining while workloads
    still hold quota keeps its groups verbatim (lifecycle rule), so it does not lose it yet."""
    rendered = {f.name for f in plan.flavors}
    prefix = rules.naming.resource_flavor_prefix
    gone = sorted(name for name in snapshot.resource_flavors if name not in rendered and name.startswith(prefix))
    still_referenced = {q.name: {f.get("name") for g in q.kept_resource_groups or [] if isinstance(g, dict)
                                 for f in g.get("flavors") or [] if isinstance(f, dict)}
                        for q in plan.cluster_queues}
    for name in gone:
        losers = sorted(q for q, cq in snapshot.cluster_queues.items()
                        if any(f.name == name for g in cq.spec.resourceGroups for f in g.flavors)
                        and name not in still_referenced.get(q, set()))
        diag.warn(f"ResourceFlavor/{name}: no managed Node feeds it any more; not rendered (finalizing)"
                  + (f"; dropped from ClusterQueue {', '.join(losers)}" if losers else ""))
