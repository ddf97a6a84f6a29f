"""``diff``: the desired objects (what ``render`` prints) against the current ones.

Current is a previous render (``--against``) or the live objects of the rendered kinds found in the
snapshot. What is compared, what may be called "removed" and which server-owned fields and defaults
are ignored all come from ``rules/diff.yaml`` (:class:`~gpustack_render.rules.model.DiffRules`), so an
admin can widen or narrow the diff without code. Output formats live in :mod:`diff_report`.
"""

from __future__ import annotations

import copy
import json
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from gpustack_render.rules.model import DiffRules
from gpustack_render.errors import Problem, UserError
from gpustack_render.k8s import Key, field_path, identity, label
from gpustack_render.k8s import format_decimal_si

Path_ = tuple[str, ...]
ACTIONS = ("added", "changed", "removed")
_MISSING = object()
_TOP_ORDER = ("apiVersion", "kind", "metadata", "spec")


@dataclass
class Change:
    """One object (or one Node subresource) that differs. ``current``/``desired`` are the compared
    forms (ignored fields dropped), ``None`` on the side where the object is absent."""

    action: str  # "added" | "changed" | "removed"
    key: Key
    api_version: str
    current: dict[str, Any] | None
    desired: dict[str, Any] | None
    fields: list[str] = field(default_factory=list)
    subresource: str | None = None     # Node patches only: "" (metadata) or "status"
    node_patch: list[dict[str, Any]] | None = None  # Node patches only: the patch against the real Node

    @property
    def label(self) -> str:
        return label(self.key) + (" (status)" if self.subresource == "status" else "")

    def patch(self) -> list[dict[str, Any]]:
        """RFC 6902 ops turning current (``{}`` when absent) into desired (``{}`` when removed);
        for a Node, the pending patch against the Node as it is in the snapshot."""
        if self.node_patch is not None:
            return self.node_patch
        import jsonpatch
        return list(jsonpatch.make_patch(self.current or {}, self.desired or {}).patch)


def _copy(obj: Any) -> Any:
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError):
        return copy.deepcopy(obj)


