"""The one typed model of each snapshot kind the renderer reads (inputs.md): msgspec structs.

Every reader hands its objects to these structs, and every stage reads them: a JSON snapshot is
decoded straight into them from its bytes (:mod:`.fastjson`, also behind :mod:`.yamlread`), any
other object is converted from its plain data (``msgspec.convert``, :func:`gpustack_render.snapshot.refusal.refusals`
words what they refuse). Only the fields the spec lists are modelled; every other field is ignored.
Scalars are read the way the spec says, here in the model: label values of other scalar types as
text (``__post_init__``), quantities as exact ``Fraction``, allocation modes by number or name;
fields upstream serialises as integers or booleans are strict (msgspec never coerces them), so a
wrong type is an input error.

A refusal of a conversion made in ``__post_init__`` is a :class:`FieldError`: its field (relative
to the struct) and its words, which msgspec keeps as the cause of its ``ValidationError``.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Annotated, Any, Union

import msgspec

from gpustack_render.k8s import QuantityError, parse_quantity
from gpustack_render.memo import Memo

Loc = tuple[str | int, ...]


class FieldError(ValueError):
    """A value a struct's ``__post_init__`` refuses: ``loc`` inside that struct, the message in our
    words; ``field``, the field that is refused as a whole (a map stops at its first bad value)."""

    def __init__(self, loc: Loc, message: str, field: Loc | None = None) -> None:
        super().__init__(message)
        self.loc = loc
        self.field = loc if field is None else field


def _label_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise ValueError(f"must be a scalar (string, number or boolean), got {'null' if value is None else type(value).__name__}")


def _label_map(values: dict[str, Any], loc: Loc) -> dict[str, str]:
    """A label/annotation/settings map whose values are not all strings, its values as text."""
    out = {}
    for key, value in values.items():
        try:
            out[key] = _label_value(value)
        except ValueError as err:
            raise FieldError(loc + (key,), str(err), loc) from None
    return out


# The value of each binary suffix (Kubernetes' grammar, read from parse_quantity itself).
_BINARY_UNITS = {suffix: parse_quantity("1" + suffix).numerator for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")}


def _quantity_text(text: str) -> Fraction:
    """One capacity value. Memory and storage differ per Node (``1844435235Ki``): plain digits, with
    or without a binary suffix, are read here without the general parser's regex and Fraction
    arithmetic (the same exact value: ``parse_quantity`` multiplies the same integers). Anything but
    a string raises ``TypeError`` (never kept: ``True``, ``1`` and ``1.0`` are one key to a dict)."""
    if type(text) is not str:
        raise TypeError(text)
    unit = _BINARY_UNITS.get(text[-2:], 1)
    digits = text[:-2] if unit != 1 else text
    if 0 < len(digits) <= 18 and digits.isascii() and digits.isdigit():
        return Fraction(int(digits) * unit)
    return parse_quantity(text)


# Capacity values repeat across thousands of Nodes: each text parsed once (a refusal is not kept);
# a dict lookup per value is a third of an ``lru_cache`` call.
_QUANTITIES = Memo(_quantity_text, 1 << 16)


def quantities(values: dict[str, Any], loc: Loc) -> dict[str, Fraction]:
    """A quantity map read (texts through :data:`_QUANTITIES`, YAML numbers by ``parse_quantity``)."""
    try:
        return {key: _QUANTITIES[value] for key, value in values.items()}
    except (TypeError, QuantityError):  # a value that is not a string (or not hashable), or refused
        return {key: _quantity(value, loc + (key,), loc) for key, value in values.items()}


def _quantity(value: Any, loc: Loc, field: Loc | None = None) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError as err:
        raise FieldError(loc, str(err), field) from None


_Name = Annotated[str, msgspec.Meta(min_length=1)]


class Frozen(msgspec.Struct, frozen=True, gc=False):
    """The base of the models. msgspec inherits ``frozen``, but type checkers read each class on its
    own (dataclass_transform), so every subclass restates ``frozen=True``.

    ``gc=False``: not tracked by the cycle collector (16 bytes less each: 5 MB at 10,000 Nodes). A
    struct of a snapshot holds only strings, numbers and containers of them, never itself."""


class Meta(Frozen, frozen=True):
    name: _Name
    namespace: str = ""
    labels: dict[str, Any] | None = None  # values as text (__post_init__)
    annotations: dict[str, Any] | None = None
    deletionTimestamp: Any = None

    def __post_init__(self) -> None:
        _text_maps(self, "labels", "annotations")


def _text_maps(struct: Any, *names: str) -> None:
    """Each map field ``names`` of ``struct`` with its values as text; a map of strings only, the
    common case, is kept as it is (checked in C: ``join`` refuses any value that is not a string)."""
    for name in names:
        values = getattr(struct, name)
        if values:
            try:
                "".join(values.values())
            except TypeError:
                msgspec.structs.force_setattr(struct, name, _label_map(values, (name,)))


_READY = {"True": "True", "False": "False", "Unknown": "Unknown", "": ""}  # one string object each


def admit_view(capacity: Any, allocatable: Any, conditions: Any) -> tuple[Any, str | None]:
    """What ``admit`` reads of a Node's status (admission.md §2), kept compact since ``render``
    never reads it: the ``allocatable`` entries that differ from ``capacity`` as written (a capacity
    key allocatable lacks as ``"0"``; ``None`` without allocatable), and the ``Ready`` condition's
    status (``""`` when the conditions carry none, ``None`` without conditions). Never refuses."""
    ready = None
    if isinstance(conditions, list) and conditions:
        ready = ""
        for condition in conditions:
            if type(condition) is NodeCondition and condition.type == "Ready":
                status = condition.status
                ready = _READY.get(str(status), str(status))
                break
    if not isinstance(allocatable, dict):
        return allocatable, ready
    written = capacity if isinstance(capacity, dict) else {}
    differs = {key: value for key, value in allocatable.items() if written.get(key) != value}
    differs.update({key: "0" for key in written if key not in allocatable})
    return differs, ready


class NodeCondition(Frozen, frozen=True):
    """One of a Node's conditions, as ``admit_view`` reads it (any field of any type)."""

    type: Any = None
    status: Any = None


