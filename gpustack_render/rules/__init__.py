"""Rule files → validated, compiled :class:`Rules`.

Every rule file is read with positions, validated by its kind's pydantic model, then compiled
(name formats, conditions, expressions, regexes). All problems of all files are collected and
raised together as one :class:`UserError` with ``file:line:col`` locations.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from pydantic import ValidationError

from gpustack_render.rules import schema
from gpustack_render.errors import Problem, UserError, did_you_mean
from gpustack_render.rules.expressions import Arithmetic, CompiledCondition, NameFormat, RuleMeaningError
from gpustack_render.rules.resources import default_rules_dir
from gpustack_render.yamlio import load_roundtrip

Loc = tuple[str | int, ...]

# Closed vocabularies: what each rule location may refer to.
NODE_FACTS = {"managed", "hasOsArch", "hasAccelerator", "cpuCount", "acceleratorCount"}
QUEUE_FACTS = {"acceleratable"}
LIFECYCLE_FACTS = {"queueExists", "queueDeleting", "instanceTypeDeleting", "inactive", "noFlavors", "hasGroups",
                   "carriesQuota", "currentStopPolicy", "drained", "adminStopped", "hasWorkloads",
                   "savedStopPolicy", "acceleratable", "inactiveHeld", "planRefused"}
CPU_FLAVOR_FIELDS = {"gKey", "gManu", "os", "arch", "count", "profile"}
ACCEL_FLAVOR_FIELDS = CPU_FLAVOR_FIELDS | {"aKey", "manufacturer"}
QUOTA_VARIABLES = {"capacity", "count", "nodes", "M"}
CAPACITY_VARIABLES = {"L", "P", "slices", "vram", "overcommit", "M"}
HOSTNAME_LEVEL = "kubernetes.io/hostname"


@dataclass(frozen=True)
class ManufacturerRule:
    name: str
    resource_base: str
    partition_kind: str | None
    publish_profile: tuple[tuple[re.Pattern[str], str], ...]


@dataclass(frozen=True)
class FlavorKind:
    key: tuple[str, ...]
    contributes: CompiledCondition
    name: NameFormat
    pin_cpu_only: CompiledCondition | None


@dataclass(frozen=True)
class PresetTier:
    cpu: str
    ram: str


@dataclass(frozen=True)
class PresetEntry:
    tier: str
    tokens: tuple[str, ...]
    by: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class AdmissionCheckRule:
    name: str
    controller_name: str
    when: CompiledCondition


@dataclass(frozen=True)
class QuotaRule:
    resource: NameFormat
    nominal_quota: Arithmetic


@dataclass(frozen=True)
class CapacityFamilyRule:
    name: str
    population: str
    pool: NameFormat
    requires_partition_kind: bool
    keys: tuple[tuple[NameFormat, Arithmetic], ...]
    profile_key: NameFormat | None


@dataclass(frozen=True)
class StopPolicyRule:
    name: str
    when: CompiledCondition
    stop_policy: str
    groups: str
    annotations: tuple[tuple[str, str], ...]
    save_stop_policy: bool
    origin: str


@dataclass(frozen=True)
class SavedStopPolicyRule:
    name: str
    when: CompiledCondition
    stop_policy: str  # a stop policy, "current" or "saved"
    annotations: tuple[tuple[str, str], ...]
    origin: str


@dataclass(frozen=True)
class LifecycleWarningRule:
    name: str
    when: CompiledCondition
    message: NameFormat
    origin: str


@dataclass(frozen=True)
class KindMetadata:
    """``rules/output.yaml`` compiled: what :func:`gpustack_render.render.output_meta.apply_output_metadata`
    adds to every rendered object of one kind, each map sorted by key."""
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()


@dataclass
class Rules:
    """Everything the engine needs, compiled. ``origins`` maps rule paths to ``file:line``."""

    setting_defaults: dict[str, bool]
    settings_source: tuple[str, str]
    units_per_accelerator: int
    manufacturers: dict[str, ManufacturerRule]
    naming: schema.NamingRules
    node_feature_name: NameFormat
    topology_name: NameFormat
    local_queue_name: NameFormat
    flavor_cpu: FlavorKind
    flavor_accelerated: FlavorKind
    pool_name: dict[tuple[bool, bool], NameFormat]          # (aware, accelerated) → format
    catalog_name: dict[tuple[bool, bool], NameFormat]
    pool_identity: dict[bool, tuple[NameFormat, NameFormat]]  # aware → (generalGroup, acceleratorGroup)
    managed_key: str
    managed_stamp_value: str
    managed_stamp_when: CompiledCondition
    cpu_only_key: str
    cpu_only_when: CompiledCondition
    normalisation: schema.NormalisationRules
    cruft_steps: tuple[Callable[[str], str], ...]
    id_prefix_max_length: dict[int, Arithmetic]
    presets: schema.PresetRules
    preset_entries: dict[str, tuple[PresetEntry, ...]]
    reserved_namespaces: frozenset[str]
    topology_levels: tuple[str, ...]
    max_flavors_per_group: int
    quota_cpu: QuotaRule
    quota_accelerated: QuotaRule
    admission_checks: tuple[AdmissionCheckRule, ...]
    capacity_families: tuple[CapacityFamilyRule, ...] = ()
    fit_sliced_label: NameFormat | None = None
    fit_shared_label: NameFormat | None = None
    share_units: int = 0
    shared_modes: frozenset[int] = frozenset()
    pin_sliced_card: NameFormat | None = None    # Workload fit pin: resources that make a demand ({base})
    pin_sliced_units: NameFormat | None = None
    pin_shared_cards: NameFormat | None = None
    resource_flavor_prefix: str = ""  # the literal start shared by both flavor name formats
    lifecycle: tuple[StopPolicyRule, ...] = ()
    lifecycle_warnings: tuple[LifecycleWarningRule, ...] = ()
    lifecycle_save: tuple[SavedStopPolicyRule, ...] = ()
    lifecycle_markers: schema.LifecycleMarkers | None = None
    origins: dict[str, str] = field(default_factory=dict)
    models: dict[str, Any] = field(default_factory=dict)  # kind → validated model (explain)
    diff: schema.DiffRules | None = None  # rules/diff.yaml, checked by rules_compile.check_diff
    output: Mapping[str, KindMetadata] = field(default_factory=dict)  # rendered kind → extra metadata
    # The operator's vocabulary and the settings reach the stages only through these rule entries.
    vocabulary: schema.VocabularyRules | None = None   # rules/vocabulary.yaml
    pool_aware: CompiledCondition | None = None         # Grouping aware: pools split per CPU key
    derive_instance_types: CompiledCondition | None = None  # Queues deriveInstanceTypes
    workload_fit_when: CompiledCondition | None = None  # Capacity workloadFit.when: the pin applies
    setting_refs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "Kind:path" → settings it names
    profile_format: NameFormat | None = None            # Vocabulary topologyProfile.format
    profile_pattern: re.Pattern[str] | None = None      # ... as a matcher (a Node's own profile label)
    local_queue_pattern: re.Pattern[str] | None = None  # Naming localQueue as a matcher (pin's queue test)
    generic_group: str = ""  # Grouping pool.whenUnaware.generalGroup: the pool not split per CPU key

    def is_aware(self, settings: Mapping[str, bool]) -> bool:
        """Grouping ``aware``: whether pools are split per CPU key under these settings."""
        return bool(self.pool_aware and self.pool_aware({}, settings))

    def settings_of(self, entry: str) -> tuple[str, ...]:
        """The settings a rule entry's condition names (``"Grouping:aware"``), for explanations."""
        return self.setting_refs.get(entry, ())


