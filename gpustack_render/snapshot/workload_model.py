"""The one typed model of a Kueue ``Workload`` (admission.md §2), for ``pin`` and ``admit``.

Every version Kueue v0.19 serves (:data:`SERVED_VERSIONS`) reads into the same structs; another
version is refused. Only the fields admission.md §2 reads are modelled, everything else is ignored.

Why msgspec (not the snapshot's pydantic models): a snapshot may hold 50,000 Workloads, each a few
dozen nested objects; ``msgspec.convert`` types them in C, several times faster than pydantic
(inputs.py's bulk kinds are msgspec structs for the same reason). msgspec stops at an object's
first problem; :func:`decode` words it as the snapshot words pydantic's (``expected a list, got
dict``, ``required field is missing``) with the field's path, so an error names the file, the
Workload and the field. Quantities are parsed to exact ``Fraction`` at decode time; a quantity that
does not parse is refused there, with its path.

``topologyAssignment`` is decoded into {domain values → Pods} (:class:`Placement`, from
:mod:`.topology_assignment`); one that does not decode is refused, with the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import Annotated, Any, Mapping

import msgspec

from gpustack_render.snapshot.inputs import FieldError, quantities
from gpustack_render.snapshot.refusal import split as split_refusal
from gpustack_render.snapshot.topology_assignment import (DecodeError, Frozen, Loc, Placement, TopologyAssignment,
                                                          decode_topology)
from gpustack_render.snapshot.workload_kind import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE, GROUP as GROUP, KIND as KIND

SERVED_VERSIONS = ("v1beta1", "v1beta2")  # Kueue v0.19's workloads CRD: the versions it serves
DEFAULT_PODSET = "main"  # the CRD's default PodSet name
# The template annotations of Kueue's API that request a topology (Kueue's own keys, not the operator's).
REQUIRED_TOPOLOGY_ANNOTATION = GROUP + "/podset-required-topology"
PREFERRED_TOPOLOGY_ANNOTATION = GROUP + "/podset-preferred-topology"

_Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]


class Resources(Frozen, frozen=True):
    limits: dict[str, Any] | None = None
    requests: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.limits is not None:
            msgspec.structs.force_setattr(self, "limits", quantities(self.limits, ("limits",)))
        if self.requests is not None:
            msgspec.structs.force_setattr(self, "requests", quantities(self.requests, ("requests",)))


class Container(Frozen, frozen=True):
    name: str = ""
    resources: Resources = msgspec.field(default_factory=Resources)
    restartPolicy: str | None = None  # "Always" on an init container: a sidecar

    @property
    def requests(self) -> dict[str, Fraction]:
        """Its requests, a limit standing for a missing request (as the API server defaults it)."""
        return {**(self.resources.limits or {}), **(self.resources.requests or {})}


class NodeSelectorRequirement(Frozen, frozen=True):
    key: str = ""  # (the API server requires both; pin has always read the term without them)
    operator: str = ""
    values: list[str] = msgspec.field(default_factory=list)


class NodeSelectorTerm(Frozen, frozen=True):
    matchExpressions: list[NodeSelectorRequirement] | None = None
    matchFields: list[NodeSelectorRequirement] | None = None


class NodeSelector(Frozen, frozen=True):
    nodeSelectorTerms: list[NodeSelectorTerm | None] | None = None


class NodeAffinity(Frozen, frozen=True):
    required: NodeSelector | None = msgspec.field(default=None, name="requiredDuringSchedulingIgnoredDuringExecution")


class Affinity(Frozen, frozen=True):
    nodeAffinity: NodeAffinity | None = None


class Toleration(Frozen, frozen=True):
    key: str = ""
    operator: str = ""  # "" is Equal
    value: str = ""
    effect: str = ""  # "" matches every effect
    tolerationSeconds: int | None = None


class PodSpec(Frozen, frozen=True):
    containers: list[Container] = msgspec.field(default_factory=list)
    initContainers: list[Container] = msgspec.field(default_factory=list)
    overhead: dict[str, Any] | None = None  # (quantities once decoded; None when absent)
    nodeSelector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.overhead is not None:
            msgspec.structs.force_setattr(self, "overhead", quantities(self.overhead, ("overhead",)))

    def pod_requests(self) -> dict[str, Fraction]:
        """Per Pod, each resource: the larger of the app containers' sum and the largest single init
        container, plus the overhead (Kubernetes' rule, admission.md §3). As Kubernetes counts them,
        sidecars (init containers with ``restartPolicy: Always``) run beside the app containers and
        every init container after them: they add to the sum and to each later init container."""
        if len(self.containers) == 1 and not self.initContainers and not self.overhead:
            return self.containers[0].requests  # (the common Pod: no arithmetic)
        total: dict[str, Fraction] = {}
        for container in self.containers:
            _add(total, container.requests)
        sidecars: dict[str, Fraction] = {}
        init: dict[str, Fraction] = {}
        for container in self.initContainers:
            if container.restartPolicy == "Always":
                _add(total, container.requests)
                _add(sidecars, container.requests)
                running = sidecars
            else:
                running = dict(sidecars)
                _add(running, container.requests)
            for name, value in running.items():
                if value > init.get(name, Fraction(0)):
                    init[name] = value
        for name, value in init.items():
            if value > total.get(name, Fraction(0)):
                total[name] = value
        _add(total, self.overhead or {})
        return total

    def required_terms(self) -> list[NodeSelectorTerm | None] | None:
        """The required node affinity's terms; ``None`` without a required node affinity."""
        affinity = self.affinity.nodeAffinity if self.affinity is not None else None
        required = affinity.required if affinity is not None else None
        return None if required is None else list(required.nodeSelectorTerms or [])


def _add(into: dict[str, Fraction], values: Mapping[str, Fraction]) -> None:
    for name, value in values.items():
        into[name] = into.get(name, Fraction(0)) + value


class TemplateMeta(Frozen, frozen=True):
    annotations: dict[str, str] | None = None


class PodTemplate(Frozen, frozen=True):
    spec: PodSpec
    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)


