"""Kueue's admission replayed over one chain (admission.md §4–§8), as Kueue v0.19 does it.

Per ClusterQueue, in name order: the quota holders' usage first (under ``--chain rendered`` a holder
whose queue drains or whose flavor is gone is evicted and queued again), then the pending Workloads
in the queue's order (§5), each given flavors PodSet by PodSet (§6), preempting lower-priority
holders where the quota or the Nodes need it, and placed on Nodes for a TAS flavor (§7).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from heapq import merge
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from gpustack_render.admit.chain import HOLD_AND_DRAIN, quantity_text
from gpustack_render.admit.model import (ADMITTED, EVICTED, FIT, KEPT, MODE_NAMES, NO_CANDIDATES, NO_FIT, NOT_TRIED,
                                         PENDING,
                                         PREEMPT, PREEMPT_MODE, PREEMPTED, QUOTA_RESERVED, REQUIRED, Chain, Cluster,
                                         FlavorQuota, FlavorSpec, PodSetDemand, QueueSpec, WorkloadDemand)
from gpustack_render.admit.nodes import Nodes, Room, podset_room, taint_text, untolerated, selector_matches

LOWER_PRIORITY = "LowerPriority"
MAY_STOP = "MayStopSearch"
STRICT_FIFO = "StrictFIFO"

Usage = dict[tuple[str, str], int]  # (flavor, resource) → amount


@dataclass
class Attempt:
    """One flavor tried for one PodSet: its mode and Kueue's reasons (``explain`` shows each)."""

    flavor: str
    mode: int
    reasons: list[str] = field(default_factory=list)
    nodes: dict[int, int] | None = None


@dataclass
class PodSetResult:
    podset: PodSetDemand
    flavor: str | None = None
    mode: int = NO_FIT
    nodes: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)


@dataclass
class Entry:
    workload: WorkloadDemand
    cluster_queue: str | None
    outcome: str = PENDING
    podsets: list[PodSetResult] = field(default_factory=list)
    preempts: list[str] = field(default_factory=list)
    preempted_by: str | None = None
    evicted: str | None = None
    reason: str = ""


@dataclass
class _Holder:
    workload: WorkloadDemand
    entry: Entry
    usage: Usage
    placed: list[tuple[dict[int, int], Room]]        # per PodSet: Node index → Pods, one Pod's room
    since: str                                       # when it got quota (later: more recently admitted)
    flavors: frozenset[str] = frozenset()            # the flavors it holds
    rank: int = 0                                    # its place in admission order (higher: more recent)


@dataclass
class Result:
    entries: list[Entry]
    usage: dict[str, Usage]                          # queue → (flavor, resource) → used
    queues: dict[str, QueueSpec]
    notes: list[str]
    nodes: Nodes | None = None                       # the Nodes' room after the run (``explain``)
    chain: Chain | None = None


def _order_key(w: WorkloadDemand) -> tuple[int, int, str, str, str]:
    return (-w.priority, 1 if w.extra and not w.created else 0, w.created, w.namespace, w.name)