# --- loading --------------------------------------------------------------------------------------

@dataclass
class _Document:
    kind: str
    file: str
    data: Any
    model: Any = None


def _position(data: Any, loc: Loc, *, at_key: bool = False) -> tuple[int | None, int | None]:
    """Walk ruamel's round-trip nodes along ``loc``; the deepest position found wins (1-based).

    A scalar is pointed at by its value (that is what is wrong), a mapping or list by its key;
    ``at_key`` points at the last key itself, for problems of the key (an unknown key)."""
    line = col = None
    node = data
    for i, part in enumerate(loc):
        lc = getattr(node, "lc", None)
        try:
            if isinstance(part, int) and isinstance(node, list) and part < len(node):
                pos = lc.item(part) if lc else None
                node = node[part]
            elif isinstance(node, dict) and part in node:
                scalar = not isinstance(node[part], (dict, list))
                use_value = scalar and not (at_key and i == len(loc) - 1)
                pos = (lc.value(part) if use_value else lc.key(part)) if lc else None
                node = node[part]
            else:
                break
        except (KeyError, IndexError, TypeError, AttributeError):
            break
        if pos:
            line, col = pos[0] + 1, pos[1] + 1
    return line, col


_TYPE_WORDS = {"string_type": "a string", "int_type": "a whole number", "int_parsing": "a whole number",
               "bool_type": "true or false", "bool_parsing": "true or false", "list_type": "a list",
               "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
               "int_from_float": "a whole number"}