# Whatever a Node's ``status.conditions`` holds is accepted (admit_view never refuses): a list of
# conditions (any item), or any other value. Each member is of another JSON type, as msgspec needs.
_AnyScalar = Union[str, int, float, bool, None]
_Conditions = Union[list[Union[NodeCondition, list[Any], _AnyScalar]], dict[Any, Any], _AnyScalar]


class NodeStatus(Frozen, frozen=True):
    capacity: dict[str, Any] | None = None  # None: the Node has no status.capacity at all; Fractions
    # Read by ``admit`` only, compact (admit_view): a render never fails on them nor keeps them whole.
    allocatable: Any = None
    ready: _Conditions = msgspec.field(default=None, name="conditions")  # then admit_view's: str | None

    def __post_init__(self) -> None:
        if self.allocatable is not None or self.ready is not None:
            allocatable, ready = admit_view(self.capacity, self.allocatable, self.ready)
            msgspec.structs.force_setattr(self, "allocatable", allocatable)
            msgspec.structs.force_setattr(self, "ready", ready)
        if self.capacity is not None:
            msgspec.structs.force_setattr(self, "capacity", quantities(self.capacity, ("capacity",)))


class NodeSpec(Frozen, frozen=True):
    taints: Any = None
    unschedulable: Any = None


# The three bulk kinds are tagged by ``kind`` and carry ``apiVersion``, so a List of them decodes in
# one call (a union of the three, fastjson) and a decoded object says its kind and group. The tag
# is checked on every ``kind`` key of the object (all must name it) and ``apiVersion`` is read as it
# comes (its group decides, in fastjson, whether the object is of the bulk kind at all).

class Node(Frozen, frozen=True, tag="Node", tag_field="kind"):
    metadata: Meta
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)
    apiVersion: Any = None


# --- Devices ---------------------------------------------------------------------------------------

class SlicedDetailLogical(Frozen, frozen=True):
    count: int = 0
    coresPercentageOvercommit: bool | None = None


class SlicedDetail(Frozen, frozen=True):
    logical: SlicedDetailLogical | None = None


class LogicalSliced(Frozen, frozen=True):
    count: int = 0
    coresPercentageOvercommit: bool = False


class StaticProfile(Frozen, frozen=True):
    name: str
    count: int = 0


