"""Stage 3 per Node: gKey, aKeys, the worker NodeFeature labels, converged labels and facts.

Work is cached per distinct input (CPU identity, label set shape) because 10,000-node snapshots
repeat a handful of machine types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

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
    return rules.profile_format.render({"levels": "\x00".join(levels)})


@dataclass
class NodeFacts:
    """What stage 4 needs of one Node, computed once."""

    name: str
    gkey: str
    gmanu: str
    cpu_count: int
    akeys: list[str]
    has_accelerator: bool
    os: str
    arch: str
    profile: str
    managed: bool
    feature_labels: dict[str, str]
    converged: dict[str, str]
    facts: dict[str, object] = field(default_factory=dict)


class NodeEvaluator:
    def __init__(self, rules: Rules, settings: Mapping[str, bool], diagnostics: Diagnostics,
                 recorder: Recorder | None = None) -> None:
        self.rules, self.settings, self.diag = rules, settings, diagnostics
        self.recorder = recorder
        self.names = NameNormaliser(rules)
        self.default_profile = profile_of_levels(rules, rules.topology_levels)
        vocab = rules.vocabulary
        assert vocab is not None and rules.profile_pattern is not None
        self._general, self._acceleratable = vocab.generalGroupPrefix, vocab.acceleratableLabel
        self._profile_label, self._profile_re = vocab.topologyProfile.label, rules.profile_pattern
        self._gkey_cache: dict[tuple[str, str, str, str], str] = {}
        norm = rules.normalisation
        self._akey_prefix, self._akey_value = norm.aKey.labelPrefix, norm.aKey.value
        self._manufacturers = set(rules.manufacturers)
        self._levels_to_check = [lvl for lvl in rules.topology_levels if lvl != "kubernetes.io/hostname"]

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
                    max_length = self.rules.id_prefix_max_length[i](manu=manu)
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

    def evaluate(self, node: inputs.Node, problems: list[Problem]) -> NodeFacts:
        meta = node.metadata
        labels = meta.labels or {}
        annotations = meta.annotations or {}
        label = f"Node/{meta.name}"
        gkey = self.gkey(labels, annotations)
        if len(gkey) > self.rules.normalisation.gKey.maxLength or not LABEL_NAME.match(gkey):
            problems.append(Problem(f"derived CPU key '{gkey}' is not a valid label name of at most "
                                    f"{self.rules.normalisation.gKey.maxLength} characters", obj=label,
                                    path="metadata.labels"))
        gmanu = gkey.split("-", 1)[0]
        cpu = (node.status.capacity or {}).get("cpu")
        cpu_count = max(quantity_ceil(cpu), 0) if cpu is not None else 0
        akeys = self.akeys(labels)
        has_accel = labels.get(self._acceleratable) == "true" or bool(akeys)
        facts: dict[str, object] = {"hasAccelerator": has_accel, "cpuCount": cpu_count}

        feature: dict[str, str] = {}
        current_managed = labels.get(self.rules.managed_key, "")
        if current_managed:
            feature[self.rules.managed_key] = current_managed
        elif self.rules.managed_stamp_when(facts, self.settings):
            feature[self.rules.managed_key] = self.rules.managed_stamp_value
        general = self._general
        feature[general + gmanu] = "true"
        feature[general + gkey] = "true"
        if cpu_count > 0:
            feature[f"{general}{gkey}.count"] = str(cpu_count)
        if self.rules.cpu_only_when(facts, self.settings):
            feature[self.rules.cpu_only_key] = "true"
        for key, value in feature.items():
            if not valid_label_value(value):
                problems.append(Problem(f"label value {value!r} is not a valid label value", obj=label,
                                        path=f"metadata.labels.{key}"))

        converged = {k: v for k, v in labels.items()
                     if not k.startswith(general) and k != self.rules.cpu_only_key}
        converged.update(feature)
        profile_label = self._profile_label
        profile = labels.get(profile_label, "")
        if profile:
            if not self._profile_re.match(profile):
                problems.append(Problem(f"{profile!r} does not match {self._profile_re.pattern}", obj=label,
                                        path=f"metadata.labels.{profile_label}"))
        else:
            profile = self.default_profile
            converged[profile_label] = profile
            for level in self._levels_to_check:
                if level not in labels:
                    self.diag.warn(f"{label}: lacks topology level label {level}; it still gets profile "
                                   f"{profile}")
        os_, arch = labels.get(OS_LABEL, ""), labels.get(ARCH_LABEL, "")
        managed = converged.get(self.rules.managed_key) == "true"
        if managed and not (os_ and arch):
            self.diag.warn(f"{label}: has no {OS_LABEL} or {ARCH_LABEL} label; it feeds no flavor")
        facts.update(managed=managed, hasOsArch=bool(os_ and arch))
        if self.recorder is not None:
            self._record(self.recorder, meta.name, labels, annotations, facts, current_managed)
        return NodeFacts(meta.name, gkey, gmanu, cpu_count, akeys, has_accel, os_, arch, profile, managed,
                         feature, converged, facts)