_ALL_FIELD_NAMES = {name for model in vars(schema).values() if isinstance(model, type)
                    and issubclass(model, schema.BaseModel) for name in model.model_fields} | {"not"}
_TAGS = set(schema.CONDITION_KEYS) | set(schema.CRUFT_KEYS) | {"annotation", "labels"}


_UNION_FIELDS = {"stampWhen", "when", "contributes", "pinCpuOnly", "not", "aware",
                 "deriveInstanceTypes"}  # tagged unions
_UNION_LISTS = {"all", "any", "idPrefix", "cruft"}


def _clean_loc(loc: tuple[Any, ...]) -> Loc:
    """Drop the discriminator tags pydantic inserts after every tagged-union field."""
    cleaned: list[str | int] = []
    expect_tag = False
    for part in loc:
        if expect_tag and isinstance(part, str):
            expect_tag = False
            continue
        expect_tag = False
        cleaned.append(part)
        if isinstance(part, str) and part in _UNION_FIELDS:
            expect_tag = True
        elif isinstance(part, int) and len(cleaned) > 1 and cleaned[-2] in _UNION_LISTS:
            expect_tag = True
    return tuple(cleaned)


def _describe(value: Any) -> str:
    for base, word in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"),
                       (list, "a list"), (dict, "a mapping")):
        if isinstance(value, base):
            return f"{word} {value!r}" if base not in (list, dict) else word
    return "nothing" if value is None else type(value).__name__