class Admission:
    """One run over a :class:`Cluster`."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.chain = cluster.chain
        self.nodes = Nodes(cluster.nodes, cluster.reserve)
        self.usage: dict[str, Usage] = defaultdict(lambda: defaultdict(int))
        self.holders: dict[str, dict[int, _Holder]] = defaultdict(dict)  # queue → its holders (by id)
        self.entries: list[Entry] = []
        self.notes = list(cluster.notes)
        self._admitted = 0
        # queue → (flavor, resource) → priority → usage: what lower-priority holders could free, without
        # walking them for every flavor tried
        self.by_priority: dict[str, dict[tuple[str, str], dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
        # queue → flavor → priority → its holders in admission order (preemption takes the last first)
        self.by_flavor: dict[str, dict[str, dict[int, dict[int, _Holder]]]] = defaultdict(dict)
        self._checked: dict[tuple[str, str], str] = {}  # (flavor, selector) → why §6 passes it over
        self._no_victims: dict[tuple[object, ...], int] = {}  # TAS placements no preemption can help (§ _place)

    # --- holders ---------------------------------------------------------------------------------

    def _holder_usage(self, w: WorkloadDemand) -> Usage:
        assert w.holding is not None
        usage: Usage = defaultdict(int)
        for i, podset in enumerate(w.podsets):
            flavors = w.holding.flavors[i] if i < len(w.holding.flavors) else {}
            for resource, amount in podset.usage.items():
                if resource in flavors:
                    usage[(flavors[resource], resource)] += amount
        return usage

    def _eviction(self, w: WorkloadDemand) -> str:
        """Why the chain evicts a holder (rendered chain only; "" when it keeps its quota)."""
        assert w.holding is not None
        queue = self.chain.queues.get(w.holding.cluster_queue)
        if queue is None or queue.stop_policy == HOLD_AND_DRAIN:
            return "ClusterQueue is draining"
        names = {f.name for f in queue.flavors}
        for flavors in w.holding.flavors:
            for flavor in sorted(set(flavors.values())):
                if flavor not in names:
                    return f"flavor {flavor} was removed from the ClusterQueue"
        return ""

    def _keep(self, w: WorkloadDemand) -> None:
        assert w.holding is not None
        cq = w.holding.cluster_queue
        entry = Entry(w, cq, KEPT)
        placed = []
        for i, podset in enumerate(w.podsets):
            flavors = w.holding.flavors[i] if i < len(w.holding.flavors) else {}
            nodes = w.holding.nodes[i] if i < len(w.holding.nodes) else {}
            indexed = {self.nodes.index[n]: c for n, c in nodes.items() if n in self.nodes.index}
            need = podset_room(podset)
            self.nodes.take(indexed, need)
            placed.append((indexed, need))
            flavor = sorted(set(flavors.values()))[0] if flavors else None
            entry.podsets.append(PodSetResult(podset, flavor, FIT, dict(sorted(nodes.items()))))
        entry.reason = "already admitted" if w.holding.admitted else "already holds quota (QuotaReserved)"
        held = frozenset(f for assigned in w.holding.flavors for f in assigned.values())
        self._hold(cq, _Holder(w, entry, self._holder_usage(w), placed, w.holding.reserved_at, held))
        self.entries.append(entry)

    def _hold(self, queue: str, holder: _Holder, sign: int = 1) -> None:
        """Add (or, ``sign`` -1, remove) a holder's usage."""
        priority = holder.workload.priority
        for key, amount in holder.usage.items():
            self.usage[queue][key] += sign * amount
            levels = self.by_priority[queue][key]
            levels[priority] = levels.get(priority, 0) + sign * amount
        lists = self.by_flavor[queue]
        for flavor in holder.flavors:
            level = lists.setdefault(flavor, {}).setdefault(priority, {})
            if sign > 0:
                level[id(holder)] = holder  # (snapshot holders are put in admission order once all are read)
            else:
                del level[id(holder)]
        if sign > 0:
            self.holders[queue][id(holder)] = holder
        else:
            del self.holders[queue][id(holder)]

    # --- the run ---------------------------------------------------------------------------------

    def run(self, evict: bool) -> Result:
        pending: dict[str, list[tuple[WorkloadDemand, str | None]]] = defaultdict(list)
        cohort_skipped = 0
        for w in self.cluster.workloads:
            if w.holding is not None:
                queue = self.chain.queues.get(w.holding.cluster_queue)
                if queue is not None and queue.cohort:
                    cohort_skipped += 1
                    continue
                evicted = self._eviction(w) if evict else ""
                if not evicted:
                    self._keep(w)
                    continue
            else:
                evicted = None
            cq, why = self._resolve(w)
            queue = self.chain.queues.get(cq) if cq else None
            if queue is not None and queue.cohort:
                cohort_skipped += 1
                continue
            if cq is None or queue is None or queue.inactive:
                self.entries.append(Entry(w, cq, PENDING, _untried(w), evicted=evicted, reason=why))
                continue
            pending[cq].append((w, evicted))
        self._rank_snapshot_holders()
        if cohort_skipped:
            self.notes.append(f"{cohort_skipped} Workload(s) of ClusterQueues in a cohort are not previewed "
                              f"(cohorts, borrowing and fair sharing are not modelled)")
        for cq in sorted(pending):
            self._queue(self.chain.queues[cq], sorted(pending[cq], key=lambda p: _order_key(p[0])))
        for entry in self.entries:
            if entry.evicted and entry.outcome == PENDING:
                entry.outcome = EVICTED
        self.entries.sort(key=lambda e: (e.cluster_queue or "", _order_key(e.workload)))
        return Result(self.entries, {q: dict(u) for q, u in self.usage.items()}, self.chain.queues, self.notes,
                      self.nodes, self.chain)

    def _rank_snapshot_holders(self) -> None:
        """The snapshot's holders in admission order: the QuotaReserved time, ties by name (the
        earlier name preempted first, so it is ranked later)."""
        holders = [h for queue in self.holders.values() for h in queue.values()]
        holders.sort(key=lambda h: h.workload.ref, reverse=True)
        holders.sort(key=lambda h: h.since)
        for rank, holder in enumerate(holders):
            holder.rank = rank
        self._admitted = len(holders)
        for lists in self.by_flavor.values():
            for levels in lists.values():
                for priority, level in levels.items():
                    levels[priority] = {id(h): h for h in sorted(level.values(), key=lambda h: h.rank)}

    def _mode(self, podset: PodSetDemand, topology: str) -> str:
        """REQUIRED when the PodSet requires the Topology's lowest level (one Node for all its Pods);
        otherwise its Pods may spread (a required higher level is not modelled: placed as preferred)."""
        levels = self.chain.topologies.get(topology) or []
        lowest = not podset.topology_level or (bool(levels) and podset.topology_level == levels[-1])
        return REQUIRED if podset.topology == REQUIRED and lowest else ""

    def _lower(self, queue: QueueSpec, w: WorkloadDemand, flavors: Iterable[str]) -> Iterator[_Holder]:
        """The holders of ``flavors`` that ``w`` may preempt, in Kueue's order: lowest priority first,
        then the most recently admitted."""
        if queue.preempt_within != LOWER_PRIORITY:
            return
        lists = [self.by_flavor[queue.name].get(f, {}) for f in sorted(set(flavors))]
        seen: set[int] = set()
        for priority in sorted({p for levels in lists for p in levels if p < w.priority}):
            groups = [reversed(levels[priority].values()) for levels in lists if levels.get(priority)]
            for holder in (groups[0] if len(groups) == 1 else merge(*groups, key=lambda h: -h.rank)):
                if id(holder) not in seen:
                    seen.add(id(holder))
                    yield holder

    def _resolve(self, w: WorkloadDemand) -> tuple[str | None, str]:
        """LocalQueue → ClusterQueue, stopped at the first missing link in Kueue's words."""
        if (w.namespace, w.queue) not in self.chain.local_queues:
            return None, f"LocalQueue {w.namespace}/{w.queue} doesn't exist"
        cq = self.chain.local_queues[(w.namespace, w.queue)]
        queue = self.chain.queues.get(cq)
        if queue is None:
            return cq, f"ClusterQueue {cq} doesn't exist"
        if queue.inactive:
            return cq, f"ClusterQueue {cq} is inactive"
        return cq, ""

    def _queue(self, queue: QueueSpec, workloads: Sequence[tuple[WorkloadDemand, str | None]]) -> None:
        blocked: str | None = None
        for w, evicted in workloads:
            entry = Entry(w, queue.name, PENDING, evicted=evicted)
            self.entries.append(entry)
            if blocked is not None:
                entry.podsets = _untried(w)
                entry.reason = f"StrictFIFO: waiting behind {blocked}, the head of ClusterQueue {queue.name}"
                continue
            self._admit(queue, entry)
            if entry.outcome == PENDING and queue.strategy == STRICT_FIFO:
                blocked = w.ref

    # --- one Workload ----------------------------------------------------------------------------

    def _admit(self, queue: QueueSpec, entry: Entry) -> None:
        w = entry.workload
        own: Usage = defaultdict(int)
        tentative: list[tuple[dict[int, int], Room]] = []  # earlier PodSets' Pods, taken while later ones are placed
        for podset in w.podsets:
            result = self._assign(queue, w, podset, own)
            entry.podsets.append(result)
            if result.mode >= PREEMPT_MODE and result.flavor is not None:
                for resource, amount in self._covered(queue, podset).items():
                    own[(result.flavor, resource)] += amount
            if result.nodes:
                placed = ({self.nodes.index[n]: c for n, c in result.nodes.items()}, podset_room(podset))
                self.nodes.take(*placed)
                tentative.append(placed)
        worst = min((r.mode for r in entry.podsets), default=FIT)
        if worst < FIT:
            for placed in tentative:
                self.nodes.take(*placed, -1)
            self.nodes.release(r.flavor for r in entry.podsets if r.nodes and r.flavor)
        if worst < PREEMPT_MODE:
            entry.reason = "; ".join(f"couldn't assign flavors to pod set {r.podset.name}: {', '.join(sorted(r.reasons))}"
                                     for r in entry.podsets if r.mode != FIT)
            return
        victims: list[_Holder] = []
        if worst == PREEMPT_MODE:
            found = self._victims(queue, w, entry.podsets, own)
            if found is None:
                for r in entry.podsets:
                    if r.mode == PREEMPT_MODE:
                        r.mode = NO_CANDIDATES
                entry.reason = "; ".join(f"couldn't assign flavors to pod set {r.podset.name}: "
                                         f"{', '.join(sorted(r.reasons))}" for r in entry.podsets if r.mode != FIT)
                return
            victims = found
        for victim in victims:
            self._evict_holder(queue, victim, w.ref)
        self._commit(queue, entry, own, taken=not victims)
        checks = queue.admission_checks
        waiting = f"waiting for admission checks: {', '.join(checks)}" if checks else ""
        if victims:
            entry.outcome = PREEMPT
            entry.preempts = [v.workload.ref for v in victims]
            entry.reason = (f"preempted {len(victims)} workload(s): {', '.join(entry.preempts)}; "
                            + (f"quota reserved; {waiting}" if checks else "admitted"))
        elif checks:
            entry.outcome, entry.reason = QUOTA_RESERVED, f"quota reserved; {waiting}"
        else:
            entry.outcome, entry.reason = ADMITTED, "admitted"

    def _covered(self, queue: QueueSpec, podset: PodSetDemand) -> dict[str, int]:
        return {r: v for r, v in sorted(podset.usage.items()) if v and r in queue.covered}

    def _assign(self, queue: QueueSpec, w: WorkloadDemand, podset: PodSetDemand, own: Usage) -> PodSetResult:
        """§6: the queue's flavors in order, with the fungibility rule; the best attempt kept."""
        result = PodSetResult(podset)
        requests = self._covered(queue, podset)
        if self.cluster.strict_quota:
            missing = sorted(r for r, v in podset.usage.items() if v and r not in queue.covered)
            if missing:
                result.reasons = [f"resource {r} unavailable in ClusterQueue" for r in missing]
                return result
        best: Attempt | None = None
        for flavor in queue.flavors:
            attempt = self._try(queue, w, podset, flavor, requests, own)
            result.attempts.append(attempt)
            result.reasons += attempt.reasons
            if attempt.mode == FIT or (attempt.mode == PREEMPT_MODE and queue.when_can_preempt == MAY_STOP):
                best = attempt
                break
            if attempt.mode >= PREEMPT_MODE and (best is None or attempt.mode > best.mode):
                best = attempt
        if best is not None:
            result.flavor, result.mode = best.flavor, best.mode
            if best.nodes:
                result.nodes = {self.nodes.nodes[i].name: c for i, c in sorted(best.nodes.items())}
        elif result.attempts:
            result.mode = max(a.mode for a in result.attempts)
        return result

    def _try(self, queue: QueueSpec, w: WorkloadDemand, podset: PodSetDemand, quota: FlavorQuota,
             requests: Mapping[str, int], own: Usage) -> Attempt:
        name = quota.name
        flavor = self.chain.flavors[name]
        refused = self._flavor_check(flavor, podset)
        if refused:
            return Attempt(name, NO_FIT, [refused])
        attempt = Attempt(name, FIT)
        used = self.usage[queue.name]
        for resource, amount in requests.items():
            nominal = quota.nominal.get(resource, 0)
            mine = own[(name, resource)]
            if mine + amount > nominal:
                attempt.reasons.append(
                    f"insufficient quota for {resource} in flavor {name}, previously considered podsets requests "
                    f"({quantity_text(resource, mine)}) + current podset request ({quantity_text(resource, amount)}) "
                    f"> maximum capacity ({quantity_text(resource, nominal)})")
                attempt.mode = NO_FIT
                return attempt
            others = used.get((name, resource), 0)
            if others + mine + amount <= nominal:
                continue
            available = max(0, nominal - others)  # Kueue's Available: 0 when the queue is in debt
            total = others + mine + amount
            attempt.reasons.append(f"insufficient unused quota for {resource} in flavor {name}, "
                                   f"{quantity_text(resource, mine + amount - available)} more needed")
            freeable = (sum(v for p, v in self.by_priority[queue.name][(name, resource)].items() if p < w.priority)
                        if queue.preempt_within == LOWER_PRIORITY else 0)
            attempt.mode = min(attempt.mode, PREEMPT_MODE if total - freeable <= nominal else NO_CANDIDATES)
        if attempt.mode >= PREEMPT_MODE and flavor.topology:
            self._place(queue, w, podset, flavor.name, flavor.topology, attempt)
        return attempt

    def _flavor_check(self, flavor: FlavorSpec, podset: PodSetDemand) -> str:
        """§6 steps 1-2, once per (flavor, selector): why the flavor is passed over, "" if it is not."""
        key = (flavor.name, Nodes.signature(podset))
        found = self._checked.get(key)
        if found is None:
            taint = untolerated(flavor.node_taints, list(podset.tolerations) + list(flavor.tolerations))
            if taint is not None:
                found = f"untolerated taint {taint_text(taint)} in flavor {flavor.name}"
            elif not selector_matches(podset, flavor.node_labels, "", frozenset(flavor.node_labels)):
                found = f"flavor {flavor.name} doesn't match node affinity"
            else:
                found = ""
            self._checked[key] = found
        return found

    def _place(self, queue: QueueSpec, w: WorkloadDemand, podset: PodSetDemand, flavor: str, topology: str,
               attempt: Attempt) -> None:
        """§7 for one flavor; on no room, Preempt when lower-priority holders' Pods make room."""
        spec = self.chain.flavors[flavor]
        need = podset_room(podset)
        mode = self._mode(podset, topology)
        placed, fit = self.nodes.place_fast(spec, podset, need, podset.count, mode)
        if placed is not None:
            attempt.nodes = placed
            return
        text = (f'topology "{topology}" allows to fit only {fit} out of {podset.count} pod(s)' if fit else
                f'topology "{topology}" doesn\'t allow to fit any of {podset.count} pod(s)')
        attempt.reasons.append(text)
        # Whether removing every lower-priority holder would make room only falls as Pods are placed
        # (a lower holder's Pods take what removing them gives back): a "no" holds until room is released.
        memo = (flavor, Nodes.signature(podset), tuple(sorted(need.items())), podset.count, mode, w.priority)
        if self._no_victims.get(memo, -1) == self.nodes.released.get(flavor, 0):
            attempt.mode = NO_FIT
            return
        on_nodes = self.nodes.candidate_set(spec, podset)  # (a flavor's Nodes hold that flavor's holders)
        relevant = [h for h in self._lower(queue, w, (flavor,)) if any(i in on_nodes for p, _ in h.placed for i in p)]
        victims = self._minimal(relevant, lambda removed: self.nodes.place_fast(spec, podset, need, podset.count, mode,
                                                                                _room_of(removed))[0] is not None)
        if victims:
            attempt.mode = min(attempt.mode, PREEMPT_MODE)
            attempt.reasons.append(f"Pending the preemption of {len(victims)} workload(s)")
        else:
            self._no_victims[memo] = self.nodes.released.get(flavor, 0)
            attempt.mode = NO_FIT

    def _minimal(self, candidates: Sequence[_Holder], fits: Callable[[list[_Holder]], bool]) -> list[_Holder] | None:
        """Candidates taken in order until ``fits``; then each given back, in reverse, if it still fits.
        (Taking more never makes it fit less, so the shortest prefix that fits is found by galloping,
        then bisection.)"""
        if not candidates:
            return None
        high = 1  # galloping: the prefixes 1, 2, 4, … until one fits (the set is most often short)
        while not fits(list(candidates[:high])):
            if high >= len(candidates):
                return None
            high = min(2 * high, len(candidates))
        low = high // 2 + 1 if high > 1 else 1
        while low < high:
            mid = (low + high) // 2
            if fits(list(candidates[:mid])):
                high = mid
            else:
                low = mid + 1
        removed = list(candidates[:low])
        for i in range(len(removed) - 2, -1, -1):
            trial = removed[:i] + removed[i + 1:]
            if fits(trial):
                removed = trial
        return removed

    def _victims(self, queue: QueueSpec, w: WorkloadDemand, results: Sequence[PodSetResult],
                 own: Usage) -> list[_Holder] | None:
        """The minimal set of holders whose removal lets every PodSet fit on its assigned flavor:
        candidates taken in order until the quota and the placements fit, then each given back, in
        reverse, if it still fits without it."""
        used = self.usage[queue.name]
        nominal = {(f.name, r): q for f in queue.flavors for r, q in f.nominal.items()}
        short = {key: used.get(key, 0) + amount - nominal.get(key, 0) for key, amount in own.items()}
        placing = [r for r in results if r.flavor and self.chain.flavors[r.flavor].topology]
        sets = [self.nodes.candidate_set(self.chain.flavors[r.flavor or ""], r.podset) for r in placing]
        on_nodes = sets[0] if len(sets) == 1 else frozenset().union(*sets)
        flavors = {r.flavor for r in results if r.mode == PREEMPT_MODE and r.flavor}

        def fits(freed: Usage, extra: dict[int, Room], record: bool = False) -> bool:
            if any(short[key] > freed.get(key, 0) for key in short):
                return False
            taken: list[tuple[dict[int, int], Room]] = []
            try:
                for r in placing:
                    spec = self.chain.flavors[r.flavor or ""]
                    need = podset_room(r.podset)
                    placed = self.nodes.place_fast(spec, r.podset, need, r.podset.count,
                                                   self._mode(r.podset, spec.topology), extra)[0]
                    if placed is None:
                        return False
                    self.nodes.take(placed, need)
                    taken.append((placed, need))
                    if record:
                        r.nodes = {self.nodes.nodes[i].name: c for i, c in sorted(placed.items())}
                return True
            finally:
                for placed, need in taken:
                    self.nodes.take(placed, need, -1)

        removed: list[_Holder] = []
        freed: Usage = defaultdict(int)
        extra: dict[int, Room] = {}
        quota_met = False
        for holder in self._lower(queue, w, flavors):
            touches = any(i in on_nodes for p, _ in holder.placed for i in p)
            if not touches and (quota_met or not any(k in short for k in holder.usage)):
                continue  # (once the quota is met, only room on the PodSets' Nodes can help)
            removed.append(holder)
            _add(freed, extra, holder, 1)
            if not quota_met and any(short[key] > freed.get(key, 0) for key in short):
                continue
            first = not quota_met
            quota_met = True
            if (first or touches) and fits(freed, extra):
                break
        else:
            return None
        for i in range(len(removed) - 2, -1, -1):
            _add(freed, extra, removed[i], -1)
            if fits(freed, extra):
                del removed[i]
            else:
                _add(freed, extra, removed[i], 1)
        fits(freed, extra, record=True)  # the placements of the final set
        return removed

    def _evict_holder(self, queue: QueueSpec, victim: _Holder, by: str) -> None:
        self._hold(queue.name, victim, -1)
        for placed, need in victim.placed:
            self.nodes.take(placed, need, -1)
        self.nodes.release(victim.flavors)
        victim.entry.outcome, victim.entry.preempted_by = PREEMPTED, by
        victim.entry.reason = f"preempted by {by}"

    def _commit(self, queue: QueueSpec, entry: Entry, own: Usage, taken: bool) -> None:
        """Add the admitted Workload's usage and Pods (``taken``: its Pods are already on their Nodes);
        it holds quota for the rest of the run, as the most recently admitted."""
        placed = []
        for r in entry.podsets:
            indexed = {self.nodes.index[n]: c for n, c in r.nodes.items()}
            need = podset_room(r.podset)
            if not taken:
                self.nodes.take(indexed, need)
            placed.append((indexed, need))
        self._admitted += 1
        since = f"\uffff{self._admitted:09d}"
        flavors = frozenset(r.flavor for r in entry.podsets if r.flavor)
        self._hold(queue.name, _Holder(entry.workload, entry, dict(own), placed, since, flavors, self._admitted))


