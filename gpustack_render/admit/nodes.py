"""Nodes for placement (admission.md §7): which Nodes a PodSet may use on a flavor, and their free room.

Room is kept per Node in Kueue's int64 accounting (cpu in milli-units), every resource a Pod
requests before transformation plus one ``pods`` per Pod. The Nodes a flavor selects are found
once per flavor, and the ones a PodSet's selector, affinity and tolerations then allow once per
distinct (flavor, selector): the cost of a placement grows with the Nodes of its flavor that have
room, never with the Workloads times every Node.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from heapq import heappop, heappush
from typing import Any, Iterable, Mapping, Sequence

from gpustack_render.admit.chain import resource_value
from gpustack_render.admit.model import REQUIRED, FlavorSpec, NodeRoom, PodSetDemand
from gpustack_render.pin.explain_nodes import satisfies

PODS = "pods"
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
Room = dict[str, int]


def taint_text(taint: Mapping[str, Any]) -> str:
    """A taint as Kueue's reason prints it (Go's ``%v`` of the struct: ``{key value Effect <nil>}``;
    the time, when set, as written)."""
    added = taint.get("timeAdded")
    return (f"{{{taint.get('key') or ''} {taint.get('value') or ''} {taint.get('effect') or ''} "
            f"{added if added else '<nil>'}}}")


def _tolerates(toleration: Any, taint: Mapping[str, Any]) -> bool:
    if not isinstance(toleration, dict):
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: Iterable[Any], tolerations: Sequence[Any]) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates, else ``None``."""
    for taint in taints:
        if isinstance(taint, dict) and taint.get("effect") in BLOCKING_EFFECTS:
            if not any(_tolerates(t, taint) for t in tolerations):
                return taint
    return None


def _requirement_holds(expression: Any, labels: Mapping[str, str], name: str, field: bool) -> bool:
    if not isinstance(expression, dict):
        return False
    if field:  # matchFields: only metadata.name exists
        fields = {"metadata.name": name}
        return satisfies(expression, fields) if expression.get("key") == "metadata.name" else False
    return satisfies(expression, labels)


def term_matches(term: Any, labels: Mapping[str, str], name: str) -> bool:
    """One nodeSelectorTerm (its expressions and fields ANDed; an empty term matches nothing)."""
    if not isinstance(term, dict):
        return False
    expressions, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return (all(_requirement_holds(e, labels, name, False) for e in expressions)
            and all(_requirement_holds(f, labels, name, True) for f in fields))


def selector_matches(podset: PodSetDemand, labels: Mapping[str, str], name: str = "",
                     keys: frozenset[str] | None = None) -> bool:
    """The Pod's nodeSelector and required node affinity against ``labels``. With ``keys`` (a
    flavor's nodeLabels keys), both are first reduced to those keys, as Kueue's flavor check does:
    a term left with no expression matches any flavor."""
    for key, value in podset.node_selector.items():
        if (keys is None or key in keys) and labels.get(key) != value:
            return False
    terms = podset.affinity_terms
    if terms is None:
        return True
    if keys is None:
        return any(term_matches(t, labels, name) for t in terms)
    reduced = []
    for term in terms:
        kept = [e for e in (term.get("matchExpressions") or [] if isinstance(term, dict) else [])
                if isinstance(e, dict) and e.get("key") in keys]
        if not kept:
            return True
        reduced.append({"matchExpressions": kept})
    return any(term_matches(t, labels, name) for t in reduced)


def podset_room(podset: PodSetDemand) -> Room:
    """:func:`pod_room` of one PodSet's Pod, computed once (treat it as read-only)."""
    room = podset.room
    if room is None:
        room = podset.room = pod_room(podset.per_pod)
    return room


def pod_room(per_pod: Mapping[str, Any]) -> Room:
    """One Pod's requests in int64 accounting, plus its ``pods`` slot."""
    room = {r: resource_value(r, q) for r, q in per_pod.items() if q}
    room[PODS] = 1
    return room


def fits_count(free: Room, need: Room) -> int:
    """How many Pods of ``need`` fit in ``free``."""
    count = None
    for resource, amount in need.items():
        if amount <= 0:
            continue
        n = free.get(resource, 0) // amount
        count = n if count is None or n < count else count
        if count <= 0:
            return 0
    return count if count is not None else 1 << 30


class _Index:
    """The Nodes one (flavor, selector) allows, bucketed by how many Pods of one need each still
    holds, so a placement finds its Node without looking at every Node of the pool. Buckets are
    heaps of Node indexes (name order), cleaned lazily: an entry counts only while the Node's count
    is still the bucket's."""

    __slots__ = ("need", "count", "buckets", "keys", "total")

    def __init__(self, need: Room) -> None:
        self.need = need
        self.count: dict[int, int] = {}
        self.buckets: dict[int, list[int]] = {}
        self.keys: list[int] = []  # the bucket counts, ascending
        self.total = 0

    def update(self, i: int, count: int) -> None:
        old = self.count.get(i)
        if old == count:
            return
        self.count[i] = count
        self.total += count - (old or 0)
        if count > 0:
            heap = self.buckets.get(count)
            if heap is None:
                heap = self.buckets[count] = []
                insort(self.keys, count)
            heappush(heap, i)

    def _first(self, count: int) -> int | None:
        heap = self.buckets[count]
        while heap and self.count.get(heap[0]) != count:
            heappop(heap)
        return heap[0] if heap else None

    def at_least(self, n: int) -> tuple[int, int] | None:
        """The Node that holds ``n`` Pods and is left with the least room (ties: name)."""
        for count in self.keys[bisect_left(self.keys, n):]:
            i = self._first(count)
            if i is not None:
                return count, i
        return None

    def roomiest(self) -> tuple[int, int] | None:
        for count in reversed(self.keys):
            i = self._first(count)
            if i is not None:
                return count, i
        return None


