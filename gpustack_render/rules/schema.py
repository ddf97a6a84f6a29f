"""Pydantic models of the rule files (``rules/*.yaml``).

Models only describe shape; meaning (placeholders, facts, settings, expressions) is checked when
:mod:`gpustack_render.rules` compiles them, where the YAML positions are known.
"""

# No ``from __future__ import annotations`` here: pydantic would wrap each string annotation in a
# ForwardRef and compile it when the class is created (two hundred compiles at every start);
# evaluated annotations are read as they are. The recursive ``Condition`` is the one string.
from typing import Annotated, Any, Callable, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, StringConstraints, Tag
from pydantic_core import PydanticCustomError

API_VERSION = "render.gpustack.ai/v1alpha1"
# The kinds the renderer writes, in output order; rules/output.yaml may name only these.
RENDER_KINDS = ("NodeFeature", "Topology", "AdmissionCheck", "ResourceFlavor", "InstanceType", "ClusterQueue",
                "LocalQueue")

NonEmpty = Annotated[str, StringConstraints(min_length=1)]

QUANTITY_ERROR = "quantity"  # the pydantic error type of Quantity; rules.py prints its message as is


def _check_quantity(value: str) -> str:
    """A rule's resource amount must be what Kubernetes accepts, and not negative: checked at load,
    so a typo (``32Gb``) is a ``file:line:col`` error instead of an InstanceType the API server refuses."""
    from gpustack_render.k8s import QuantityError, parse_quantity
    try:
        amount = parse_quantity(value)
    except QuantityError as err:
        raise PydanticCustomError(QUANTITY_ERROR, "{reason}", {
            "reason": str(err), "hint": "a Kubernetes quantity, like 8, 500m or 32Gi"}) from None
    if amount < 0:
        raise PydanticCustomError(QUANTITY_ERROR, "{reason}", {"reason": f'"{value}" must not be negative',
                                                               "hint": ""})
    return value