class TopologyRequest(Frozen, frozen=True):
    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None


class PodSet(Frozen, frozen=True):
    template: PodTemplate
    name: str | None = None  # None: the CRD's default, see :attr:`ref`
    count: _Count = 1
    topologyRequest: TopologyRequest | None = None

    @property
    def ref(self) -> str:
        return self.name or DEFAULT_PODSET

    def topology(self) -> TopologyRequest | None:
        """The topology request: ``topologyRequest``, else the template's Kueue annotations."""
        if self.topologyRequest is not None:
            return self.topologyRequest
        annotations = self.template.metadata.annotations or {}
        required = annotations.get(REQUIRED_TOPOLOGY_ANNOTATION)
        preferred = annotations.get(PREFERRED_TOPOLOGY_ANNOTATION)
        if required is None and preferred is None:
            return None
        return TopologyRequest(required=required, preferred=preferred)


class WorkloadSpec(Frozen, frozen=True):
    podSets: list[PodSet]
    queueName: str | None = None
    priority: _Int32 | None = None


class WorkloadMeta(Frozen, frozen=True):
    name: str
    namespace: str = ""
    creationTimestamp: datetime | None = None

    def __post_init__(self) -> None:
        _utc(self, "creationTimestamp")


def _utc(struct: Any, name: str) -> None:
    """A timestamp without a zone (YAML's plain timestamps can be read so) is UTC."""
    value = getattr(struct, name)
    if value is not None and value.tzinfo is None:
        msgspec.structs.force_setattr(struct, name, value.replace(tzinfo=timezone.utc))


# --- status ------------------------------------------------------------------------------------------

class Condition(Frozen, frozen=True):
    type: str
    status: str = ""
    lastTransitionTime: datetime | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        _utc(self, "lastTransitionTime")


class PodSetAssignment(Frozen, frozen=True):
    name: str = DEFAULT_PODSET
    flavors: dict[str, str] = msgspec.field(default_factory=dict)  # resource → ResourceFlavor
    count: _Count | None = None  # None: the PodSet's count (Workloads created before the field)
    topologyAssignment: TopologyAssignment | None = None


class Admission(Frozen, frozen=True):
    clusterQueue: str
    podSetAssignments: list[PodSetAssignment] = msgspec.field(default_factory=list)


class WorkloadStatus(Frozen, frozen=True):
    admission: Admission | None = None
    conditions: list[Condition] = msgspec.field(default_factory=list)

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def is_true(self, kind: str) -> bool:
        found = self.condition(kind)
        return found is not None and found.status == "True"


class _WorkloadObject(Frozen, frozen=True):
    metadata: WorkloadMeta
    spec: WorkloadSpec
    status: WorkloadStatus = msgspec.field(default_factory=WorkloadStatus)


class _PendingObject(Frozen, frozen=True):
    """A Workload whose ``status`` is ignored (``admit --workloads``: they are pending)."""

    metadata: WorkloadMeta
    spec: WorkloadSpec


