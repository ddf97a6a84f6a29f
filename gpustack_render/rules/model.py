"""The compiled rules: frozen values the stages read (no rule file, no pydantic model needed).

The records are frozen ``msgspec.Struct`` classes: msgspec creates a class in C, where a dataclass
generates and compiles its methods (40 records: 13 ms of every command's start, issue 14). They are
``eq=False``: compiled once per rules directory and never compared or hashed by value (they hold
compiled closures, which compare by identity anyway); they stay hashable (by identity). A copy
with changes is ``msgspec.structs.replace``, their fields ``__struct_fields__``."""

from __future__ import annotations

import re
from typing import Callable, Mapping

import msgspec

from gpustack_render.rules.admission import AdmissionRule
from gpustack_render.rules.expressions import (Arithmetic, CompiledCondition, CompiledVerdict, NameFormat,
                                               compile_verdict)

# Closed vocabularies: what each rule location may refer to.
CPU_FLAVOR_FIELDS = {"gKey", "gManu", "os", "arch", "count", "profile"}
ACCEL_FLAVOR_FIELDS = CPU_FLAVOR_FIELDS | {"aKey", "manufacturer"}
QUOTA_VARIABLES = {"capacity", "count", "nodes", "M"}
CAPACITY_VARIABLES = {"L", "P", "slices", "vram", "overcommit", "M"}
HOSTNAME_LEVEL = "kubernetes.io/hostname"


class RuleCondition(msgspec.Struct, frozen=True, eq=False):
    """A rule's condition as ``explain`` shows it, compiled at load next to its boolean closure:
    its one-line text, its verdict twin (why it holds or not) and, when it is a single setting, that
    setting's name."""
    text: str
    verdict: CompiledVerdict
    setting: str | None


ALWAYS = RuleCondition("always", compile_verdict(None), None)  # an entry written without a condition


class FitPopulations(msgspec.Struct, frozen=True, eq=False):
    """Capacity ``fitLabels.populations``: which cards each fit label counts (``logical`` or ``wholeCard``)."""
    slicedMaxFreeUnits: str
    sharedFreeCards: str


class ManufacturerRule(msgspec.Struct, frozen=True, eq=False):
    """One ``rules/manufacturers.yaml`` item: resource base, partition kind, profile rewrites."""
    name: str
    resource_base: str
    partition_kind: str | None
    publish_profile: tuple[tuple[re.Pattern[str], str], ...]


class FlavorKind(msgspec.Struct, frozen=True, eq=False):
    """A flavor kind of ``rules/grouping.yaml`` (cpu or accelerated): key, who contributes, name."""
    key: tuple[str, ...]
    contributes: CompiledCondition
    name: NameFormat
    pin_cpu_only: CompiledCondition | None


class PresetTier(msgspec.Struct, frozen=True, eq=False):
    """The cpu and ram of one unit-resource preset tier."""
    cpu: str
    ram: str


class PresetEntry(msgspec.Struct, frozen=True, eq=False):
    """A preset table row flattened for matching: the tier, one prefix's tokens, its ``by`` overrides."""
    tier: str
    tokens: tuple[str, ...]
    by: tuple[tuple[str, str], ...]


class CpuManufacturerSource(msgspec.Struct, frozen=True, eq=False):
    """Normalisation ``gKey.manufacturer``: the CPU manufacturer label, fallback, absent values."""
    label: str
    fallback: str
    absentValues: tuple[str, ...]


class AnnotationIdSource(msgspec.Struct, frozen=True, eq=False):
    """A gKey idPrefix source read from an annotation (its ``maxLength`` expression, as written, is
    compiled into :attr:`Normalisation.id_prefix_max_length`)."""
    annotation: str
    stripCruft: bool
    maxLength: str


class LabelsIdSource(msgspec.Struct, frozen=True, eq=False):
    """A gKey idPrefix source made of Node labels joined by ``join``."""
    labels: tuple[str, ...]
    join: str


class GKeyRule(msgspec.Struct, frozen=True, eq=False):
    """Normalisation ``gKey`` as written (``explain`` shows it)."""
    maxLength: int
    manufacturer: CpuManufacturerSource
    idPrefix: tuple[AnnotationIdSource | LabelsIdSource, ...]


class AKeyRule(msgspec.Struct, frozen=True, eq=False):
    """Normalisation ``aKey`` as written: the accelerator label prefix and its value format."""
    labelPrefix: str
    value: str