Quantity = Annotated[str, AfterValidator(_check_quantity),
                     Field(min_length=1, description="A Kubernetes resource quantity: 8, 500m, 32Gi, 1.5e3")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Envelope(Strict):
    apiVersion: Literal["render.gpustack.ai/v1alpha1"]
    kind: str


# --- conditions -------------------------------------------------------------------------------

Operator = Literal["Gt", "Ge", "Lt", "Le", "Eq", "Ne"]


class FactCondition(Strict):
    fact: NonEmpty
    operator: Operator | None = None
    value: int | str | bool | None = None


class SettingCondition(Strict):
    setting: NonEmpty


class AllCondition(Strict):
    all: "list[Condition]" = Field(min_length=1)


class AnyCondition(Strict):
    any: "list[Condition]" = Field(min_length=1)


class NotCondition(Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)
    not_: "Condition" = Field(alias="not")


def _tag_by_key(*tags: str) -> Callable[[Any], str | None]:
    """Discriminate a union by which of its tag keys the mapping carries, for clean errors."""

    def pick(value: Any) -> str | None:
        if isinstance(value, dict):
            found = [tag for tag in tags if tag in value]
            return found[0] if found else None
        found = [tag for tag in tags if hasattr(value, tag.rstrip("_")) or hasattr(value, tag + "_")]
        return found[0] if found else None

    return pick


CONDITION_KEYS = ("fact", "setting", "all", "any", "not")

Condition = Annotated[
    Union[Annotated[FactCondition, Tag("fact")], Annotated[SettingCondition, Tag("setting")],
          Annotated[AllCondition, Tag("all")], Annotated[AnyCondition, Tag("any")],
          Annotated[NotCondition, Tag("not")]],
    Discriminator(_tag_by_key(*CONDITION_KEYS)),
]


# --- one model per rule-file kind --------------------------------------------------------------

class SettingsSource(Strict):
    namespace: NonEmpty
    name: NonEmpty


class SettingsRules(Envelope):
    kind: Literal["Settings"]
    source: SettingsSource
    defaults: dict[NonEmpty, bool] = Field(min_length=1)


class ProfileRewrite(Strict):
    match: NonEmpty
    replace: str


class Manufacturer(Strict):
    name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+$")]
    resourceBase: NonEmpty
    partitionKind: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+$")] | None = None
    publishProfile: list[ProfileRewrite] = []


class ManufacturersRules(Envelope):
    kind: Literal["Manufacturers"]
    unitsPerAccelerator: Annotated[int, Field(gt=0)]
    items: list[Manufacturer] = Field(min_length=1)


class ByKind(Strict):
    cpu: NonEmpty
    accelerated: NonEmpty


class AwareSplit(Strict):
    whenAware: ByKind
    whenUnaware: ByKind


class NamingRules(Envelope):
    kind: Literal["Naming"]
    nodeFeature: NonEmpty
    topology: NonEmpty
    resourceFlavor: ByKind
    pool: AwareSplit
    catalog: AwareSplit
    localQueue: NonEmpty
    unawareCpuDisplayName: NonEmpty
    displayNameMaxLength: Annotated[int, Field(gt=0)]


class ManagedLabel(Strict):
    key: NonEmpty
    stampValue: NonEmpty
    stampWhen: Condition


class GatedLabel(Strict):
    key: NonEmpty
    when: Condition


class FlavorGroup(Strict):
    key: list[NonEmpty] = Field(min_length=1)
    contributes: Condition
    pinCpuOnly: Condition | None = None


class FlavorGroups(Strict):
    cpu: FlavorGroup
    accelerated: FlavorGroup


class PoolIdentity(Strict):
    generalGroup: NonEmpty
    acceleratorGroup: NonEmpty


class PoolIdentities(Strict):
    whenAware: PoolIdentity
    whenUnaware: PoolIdentity


class GroupingRules(Envelope):
    kind: Literal["Grouping"]
    managedLabel: ManagedLabel
    cpuOnlyLabel: GatedLabel
    flavor: FlavorGroups
    aware: Condition  # pools (queues, InstanceTypes) are split per CPU key: whenAware, else whenUnaware
    pool: PoolIdentities


class CpuManufacturerSource(Strict):
    label: NonEmpty
    fallback: NonEmpty
    absentValues: list[str] = []


class AnnotationSource(Strict):
    annotation: NonEmpty
    stripCruft: bool = False
    maxLength: str = "0"


class LabelsSource(Strict):
    labels: list[NonEmpty] = Field(min_length=1)
    join: str = "-"


class GKeyRules(Strict):
    maxLength: Annotated[int, Field(gt=0)]
    manufacturer: CpuManufacturerSource
    idPrefix: list[Annotated[Union[Annotated[AnnotationSource, Tag("annotation")],
                                   Annotated[LabelsSource, Tag("labels")]],
                             Discriminator(_tag_by_key("annotation", "labels"))]]


class AKeyRules(Strict):
    labelPrefix: NonEmpty
    value: NonEmpty


class CutAt(Strict):
    cutAt: NonEmpty


class Delete(Strict):
    delete: list[NonEmpty] = Field(min_length=1)


class RegexReplace(Strict):
    regex: NonEmpty
    replace: str


class Trim(Strict):
    trim: Literal[True]


CRUFT_KEYS = ("cutAt", "delete", "regex", "trim")
CruftStep = Annotated[
    Union[Annotated[CutAt, Tag("cutAt")], Annotated[Delete, Tag("delete")],
          Annotated[RegexReplace, Tag("regex")], Annotated[Trim, Tag("trim")]],
    Discriminator(_tag_by_key(*CRUFT_KEYS)),
]


class NormalizeNameRules(Strict):
    cruft: list[CruftStep]
    spaceBecomes: Annotated[str, StringConstraints(min_length=1, max_length=1)]
    keep: NonEmpty
    separators: NonEmpty


class NormalisationRules(Envelope):
    kind: Literal["Normalisation"]
    gKey: GKeyRules
    aKey: AKeyRules
    normalizeName: NormalizeNameRules


class UnitResources(Strict):
    cpu: Quantity
    ram: Quantity


class PresetEntry(Strict):
    tier: NonEmpty
    prefixes: list[NonEmpty] = Field(min_length=1)
    by: dict[NonEmpty, NonEmpty] = {}


class PresetRules(Envelope):
    kind: Literal["UnitResourcePresets"]
    localStorage: Quantity
    cpuPool: UnitResources
    fallback: UnitResources
    tiers: dict[NonEmpty, UnitResources]
    ignoreLeadingTokens: list[NonEmpty] = []
    tokenSeparators: NonEmpty
    manufacturers: dict[NonEmpty, list[PresetEntry]]


class NamespaceRules(Envelope):
    kind: Literal["Namespaces"]
    reserved: list[NonEmpty]


class TopologyRules(Envelope):
    kind: Literal["Topology"]
    levels: list[NonEmpty] = Field(min_length=1, max_length=16)


class Quota(Strict):
    resource: NonEmpty
    nominalQuota: NonEmpty


class Quotas(Strict):
    cpu: Quota
    accelerated: Quota


class AdmissionCheckRule(Strict):
    name: NonEmpty
    controllerName: NonEmpty
    when: Condition | None = None


class QueueRules(Envelope):
    kind: Literal["Queues"]
    maxFlavorsPerGroup: Annotated[int, Field(gt=0)]
    deriveInstanceTypes: Condition  # derive an InstanceType per pool the snapshot has none for
    quota: Quotas
    admissionChecks: list[AdmissionCheckRule]


class CapacityKey(Strict):
    key: NonEmpty
    value: NonEmpty


class CapacityFamily(Strict):
    name: NonEmpty
    population: Literal["logical", "partitioned"]
    pool: NonEmpty
    requiresPartitionKind: bool = False
    keys: list[CapacityKey] = Field(min_length=1)
    profileKey: NonEmpty | None = None


class FitPopulations(Strict):
    """Which cards each fit label counts (stage3-node.md §5), by card predicate: ``logical`` =
    logically sliceable (``logicalSliced.count > 0``, not partitioned), ``wholeCard`` = not
    partitioned. The candidates are always the ledger rows joined by id to their spec card: only a
    row says how much of a card is free, so a spec card without one is in no population, for a
    label's presence as well as its value."""

    slicedMaxFreeUnits: Literal["logical", "wholeCard"]
    sharedFreeCards: Literal["logical", "wholeCard"]


class FitLabels(Strict):
    slicedMaxFreeUnits: NonEmpty
    sharedFreeCards: NonEmpty
    shareUnits: NonEmpty
    sharedModes: list[Annotated[int, Field(ge=0, le=5)]]
    populations: FitPopulations


class WorkloadFit(Strict):
    """The Workload fit pin (fit-pin.md §3): the container resources that make a demand."""

    when: Condition  # the pin applies at all (a setting, typically)
    slicedCard: NonEmpty
    slicedUnits: NonEmpty
    sharedCards: NonEmpty


class CapacityRules(Envelope):
    kind: Literal["Capacity"]
    families: list[CapacityFamily] = Field(min_length=1)
    fitLabels: FitLabels
    workloadFit: WorkloadFit


class LifecycleMarkers(Strict):
    emptyPlanHold: NonEmpty
    savedStopPolicy: NonEmpty
    savedWhenUnset: NonEmpty
    inactiveHold: NonEmpty  # on a Hold that comes from spec.inactive: released when inactive is cleared


class StopPolicyRule(Strict):
    name: NonEmpty
    when: Condition | None = None
    stopPolicy: Literal["None", "Hold", "HoldAndDrain"]
    groups: Literal["plan", "current", "none"] = "plan"
    mark: list[Literal["emptyPlanHold", "inactiveHold"]] = []  # markers (by name) set to "true"
    annotations: dict[NonEmpty, str] = {}
    saveStopPolicy: bool = False


class LifecycleWarning(Strict):
    name: NonEmpty
    when: Condition
    message: NonEmpty


class SavedStopPolicyRule(Strict):
    """What a drain records as the policy to restore: a stop policy, or ``current`` (the queue's,
    ``markers.savedWhenUnset`` when it has none) or ``saved`` (what an earlier drain recorded)."""
    name: NonEmpty
    when: Condition | None = None
    stopPolicy: Literal["None", "Hold", "HoldAndDrain", "current", "saved"]
    mark: list[Literal["emptyPlanHold", "inactiveHold"]] = []  # markers (by name) set to "true"
    annotations: dict[NonEmpty, str] = {}


class LifecycleRules(Envelope):
    kind: Literal["Lifecycle"]
    markers: LifecycleMarkers
    stopPolicy: list[StopPolicyRule] = Field(min_length=1)
    save: list[SavedStopPolicyRule] = []
    warnings: list[LifecycleWarning] = []


class ObjectKind(Strict):
    """An API group (``""`` for the core group) and kind."""
    group: str
    kind: NonEmpty


class OwnerLabel(Strict):
    key: NonEmpty
    value: str | None = None  # any value when unset


class Ownership(Strict):
    labels: list[OwnerLabel] = []
    namePrefixes: list[NonEmpty] = []


class IgnoredField(Strict):
    path: list[NonEmpty] = Field(min_length=1)
    whenDesiredUnset: bool = False


class DefaultValue(Strict):
    path: list[NonEmpty] = Field(min_length=1)
    value: str | bool | int


class KindDefaults(Strict):
    group: str
    kind: NonEmpty
    values: list[DefaultValue] = Field(min_length=1)


class DiffRules(Envelope):
    """``diff``: the compared kinds, ownership (what may be "removed"), ignored fields, server defaults."""
    kind: Literal["Diff"]
    kinds: list[ObjectKind] = Field(min_length=1)
    owned: Ownership
    createOnly: list[ObjectKind] = []
    ignore: list[IgnoredField] = []
    defaults: list[KindDefaults] = []


class KindMetadata(Strict):
    """Labels and annotations added to every rendered object of one kind."""
    labels: dict[NonEmpty, str] = {}
    annotations: dict[NonEmpty, str] = {}


class TopologyProfile(Strict):
    """The Node label that names a Node's topology profile, and the format of the profile the
    renderer computes for Nodes without it (``{levels}`` is the topology level keys joined by NUL)."""
    label: NonEmpty
    format: NonEmpty


class QueueTypeLabel(Strict):
    """The label that marks what a Kueue object was built from: its key, the value on ResourceFlavors
    built from Nodes and the value on ClusterQueues built from InstanceTypes."""
    key: NonEmpty
    flavor: NonEmpty
    queue: NonEmpty


class CpuAnnotations(Strict):
    """The Node annotations (written by the worker) that a CPU flavor's notes read. ``detail`` and
    ``cache`` map the fields of the ``cpuDetail`` note, in this order, to their annotation."""
    product: NonEmpty
    family: NonEmpty
    detail: dict[NonEmpty, NonEmpty] = {}
    cache: dict[NonEmpty, NonEmpty] = {}


class VocabularyRules(Envelope):
    """The operator's label keys, annotation keys and API group that several stages share, each
    defined once (the stages and the templates refer to these entries, never to a literal)."""
    kind: Literal["Vocabulary"]
    workerApiGroup: NonEmpty
    nodeFeatureNamespace: NonEmpty
    generalGroupPrefix: NonEmpty
    acceleratableLabel: NonEmpty
    topologyProfile: TopologyProfile
    tasQueueAnnotation: NonEmpty
    queueType: QueueTypeLabel
    notePrefix: NonEmpty
    cpuAnnotations: CpuAnnotations


class OutputRules(Envelope):
    """Per rendered kind, labels and annotations added to every object of that kind (for example a
    GitOps tool's prune annotation on InstanceTypes). A key the template sets keeps its value."""
    kind: Literal["Output"]
    kinds: dict[NonEmpty, KindMetadata] = {}


RULE_KINDS: dict[str, type[Envelope]] = {
    model.model_fields["kind"].annotation.__args__[0]: model  # type: ignore[union-attr]
    for model in (SettingsRules, ManufacturersRules, NamingRules, GroupingRules, NormalisationRules,
                  PresetRules, NamespaceRules, TopologyRules, QueueRules, CapacityRules,
                  LifecycleRules, DiffRules, OutputRules, VocabularyRules)
}
# Kinds a rules directory may leave out: their file's defaults apply (rules directories copied
# before the kind existed keep working).
OPTIONAL_KINDS: frozenset[str] = frozenset({"Output"})


class DirectoryRules(Envelope):
    """A rules directory's own switch (``rules.yaml``): ``inherit: false`` makes the directory a full
    copy of the rules; by default it is an overlay, and the kinds it holds no file of are the
    built-in rules' of this version."""
    kind: Literal["Rules"]
    inherit: bool = True


DIRECTORY_KIND = "Rules"
# Every kind a file of a rules directory may declare: the rule kinds and the directory's switch.
FILE_KINDS: dict[str, type[Envelope]] = {**RULE_KINDS, DIRECTORY_KIND: DirectoryRules}