class PhysicalSliced(Frozen, frozen=True):
    count: int = 0
    profiles: list[StaticProfile] = msgspec.field(default_factory=list)


class AcceleratorStatus(Frozen, frozen=True):
    logicalSliced: LogicalSliced | None = None
    physicalSliced: PhysicalSliced | None = None


class Accelerator(Frozen, frozen=True):
    id: _Name
    index: int | None = None
    status: AcceleratorStatus = msgspec.field(default_factory=AcceleratorStatus)


class DeviceGroup(Frozen, frozen=True):
    id: _Name
    manufacturer: _Name
    name: str = ""
    acceleratorSlicedDetail: SlicedDetail | None = None
    accelerators: list[Accelerator] = msgspec.field(default_factory=list)


class ProfileCount(Frozen, frozen=True):
    name: str
    count: int = 0


_MODES = {"none": 0, "exclusive": 1, "shared": 2, "sliced": 3, "partitioned": 4, "visibility": 5}
MODE_FIELD = "mode"  # LedgerAccelerator's: any refusal of it is worded by mode_refusal
_ModeNumber = Annotated[int, msgspec.Meta(ge=min(_MODES.values()), le=max(_MODES.values()))]


def mode_refusal(value: Any) -> str:
    """Why ``value`` is not an allocation mode (given as the integer or its name; upstream's encoding is unverified)."""
    return f"{value!r} is not an allocation mode (0-5 or None, Exclusive, Shared, Sliced, Partitioned, Visibility)"


class LedgerAccelerator(Frozen, frozen=True):
    id: _Name
    mode: _ModeNumber | str = 0  # a name: its number (DevicesStatus)
    allocated: int = 0
    remaining: int = 0
    allocatedSlices: int = 0
    allocatedProfiles: list[ProfileCount] = msgspec.field(default_factory=list)
    remainingProfiles: list[ProfileCount] = msgspec.field(default_factory=list)


class LedgerGroup(Frozen, frozen=True):
    id: _Name
    manufacturer: _Name
    accelerators: list[LedgerAccelerator] = msgspec.field(default_factory=list)


class DevicesSpec(Frozen, frozen=True):
    groups: list[DeviceGroup] = msgspec.field(default_factory=list)


class DevicesStatus(Frozen, frozen=True):
    groups: list[LedgerGroup] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        """A card's mode given by name becomes its number (msgspec checks a number's range). Here
        once per Devices, not once per card: the ledger has 57,000 cards at 10,000 Nodes."""
        for group in self.groups:
            for card in group.accelerators:
                if type(card.mode) is str:
                    number = _MODES.get(card.mode.lower())
                    if number is None:
                        raise FieldError(self._where(group, card), mode_refusal(card.mode))
                    msgspec.structs.force_setattr(card, MODE_FIELD, number)

    def _where(self, group: LedgerGroup, card: LedgerAccelerator) -> Loc:
        """The field of ``card``'s mode (only on a refusal: the loop above keeps no index)."""
        g = next(i for i, one in enumerate(self.groups) if one is group)
        return ("groups", g, "accelerators", next(i for i, one in enumerate(group.accelerators) if one is card), MODE_FIELD)


class Devices(Frozen, frozen=True, tag="Devices", tag_field="kind"):
    metadata: Meta
    spec: DevicesSpec = msgspec.field(default_factory=DevicesSpec)
    status: DevicesStatus = msgspec.field(default_factory=DevicesStatus)
    apiVersion: Any = None


# --- the rest ----------------------------------------------------------------------------------------

class NamespaceStatus(Frozen, frozen=True):
    phase: str = ""


class Namespace(Frozen, frozen=True, tag="Namespace", tag_field="kind"):
    metadata: Meta
    status: NamespaceStatus = msgspec.field(default_factory=NamespaceStatus)
    apiVersion: Any = None


class InstanceTypeSpec(Frozen, frozen=True, kw_only=True):  # (kw_only: the fields in the CRD's order)
    acceleratable: bool = False
    acceleratorGroup: str = ""
    generalGroup: str = ""
    os: _Name
    arch: _Name
    inactive: bool = False


class InstanceType(Frozen, frozen=True):
    metadata: Meta
    spec: InstanceTypeSpec