class CruftCutAt(msgspec.Struct, frozen=True, eq=False):
    """A cruft step: cut the name at the first ``cutAt``."""
    cutAt: str


class CruftDelete(msgspec.Struct, frozen=True, eq=False):
    """A cruft step: delete each of these words."""
    delete: tuple[str, ...]


class CruftRegex(msgspec.Struct, frozen=True, eq=False):
    """A cruft step: replace matches of ``regex``."""
    regex: str
    replace: str


class CruftTrim(msgspec.Struct, frozen=True, eq=False):
    """A cruft step: trim surrounding whitespace."""


CruftRule = CruftCutAt | CruftDelete | CruftRegex | CruftTrim


class NormalizeNameRule(msgspec.Struct, frozen=True, eq=False):
    """NormalizeName as written (``explain`` words each cruft step; the steps as functions are
    :attr:`Normalisation.cruft_steps`)."""
    cruft: tuple[CruftRule, ...]
    spaceBecomes: str
    keep: str
    separators: str


class Normalisation(msgspec.Struct, frozen=True, eq=False):
    """``rules/normalisation.yaml`` compiled; the entries named as in the file, then what is
    compiled from them."""
    gKey: GKeyRule
    aKey: AKeyRule
    normalizeName: NormalizeNameRule
    cruft_steps: tuple[Callable[[str], str], ...]  # normalizeName.cruft as functions
    id_prefix_max_length: dict[int, Arithmetic]    # gKey.idPrefix[i].maxLength compiled


class PresetRow(msgspec.Struct, frozen=True, eq=False):
    """One row of a manufacturer's preset table as written (``explain`` names its prefixes and ``by``)."""
    tier: str
    prefixes: tuple[str, ...]
    by: Mapping[str, str]


class Presets(msgspec.Struct, frozen=True, eq=False):
    """``rules/presets.yaml`` (UnitResourcePresets) compiled; the match table itself is
    :attr:`entries`, flattened to token prefixes."""
    localStorage: str
    cpuPool: PresetTier
    fallback: PresetTier
    tiers: Mapping[str, PresetTier]
    ignoreLeadingTokens: frozenset[str]
    tokenSeparators: str
    manufacturers: Mapping[str, tuple[PresetRow, ...]]
    entries: dict[str, tuple[PresetEntry, ...]]  # manufacturer → its rows flattened for matching


class AdmissionCheckRule(msgspec.Struct, frozen=True, eq=False):
    """One Queues ``admissionChecks`` entry: an AdmissionCheck and when a queue lists it."""
    name: str
    controller_name: str
    when: CompiledCondition


class QuotaRule(msgspec.Struct, frozen=True, eq=False):
    """Queues ``quota`` of one pool kind: the resource name format and the nominalQuota expression."""
    resource: NameFormat
    nominal_quota: Arithmetic


class CapacityFamilyRule(msgspec.Struct, frozen=True, eq=False):
    """One Capacity ``families`` entry compiled: its population, pool and capacity keys."""
    name: str
    population: str
    pool: NameFormat
    requires_partition_kind: bool
    keys: tuple[tuple[NameFormat, Arithmetic], ...]
    profile_key: NameFormat | None


class StopPolicyRule(msgspec.Struct, frozen=True, eq=False):
    """One Lifecycle ``stopPolicy`` rule compiled; ``origin`` is its ``file:line`` for ``explain``."""
    name: str
    when: CompiledCondition
    stop_policy: str
    groups: str
    annotations: tuple[tuple[str, str], ...]
    save_stop_policy: bool
    origin: str


class SavedStopPolicyRule(msgspec.Struct, frozen=True, eq=False):
    """One Lifecycle ``save`` rule compiled: what a drain records as the policy to restore."""
    name: str
    when: CompiledCondition
    stop_policy: str  # a stop policy, "current" or "saved"
    annotations: tuple[tuple[str, str], ...]
    origin: str


class LifecycleWarningRule(msgspec.Struct, frozen=True, eq=False):
    """One Lifecycle ``warnings`` entry compiled: when it is given and its message format."""
    name: str
    when: CompiledCondition
    message: NameFormat
    origin: str