@dataclass(frozen=True, eq=False)
class Workload:
    """One Workload: where it came from, its typed spec and status, and its decoded placements."""

    file: str
    api_version: str
    meta: WorkloadMeta
    spec: WorkloadSpec
    status: WorkloadStatus
    placements: tuple[Placement | None, ...] = ()  # per status.admission.podSetAssignments[i]

    @property
    def namespace(self) -> str:
        return self.meta.namespace or DEFAULT_NAMESPACE

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def label(self) -> str:
        return f"{KIND}/{self.namespace}/{self.name}"

    @property
    def priority(self) -> int:
        return self.spec.priority or 0

    @property
    def finished(self) -> bool:
        return self.status.is_true("Finished")

    @property
    def holds_quota(self) -> bool:
        """``QuotaReserved`` True and not ``Finished`` (admission.md §2)."""
        return self.status.is_true("QuotaReserved") and not self.finished and self.status.admission is not None

    @property
    def admitted(self) -> bool:
        return self.holds_quota and self.status.is_true("Admitted")

    @property
    def evicted(self) -> bool:
        return self.status.is_true("Evicted")

    @property
    def quota_reserved_at(self) -> datetime | None:
        found = self.status.condition("QuotaReserved")
        return found.lastTransitionTime if found is not None else None


# --- decoding -------------------------------------------------------------------------------------------

def version_problem(api_version: Any) -> str:
    """Why ``api_version`` (of a Kueue Workload) cannot be read; ``""`` when it can."""
    version = api_version.rpartition("/")[2] if isinstance(api_version, str) else ""
    if version in SERVED_VERSIONS:
        return ""
    return f"version {version!r} of {GROUP} is not served by Kueue v0.19 (served: {', '.join(SERVED_VERSIONS)})"


def decode(obj: Mapping[str, Any], file: str, status: bool = True) -> Workload:
    """``obj`` (a ``kueue.x-k8s.io`` Workload as plain data) typed; ``status=False`` ignores its
    status (a pending Workload of ``--workloads``). Raises :class:`DecodeError`."""
    api = obj.get("apiVersion")
    return _typed(api, file, status, lambda: msgspec.convert(obj, _WorkloadObject if status else _PendingObject))


_JSON: dict[bool, msgspec.json.Decoder[Any]] = {True: msgspec.json.Decoder(_WorkloadObject),
                                                False: msgspec.json.Decoder(_PendingObject)}


def decode_json(text: bytes, api_version: str, file: str, status: bool = True) -> Workload:
    """:func:`decode` of a Workload kept as its JSON text (typed straight from the text)."""
    return _typed(api_version, file, status, lambda: _JSON[status].decode(text))


def _typed(api: Any, file: str, status: bool, convert: Any) -> Workload:
    problem = version_problem(api)
    if problem:
        raise DecodeError(problem, ("apiVersion",))
    try:
        typed: Any = convert()
    except msgspec.ValidationError as err:
        raise _translate(err) from None
    state = typed.status if status else WorkloadStatus()
    return Workload(file, api, typed.metadata, typed.spec, state, _placements(state))


_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]*)`\Z")
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]*)`(?:, got `(?P<got>[^`]*)`)?(?P<rest>.*)\Z", re.S)
_WORDS = {"array": "a list", "object": "a mapping", "str": "a string", "int": "an integer", "bool": "a boolean",
          "float": "a number", "datetime": "an RFC 3339 timestamp"}
# What a missing (or null) field of these names means, in the words pin always used.
_NEEDED = {"template": "a PodSet needs a template", "spec": "a PodSet template needs a spec"}


def _translate(err: msgspec.ValidationError) -> DecodeError:
    message, loc = split_refusal(str(err))
    cause = err.__cause__
    if isinstance(cause, FieldError):  # a quantity refused in __post_init__ (inputs.quantities)
        return DecodeError(str(cause), loc + cause.loc)
    missing = _MISSING.match(message)
    if missing:
        field = missing["field"]
        return DecodeError(_missing(loc + (field,)), loc + (field,))
    expected = _EXPECTED.match(message)
    if expected:
        if expected["got"] == "null":
            return DecodeError(_missing(loc), loc)
        want = " or ".join(_WORDS.get(w.strip(), w.strip()) for w in expected["want"].split("|"))
        got = f", got {_WORDS.get(expected['got'], expected['got'])}" if expected["got"] else ""
        return DecodeError(f"expected {want}{got}{expected['rest']}", loc)
    return DecodeError(message[:1].lower() + message[1:], loc)


def _missing(loc: Loc) -> str:
    if loc[-1:] == ("template",) or loc[-2:] == ("template", "spec"):
        return _NEEDED[str(loc[-1])]
    return "required field is missing"


def _placements(status: WorkloadStatus) -> tuple[Placement | None, ...]:
    if status.admission is None:
        return ()
    out: list[Placement | None] = []
    for i, assignment in enumerate(status.admission.podSetAssignments):
        topology = assignment.topologyAssignment
        loc: Loc = ("status", "admission", "podSetAssignments", i, "topologyAssignment")
        out.append(None if topology is None else decode_topology(topology, loc))
    return tuple(out)
