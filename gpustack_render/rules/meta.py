"""Compiling the kinds that describe the output rather than the engine: Vocabulary, Diff, Output."""

from __future__ import annotations

import re
from types import MappingProxyType

from gpustack_render.errors import did_you_mean
from gpustack_render.k8s import dns_label, dns_subdomain, label_value, qualified_name
from gpustack_render.rules import schema
from gpustack_render.rules.compiler import Compiler, format_matcher
from gpustack_render.rules.expressions import NameFormat
from gpustack_render.rules.model import (CpuAnnotations, DiffDefaultValue, DiffIgnoredField, DiffKind, DiffKindDefaults,
                                         DiffOwnerLabel, DiffOwnership, DiffRules, KindMetadata, QueueTypeLabel,
                                         TopologyProfileLabel, Vocabulary)


def compile_vocabulary(c: Compiler, vocab: schema.VocabularyRules
                       ) -> Vocabulary | None:
    """rules/vocabulary.yaml: every key must be one the API server accepts (a prefix: with a name
    after it), and the topology profile format must be a valid label value with its ``{levels}``."""
    keys: list[tuple[tuple[str | int, ...], str]] = [
        (("acceleratableLabel",), vocab.acceleratableLabel), (("tasQueueAnnotation",), vocab.tasQueueAnnotation),
        (("topologyProfile", "label"), vocab.topologyProfile.label), (("queueType", "key"), vocab.queueType.key),
        (("cpuAnnotations", "product"), vocab.cpuAnnotations.product),
        (("cpuAnnotations", "family"), vocab.cpuAnnotations.family)]
    keys += [(("cpuAnnotations", section, name), key) for section in ("detail", "cache")
             for name, key in getattr(vocab.cpuAnnotations, section).items()]
    keys += [((entry,), getattr(vocab, entry) + "x") for entry in ("generalGroupPrefix", "notePrefix")]
    for loc, key in keys:
        if problem := qualified_name(key):
            c.fail("Vocabulary", loc, f"not a valid label or annotation key: {problem}")
    for loc, value in ((("queueType", "flavor"), vocab.queueType.flavor), (("queueType", "queue"), vocab.queueType.queue)):
        if problem := label_value(value):
            c.fail("Vocabulary", loc, f"not a valid label value: {problem}")
    if vocab.queueType.flavor == vocab.queueType.queue:
        c.fail("Vocabulary", ("queueType", "queue"), "must differ from queueType.flavor")
    if problem := dns_label(vocab.nodeFeatureNamespace):
        c.fail("Vocabulary", ("nodeFeatureNamespace",), f"not a valid namespace: {problem}")
    if problem := dns_subdomain(vocab.workerApiGroup):
        c.fail("Vocabulary", ("workerApiGroup",), f"not a valid API group: {problem}")
    profile = c.at("Vocabulary", ("topologyProfile", "format"),
                   lambda: NameFormat.compile(vocab.topologyProfile.format, {"levels"}))
    if profile is None:
        return None
    if "levels" not in profile.placeholders:
        c.fail("Vocabulary", ("topologyProfile", "format"), "must contain the placeholder {levels}",
               "a profile names the topology levels: {levels|fnv64a}")
    elif problem := label_value(profile.render({"levels": ""})):
        c.fail("Vocabulary", ("topologyProfile", "format"), f"does not make a valid label value: {problem}")
    return _vocabulary(vocab, profile, format_matcher(profile, ".*", "[0-9a-f]{16}")[1])


def _vocabulary(vocab: schema.VocabularyRules, profile: NameFormat, profile_pattern: re.Pattern[str]) -> Vocabulary:
    """The validated model as the frozen value the stages read (no pydantic model past the loader)."""
    cpu = vocab.cpuAnnotations
    return Vocabulary(
        vocab.workerApiGroup, vocab.nodeFeatureNamespace, vocab.generalGroupPrefix, vocab.acceleratableLabel,
        TopologyProfileLabel(vocab.topologyProfile.label, vocab.topologyProfile.format), vocab.tasQueueAnnotation,
        QueueTypeLabel(vocab.queueType.key, vocab.queueType.flavor, vocab.queueType.queue), vocab.notePrefix,
        CpuAnnotations(cpu.product, cpu.family, MappingProxyType(dict(cpu.detail)), MappingProxyType(dict(cpu.cache))),
        profile, profile_pattern)