class LifecycleMarkers(msgspec.Struct, frozen=True, eq=False):
    """The annotation keys the renderer marks its own holds with (rules/lifecycle.yaml ``markers``);
    the fields are named as the rule file names them, so ``mark: [name]`` and the code agree."""
    emptyPlanHold: str
    savedStopPolicy: str
    savedWhenUnset: str
    inactiveHold: str


class KindMetadata(msgspec.Struct, frozen=True):  # a value: compared (tests, overrides), so it keeps __eq__
    """``rules/output.yaml`` compiled: what :func:`gpustack_render.render.output_meta.apply_output_metadata`
    adds to every rendered object of one kind, each map sorted by key."""
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()


class TopologyProfileLabel(msgspec.Struct, frozen=True, eq=False):
    """Vocabulary ``topologyProfile``: the Node label naming a profile, the computed one's format."""
    label: str
    format: str


class QueueTypeLabel(msgspec.Struct, frozen=True, eq=False):
    """Vocabulary ``queueType``: the label key and its values on flavors and on queues."""
    key: str
    flavor: str
    queue: str


class CpuAnnotations(msgspec.Struct, frozen=True, eq=False):
    """Vocabulary ``cpuAnnotations``; ``detail`` and ``cache`` keep the rule file's order (the note's)."""
    product: str
    family: str
    detail: Mapping[str, str]
    cache: Mapping[str, str]


class Vocabulary(msgspec.Struct, frozen=True, eq=False):
    """``rules/vocabulary.yaml`` compiled; fields named as the rule file names them, so a stage's
    ``vocab.queueType.key`` reads like the entry it refers to; then what is compiled from them."""
    workerApiGroup: str
    nodeFeatureNamespace: str
    generalGroupPrefix: str
    acceleratableLabel: str
    topologyProfile: TopologyProfileLabel
    tasQueueAnnotation: str
    queueType: QueueTypeLabel
    notePrefix: str
    cpuAnnotations: CpuAnnotations
    profile_format: NameFormat         # topologyProfile.format compiled
    profile_pattern: re.Pattern[str]   # ... as a matcher (a Node's own profile label)


class DiffKind(msgspec.Struct, frozen=True, eq=False):
    """An API group and kind ``diff`` compares (or creates only)."""
    group: str
    kind: str


class DiffOwnerLabel(msgspec.Struct, frozen=True, eq=False):
    """A label that marks an object as the tool's (any value when ``value`` is None)."""
    key: str
    value: str | None


class DiffOwnership(msgspec.Struct, frozen=True, eq=False):
    """Diff ``owned``: what makes an object the tool's, so ``diff`` may call it removed."""
    labels: tuple[DiffOwnerLabel, ...]
    namePrefixes: tuple[str, ...]


class DiffIgnoredField(msgspec.Struct, frozen=True, eq=False):
    """Diff ``ignore``: a field path the comparison leaves out."""
    path: tuple[str, ...]
    whenDesiredUnset: bool


class DiffDefaultValue(msgspec.Struct, frozen=True, eq=False):
    """A server default of one field path (Diff ``defaults``)."""
    path: tuple[str, ...]
    value: str | bool | int


class DiffKindDefaults(msgspec.Struct, frozen=True, eq=False):
    """Diff ``defaults`` of one kind: the values the API server fills in."""
    group: str
    kind: str
    values: tuple[DiffDefaultValue, ...]


class DiffRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/diff.yaml`` compiled (checked by meta.compile_diff); fields named as in the file."""
    kinds: tuple[DiffKind, ...]
    owned: DiffOwnership
    createOnly: tuple[DiffKind, ...]
    ignore: tuple[DiffIgnoredField, ...]
    defaults: tuple[DiffKindDefaults, ...]


class SettingsRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/settings.yaml`` compiled: each setting's default and the object that overrides them."""
    defaults: dict[str, bool]
    source: tuple[str, str]  # (namespace, name) of the snapshot's settings object


class ManufacturersRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/manufacturers.yaml`` compiled: M and the manufacturers by name."""
    units_per_accelerator: int
    by_name: dict[str, ManufacturerRule]


class NamingRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/naming.yaml`` compiled: the name formats (the flavor ones are in :class:`FlavorKind`)
    and the display entries, these named as in the file."""
    node_feature: NameFormat
    topology: NameFormat
    local_queue: NameFormat
    local_queue_pattern: re.Pattern[str]  # localQueue as a matcher (pin's queue test)
    pool: dict[tuple[bool, bool], NameFormat]     # (aware, accelerated) → format
    catalog: dict[tuple[bool, bool], NameFormat]
    resource_flavor_prefix: str  # the literal start shared by both flavor name formats
    unawareCpuDisplayName: str
    displayNameMaxLength: int


class GroupingRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/grouping.yaml`` compiled (a flavor kind's name format comes from Naming)."""
    flavor_cpu: FlavorKind
    flavor_accelerated: FlavorKind
    pool_identity: dict[bool, tuple[NameFormat, NameFormat]]  # aware → (generalGroup, acceleratorGroup)
    managed_key: str
    managed_stamp_value: str
    managed_stamp_when: CompiledCondition
    cpu_only_key: str
    cpu_only_when: CompiledCondition
    aware: CompiledCondition  # pools split per CPU key
    generic_group: str  # pool.whenUnaware.generalGroup: the pool not split per CPU key


class NamespacesRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/namespaces.yaml`` compiled."""
    reserved: frozenset[str]


class TopologyRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/topology.yaml`` compiled: the levels, the last one the hostname."""
    levels: tuple[str, ...]


class QueuesRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/queues.yaml`` compiled."""
    quota_cpu: QuotaRule
    quota_accelerated: QuotaRule
    admission_checks: tuple[AdmissionCheckRule, ...]
    max_flavors_per_group: int
    derive_instance_types: CompiledCondition


class CapacityRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/capacity.yaml`` compiled."""
    families: tuple[CapacityFamilyRule, ...]
    fit_sliced_label: NameFormat
    fit_shared_label: NameFormat
    share_units: int
    shared_modes: frozenset[int]
    fit_populations: FitPopulations  # fitLabels.populations
    pin_sliced_card: NameFormat    # Workload fit pin: resources that make a demand ({base})
    pin_sliced_units: NameFormat
    pin_shared_cards: NameFormat
    workload_fit_when: CompiledCondition  # workloadFit.when: the pin applies


class LifecycleRules(msgspec.Struct, frozen=True, eq=False):
    """``rules/lifecycle.yaml`` compiled."""
    stop_policy: tuple[StopPolicyRule, ...]
    save: tuple[SavedStopPolicyRule, ...]
    warnings: tuple[LifecycleWarningRule, ...]
    markers: LifecycleMarkers


class Rules(msgspec.Struct, frozen=True, eq=False):
    """Everything the engine needs, compiled: one record per rule kind (``rules.naming``,
    ``rules.queues``, ...), and what spans the kinds: ``origins`` maps rule paths to ``file:line``,
    ``conditions`` and ``setting_refs`` describe each entry's condition for ``explain``."""

    settings: SettingsRules
    manufacturers: ManufacturersRules
    naming: NamingRules
    grouping: GroupingRules
    normalisation: Normalisation
    presets: Presets
    namespaces: NamespacesRules
    topology: TopologyRules
    queues: QueuesRules
    capacity: CapacityRules
    lifecycle: LifecycleRules
    diff: DiffRules                           # checked by meta.compile_diff
    output: Mapping[str, KindMetadata]        # rules/output.yaml: rendered kind → extra metadata
    # The operator's vocabulary and the settings reach the stages only through these rule entries.
    vocabulary: Vocabulary
    admission: AdmissionRule  # rules/admission.yaml derived per manufacturer (admit: quota usage)
    origins: Mapping[str, str]                # "Kind:path" → file:line (explain)
    conditions: Mapping[str, RuleCondition]   # "Kind:path" → its condition as explain shows it
    setting_refs: Mapping[str, tuple[str, ...]]  # "Kind:path" → settings its condition names

    def is_aware(self, settings: Mapping[str, bool]) -> bool:
        """Grouping ``aware``: whether pools are split per CPU key under these settings."""
        return bool(self.grouping.aware({}, settings))

    def verdict(self, entry: str) -> CompiledVerdict:
        """The verdict twin of the condition at ``entry`` (``"Queues:admissionChecks.0.when"``); an
        entry written without one is always true."""
        return self.conditions.get(entry, ALWAYS).verdict

    def describe(self, entry: str) -> str:
        """The condition at ``entry`` in one line (``always`` when it has none)."""
        return self.conditions.get(entry, ALWAYS).text

    def settings_of(self, entry: str) -> tuple[str, ...]:
        """The settings a rule entry's condition names (``"Grouping:aware"``), for explanations."""
        return self.setting_refs.get(entry, ())
