"""Rule files → validated, compiled :class:`Rules`.

The loader composes its stages: read (documents with positions, pydantic shape, our own messages:
read.py) → one compile function per kind → cross-file checks (compile.py) → the frozen
:class:`Rules` (model.py). All problems of all files are collected and raised together as one
:class:`UserError` with ``file:line:col`` locations.
"""

from __future__ import annotations

from pathlib import Path

from gpustack_render.errors import Problem, UserError
from gpustack_render.memo import Bounded, ContentKey, content_key
from gpustack_render.rules import overlay, schema
from gpustack_render.rules.compile import compile_rules
from gpustack_render.rules.model import (ACCEL_FLAVOR_FIELDS, CAPACITY_VARIABLES, CPU_FLAVOR_FIELDS, HOSTNAME_LEVEL,
                                         QUOTA_VARIABLES, AdmissionCheckRule, CapacityFamilyRule, FlavorKind,
                                         KindMetadata, LifecycleMarkers, LifecycleWarningRule, ManufacturerRule,
                                         PresetEntry, PresetTier, QuotaRule, Rules, SavedStopPolicyRule,
                                         StopPolicyRule)
from gpustack_render.rules.read import Document, default_document, rule_error
from gpustack_render.rules.resources import default_rules_dir

__all__ = ["ACCEL_FLAVOR_FIELDS", "CAPACITY_VARIABLES", "CPU_FLAVOR_FIELDS", "HOSTNAME_LEVEL", "QUOTA_VARIABLES",
           "AdmissionCheckRule", "CapacityFamilyRule", "FlavorKind", "KindMetadata", "LifecycleMarkers",
           "LifecycleWarningRule", "ManufacturerRule", "PresetEntry", "PresetTier", "QuotaRule", "Rules",
           "SavedStopPolicyRule", "StopPolicyRule", "load_rules"]


# Compiled rules by directory and the bytes of its rule files: a process that loads the same rules
# again (the test suite runs the CLI thousands of times in one interpreter; ``casetest`` runs every
# case against one directory) compiles them once. Rules are frozen, so sharing them is safe; only
# successful loads are kept, and any edit to a file is a new key.
_LOADED: Bounded[ContentKey, Rules] = Bounded(32)


def _content_key(rules_dir: Path) -> ContentKey | None:
    try:
        files = overlay.rule_files(rules_dir)
        if not overlay.is_built_in(rules_dir):  # an overlay inherits from the built-in files
            files += overlay.rule_files(default_rules_dir())
    except OSError:
        return None  # the loader words the problem
    return content_key(rules_dir, files)


def load_rules(rules_dir: Path | None = None) -> Rules:
    """Load, validate and compile a rules directory (the packaged defaults when ``None``; a
    directory is an overlay over them, see :mod:`gpustack_render.rules.overlay`), once per
    distinct content (see ``_LOADED``)."""
    rules_dir = rules_dir or default_rules_dir()
    key = _content_key(rules_dir)
    if key is not None and key in _LOADED:
        return _LOADED[key]
    rules = _load(rules_dir)
    if key is not None:
        _LOADED[key] = rules
    return rules


def lint_load(rules_dir: Path) -> tuple[dict[str, str], list[Problem]]:
    """``lint``: where each kind comes from (see :func:`overlay.sources_of`) and every problem of
    the rules (none: they load), from one reading of the files, as :func:`load_rules` reads them."""
    problems: list[Problem] = []
    resolved = overlay.resolve(rules_dir, problems)
    sources = overlay.sources_of(resolved)
    key = _content_key(rules_dir)
    if key is not None and key in _LOADED:
        return sources, []
    try:
        rules = _compiled(rules_dir, resolved, problems)
    except UserError as err:
        return sources, err.problems
    if key is not None:
        _LOADED[key] = rules
    return sources, []


def _load(rules_dir: Path) -> Rules:
    """Load, validate and compile a rules directory."""
    problems: list[Problem] = []
    return _compiled(rules_dir, overlay.resolve(rules_dir, problems), problems)


def _compiled(rules_dir: Path, resolved: overlay.Resolved, problems: list[Problem]) -> Rules:
    """The rules of a resolved directory (``problems``: those of reading it, extended here).

    All problems of all files are reported at once: when some files of a rules directory are
    broken, their cross-references are resolved against the built-in rules of those kinds; when
    the built-in rules themselves are broken, every intact kind is still compiled and checked."""
    by_kind = resolved.by_kind
    unreadable = sum(p.message.startswith("invalid YAML") for p in problems)
    missing = set(schema.OPTIONAL_KINDS) - set(by_kind)
    # A directory copied before an optional kind existed gets the operator's defaults, not an empty model.
    builtin = {} if overlay.is_built_in(rules_dir) else overlay.builtin_documents(missing)
    for kind in sorted(missing):
        doc = builtin.get(kind)
        by_kind[kind] = doc if doc is not None and doc.model is not None else default_document(kind, rules_dir)
    if not unreadable:  # a file that did not parse may well be the "missing" kind
        why = "" if resolved.inherits else f" ({resolved.switch_file} says inherit: false)"
        problems.extend(Problem(f"no rule file of kind {kind}{why}", file=str(rules_dir))
                        for kind in schema.RULE_KINDS if kind not in by_kind)
    merged = {k: d for k, d in by_kind.items() if d.model is not None}
    substitutes = _substitute_builtin(rules_dir, merged)
    compile_problems: list[Problem] = []
    rules = compile_rules(merged, compile_problems)
    problems.extend(p for p in compile_problems if p.file not in substitutes)
    if not problems and rules is not None:
        return rules
    raise rule_error(problems)


def _substitute_builtin(rules_dir: Path, merged: dict[str, Document]) -> set[str]:
    """Fill the kinds ``rules_dir`` lacks or breaks with the built-in ones (in place), so that the
    intact files' cross-references are checked; returns the substitutes' files (never reported on).
    The built-in directory itself gets no substitute: its intact kinds are compiled on their own."""
    broken = [k for k in schema.RULE_KINDS if k not in merged]
    if not broken or overlay.is_built_in(rules_dir):
        return set()
    found = overlay.builtin_documents(set(broken))
    merged.update(found)
    return {doc.file for doc in found.values()}