def compile_diff(c: Compiler, diff: schema.DiffRules) -> DiffRules:
    """rules/diff.yaml: every kind it names must be a compared kind, and nothing is listed twice,
    so a typo cannot silently switch off an ownership, create-only or default rule."""
    kinds = [(k.group, k.kind) for k in diff.kinds]
    names = {f"{kind}.{group}" if group else kind for group, kind in kinds}
    for i, key in enumerate(kinds):
        if key in kinds[:i]:
            c.fail("Diff", ("kinds", i, "kind"), f"kind {key[1]} of group '{key[0]}' is listed twice")
    sections: tuple[tuple[str, list[tuple[str, str]]], ...] = (
        ("createOnly", [(e.group, e.kind) for e in diff.createOnly]),
        ("defaults", [(e.group, e.kind) for e in diff.defaults]))
    for section, entries in sections:
        for i, (group, kind) in enumerate(entries):
            if (group, kind) not in kinds:
                wanted = f"{kind}.{group}" if group else kind
                c.fail("Diff", (section, i, "kind"), f"{wanted} is not one of the compared kinds",
                       did_you_mean(wanted, names) or "add it under kinds first")
    for i, entry in enumerate(diff.defaults):
        paths = [tuple(v.path) for v in entry.values]
        for j, path in enumerate(paths):
            if path in paths[:j]:
                c.fail("Diff", ("defaults", i, "values", j, "path"), f"default for {'.'.join(path)} is listed twice")
    paths = [tuple(f.path) for f in diff.ignore]
    for i, path in enumerate(paths):
        if path in paths[:i]:
            c.fail("Diff", ("ignore", i, "path"), f"ignored field {'.'.join(path)} is listed twice")
    return DiffRules(
        tuple(DiffKind(k.group, k.kind) for k in diff.kinds),
        DiffOwnership(tuple(DiffOwnerLabel(o.key, o.value) for o in diff.owned.labels), tuple(diff.owned.namePrefixes)),
        tuple(DiffKind(k.group, k.kind) for k in diff.createOnly),
        tuple(DiffIgnoredField(tuple(f.path), f.whenDesiredUnset) for f in diff.ignore),
        tuple(DiffKindDefaults(d.group, d.kind, tuple(DiffDefaultValue(tuple(v.path), v.value) for v in d.values))
              for d in diff.defaults))


def compile_output(c: Compiler, output: schema.OutputRules) -> dict[str, KindMetadata]:
    """rules/output.yaml: only kinds the renderer writes (a typo would add nothing, silently), keys
    and values the API server accepts (checked here, not as a failing apply), maps sorted by key."""
    compiled: dict[str, KindMetadata] = {}
    for kind, meta in output.kinds.items():
        loc: tuple[str | int, ...] = ("kinds", kind)
        if kind not in schema.RENDER_KINDS:
            c.fail("Output", loc, f"'{kind}' is not a rendered kind",
                   did_you_mean(kind, schema.RENDER_KINDS) or f"one of {', '.join(schema.RENDER_KINDS)}", at_key=True)
            continue
        for section, check_value in (("labels", label_value), ("annotations", None)):
            for key, value in getattr(meta, section).items():
                if problem := qualified_name(key):
                    c.fail("Output", loc + (section, key), f"invalid {section[:-1]}: {problem}", at_key=True)
                if check_value is not None and (problem := check_value(value)):
                    c.fail("Output", loc + (section, key), f"invalid label: {problem}")
        compiled[kind] = KindMetadata(tuple(sorted(meta.labels.items())), tuple(sorted(meta.annotations.items())))
    return compiled