class Nodes:
    """The Nodes' free room, and the Nodes each flavor and each PodSet selector may use."""

    def __init__(self, nodes: Sequence[NodeRoom], reserve: Mapping[str, Any]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        taken = pod_room(reserve)
        taken.pop(PODS)
        self.free: list[Room] = []
        for node in self.nodes:
            room = {r: resource_value(r, q) for r, q in node.allocatable.items()}
            for resource, amount in taken.items():
                room[resource] = room.get(resource, 0) - amount
            self.free.append(room)
        self._flavor: dict[str, list[int]] = {}
        self._by_label: dict[str, dict[str, list[int]]] = {}
        self._candidates: dict[tuple[str, str], list[int]] = {}
        self._indexes: dict[tuple[str, str, tuple[tuple[str, int], ...]], _Index] = {}
        self._member_of: dict[int, list[_Index]] = {}
        # per flavor, how often room on its Nodes was freed for good (a placement that failed may fit again)
        self.released: dict[str, int] = {}
        self._sets: dict[tuple[str, str], frozenset[int]] = {}

    def _with_label(self, key: str, value: str) -> list[int]:
        """The Nodes whose label ``key`` is ``value`` (each key's values indexed once)."""
        values = self._by_label.get(key)
        if values is None:
            values = self._by_label[key] = {}
            for i, node in enumerate(self.nodes):
                if key in node.labels:
                    values.setdefault(node.labels[key], []).append(i)
        return values.get(value, [])

    def of_flavor(self, flavor: FlavorSpec) -> list[int]:
        found = self._flavor.get(flavor.name)
        if found is None:
            wanted = flavor.node_labels.items()
            pool = (min((self._with_label(k, v) for k, v in wanted), key=len) if wanted
                    else range(len(self.nodes)))
            found = [i for i in pool if self.nodes[i].schedulable
                     and all(self.nodes[i].labels.get(k) == v for k, v in wanted)]
            self._flavor[flavor.name] = found
        return found

    @staticmethod
    def signature(podset: PodSetDemand) -> str:
        key = podset.selector_key
        if key is None:
            key = podset.selector_key = repr((podset.node_selector, podset.affinity_terms, podset.tolerations))
        return key

    def candidates(self, flavor: FlavorSpec, podset: PodSetDemand) -> list[int]:
        """The flavor's Nodes the PodSet's whole selector, affinity and tolerations allow."""
        sig = self.signature(podset)
        found = self._candidates.get((flavor.name, sig))
        if found is None:
            tolerations = list(podset.tolerations) + list(flavor.tolerations)
            found = [i for i in self.of_flavor(flavor)
                     if selector_matches(podset, self.nodes[i].labels, self.nodes[i].name)
                     and untolerated(self.nodes[i].taints, tolerations) is None]
            self._candidates[(flavor.name, sig)] = found
        return found

    def candidate_set(self, flavor: FlavorSpec, podset: PodSetDemand) -> frozenset[int]:
        key = (flavor.name, self.signature(podset))
        found = self._sets.get(key)
        if found is None:
            found = self._sets[key] = frozenset(self.candidates(flavor, podset))
        return found

    def release(self, flavors: Iterable[str]) -> None:
        for flavor in flavors:
            self.released[flavor] = self.released.get(flavor, 0) + 1

    def take(self, placed: Mapping[int, int], need: Room, sign: int = 1) -> None:
        """Take (``sign`` 1) or give back (-1) ``placed`` Pods of ``need`` per Node index."""
        for i, pods in placed.items():
            room = self.free[i]
            for resource, amount in need.items():
                room[resource] = room.get(resource, 0) - sign * amount * pods
            for index in self._member_of.get(i, ()):
                index.update(i, fits_count(room, index.need))

    def place_fast(self, flavor: FlavorSpec, podset: PodSetDemand, need: Room, count: int,
                   mode: str, extra: Mapping[int, Room] | None = None) -> tuple[dict[int, int] | None, int]:
        """:meth:`place` over the (flavor, selector, need) index: the same answer, without a scan.
        ``extra``'s Nodes are counted with that room given back while this placement is planned."""
        key = (flavor.name, self.signature(podset), tuple(sorted(need.items())))
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = _Index(need)
            for i in self.candidates(flavor, podset):
                index.update(i, fits_count(self.free[i], need))
                self._member_of.setdefault(i, []).append(index)
        overridden = [i for i in extra if i in index.count] if extra else []
        for i in overridden:
            assert extra is not None
            room = self.free[i]
            index.update(i, fits_count({r: room.get(r, 0) + extra[i].get(r, 0) for r in set(room) | set(extra[i])},
                                       need))
        try:
            return self._plan(index, need, count, mode)
        finally:
            for i in overridden:
                index.update(i, fits_count(self.free[i], need))

    def _plan(self, index: _Index, need: Room, count: int, mode: str) -> tuple[dict[int, int] | None, int]:
        if mode == REQUIRED:
            found = index.at_least(count)
            if found is None:
                best = index.roomiest()
                return None, best[0] if best else 0
            return {found[1]: count}, count
        if index.total < count:
            return None, index.total
        placed: dict[int, int] = {}
        left = count
        saved: dict[int, int] = {}
        while left > 0:  # (each Node taken whole is set to 0 while planning, then restored)
            found = index.at_least(left)
            if found is not None:
                placed[found[1]] = left
                break
            roomiest = index.roomiest()
            assert roomiest is not None  # (total >= left)
            placed[roomiest[1]] = saved[roomiest[1]] = roomiest[0]
            left -= roomiest[0]
            index.update(roomiest[1], 0)
        for i, n in saved.items():
            index.update(i, n)
        return placed, count