class QuotaResource(Frozen, frozen=True):
    name: str
    nominalQuota: Any  # a Fraction (__post_init__)

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "nominalQuota", _quantity(self.nominalQuota, ("nominalQuota",)))


class QuotaFlavor(Frozen, frozen=True):
    name: str
    resources: list[QuotaResource] = msgspec.field(default_factory=list)


class ResourceGroup(Frozen, frozen=True):
    flavors: list[QuotaFlavor] = msgspec.field(default_factory=list)


class ClusterQueueSpec(Frozen, frozen=True):
    resourceGroups: list[ResourceGroup] = msgspec.field(default_factory=list)
    stopPolicy: str = ""


class ClusterQueueStatus(Frozen, frozen=True):
    reservingWorkloads: int = 0
    admittedWorkloads: int = 0


class ClusterQueue(Frozen, frozen=True):
    metadata: Meta
    spec: ClusterQueueSpec = msgspec.field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus = msgspec.field(default_factory=ClusterQueueStatus)
    raw_resource_groups: Any = None  # spec.resourceGroups as written (set when placed)


class Condition(Frozen, frozen=True):
    type: str
    status: str = ""


class ConditionsStatus(Frozen, frozen=True):
    conditions: list[Condition] = msgspec.field(default_factory=list)


class AdmissionCheck(Frozen, frozen=True):
    metadata: Meta
    status: ConditionsStatus = msgspec.field(default_factory=ConditionsStatus)


class TopologyLevel(Frozen, frozen=True):
    nodeLabel: str


class TopologySpec(Frozen, frozen=True):
    levels: list[TopologyLevel] = msgspec.field(default_factory=list)


class Topology(Frozen, frozen=True):
    metadata: Meta
    spec: TopologySpec = msgspec.field(default_factory=TopologySpec)


class ResourceFlavorSpec(Frozen, frozen=True):
    topologyName: str = ""


class ResourceFlavor(Frozen, frozen=True):
    metadata: Meta
    spec: ResourceFlavorSpec = msgspec.field(default_factory=ResourceFlavorSpec)


class SettingsObject(Frozen, frozen=True):
    metadata: Meta
    data: dict[str, Any] | None = None  # values as text (__post_init__)
    stringData: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _text_maps(self, "data", "stringData")


Model = type[Frozen]
"""The model of a kind: one of the structs above."""

BULK: tuple[Model, ...] = (Node, Devices, Namespace)
"""The kinds that are most of a snapshot, tagged by ``kind``: a List of them decodes in one call."""

# Kinds of the operator's API group, which rules/vocabulary.yaml names (workerApiGroup; fixed by its CRDs).
WORKER_MODELS: dict[str, Model] = {"Devices": Devices, "InstanceType": InstanceType}
# (API group, kind) → model for the kinds of Kubernetes' and Kueue's own groups.
_FIXED_MODELS: dict[tuple[str, str], Model] = {
    ("", "Node"): Node,
    ("", "Namespace"): Namespace,
    ("kueue.x-k8s.io", "ClusterQueue"): ClusterQueue,
    ("kueue.x-k8s.io", "AdmissionCheck"): AdmissionCheck,
    ("kueue.x-k8s.io", "Topology"): Topology,
    ("kueue.x-k8s.io", "ResourceFlavor"): ResourceFlavor,
    ("", "Secret"): SettingsObject,
    ("", "ConfigMap"): SettingsObject,
}


@lru_cache(maxsize=8)
def models(worker_group: str) -> dict[tuple[str, str], Model]:
    """(API group, kind) → model, the operator's kinds in ``worker_group`` (the rules' Vocabulary
    ``workerApiGroup``). Any version of a group is accepted (inputs.md §1)."""
    return {**{(worker_group, kind): model for kind, model in WORKER_MODELS.items()}, **_FIXED_MODELS}


@lru_cache(maxsize=1)
def builtin_vocabulary() -> dict[str, Any]:
    """The built-in rules/vocabulary.yaml as plain data, for a caller that is handed no rules (the
    values are read from the rule file, never restated here)."""
    from gpustack_render.rules.resources import default_rules_dir
    from gpustack_render import rulesyaml  # the rule files' reader
    path = default_rules_dir() / "vocabulary.yaml"
    return dict(rulesyaml.load(path, str(path)))
