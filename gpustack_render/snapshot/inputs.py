"""Typed models of the snapshot objects the renderer reads (inputs.md).

Only the fields the spec lists are modelled; everything else is ignored (``extra="ignore"``).
Scalars are coerced the way the spec says (label values: booleans and numbers read as text), and
fields that upstream serialises as integers are strict integers, so a wrong type is an input error.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Annotated, Any

import msgspec
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, model_validator
from pydantic_core import PydanticCustomError

from gpustack_render.k8s import QuantityError, parse_quantity
from gpustack_render.memo import Memo


def _label_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise PydanticCustomError("label_value", "must be a scalar (string, number or boolean), got {what}",
                              {"what": "null" if value is None else type(value).__name__})


def _quantity(value: Any) -> Fraction:
    if isinstance(value, bool) or value is None or isinstance(value, (list, dict)):
        raise PydanticCustomError("quantity", "{value} is not a valid quantity", {"value": repr(value)})
    try:
        return parse_quantity(value)
    except QuantityError as err:
        raise PydanticCustomError("quantity", "{message}", {"message": str(err)}) from None


def _label_map(value: Any) -> Any:
    """Label/annotation maps, converted in one call per map (not per value) for 10,000-node speed."""
    if not isinstance(value, dict):
        return value
    if all(type(v) is str for v in value.values()):
        return value
    out = {}
    for key, item in value.items():
        try:
            out[key] = _label_value(item)
        except PydanticCustomError as err:
            raise PydanticCustomError("keyed", "{message}", {"key": str(key), "message": err.message()}) from None
    return out


def _quantity_map(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        try:
            out[key] = _quantity(item)
        except PydanticCustomError as err:
            raise PydanticCustomError("keyed", "{message}", {"key": str(key), "message": err.message()}) from None
    return out


LabelValue = Annotated[str, BeforeValidator(_label_value)]
LabelMap = Annotated[dict[str, str], BeforeValidator(_label_map)]
Quantity = Annotated[Fraction, BeforeValidator(_quantity)]
QuantityMap = Annotated[dict[str, Any], BeforeValidator(_quantity_map)]
StrictInt = Annotated[int, Strict()]
StrictBool = Annotated[bool, Strict()]


class Model(BaseModel):
    # Built on first use: the bulk kinds are typed by the msgspec structs below, so a snapshot
    # without errors builds the validators of the few other kinds it holds, not all of them.
    model_config = ConfigDict(extra="ignore", frozen=True, arbitrary_types_allowed=True, defer_build=True)


class Meta(Model):
    name: Annotated[str, Field(min_length=1)]
    namespace: str = ""
    labels: LabelMap | None = None
    annotations: LabelMap | None = None
    deletionTimestamp: Any = None


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
            kind = condition.get("type") if isinstance(condition, dict) else getattr(condition, "type", None)
            if kind == "Ready":
                status = condition.get("status") if isinstance(condition, dict) else getattr(condition, "status", "")
                ready = _READY.get(str(status), str(status))
                break
    if not isinstance(allocatable, dict):
        return allocatable, ready
    written = capacity if isinstance(capacity, dict) else {}
    differs = {key: value for key, value in allocatable.items() if written.get(key) != value}
    differs.update({key: "0" for key in written if key not in allocatable})
    return differs, ready


class NodeStatus(Model):
    capacity: QuantityMap | None = None  # None: the Node has no status.capacity at all
    # Read by ``admit`` only, compact (admit_view): a render never fails on them nor keeps them whole.
    allocatable: Any = None
    ready: Any = Field(default=None, alias="conditions")

    @model_validator(mode="before")
    @classmethod
    def _admit_view(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("allocatable" in data or "conditions" in data):
            data = dict(data)
            data["allocatable"], data["conditions"] = admit_view(data.get("capacity"), data.get("allocatable"),
                                                                 data.get("conditions"))
        return data


class NodeSpec(Model):
    taints: Any = None
    unschedulable: Any = None


class Node(Model):
    metadata: Meta
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


# --- Devices ---------------------------------------------------------------------------------------

class SlicedDetailLogical(Model):
    count: StrictInt = 0
    coresPercentageOvercommit: StrictBool | None = None


class SlicedDetail(Model):
    logical: SlicedDetailLogical | None = None


class LogicalSliced(Model):
    count: StrictInt = 0
    coresPercentageOvercommit: StrictBool = False


class StaticProfile(Model):
    name: str
    count: StrictInt = 0


class PhysicalSliced(Model):
    count: StrictInt = 0
    profiles: list[StaticProfile] = Field(default_factory=list)


class AcceleratorStatus(Model):
    logicalSliced: LogicalSliced | None = None
    physicalSliced: PhysicalSliced | None = None


class Accelerator(Model):
    id: Annotated[str, Field(min_length=1)]
    index: StrictInt | None = None
    status: AcceleratorStatus = Field(default_factory=AcceleratorStatus)


class DeviceGroup(Model):
    id: Annotated[str, Field(min_length=1)]
    manufacturer: Annotated[str, Field(min_length=1)]
    name: str = ""
    acceleratorSlicedDetail: SlicedDetail | None = None
    accelerators: list[Accelerator] = Field(default_factory=list)


class ProfileCount(Model):
    name: str
    count: StrictInt = 0


_MODES = {"none": 0, "exclusive": 1, "shared": 2, "sliced": 3, "partitioned": 4, "visibility": 5}


def _mode(value: Any) -> int:
    """Allocation mode, accepted as the integer or its name (upstream's encoding is unverified)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 5:
        return value
    if isinstance(value, str) and value.lower() in _MODES:
        return _MODES[value.lower()]
    raise PydanticCustomError("mode", "{value} is not an allocation mode (0-5 or None, Exclusive, Shared, "
                              "Sliced, Partitioned, Visibility)", {"value": repr(value)})


class LedgerAccelerator(Model):
    id: Annotated[str, Field(min_length=1)]
    mode: Annotated[int, BeforeValidator(_mode)] = 0
    allocated: StrictInt = 0
    remaining: StrictInt = 0
    allocatedSlices: StrictInt = 0
    allocatedProfiles: list[ProfileCount] = Field(default_factory=list)
    remainingProfiles: list[ProfileCount] = Field(default_factory=list)


class LedgerGroup(Model):
    id: Annotated[str, Field(min_length=1)]
    manufacturer: Annotated[str, Field(min_length=1)]
    accelerators: list[LedgerAccelerator] = Field(default_factory=list)


class DevicesSpec(Model):
    groups: list[DeviceGroup] = Field(default_factory=list)


class DevicesStatus(Model):
    groups: list[LedgerGroup] = Field(default_factory=list)


class Devices(Model):
    metadata: Meta
    spec: DevicesSpec = Field(default_factory=DevicesSpec)
    status: DevicesStatus = Field(default_factory=DevicesStatus)


# --- the rest ----------------------------------------------------------------------------------------

class NamespaceStatus(Model):
    phase: str = ""


class Namespace(Model):
    metadata: Meta
    status: NamespaceStatus = Field(default_factory=NamespaceStatus)


class InstanceTypeSpec(Model):
    acceleratable: StrictBool = False
    acceleratorGroup: str = ""
    generalGroup: str = ""
    os: Annotated[str, Field(min_length=1)]
    arch: Annotated[str, Field(min_length=1)]
    inactive: StrictBool = False


class InstanceType(Model):
    metadata: Meta
    spec: InstanceTypeSpec


class QuotaResource(Model):
    name: str
    nominalQuota: Quantity


class QuotaFlavor(Model):
    name: str
    resources: list[QuotaResource] = Field(default_factory=list)


class ResourceGroup(Model):
    flavors: list[QuotaFlavor] = Field(default_factory=list)


class ClusterQueueSpec(Model):
    resourceGroups: list[ResourceGroup] = Field(default_factory=list)
    stopPolicy: str = ""


class ClusterQueueStatus(Model):
    reservingWorkloads: StrictInt = 0
    admittedWorkloads: StrictInt = 0


class ClusterQueue(Model):
    metadata: Meta
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus = Field(default_factory=ClusterQueueStatus)
    raw_resource_groups: Any = None


class Condition(Model):
    type: str
    status: str = ""


class ConditionsStatus(Model):
    conditions: list[Condition] = Field(default_factory=list)


class AdmissionCheck(Model):
    metadata: Meta
    status: ConditionsStatus = Field(default_factory=ConditionsStatus)


class TopologyLevel(Model):
    nodeLabel: str


class TopologySpec(Model):
    levels: list[TopologyLevel] = Field(default_factory=list)


class Topology(Model):
    metadata: Meta
    spec: TopologySpec = Field(default_factory=TopologySpec)


class ResourceFlavorSpec(Model):
    topologyName: str = ""


class ResourceFlavor(Model):
    metadata: Meta
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


class SettingsObject(Model):
    metadata: Meta
    data: LabelMap | None = None
    stringData: LabelMap | None = None


# Kinds of the operator's API group, which rules/vocabulary.yaml names (workerApiGroup; fixed by its CRDs).
WORKER_MODELS: dict[str, type[Model]] = {"Devices": Devices, "InstanceType": InstanceType}
# (API group, kind) → model for the kinds of Kubernetes' and Kueue's own groups.
_FIXED_MODELS: dict[tuple[str, str], type[Model]] = {
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
def models(worker_group: str) -> dict[tuple[str, str], type[Model]]:
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


# --- fast decoding of the bulk kinds ------------------------------------------------------------------
# Nodes, Devices and Namespaces are most of a snapshot. msgspec converts them in C into frozen
# structs with the attributes of the models above; an object it refuses goes through the pydantic
# model instead, which either accepts it (coercions msgspec does not do) or words the error exactly
# as before. ``__post_init__`` applies the before-validators' conversions.

def _fix(struct: Any, name: str, convert: Any) -> None:
    """Apply a before-validator's conversion to a decoded field (its errors: a refusal)."""
    value = getattr(struct, name)
    try:
        msgspec.structs.force_setattr(struct, name, convert(value))
    except PydanticCustomError as err:
        raise ValueError(err.message()) from None


# The value of each binary suffix (Kubernetes' grammar, read from parse_quantity itself).
_BINARY_UNITS = {suffix: parse_quantity("1" + suffix).numerator for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")}


def _quantity_text(text: str) -> Fraction:
    """One capacity value. Memory and storage differ per Node (``1844435235Ki``): plain digits, with
    or without a binary suffix, are read here without the general parser's regex and Fraction
    arithmetic (the same exact value: ``parse_quantity`` multiplies the same integers)."""
    unit = _BINARY_UNITS.get(text[-2:], 1)
    digits = text[:-2] if unit != 1 else text
    if 0 < len(digits) <= 18 and digits.isascii() and digits.isdigit():
        return Fraction(int(digits) * unit)
    try:
        return parse_quantity(text)
    except QuantityError as err:
        raise ValueError(str(err)) from None


# Capacity values repeat across thousands of Nodes: each text parsed once (a refusal is not kept);
# a dict lookup per value is a third of an ``lru_cache`` call.
_QUANTITIES = Memo(_quantity_text, 1 << 16)


_Name = Annotated[str, msgspec.Meta(min_length=1)]
_ModeNumber = Annotated[int, msgspec.Meta(ge=min(_MODES.values()), le=max(_MODES.values()))]  # as _mode accepts


class _Struct(msgspec.Struct, frozen=True, gc=False):
    """The base of the fast structs. msgspec inherits ``frozen``, but type checkers read each class
    on its own (dataclass_transform), so every subclass restates ``frozen=True``.

    ``gc=False``: not tracked by the cycle collector (16 bytes less each: 5 MB at 10,000 Nodes). A
    frozen struct decoded from JSON holds only strings, numbers and containers of them, so it
    cannot be part of a reference cycle."""


class FastMeta(_Struct, frozen=True):
    name: _Name
    namespace: str = ""
    labels: dict[str, str] | None = None  # a value of another type: pydantic coerces it
    annotations: dict[str, str] | None = None
    deletionTimestamp: Any = None


class FastCondition(_Struct, frozen=True):
    type: Any = None
    status: Any = None


class FastNodeStatus(_Struct, frozen=True):
    capacity: dict[str, str] | None = None
    allocatable: Any = None  # (admit only, compact as NodeStatus's)
    ready: list[FastCondition] | str | None = msgspec.field(default=None, name="conditions")  # then admit_view's

    def __post_init__(self) -> None:
        if self.allocatable is not None or self.ready is not None:
            allocatable, ready = admit_view(self.capacity, self.allocatable, self.ready)
            msgspec.structs.force_setattr(self, "allocatable", allocatable)
            msgspec.structs.force_setattr(self, "ready", ready)
        capacity = self.capacity
        if capacity is not None:  # (a refused text raises ValueError: msgspec refuses the Node)
            msgspec.structs.force_setattr(self, "capacity", {key: _QUANTITIES[text] for key, text in capacity.items()})


# The three bulk kinds are tagged by ``kind`` and carry ``apiVersion``, so a List of them decodes in
# one call (a union of the three, fastjson) and a decoded object says its kind and group. The tag
# is checked on every ``kind`` key of the object (all must name it) and ``apiVersion`` is read as it
# comes (its group decides, in fastjson, whether the object is of the bulk kind at all).

class FastNodeSpec(_Struct, frozen=True):
    taints: Any = None
    unschedulable: Any = None


class FastNode(_Struct, frozen=True, tag="Node", tag_field="kind"):
    metadata: FastMeta
    spec: FastNodeSpec = msgspec.field(default_factory=FastNodeSpec)
    status: FastNodeStatus = msgspec.field(default_factory=FastNodeStatus)
    apiVersion: Any = None


class FastSlicedDetailLogical(_Struct, frozen=True):
    count: int = 0
    coresPercentageOvercommit: bool | None = None


class FastSlicedDetail(_Struct, frozen=True):
    logical: FastSlicedDetailLogical | None = None


class FastLogicalSliced(_Struct, frozen=True):
    count: int = 0
    coresPercentageOvercommit: bool = False


class FastStaticProfile(_Struct, frozen=True):
    name: str
    count: int = 0


class FastPhysicalSliced(_Struct, frozen=True):
    count: int = 0
    profiles: list[FastStaticProfile] = msgspec.field(default_factory=list)


class FastAcceleratorStatus(_Struct, frozen=True):
    logicalSliced: FastLogicalSliced | None = None
    physicalSliced: FastPhysicalSliced | None = None


class FastAccelerator(_Struct, frozen=True):
    id: _Name
    index: int | None = None
    status: FastAcceleratorStatus = msgspec.field(default_factory=FastAcceleratorStatus)


class FastDeviceGroup(_Struct, frozen=True):
    id: _Name
    manufacturer: _Name
    name: str = ""
    acceleratorSlicedDetail: FastSlicedDetail | None = None
    accelerators: list[FastAccelerator] = msgspec.field(default_factory=list)


class FastProfileCount(_Struct, frozen=True):
    name: str
    count: int = 0


class FastLedgerAccelerator(_Struct, frozen=True):
    id: _Name
    mode: _ModeNumber | str = 0  # a name: converted by FastDevicesStatus
    allocated: int = 0
    remaining: int = 0
    allocatedSlices: int = 0
    allocatedProfiles: list[FastProfileCount] = msgspec.field(default_factory=list)
    remainingProfiles: list[FastProfileCount] = msgspec.field(default_factory=list)


class FastLedgerGroup(_Struct, frozen=True):
    id: _Name
    manufacturer: _Name
    accelerators: list[FastLedgerAccelerator] = msgspec.field(default_factory=list)


class FastDevicesSpec(_Struct, frozen=True):
    groups: list[FastDeviceGroup] = msgspec.field(default_factory=list)


class FastDevicesStatus(_Struct, frozen=True):
    groups: list[FastLedgerGroup] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        """A card's mode given by name becomes its number (msgspec checks a number's range). Here
        once per Devices, not once per card: the ledger has 57,000 cards at 10,000 Nodes."""
        for group in self.groups:
            for card in group.accelerators:
                if type(card.mode) is str:
                    _fix(card, "mode", _mode)


class FastDevices(_Struct, frozen=True, tag="Devices", tag_field="kind"):
    metadata: FastMeta
    spec: FastDevicesSpec = msgspec.field(default_factory=FastDevicesSpec)
    status: FastDevicesStatus = msgspec.field(default_factory=FastDevicesStatus)
    apiVersion: Any = None


class FastNamespaceStatus(_Struct, frozen=True):
    phase: str = ""


class FastNamespace(_Struct, frozen=True, tag="Namespace", tag_field="kind"):
    metadata: FastMeta
    status: FastNamespaceStatus = msgspec.field(default_factory=FastNamespaceStatus)
    apiVersion: Any = None


FAST_MODELS: dict[type[Model], type[_Struct]] = {Node: FastNode, Devices: FastDevices, Namespace: FastNamespace}


def fast_validate(model: type[Model], obj: Any) -> Any:
    """``model.model_validate(obj)``, by msgspec when it accepts ``obj`` (see above)."""
    fast = FAST_MODELS.get(model)
    if fast is not None:
        try:
            return msgspec.convert(obj, fast)
        except msgspec.ValidationError:
            pass
    return model.model_validate(obj)
