"""Table-driven unit tests of the pure evaluation helpers, cases taken from the spec pages."""

from __future__ import annotations

import pytest

from gpustack_render.errors import Diagnostics
from gpustack_render.evaluate.names import NameNormaliser
from gpustack_render.evaluate.nodes import NodeEvaluator, profile_of_levels
from gpustack_render.evaluate.presets import PresetMatcher
from gpustack_render.rules import Rules, load_rules

DEFAULTS = {"instance-type-aware-cpu-manufacturer": False, "instance-type-mixed-on-node": True,
            "instance-type-derived-from-node": True, "instance-type-drain-when-no-flavors": True,
            "node-management-manual": False, "workload-fit-affinity": True}


@pytest.fixture(scope="module")
def rules() -> Rules:
    return load_rules()


@pytest.mark.parametrize("name,prefix,max_length,strip,expected", [
    ("12th Gen Intel(R) Core(TM) i7-12700K", "intel", 48, True, "core-i7-12700k"),
    ("Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", "intel", 48, True, "xeon-platinum-8259cl"),
    ("AMD EPYC 7R13 Processor", "amd", 50, True, "epyc-7r13"),
    ("AMD EPYC 9654 96-Core Processor", "amd", 50, True, "epyc-9654"),
    ("Genuine Intel(R) CPU 0000", "intel", 48, True, "cpu-0000"),
    ("Ascend910B", "ascend", 0, False, "910b"),
    ("NVIDIA A100 80GB PCIe", "nvidia", 56, False, "a100-80gb-pcie"),
    ("NVIDIA-A10G", "nvidia", 0, False, "a10g"),
    ("Tesla-T4", "nvidia", 0, False, "tesla-t4"),
    ("a  b__c..d", "", 0, False, "a-b_c.d"),
    ("abcdefgh", "", 4, False, "abcd"),
    ("abc-def", "", 4, False, "abc"),
    ("Ünïcode Name", "", 0, False, "ncode-name"),
], ids=lambda v: str(v)[:24])
def test_normalize_name(rules: Rules, name: str, prefix: str, max_length: int, strip: bool, expected: str) -> None:
    assert NameNormaliser(rules).normalize(name, prefix, max_length, strip) == expected


@pytest.mark.parametrize("labels,annotations,expected", [
    ({"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel", "feature.node.kubernetes.io/cpu-model.family": "6",
      "feature.node.kubernetes.io/cpu-model.id": "151"},
     {"feature.gpustack.ai/cpu-name": "12th Gen Intel(R) Core(TM) i7-12700K"}, "intel-core-i7-12700k"),
    ({"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel", "feature.node.kubernetes.io/cpu-model.family": "6",
      "feature.node.kubernetes.io/cpu-model.id": "151"}, {}, "intel-6-151"),
    ({"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel", "feature.node.kubernetes.io/cpu-model.family": "6",
      "feature.node.kubernetes.io/cpu-model.id": "151"}, {"feature.gpustack.ai/cpu-name": "@template"}, "intel-6-151"),
    ({"feature.node.kubernetes.io/cpu-model.vendor_id": "VendorUnknown"}, {}, "generic"),
    ({}, {}, "generic"),
    ({"feature.node.kubernetes.io/cpu-model.vendor_id": "Intel", "feature.node.kubernetes.io/cpu-model.family": "6"},
     {}, "intel"),
    ({"feature.node.kubernetes.io/cpu-model.vendor_id": "AMD"}, {"feature.gpustack.ai/cpu-name": "(R)(TM)"}, "amd"),
], ids=["cpu-name", "family-id", "unresolved-template", "vendorunknown", "nothing", "family-only", "empty-name"])
def test_gkey(rules: Rules, labels: dict[str, str], annotations: dict[str, str], expected: str) -> None:
    assert NodeEvaluator(rules, DEFAULTS, Diagnostics()).gkey(labels, annotations) == expected


@pytest.mark.parametrize("labels,expected", [
    ({"acceleratable.feature.gpustack.ai/nvidia-l4": "true"}, ["nvidia-l4"]),
    ({"acceleratable.feature.gpustack.ai/nvidia": "true"}, []),
    ({"acceleratable.feature.gpustack.ai/acme-x1": "true"}, []),
    ({"feature.gpustack.ai/nvidia-t4": "true"}, []),
    ({"acceleratable.feature.gpustack.ai/nvidia-l4": "false"}, []),
    ({"acceleratable.feature.gpustack.ai/nvidia-l4.count": "true"}, ["nvidia-l4.count"]),
    ({"acceleratable.feature.gpustack.ai/nvidia-t4": "true", "acceleratable.feature.gpustack.ai/amd-mi300x": "true"},
     ["amd-mi300x", "nvidia-t4"]),
], ids=["model", "no-dash", "unknown-manufacturer", "other-prefix", "not-true", "suffix-true", "sorted"])
def test_akeys(rules: Rules, labels: dict[str, str], expected: list[str]) -> None:
    assert NodeEvaluator(rules, DEFAULTS, Diagnostics()).akeys(labels) == expected


@pytest.mark.parametrize("manufacturer,product,expected", [
    ("nvidia", "Tesla-T4", "small"),
    ("nvidia", "NVIDIA-A10G", "medium"),
    ("nvidia", "NVIDIA A10", "medium"),
    ("nvidia", "NVIDIA-A100-80GB-PCIe", "large"),
    ("nvidia", "NVIDIA-A100-SXM4-40GB", "medium"),
    ("nvidia", "NVIDIA A100", "medium"),
    ("nvidia", "NVIDIA-H100-80GB-HBM3", "xlarge"),
    ("nvidia", "Tesla-V100-SXM2-32GB", "medium"),
    ("nvidia", "Tesla-V100S-PCIE-32GB", "small"),
    ("nvidia", "NVIDIA-L40S", "large"),
    ("nvidia", "NVIDIA-L40", "medium"),
    ("nvidia", "NVIDIA-GeForce-RTX-4090", "medium"),
    ("nvidia", "NVIDIA RTX A6000", "small"),
    ("nvidia", "NVIDIA-B9000", None),
    ("ascend", "Ascend-910B3", "medium"),
    ("ascend", "Ascend910_9392", "xlarge"),
    ("amd", "AMD-Instinct-MI300X", "xlarge"),
    ("cambricon", "MLU", None),
    ("cambricon", "MLU370-X8", "medium"),
    ("intel", "Gaudi2", None),
    ("nvidia", "", None),
], ids=lambda v: str(v))
def test_preset_tier(rules: Rules, manufacturer: str, product: str, expected: str | None) -> None:
    assert PresetMatcher(rules, NameNormaliser(rules)).tier(manufacturer, product) == expected


def test_profile_of_levels(rules: Rules) -> None:
    assert profile_of_levels(rules, ["kubernetes.io/hostname"]) == "fnv64-87bf574bea2a4f23"
    two = profile_of_levels(rules, ["topology.kubernetes.io/zone", "kubernetes.io/hostname"])
    assert two != profile_of_levels(rules, ["topology.kubernetes.io/zonekubernetes.io/hostname"])
    assert len(two) == len("fnv64-") + 16