def _get(obj: Any, path: Path_) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def _pop(obj: dict[str, Any], path: Path_, other: Any) -> None:
    """Remove ``path`` from ``obj``, then the maps that removal left empty, unless ``other`` (the
    opposite side) has that map too: ``annotations: {}`` left behind is noise, a desired one is not."""
    parents = [obj]
    for part in path[:-1]:
        child = parents[-1].get(part)
        if not isinstance(child, dict):
            return
        parents.append(child)
    if path[-1] not in parents[-1]:
        return
    del parents[-1][path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        if parents[depth] or _get(other, path[:depth]) is not _MISSING:
            break
        del parents[depth - 1][path[depth - 1]]


def _same_scalar(have: Any, default: Any) -> bool:
    """Server defaults compare as the API prints them: ``weight: 1`` equals ``"1"``, booleans exactly."""
    if isinstance(have, (dict, list)) or have is None:
        return False
    if isinstance(default, bool) or isinstance(have, bool):
        return have is default
    return str(have) == str(default)


def _align(obj: Any, model: Any) -> Any:
    """``obj`` with its keys in ``model``'s order (then the rest sorted), so a line diff shows real
    changes, not the API server's field order."""
    if isinstance(obj, dict) and isinstance(model, dict):
        keys = [k for k in model if k in obj] + sorted(k for k in obj if k not in model)
        return {k: _align(obj[k], model.get(k)) for k in keys}
    if isinstance(obj, list) and isinstance(model, list):
        return [_align(v, model[i] if i < len(model) else None) for i, v in enumerate(obj)]
    return obj


def _canonical(obj: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys in manifest order (apiVersion, kind, metadata, spec, then the rest sorted)."""
    keys = [k for k in _TOP_ORDER if k in obj] + sorted(k for k in obj if k not in _TOP_ORDER)
    return {k: obj[k] for k in keys}


class DiffPolicy:
    """The compiled meaning of ``rules/diff.yaml``."""

    def __init__(self, rules: DiffRules) -> None:
        self.order = {(k.group, k.kind): i for i, k in enumerate(rules.kinds)}
        self.owner_labels = [(owner.key, owner.value) for owner in rules.owned.labels]
        self.prefixes = tuple(rules.owned.namePrefixes)
        self.create_only = {(k.group, k.kind) for k in rules.createOnly}
        self.always = [tuple(f.path) for f in rules.ignore if not f.whenDesiredUnset]
        self.unless_desired = [tuple(f.path) for f in rules.ignore if f.whenDesiredUnset]
        self.defaults: dict[tuple[str, str], list[tuple[Path_, Any]]] = {
            (d.group, d.kind): [(tuple(v.path), v.value) for v in d.values] for d in rules.defaults}

    def default(self, key: Key, path: Path_) -> Any:
        """The server default of ``path`` for ``key``'s kind (``None`` when the rules name none): what
        an object that leaves the field unset means."""
        return next((value for p, value in self.defaults.get(key[:2], ()) if p == path), None)

    def compared(self, key: Key) -> bool:
        return key[:2] in self.order

    def sort_key(self, key: Key) -> tuple[int, str, str]:
        return self.order.get(key[:2], len(self.order)), key[2], key[3]

    def owns(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        for key, value in self.owner_labels:  # a loop, not any(): it runs for every current object
            if key in labels and (value is None or str(labels[key]) == value):
                return True
        return str(meta.get("name") or "").startswith(self.prefixes) if self.prefixes else False

    def removes(self, key: Key, current: Mapping[str, Any], existing: set[Key]) -> bool:
        """Whether a current object the render lacks is a removal: owned, and not a create-only
        object that exists (it is absent from the render because it already exists)."""
        return self.owns(current) and not (key[:2] in self.create_only and key in existing)

    def desired_form(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The desired object without the always-ignored fields (a render has none: no copy then)."""
        if all(_get(obj, p) is _MISSING for p in self.always):
            return obj
        out: dict[str, Any] = _copy(obj)
        for path in self.always:
            _pop(out, path, None)
        return out

    def current_form(self, obj: dict[str, Any], desired: dict[str, Any] | None) -> dict[str, Any]:
        """The current object without what the API server and controllers own, and without the
        server defaults that ``desired`` leaves unset, keys in ``desired``'s order."""
        out = _copy(obj)
        for path in self.always:
            _pop(out, path, desired)
        for path in self.unless_desired:
            if _get(desired, path) is _MISSING:
                _pop(out, path, desired)
        for path, value in self.defaults.get(identity(obj)[:2], ()):
            if _get(desired, path) is _MISSING and _same_scalar(_get(out, path), value):
                _pop(out, path, desired)
        return _align(out, desired) if desired is not None else _canonical(out)


def changed_fields(current: Any, desired: Any) -> list[str]:
    """The field paths that differ (deepdiff), e.g. ``spec.stopPolicy``, ``metadata.labels["a/b"]``."""
    from deepdiff import DeepDiff
    try:  # deepdiff >= 8.1 reports a mostly-replaced map as one change unless told to go deeper
        tree = DeepDiff(current, desired, view="tree", threshold_to_diff_deeper=0)
    except TypeError:
        tree = DeepDiff(current, desired, view="tree")
    return sorted({field_path(level.path(output_format="list")) for levels in tree.values() for level in levels})


def compare(desired_objects: Sequence[dict[str, Any]], current_objects: Iterable[dict[str, Any]],
            policy: DiffPolicy, existing: set[Key]) -> list[Change]:
    """Match by (group, kind, namespace, name); report added, changed, and removed objects.

    "Removed" only for objects the tool owns, and never for a create-only kind that ``existing``
    (the snapshot) holds: it is absent from the render because it already exists.
    """
    desired: dict[Key, dict[str, Any]] = {}
    known: dict[int, tuple[dict[str, Any], Key]] = {}  # id -> (desired object, kept alive here, key)
    for obj in desired_objects:
        key = identity(obj)
        known[id(obj)] = obj, key
        desired[key] = obj
    if _the_same(desired_objects, current_objects) and len(desired) == len(desired_objects) \
            and all(policy.compared(key) for key in desired):
        return []  # a previous render read back whole: each object is the desired one itself, once
    current: dict[Key, dict[str, Any]] = {}
    problems = []
    for obj in current_objects:
        # a previous render read back by bytes holds the desired objects themselves: their keys
        # are known (an id is one object's while ``known`` keeps it alive)
        same = known.get(id(obj))
        key = same[1] if same is not None and same[0] is obj else identity(obj)
        if not policy.compared(key):
            continue
        if key in current and current[key] != obj:
            problems.append(Problem("appears twice in the current objects, with different contents",
                                    obj=label(key)))
        current[key] = obj
    if problems:
        raise UserError(problems)
    # Equal objects are unchanged in every form, so they are not copied, trimmed and aligned
    # (10,000 NodeFeatures against a previous render): both forms drop the always-ignored paths
    # from the same data in the same order, a map emptied on the way is emptied on both sides (so
    # the current side drops it too: the desired form lacks it); every path the desired form lacks
    # is then absent from the current form, so the whenDesiredUnset paths and the server defaults
    # (_same_scalar of a missing value is false) remove nothing, and _align only reorders keys.
    # The test is ``==``, as the full one is. Only the other keys are sorted (changes come in
    # sort_key order; keys of kinds outside the rules tie there and keep the desired order).
    differing = [key for key, want in desired.items()
                 if (have := current.get(key)) is None or not (have is want or have == want)]
    differing += [key for key in current if key not in desired]
    changes: list[Change] = []
    for key in sorted(differing, key=policy.sort_key):
        want, have = desired.get(key), current.get(key)
        if have is None:
            assert want is not None
            changes.append(Change("added", key, want["apiVersion"], None, policy.desired_form(want)))
        elif want is None:
            if policy.removes(key, have, existing):
                changes.append(Change("removed", key, have["apiVersion"], policy.current_form(have, None), None))
        else:
            target = policy.desired_form(want)
            now = policy.current_form(have, target)
            if now != target:
                changes.append(Change("changed", key, want["apiVersion"], now, target, changed_fields(now, target)))
    return changes


def _the_same(desired: Sequence[dict[str, Any]], current: Iterable[dict[str, Any]]) -> bool:
    """Whether ``current`` is a list of the very ``desired`` objects in their order."""
    return isinstance(current, list) and len(current) == len(desired) and all(map(operator.is_, current, desired))


def _quantity_text(value: Any) -> str:
    """A snapshot capacity (a Fraction) as a quantity string, for showing the before side."""
    if getattr(value, "denominator", 1) == 1:
        return format_decimal_si(int(value))
    milli = value * 1000
    return f"{int(milli)}m" if milli.denominator == 1 else str(float(value))


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def node_changes(nodes: Mapping[str, Any], entries: Sequence[dict[str, Any]]) -> list[Change]:
    """``node-patches`` entries as changes: only the touched labels or capacity keys are shown,
    before (from the snapshot's Node) and after (the patch applied)."""
    import jsonpatch
    changes = []
    for entry in entries:
        node = nodes[entry["node"]]
        status = entry["subresource"] == "status"
        base = ("status", "capacity") if status else ("metadata", "labels")
        have = node.status.capacity if status else node.metadata.labels
        before: dict[str, Any] = {base[0]: {}}
        if have is not None:
            before[base[0]][base[1]] = {k: _quantity_text(v) if status else v for k, v in have.items()}
        after = jsonpatch.apply_patch(before, entry["patch"])
        prefix = "/" + "/".join(base)
        touched: list[str] = []
        for op in entry["patch"]:
            rest = op["path"][len(prefix):].lstrip("/")
            touched.extend([_unescape(rest)] if rest else sorted(op.get("value") or {}))
        views = []
        for doc in (before, after):
            values = doc[base[0]].get(base[1]) or {}
            views.append({base[0]: {base[1]: {k: values[k] for k in touched if k in values}}})
        changes.append(Change("changed", ("", "Node", "", entry["node"]), "v1", views[0], views[1],
                              [field_path(base + (k,)) for k in touched], entry["subresource"], entry["patch"]))
    return changes


@dataclass(frozen=True)
class Summary:
    """Objects per action and kind (kinds in the order the changes come, i.e. the rules' kind order).

    Objects, not entries: a Node with both a label and a capacity patch counts once."""

    counts: dict[str, dict[str, int]]
    order: tuple[str, ...] = ()   # every kind that has a change, in change order

    def total(self, action: str) -> int:
        return sum(self.counts[action].values())

    def text(self) -> str:
        """``3 added (ResourceFlavor 1, ClusterQueue 2), 1 changed (ClusterQueue 1), 0 removed``."""
        parts = []
        for action in ACTIONS:
            kinds = ", ".join(f"{kind} {n}" for kind, n in self.counts[action].items())
            parts.append(f"{self.total(action)} {action}" + (f" ({kinds})" if kinds else ""))
        return ", ".join(parts)

    def data(self) -> dict[str, Any]:
        """The same as JSON data: ``{"added": 3, ..., "kinds": {"ClusterQueue": {"added": 2, ...}}}``,
        kinds in the rules' kind order."""
        kinds = [kind for kind in self.order if any(kind in self.counts[a] for a in ACTIONS)]
        return {**{action: self.total(action) for action in ACTIONS},
                "kinds": {kind: {action: self.counts[action].get(kind, 0) for action in ACTIONS} for kind in kinds}}


def summarise(changes: Sequence[Change]) -> Summary:
    seen: dict[str, dict[str, set[Key]]] = {action: {} for action in ACTIONS}
    for change in changes:
        seen[change.action].setdefault(change.key[1], set()).add(change.key)
    order = tuple(dict.fromkeys(change.key[1] for change in changes))
    return Summary({action: {kind: len(keys) for kind, keys in kinds.items()} for action, kinds in seen.items()}, order)


def owned_counts(current_objects: Iterable[dict[str, Any]], policy: DiffPolicy) -> dict[str, int]:
    """How many compared objects of each kind the tool owns among the current ones: the base that
    removals are measured against."""
    keys: dict[str, set[Key]] = {}
    for obj in current_objects:
        key = identity(obj)
        if policy.compared(key) and policy.owns(obj):
            keys.setdefault(key[1], set()).add(key)
    return {kind: len(found) for kind, found in keys.items()}


def removal_warnings(summary: Summary, owned: Mapping[str, int], source: str = "diff") -> list[str]:
    """A warning per kind that would lose more than half of its owned objects: the usual cause is a
    partial snapshot or a rule edit that matches nothing, and applying it would empty the cluster's
    queues or flavors."""
    return half_removed_warnings(summary.counts["removed"], owned, source)


def half_removed(removed_per_kind: Mapping[str, int], owned: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """(kind, removed, owned) of every kind that would lose more than half of its owned objects."""
    out = []
    for kind, removed in removed_per_kind.items():
        total = max(owned.get(kind, 0), removed)  # removed objects are owned ones: never fewer
        if 2 * removed > total:
            out.append((kind, removed, total))
    return out


def half_removed_warnings(removed_per_kind: Mapping[str, int], owned: Mapping[str, int], source: str) -> list[str]:
    return [f"{source}: {removed} of {total} owned {kind} objects would be removed (more than half); "
            f"check the snapshot and the rules before applying"
            for kind, removed, total in half_removed(removed_per_kind, owned)]


def check_half_removals(summary: Summary, owned: Mapping[str, int]) -> None:
    """``--guard-removals``: the CI guard of the per-kind half rule (the warning above), failing the
    run (exit 2) instead of reporting."""
    kinds = half_removed(summary.counts["removed"], owned)
    if kinds:
        listed = ", ".join(f"{kind} {removed} of {total}" for kind, removed, total in kinds)
        raise UserError.single(f"more than half of a kind's owned objects would be removed ({listed}); "
                               f"refused by --guard-removals: check the snapshot and the rules")


def removed_counts(desired_objects: Iterable[dict[str, Any]], current_objects: Iterable[dict[str, Any]],
                   policy: DiffPolicy, existing: set[Key]) -> dict[str, int]:
    """Per kind, how many current objects applying the render would remove (what :func:`compare`
    calls removed), from identities alone: cheap enough for every ``render``."""
    desired = {identity(o) for o in desired_objects}
    out: dict[str, int] = {}
    for obj in current_objects:
        key = identity(obj)
        if policy.compared(key) and key not in desired and policy.removes(key, obj, existing):
            out[key[1]] = out.get(key[1], 0) + 1
    return out


def check_max_removals(summary: Summary, limit: int | None) -> None:
    """``--max-removals N``: a guard for CI jobs, failing the run (exit 2) instead of reporting."""
    removed = summary.total("removed")
    if limit is not None and removed > limit:
        kinds = ", ".join(f"{kind} {n}" for kind, n in summary.counts["removed"].items())
        raise UserError.single(f"{removed} owned objects would be removed ({kinds}), more than "
                               f"--max-removals {limit}")