def _friendly(error: dict[str, Any]) -> tuple[str, str]:
    """Our words for a pydantic error: pydantic's own messages never reach the user."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        return "required key is missing", ""
    if kind == schema.QUANTITY_ERROR:  # schema.Quantity: our own words already
        return str(ctx.get("reason", error["msg"])), str(ctx.get("hint", ""))
    if kind == "string_type" and isinstance(value, (bool, int, float)):  # YAML read `8`, `true` as such
        shown = str(value).lower() if isinstance(value, bool) else value
        return f"expected {_TYPE_WORDS[kind]}, got {_describe(value)}", \
            f'quote it: "{shown}"' if isinstance(value, int) else "quote it"
    if kind == "extra_forbidden":
        name = str(error["loc"][-1])
        return f"unknown key '{name}'", did_you_mean(name, _ALL_FIELD_NAMES - {name})  # a key of another place is unknown here
    if kind in _TYPE_WORDS:
        return f"expected {_TYPE_WORDS[kind]}, got {_describe(value)}", ""
    if kind == "literal_error":
        return f"must be {ctx.get('expected')}, got {value!r}", ""
    if kind == "too_short":
        return "must not be empty" if ctx.get("min_length", 1) <= 1 else \
            f"needs at least {ctx.get('min_length')} entries", ""
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} entries", ""
    if kind == "string_too_short":
        return "must not be empty", ""
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters", ""
    if kind == "string_pattern_mismatch":
        return f"{value!r} does not match {ctx.get('pattern')}", ""
    if kind in ("greater_than", "greater_than_equal"):
        return f"must be greater than {ctx.get('gt', ctx.get('ge'))}", ""
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        keys = sorted(value) if isinstance(value, dict) else []
        hint = did_you_mean(keys[0], _TAGS) if keys else ""
        return f"not a known entry (keys: {', '.join(keys) or 'none'})", hint
    return f"invalid value {value!r}", ""


def _read_documents(rules_dir: Path, problems: list[Problem]) -> list[_Document]:
    if not rules_dir.is_dir():
        raise UserError.single("rules directory not found", file=str(rules_dir))
    documents: list[_Document] = []
    for path in sorted(p for p in rules_dir.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()):
        display = str(path)
        try:
            data = load_roundtrip(path, display)
        except UserError as err:
            problems.extend(err.problems)
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            problems.append(Problem("a rule file must be a mapping with apiVersion and kind", file=display))
            continue
        kind = data.get("kind")
        if data.get("apiVersion") != schema.API_VERSION:
            line, col = _position(data, ("apiVersion",))
            problems.append(Problem(f"apiVersion must be {schema.API_VERSION}", file=display, line=line,
                                    column=col, path="apiVersion"))
            continue
        if kind not in schema.RULE_KINDS:
            line, col = _position(data, ("kind",))
            problems.append(Problem(f"unknown rule kind {kind!r}", file=display, line=line, column=col,
                                    path="kind", hint=did_you_mean(str(kind), schema.RULE_KINDS)))
            continue
        documents.append(_Document(kind, display, data))
    return documents


def _validate(doc: _Document, problems: list[Problem]) -> None:
    try:
        doc.model = schema.RULE_KINDS[doc.kind].model_validate(doc.data)
    except ValidationError as err:
        for error in err.errors():
            loc = _clean_loc(error["loc"])
            message, hint = _friendly(error)
            line, col = _position(doc.data, loc, at_key=error["type"] == "extra_forbidden")
            problems.append(Problem(message, file=doc.file, line=line, column=col,
                                    path=".".join(str(p) for p in loc), hint=hint))


class _Compiler:
    """Compiles validated models, turning meaning errors into positioned problems."""

    def __init__(self, docs: dict[str, _Document], problems: list[Problem]) -> None:
        self.docs, self.problems = docs, problems
        self.origins: dict[str, str] = {}

    def at(self, kind: str, loc: Loc, fn: Callable[[], Any]) -> Any:
        doc = self.docs[kind]
        line, _ = _position(doc.data, loc)
        self.origins[f"{kind}:{'.'.join(map(str, loc))}"] = f"{doc.file}:{line}" if line else doc.file
        try:
            return fn()
        except RuleMeaningError as err:
            full = loc + err.subpath
            line, col = _position(doc.data, full)
            self.problems.append(Problem(str(err), file=doc.file, line=line, column=col,
                                         path=".".join(map(str, full)), hint=err.hint))
        except re.error as err:
            line, col = _position(doc.data, loc)
            self.problems.append(Problem(f"invalid regular expression: {err}", file=doc.file, line=line,
                                         column=col, path=".".join(map(str, loc))))
        return None

    def fail(self, kind: str, loc: Loc, message: str, hint: str = "", *, at_key: bool = False) -> None:
        doc = self.docs[kind]
        line, col = _position(doc.data, loc, at_key=at_key)
        self.problems.append(Problem(message, file=doc.file, line=line, column=col,
                                     path=".".join(map(str, loc)), hint=hint))


def _iter_kinds() -> Iterator[str]:
    return iter(schema.RULE_KINDS)


def load_rules(rules_dir: Path | None = None) -> Rules:
    """Load, validate and compile a rules directory (the packaged defaults when ``None``).

    All problems of all files are reported at once: when some files are broken, the others are
    still compiled, their cross-references resolved against the built-in rules of the broken kinds.
    """
    rules_dir = rules_dir or default_rules_dir()
    problems: list[Problem] = []
    documents = _read_documents(rules_dir, problems)
    unreadable = sum(p.message.startswith("invalid YAML") for p in problems)
    by_kind: dict[str, _Document] = {}
    for doc in documents:
        if doc.kind in by_kind:
            line, col = _position(doc.data, ("kind",))
            problems.append(Problem(f"rule kind {doc.kind} is already defined in {by_kind[doc.kind].file}",
                                    file=doc.file, line=line, column=col, path="kind"))
            continue
        by_kind[doc.kind] = doc
        _validate(doc, problems)
    for kind in sorted(schema.OPTIONAL_KINDS - set(by_kind)):
        by_kind[kind] = _default_document(kind, rules_dir)
    if not unreadable:  # a file that did not parse may well be the "missing" kind
        for kind in _iter_kinds():
            if kind not in by_kind:
                problems.append(Problem(f"no rule file of kind {kind}", file=str(rules_dir)))
    broken = [k for k in _iter_kinds() if k not in by_kind or by_kind[k].model is None]
    merged = {k: d for k, d in by_kind.items() if d.model is not None}
    substitutes: set[str] = set()
    if broken and rules_dir.resolve() != default_rules_dir().resolve():
        for doc in _read_documents(default_rules_dir(), []):
            if doc.kind in broken:
                _validate(doc, [])
                merged[doc.kind] = doc
                substitutes.add(doc.file)
    elif broken:  # the built-in rules themselves are broken (a source checkout): their committed version
        for doc in _committed_documents(rules_dir):
            if doc.kind in broken and doc.kind not in merged:
                _validate(doc, [])
                if doc.model is not None:
                    merged[doc.kind] = doc
                    substitutes.add(doc.file)
    if all(k in merged and merged[k].model is not None for k in _iter_kinds()):
        compile_problems: list[Problem] = []
        rules = _compile(merged, compile_problems)
        problems.extend(p for p in compile_problems if p.file not in substitutes)
        if not problems and rules is not None:
            return rules
    raise _rule_error(problems)


def _default_document(kind: str, rules_dir: Path) -> _Document:
    """An optional kind the directory leaves out: its model's defaults (nothing to report on)."""
    data = {"apiVersion": schema.API_VERSION, "kind": kind}
    return _Document(kind, str(rules_dir), data, schema.RULE_KINDS[kind].model_validate(data))


