"""rules/output.yaml (kind Output): per-kind labels and annotations added to rendered objects.

The apply step (:func:`gpustack_render.render.output_meta.apply_output_metadata`) is tested directly on
rendered objects; loading and checking the rule file through ``lint`` / ``load_rules`` on a copy of
``rules/`` whose output.yaml is rewritten, with the exact ``file:line:col: error:`` lines located in
the written text.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
from cli_invoke import invoke
from gpustack_render.render.output_meta import apply_output_metadata, overridden_keys
from gpustack_render.rules import KindMetadata, load_rules

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
HEADER = "apiVersion: render.gpustack.ai/v1alpha1\nkind: Output\n"
ARGO = ("argocd.argoproj.io/sync-options", "Prune=false")
FLUX = ("kustomize.toolkit.fluxcd.io/prune", "disabled")


def rules_with_output(tmp_path: Path, body: str) -> tuple[Path, str]:
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    text = HEADER + body
    (rules / "output.yaml").write_text(text, encoding="utf-8")
    return rules, text


def position_of(text: str, marker: str) -> tuple[int, int]:
    assert text.count(marker) == 1, f"{marker!r} occurs {text.count(marker)} times"
    start = text.index(marker)
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


def lint(rules: Path) -> tuple[int, list[str]]:
    result = invoke("lint", "--rules", str(rules))
    return result.exit_code, result.stdout.splitlines()


def rendered(*extra: dict) -> list[dict]:
    """A few objects shaped like the renderer's (maps already sorted)."""
    return [
        {"apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceType",
         "metadata": {"name": "gpustack--nvidia-t4", "labels": {"resource.gpustack.ai/type": "instancetypes",
                                                               "z.example.com/last": "1"}},
         "spec": {"unitResources": {"cpu": "8"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpustack--cq"},
         "spec": {}},
        *extra,
    ]


# --- apply_output_metadata ------------------------------------------------------------------------

def test_adds_annotations_to_every_object_of_the_kind_only() -> None:
    objects = rendered({"apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceType", "metadata": {"name": "b"}})
    out = apply_output_metadata(objects, {"InstanceType": KindMetadata(annotations=(ARGO,))})
    assert [o["metadata"].get("annotations") for o in out] == [dict([ARGO]), None, dict([ARGO])]
    assert out[1] is objects[1]  # other kinds pass through untouched


def test_maps_stay_sorted_and_new_maps_are_created() -> None:
    meta = KindMetadata(labels=(("m.example.com/team", "ml"),), annotations=(FLUX, ARGO))
    out = apply_output_metadata(rendered(), {"InstanceType": meta, "ClusterQueue": meta})
    labels = out[0]["metadata"]["labels"]
    assert list(labels) == sorted(labels) == ["m.example.com/team", "resource.gpustack.ai/type", "z.example.com/last"]
    assert list(out[0]["metadata"]["annotations"]) == sorted([FLUX[0], ARGO[0]])
    assert out[1]["metadata"] == {"name": "gpustack--cq", "labels": {"m.example.com/team": "ml"},
                                  "annotations": dict(sorted([FLUX, ARGO]))}


def test_the_template_wins_on_a_key_it_set() -> None:
    objects = rendered()
    meta = KindMetadata(labels=(("resource.gpustack.ai/type", "other"), ("z.example.com/last", "1")))
    out = apply_output_metadata(objects, {"InstanceType": meta})
    assert out[0]["metadata"]["labels"]["resource.gpustack.ai/type"] == "instancetypes"
    # only a different value is an override worth a warning
    assert overridden_keys(objects, {"InstanceType": meta}) == [
        "InstanceType/gpustack--nvidia-t4: metadata.labels.resource.gpustack.ai/type: the template sets "
        "'instancetypes', so rules/output.yaml's 'other' is not applied"]


def test_input_is_never_mutated() -> None:
    objects = rendered()
    before = copy.deepcopy(objects)
    apply_output_metadata(objects, {"InstanceType": KindMetadata(labels=(("a.example.com/x", "y"),),
                                                                 annotations=(ARGO,))})
    assert objects == before


def test_no_output_rules_change_nothing() -> None:
    objects = rendered()
    assert apply_output_metadata(objects, {}) == objects
    assert apply_output_metadata(objects, {"InstanceType": KindMetadata()}) == objects


# --- loading: rules/output.yaml -------------------------------------------------------------------

def test_builtin_output_rules_are_empty() -> None:
    assert dict(load_rules().output) == {}


def test_output_rules_are_compiled_sorted(tmp_path: Path) -> None:
    rules, _ = rules_with_output(tmp_path, "kinds:\n  InstanceType:\n    annotations:\n"
                                           f"      {FLUX[0]}: {FLUX[1]}\n      {ARGO[0]}: {ARGO[1]}\n"
                                           "    labels: {team.example.com/name: ml}\n")
    assert dict(load_rules(rules).output) == {
        "InstanceType": KindMetadata(labels=(("team.example.com/name", "ml"),), annotations=tuple(sorted([FLUX, ARGO])))}
    code, lines = lint(rules)
    assert code == 0 and lines[0].startswith(f"{len(list(RULES.glob('*.yaml')))} rule files OK"), lines


def test_a_rules_directory_without_output_yaml_still_loads(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    (rules / "output.yaml").unlink()
    assert dict(load_rules(rules).output) == {}


@pytest.mark.parametrize("body, marker, message", [
    ("kinds:\n  InstanceTypes: {annotations: {a: b}}\n", "InstanceTypes",
     "kinds.InstanceTypes: 'InstanceTypes' is not a rendered kind (did you mean 'InstanceType'?)"),
    ("kinds:\n  Node: {}\n", "Node",
     "kinds.Node: 'Node' is not a rendered kind (one of NodeFeature, Topology, AdmissionCheck, ResourceFlavor, "
     "InstanceType, ClusterQueue, LocalQueue)"),
    ("kinds:\n  LocalQueue:\n    labels:\n      team: \"not valid!\"\n", '"not valid!"',
     "kinds.LocalQueue.labels.team: invalid label: value 'not valid!' must be alphanumerics, '-', '_' or '.', "
     "alphanumeric at both ends"),
    ("kinds:\n  LocalQueue:\n    labels:\n      Bad_Prefix/team: ml\n", "Bad_Prefix",
     "kinds.LocalQueue.labels.Bad_Prefix/team: invalid label: key 'Bad_Prefix/team': prefix is not a DNS-1123 "
     "subdomain of at most 253 characters"),
    ("kinds:\n  ClusterQueue:\n    annotations: {\"-x\": v}\n", '"-x"',
     "kinds.ClusterQueue.annotations.-x: invalid annotation: key '-x': name part must be alphanumerics, '-', '_' "
     "or '.', alphanumeric at both ends"),
    ("kinds:\n  ClusterQueue:\n    annotations: {a.example.com/b: true}\n", "true",
     "kinds.ClusterQueue.annotations.a.example.com/b: expected a string, got a boolean True (quote it: \"true\")"),
    ("kinds:\n  ClusterQueue:\n    annotation: {a: b}\n", "annotation:",
     "kinds.ClusterQueue.annotation: unknown key 'annotation' (did you mean 'annotations'?)"),
])
def test_invalid_output_rules(tmp_path: Path, body: str, marker: str, message: str) -> None:
    rules, text = rules_with_output(tmp_path, body)
    line, col = position_of(text, marker)
    code, lines = lint(rules)
    assert code == 1
    assert lines[0] == f"{rules / 'output.yaml'}:{line}:{col}: error: {message}", "\n".join(lines)
    assert len(lines) == 2  # the problem and the summary
    render = invoke("render", "fixtures/demo", "--rules", str(rules))
    assert render.exit_code == 2 and render.stdout == ""
    assert render.stderr.splitlines() == lines[:1]
