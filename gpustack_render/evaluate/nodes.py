"""Stage 3 per Node: gKey, aKeys, the worker NodeFeature labels, converged labels and facts.

Work is done once per distinct input, not per Node, because 10,000-node snapshots repeat a handful
of machine types: a Node's *signature* is the values of exactly the labels, annotations and
capacity the compiled rules make this stage read (the keys come from the rules, never from a list
here), and every Node with the same signature shares one :class:`NodeShape`. Per Node there is a
small :class:`NodeFacts` (name, shape, labels); the converged label view, which keeps every label of
the Node, is built only when something reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from operator import itemgetter
from typing import Callable, Iterable, Mapping, Sequence

from gpustack_render.snapshot import inputs
from gpustack_render.errors import Diagnostics, Problem
from gpustack_render.evaluate.names import NameNormaliser
from gpustack_render.evaluate.record import Decision, Recorder
from gpustack_render.k8s import LABEL_NAME, quantity_ceil, valid_label_value
from gpustack_render.rules import Rules
from gpustack_render.rules.model import AnnotationIdSource

OS_LABEL, ARCH_LABEL = "kubernetes.io/os", "kubernetes.io/arch"  # Kubernetes' well-known labels


def profile_of_levels(rules: Rules, levels: tuple[str, ...] | list[str]) -> str:
    """The Vocabulary ``topologyProfile.format`` over the level keys joined by NUL (stage3-node.md §7)."""
    return rules.vocabulary.profile_format.render({"levels": "\x00".join(levels)})


@dataclass(frozen=True, eq=False)
class NodeShape:
    """Everything stage 3 derives from a Node's signature, shared by the Nodes that have it (compared
    by identity: later stages cache their own per-signature work on it). Never mutated.

    ``problems`` are (message, field path) and ``warnings`` the text after ``Node/NAME: ``, both in
    the order the evaluation finds them; each Node that has this shape reports them with its name."""

    gkey: str
    gmanu: str
    cpu_count: int
    akeys: tuple[str, ...]
    has_accelerator: bool
    os: str
    arch: str
    profile: str
    managed: bool
    feature: Mapping[str, str]
    facts: Mapping[str, object]
    converged_update: dict[str, str]   # applied to the Node's labels (less the dropped keys)
    feature_sorted: tuple[tuple[str, str], ...]   # the NodeFeature's labels in key order
    problems: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    reports: bool   # problems or warnings: each Node of this shape has something to report


@dataclass(frozen=True, eq=False)
class _KeySet:
    """What a Node's label *keys* (``keys``, in order) decide, computed once per distinct key tuple:
    which labels the signature reads (``read``: those of them present, ``values`` fetches theirs in one
    C call), which the converged view drops, and which topology levels are absent."""

    keys: tuple[str, ...]
    read: tuple[str, ...]
    values: Callable[[Mapping[str, str]], object]
    drop: tuple[str, ...]
    missing_levels: tuple[str, ...]


_NO_VALUES: Callable[[Mapping[str, str]], object] = lambda _labels: ()


class NodeFacts:
    """What stage 4 needs of one Node, computed once. ``shape`` is the per-signature evaluation it
    was built from (``None`` when the evaluation was recorded for ``explain``, which bypasses the
    caches). ``akeys``, ``feature_labels`` and ``facts`` are the shape's own, shared by every Node
    of that shape: read-only (hence the read-only types); ``converged`` is the Node's own.

    One small object per Node holding its name, its shape and its labels: every other field is read
    from the shape, and the converged view (the Node's labels less the dropped keys, with the
    NodeFeature's applied) is built when first read. Building it for each of 10,000 Nodes was the
    largest per-Node cost of stage 3, and only ``explain``, ``diff`` and ``graph`` read all of it;
    the stages that need one converged value ask :meth:`label`."""

    __slots__ = ("name", "shape", "_shape", "_labels", "_key_set", "_converged")

    def __init__(self, name: str, shape: NodeShape, labels: Mapping[str, str], key_set: _KeySet,
                 shared: bool = True) -> None:
        self.name, self._shape, self._labels, self._key_set = name, shape, labels, key_set
        self.shape: NodeShape | None = shape if shared else None
        self._converged: dict[str, str] | None = None

    @property
    def gkey(self) -> str:
        return self._shape.gkey

    @property
    def gmanu(self) -> str:
        return self._shape.gmanu

    @property
    def cpu_count(self) -> int:
        return self._shape.cpu_count

    @property
    def akeys(self) -> Sequence[str]:
        return self._shape.akeys

    @property
    def has_accelerator(self) -> bool:
        return self._shape.has_accelerator

    @property
    def os(self) -> str:
        return self._shape.os

    @property
    def arch(self) -> str:
        return self._shape.arch

    @property
    def profile(self) -> str:
        return self._shape.profile

    @property
    def managed(self) -> bool:
        return self._shape.managed

    @property
    def feature_labels(self) -> Mapping[str, str]:
        return self._shape.feature

    @property
    def facts(self) -> Mapping[str, object]:
        return self._shape.facts

    @property
    def converged(self) -> dict[str, str]:
        """The Node's labels once its NodeFeature is applied: the worker's keys it no longer sets
        (``drop``) removed, the NodeFeature's set. Built on first read, then kept."""
        converged = self._converged
        if converged is None:
            converged = dict(self._labels)
            for key in self._key_set.drop:
                del converged[key]
            converged.update(self._shape.converged_update)
            self._converged = converged
        return converged

    @property
    def reports(self) -> bool:
        """Whether the Node has a problem or a warning of its own (:meth:`NodeEvaluator.report`)."""
        return self._shape.reports

    @property
    def label_keys(self) -> tuple[str, ...]:
        """The keys of the Node's own labels, in order: one tuple shared by the Nodes whose label
        keys are equal (later stages key their per-key-tuple work by it)."""
        return self._key_set.keys

    def label(self, key: str) -> str | None:
        """``converged.get(key)`` without building the converged view."""
        update = self._shape.converged_update
        if key in update:
            return update[key]
        if key in self._key_set.drop:
            return None
        return self._labels.get(key)


@dataclass(slots=True)
class ShapeGroup:
    """The Nodes of one shape: the first one's facts (in name order, the smallest name) and every
    member's name, the first included."""

    first: NodeFacts
    names: list[str]


class NodeEvaluator:
    def __init__(self, rules: Rules, settings: Mapping[str, bool], diagnostics: Diagnostics,
                 recorder: Recorder | None = None) -> None:
        self.rules, self.settings, self.diag = rules, settings, diagnostics
        self.recorder = recorder
        self.names = NameNormaliser(rules)
        self.default_profile = profile_of_levels(rules, rules.topology.levels)
        vocab = rules.vocabulary
        assert vocab is not None and rules.vocabulary.profile_pattern is not None
        self._general, self._acceleratable = vocab.generalGroupPrefix, vocab.acceleratableLabel
        self._profile_label, self._profile_re = vocab.topologyProfile.label, rules.vocabulary.profile_pattern
        self._gkey_cache: dict[tuple[str, str, str, str], str] = {}
        norm = rules.normalisation
        self._akey_prefix, self._akey_value = norm.aKey.labelPrefix, norm.aKey.value
        self._manufacturers = set(rules.manufacturers.by_name)
        self._levels_to_check = [lvl for lvl in rules.topology.levels if lvl != "kubernetes.io/hostname"]
        # The signature: the label keys the rules make this stage read (plus, per key set, those
        # under the aKey prefix), the idPrefix annotations and the CPU count.
        g = norm.gKey
        exact = [g.manufacturer.label]
        for source in g.idPrefix:
            if not isinstance(source, AnnotationIdSource):
                exact.extend(source.labels)
        exact += [self._acceleratable, rules.grouping.managed_key, self._profile_label, OS_LABEL, ARCH_LABEL]
        self._exact_keys = tuple(dict.fromkeys(exact))
        self._annotation_keys = tuple(s.annotation for s in g.idPrefix if isinstance(s, AnnotationIdSource))
        self._key_sets: dict[tuple[str, ...], _KeySet] = {}
        self._cpu_counts: dict[int, tuple[Fraction | None, int]] = {}

    def gkey(self, labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
        g = self.rules.normalisation.gKey
        key = (labels.get(g.manufacturer.label, ""),
               *(annotations.get(s.annotation, "") if hasattr(s, "annotation") else
                 "\x00".join(labels.get(lbl, "") for lbl in s.labels) for s in g.idPrefix))
        cached = self._gkey_cache.get(key)  # type: ignore[arg-type]
        if cached is None:
            cached = self._gkey_cache[key] = self._derive_gkey(key)  # type: ignore[index, arg-type]
        return cached

    def _derive_gkey(self, key: tuple[str, ...], steps: list[dict[str, object]] | None = None) -> str:
        """stage3-node.md §1.3. ``steps`` (only when recording) receives each step's inputs and result,
        so ``explain`` shows this derivation rather than a copy of it."""
        g = self.rules.normalisation.gKey
        manu = key[0].lower()
        if not manu or manu in g.manufacturer.absentValues:
            manu = g.manufacturer.fallback
        if steps is not None:
            steps.append({"step": "manu", "value": manu, "label": g.manufacturer.label, "read": key[0],
                          "fallback": not key[0] or key[0].lower() in g.manufacturer.absentValues})
        id_prefix = ""
        for i, source in enumerate(g.idPrefix):
            raw = key[1 + i]
            if isinstance(source, AnnotationIdSource):
                if raw and not raw.startswith("@"):
                    max_length = self.rules.normalisation.id_prefix_max_length[i](manu=manu)
                    id_prefix = self.names.normalize(raw, manu, max(max_length, 0), source.stripCruft)
                    if steps is not None:
                        cruft = self.names.cruft_trace(raw) if source.stripCruft else []
                        steps.append({"step": f"idPrefix[{i}]", "applies": True, "value": id_prefix, "input": raw,
                                      "cruft": cruft, "afterCruft": cruft[-1] if cruft else raw,
                                      "afterCharacterPass": id_prefix, "maxLength": max(max_length, 0)})
                    break
                if steps is not None:
                    steps.append({"step": f"idPrefix[{i}]", "applies": False, "input": raw})
            else:
                parts = raw.split("\x00")
                if all(parts):
                    id_prefix = source.join.join(parts)
                    if steps is not None:
                        steps.append({"step": f"idPrefix[{i}]", "applies": True, "value": id_prefix, "parts": parts})
                    break
                if steps is not None:
                    steps.append({"step": f"idPrefix[{i}]", "applies": False, "parts": parts})
        gkey = f"{manu}-{id_prefix}" if id_prefix else manu
        if steps is not None:
            steps.append({"step": "gKey", "value": gkey, "idPrefix": id_prefix})
        return gkey

    def _gkey_key(self, labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[str, ...]:
        g = self.rules.normalisation.gKey
        return (labels.get(g.manufacturer.label, ""),
                *(annotations.get(s.annotation, "") if hasattr(s, "annotation") else
                  "\x00".join(labels.get(lbl, "") for lbl in s.labels) for s in g.idPrefix))

    def _record(self, recorder: Recorder, name: str, labels: Mapping[str, str], annotations: Mapping[str, str],
                facts: Mapping[str, object], current_managed: str) -> None:
        """The Node's decisions for ``explain``: the gKey steps, the managed stamp and cpu-only verdicts."""
        origins, subject = self.rules.origins, f"Node/{name}"
        steps: list[dict[str, object]] = []
        gkey = self._derive_gkey(self._gkey_key(labels, annotations), steps)
        recorder.record(subject, Decision("gKey", gkey, "Normalisation:gKey", origins.get("Normalisation:gKey", ""),
                                          steps=tuple(steps)))
        rejected: list[tuple[str, str]] = []
        akeys = self.akeys(labels, rejected)
        recorder.record(subject, Decision("aKeys", akeys, "Normalisation:aKey", origins.get("Normalisation:aKey", ""),
                                          tuple((key, (why, labels[key])) for key, why in sorted(rejected))))
        recorder.record(subject, Decision(
            "managed", current_managed or None, "Grouping:managedLabel.stampWhen",
            origins.get("Grouping:managedLabel", ""), (("label", current_managed),),
            self.rules.verdict("Grouping:managedLabel.stampWhen")(facts, self.settings)))
        recorder.record(subject, Decision(
            "cpuOnly", None, "Grouping:cpuOnlyLabel.when", origins.get("Grouping:cpuOnlyLabel.when", ""),
            verdict=self.rules.verdict("Grouping:cpuOnlyLabel.when")(facts, self.settings)))

    def akeys(self, labels: Mapping[str, str], rejected: list[tuple[str, str]] | None = None) -> list[str]:
        """The Node's aKeys. ``rejected`` (only when recording, for ``explain``) receives each other
        label under the aKey prefix with why it is not one: ``value``, ``no-dash``, ``manufacturer``
        or ``slash``."""
        prefix, plen = self._akey_prefix, len(self._akey_prefix)
        found = []
        for key, value in labels.items():
            if key.startswith(prefix) and value == self._akey_value:
                rest = key[plen:]
                manu, dash, _ = rest.partition("-")
                if dash and manu in self._manufacturers and "/" not in rest:
                    found.append(rest)
                elif rejected is not None:
                    rejected.append((key, "no-dash" if not dash else "manufacturer" if manu not in self._manufacturers
                                     else "slash"))
            elif rejected is not None and key.startswith(prefix):
                rejected.append((key, "value"))
        return sorted(found)

    def _key_set(self, keys: tuple[str, ...]) -> _KeySet:
        prefix, general, cpu_only = self._akey_prefix, self._general, self.rules.grouping.cpu_only_key
        present = set(keys)
        read = tuple(k for k in self._exact_keys if k in present) + tuple(
            k for k in keys if k.startswith(prefix) and k not in self._exact_keys)
        found = self._key_sets[keys] = _KeySet(
            keys, read, itemgetter(*read) if read else _NO_VALUES,
            tuple(k for k in keys if k.startswith(general) or k == cpu_only),
            tuple(lvl for lvl in self._levels_to_check if lvl not in present))
        return found

    def _cpu_count(self, cpu: Fraction | None) -> int:
        """``status.capacity.cpu`` rounded up, kept per object with the object: equal quantities are
        mostly one shared object, as the snapshot parses each text once, and rounding a Fraction is
        Python code."""
        hit = self._cpu_counts.get(id(cpu))
        if hit is not None and hit[0] is cpu:
            return hit[1]
        count = max(quantity_ceil(cpu), 0) if cpu is not None else 0
        self._cpu_counts[id(cpu)] = (cpu, count)
        return count

    def evaluate_all(self, nodes: Iterable[tuple[str, inputs.Node]]) -> tuple[list[NodeFacts], list[ShapeGroup]]:
        """Every Node's facts (``nodes``: name and Node, in order), and the Nodes grouped by shape:
        per shape its first Node's facts and every member's name, in that order, the groups in the
        order of their first Nodes (a recorded evaluation has no shapes: one group per Node). What a Node is warned
        about and its problems are given by :meth:`report`, which the caller interleaves with the
        flavors' warnings per Node.

        The loop is the one per-Node part of stage 3, so it only finds each Node's shape from its
        signature: the label key tuple decides which values are read (:class:`_KeySet`), then those
        values, the idPrefix annotations and the CPU count pick the shape."""
        if self.recorder is not None:
            facts = [self._evaluate_recorded(name, node) for name, node in nodes]
            return facts, [ShapeGroup(f, [f.name]) for f in facts]
        key_sets = self._key_sets
        annotation_keys = self._annotation_keys
        one_annotation = annotation_keys[0] if len(annotation_keys) == 1 else None
        no_annotations: Mapping[str, str] = {}
        groups: dict[tuple[object, ...], ShapeGroup] = {}  # by signature
        by_content: dict[tuple[object, ...], ShapeGroup] = {}  # the same groups by what makes the shape
        out: list[NodeFacts] = []
        append = out.append
        for name, node in nodes:
            meta = node.metadata
            labels = meta.labels or {}
            keys = tuple(labels)
            key_set = key_sets.get(keys) or self._key_set(keys)
            capacity = node.status.capacity
            cpu = capacity.get("cpu") if capacity else None
            annotations = meta.annotations or no_annotations
            # The CPU quantity by id: equal quantities are mostly one shared object (the snapshot
            # parses each text once), all live as long as this loop, and two objects of one value
            # make two signatures of one content, hence one group (_group).
            signature = (key_set, key_set.values(labels), id(cpu),
                         annotations.get(one_annotation) if one_annotation is not None else
                         tuple(map(annotations.get, annotation_keys)))
            group = groups.get(signature)
            if group is None:
                group = groups[signature] = self._group(name, labels, annotations, self._cpu_count(cpu), key_set,
                                                        by_content)
                if group.first.name == name:
                    append(group.first)
                    continue
            group.names.append(name)
            append(NodeFacts(name, group.first._shape, labels, key_set))
        return out, list(by_content.values())

    def _group(self, name: str, labels: Mapping[str, str], annotations: Mapping[str, str], cpu_count: int,
               key_set: _KeySet, by_content: dict[tuple[object, ...], ShapeGroup]) -> ShapeGroup:
        """The group of a signature not seen before: a new shape, or the one an earlier signature
        already made of the same content. Signatures differ in what does not change the shape (the
        order of the label keys, labels nothing reads), and :meth:`_shape` reads only the content
        here: the read labels, the idPrefix annotations, the CPU count, the topology levels absent
        and whether the managed label is one the converged view drops."""
        read = {k: labels[k] for k in key_set.read}
        present = {k: annotations[k] for k in self._annotation_keys if k in annotations}
        content = (tuple(sorted(read.items())), tuple(present.items()), cpu_count, key_set.missing_levels,
                   self.rules.grouping.managed_key in key_set.drop)
        group = by_content.get(content)
        if group is None:
            facts = NodeFacts(name, self._shape(read, present, cpu_count, key_set), labels, key_set)
            group = by_content[content] = ShapeGroup(facts, [name])
        return group

    def _evaluate_recorded(self, name: str, node: inputs.Node) -> NodeFacts:
        """One Node evaluated afresh (no shared shape), its decisions recorded for ``explain``."""
        assert self.recorder is not None
        meta = node.metadata
        labels = meta.labels or {}
        annotations = meta.annotations or {}
        keys = tuple(labels)
        key_set = self._key_sets.get(keys) or self._key_set(keys)
        cpu = (node.status.capacity or {}).get("cpu")
        shape = self._read_shape(labels, annotations, self._cpu_count(cpu), key_set)
        self._record(self.recorder, name, labels, annotations, shape.facts, labels.get(self.rules.grouping.managed_key, ""))
        return NodeFacts(name, shape, labels, key_set, shared=False)

    def report(self, facts: NodeFacts, problems: list[Problem], files: Mapping[tuple[str, str], str]) -> None:
        """The Node's problems (into ``problems``, with the file it came from) and warnings: its
        shape's, given with its name."""
        shape = facts._shape
        if not shape.reports:
            return
        name = facts.name
        if shape.problems:
            file = files.get(("Node", name), "")
            problems.extend(Problem(message, file=file, obj=f"Node/{name}", path=path)
                            for message, path in shape.problems)
        for warning in shape.warnings:
            self.diag.warn(f"Node/{name}: {warning}")

    def _read_shape(self, labels: Mapping[str, str], annotations: Mapping[str, str], cpu_count: int,
                    key_set: _KeySet) -> NodeShape:
        """The evaluation of one signature, handed only what the signature holds (the labels of
        ``key_set.read``, the idPrefix annotations): that is what makes sharing it sound."""
        return self._shape({k: labels[k] for k in key_set.read},
                           {k: annotations[k] for k in self._annotation_keys if k in annotations}, cpu_count, key_set)

    def _shape(self, labels: Mapping[str, str], annotations: Mapping[str, str], cpu_count: int,
               key_set: _KeySet) -> NodeShape:
        problems: list[tuple[str, str]] = []
        warnings: list[str] = []
        gkey = self.gkey(labels, annotations)
        if len(gkey) > self.rules.normalisation.gKey.maxLength or not LABEL_NAME.match(gkey):
            problems.append((f"derived CPU key '{gkey}' is not a valid label name of at most "
                             f"{self.rules.normalisation.gKey.maxLength} characters", "metadata.labels"))
        gmanu = gkey.split("-", 1)[0]
        akeys = self.akeys(labels)
        has_accel = labels.get(self._acceleratable) == "true" or bool(akeys)
        facts: dict[str, object] = {"hasAccelerator": has_accel, "cpuCount": cpu_count}

        feature: dict[str, str] = {}
        current_managed = labels.get(self.rules.grouping.managed_key, "")
        if current_managed:
            feature[self.rules.grouping.managed_key] = current_managed
        elif self.rules.grouping.managed_stamp_when(facts, self.settings):
            feature[self.rules.grouping.managed_key] = self.rules.grouping.managed_stamp_value
        general = self._general
        feature[general + gmanu] = "true"
        feature[general + gkey] = "true"
        if cpu_count > 0:
            feature[f"{general}{gkey}.count"] = str(cpu_count)
        if self.rules.grouping.cpu_only_when(facts, self.settings):
            feature[self.rules.grouping.cpu_only_key] = "true"
        for key, value in feature.items():
            if not valid_label_value(value):
                problems.append((f"label value {value!r} is not a valid label value", f"metadata.labels.{key}"))

        update = dict(feature)
        profile_label = self._profile_label
        profile = labels.get(profile_label, "")
        if profile:
            if not self._profile_re.match(profile):
                problems.append((f"{profile!r} does not match {self._profile_re.pattern}",
                                 f"metadata.labels.{profile_label}"))
        else:
            profile = self.default_profile
            update[profile_label] = profile
            for level in key_set.missing_levels:
                warnings.append(f"lacks topology level label {level}; it still gets profile {profile}")
        os_, arch = labels.get(OS_LABEL, ""), labels.get(ARCH_LABEL, "")
        managed_key = self.rules.grouping.managed_key  # its value in the converged view evaluate() builds
        managed = (update[managed_key] if managed_key in update else
                   None if managed_key in key_set.drop else labels.get(managed_key)) == "true"
        if managed and not (os_ and arch):
            warnings.append(f"has no {OS_LABEL} or {ARCH_LABEL} label; it feeds no flavor")
        facts.update(managed=managed, hasOsArch=bool(os_ and arch))
        return NodeShape(gkey, gmanu, cpu_count, tuple(akeys), has_accel, os_, arch, profile, managed, feature,
                         facts, update, tuple(sorted(feature.items())), tuple(problems), tuple(warnings),
                         bool(problems or warnings))