def _committed_documents(rules_dir: Path) -> list[_Document]:
    """The rule files of ``rules_dir`` as last committed (git ``HEAD``), when it is in a git work tree.

    Only used to resolve the cross-references of the intact files while some built-in rule files are
    broken, so that one run reports the meaning problems of every file; never a source of rules."""
    import subprocess

    from ruamel.yaml import YAML

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(rules_dir), *args], capture_output=True, text=True,
                                  timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout if proc.returncode == 0 else None

    listing = git("ls-tree", "--name-only", "HEAD", ".")
    documents: list[_Document] = []
    for name in (listing or "").splitlines():
        if not name.endswith((".yaml", ".yml")) or "/" in name:
            continue
        text = git("show", f"HEAD:./{name}")
        if text is None:
            continue
        try:
            data = YAML(typ="rt").load(text)
        except Exception:  # the committed file may be broken too: then it substitutes nothing
            continue
        if isinstance(data, dict) and data.get("apiVersion") == schema.API_VERSION \
                and data.get("kind") in schema.RULE_KINDS:
            documents.append(_Document(str(data["kind"]), f"{rules_dir / name}@HEAD", data))
    return documents


def _rule_error(problems: list[Problem]) -> UserError:
    ordered = sorted(problems, key=lambda p: (p.file, p.line or 0, p.column or 0, p.message))
    return UserError([dataclasses.replace(p, compiler_style=True) for p in ordered])


def _compile(docs: dict[str, _Document], problems: list[Problem]) -> Rules | None:
    from gpustack_render.rules.compile import compile_rules
    compiler = _Compiler(docs, problems)
    for doc in docs.values():
        _record_origins(doc, compiler.origins)
    return compile_rules(compiler, docs)


def _record_origins(doc: _Document, origins: dict[str, str]) -> None:
    """``Kind:path`` → ``file:line`` for every key and list item of a rule file (for ``explain``).

    Same positions as :func:`_position`: a scalar's value, a mapping's or list's key."""
    def walk(node: Any, path: tuple[str | int, ...]) -> None:
        lc = getattr(node, "lc", None)
        if isinstance(node, dict):
            children = [(key, node[key]) for key in node]
        elif isinstance(node, list):
            children = list(enumerate(node))
        else:
            return
        for key, value in children:
            try:
                if isinstance(node, list):
                    pos = lc.item(key) if lc else None
                else:
                    pos = (lc.key(key) if isinstance(value, (dict, list)) else lc.value(key)) if lc else None
            except (KeyError, IndexError, TypeError, AttributeError):
                pos = None
            sub = path + (key,)
            if pos:
                origins.setdefault(f"{doc.kind}:{'.'.join(map(str, sub))}", f"{doc.file}:{pos[0] + 1}")
            walk(value, sub)

    walk(doc.data, ())