def _add(freed: Usage, extra: dict[int, Room], holder: _Holder, sign: int) -> None:
    """Count (``sign`` 1) or uncount (-1) what removing ``holder`` frees: its quota and its Pods' room."""
    for key, amount in holder.usage.items():
        freed[key] += sign * amount
    _add_room(extra, holder, sign)


def _add_room(room: dict[int, Room], holder: _Holder, sign: int = 1) -> None:
    """Count (``sign`` 1) or uncount (-1) the room ``holder``'s Pods take, per Node index."""
    for placed, need in holder.placed:
        for i, pods in placed.items():
            node = room.setdefault(i, {})
            for resource, amount in need.items():
                node[resource] = node.get(resource, 0) + sign * amount * pods


def _room_of(holders: Sequence[_Holder]) -> dict[int, Room]:
    """The room ``holders``' Pods take per Node index."""
    room: dict[int, Room] = {}
    for holder in holders:
        _add_room(room, holder)
    return room


def admit(cluster: Cluster, evict: bool) -> Result:
    """Run admission over ``cluster``; ``evict``: check holders against the chain first (rendered)."""
    return Admission(cluster).run(evict)


def _untried(w: WorkloadDemand) -> list[PodSetResult]:
    return [PodSetResult(p, mode=NOT_TRIED) for p in w.podsets]


def mode_name(mode: int) -> str | None:
    return MODE_NAMES.get(mode)
