#!/usr/bin/env python3
"""Differential run: this checkout's gpustack-render against another checkout's (``--baseline``,
default /work/base), over generated snapshots (tests/bench/gen_snapshot.py with random sizes and
seeds, plus random label and annotation values YAML readers treat specially), the fixture cases,
rule edits (applied alike to both) and template edits (each written once in this checkout's template
language and once in the baseline's ``.yaml.j2`` form). Every command's stdout must be byte-identical
and its exit code the same; stderr is not compared (error wording changed on purpose: file:line:col).

    .venv/bin/python tests/differential/differential.py [--snapshots 300] [--seed 1]

Prints the counts (runs, identical, different) and each difference; exit 1 when any differs.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "bench"))
import gen_snapshot  # noqa: E402

# Label values YAML readers treat specially but Kubernetes accepts (most mutated snapshots stay
# valid), and a few it refuses (their error paths are compared too).
AWKWARD = ["yes", "on", "0777", "1e3", "null", "true", "12", "0x1F", "1_000", "y", "NO", "a.b-c"]
INVALID = ["~", "", "x y", "1:20", "é"]
COMMANDS = [["render"], ["render", "--format", "json"], ["catalog"], ["node-patches", "--format", "json"]]

# (file, old text, new text): rule edits, applied to a copy of the rules of both checkouts.
RULE_EDITS = [
    ("naming.yaml", 'nodeFeature: "{node}-gpustack-worker"', 'nodeFeature: "nf-{node}"'),
    ("naming.yaml", 'topology: "gpustack-{profile}"', 'topology: "topo-{profile}"'),
    ("naming.yaml", "unawareCpuDisplayName: CPU-only", "unawareCpuDisplayName: Plain CPU"),
    ("naming.yaml", "displayNameMaxLength: 64", "displayNameMaxLength: 5"),
    ("output.yaml", "kinds: {}", "kinds:\n  InstanceType:\n    annotations: {argocd.argoproj.io/sync-options: Prune=false}\n"
                                 "  NodeFeature:\n    labels: {team: gpu, \"on\": \"yes\"}"),
]

# (kind, baseline .yaml.j2 edit (old, new), this checkout's .yaml edit (old, new)): the same change.
TEMPLATE_EDITS: list[tuple[str, tuple[str, str], tuple[str, str]]] = [
    ("NodeFeature", ("  name: {{ obj.name | q }}", "  name: {{ obj.name | trim | q }}"),
     ('  name: "{{ obj.name }}"', '  name: "{{ obj.name | trim }}"')),
    ("NodeFeature", ("  name: {{ obj.name | q }}", "  name: {{ ('x-' ~ obj.name) | q }}"),
     ('  name: "{{ obj.name }}"', '  name: "x-{{ obj.name }}"')),
    ("NodeFeature", ("  labels: {{ obj.labels | q }}",
                     "  labels:\n{%- for k, v in obj.labels | dictsort %}\n    {{ k | q }}: {{ v | q }}\n{%- endfor %}"),
     ('  labels: "{{ obj.labels }}"', '  labels:\n    $for: k, v in obj.labels | dictsort\n    "{{ k }}": "{{ v }}"')),
    ("NodeFeature", ("    app.kubernetes.io/part-of: gpustack-operator-worker",
                     "    app.kubernetes.io/part-of: gpustack-operator-worker\n{%- if obj.labels %}\n    count: {{ obj.labels | length | string | q }}\n{%- endif %}"),
     ("    app.kubernetes.io/part-of: gpustack-operator-worker",
      '    app.kubernetes.io/part-of: gpustack-operator-worker\n    count: "{{ (obj.labels | length | string) if obj.labels else omit }}"')),
    ("LocalQueue", ("  clusterQueue: {{ obj.cluster_queue | q }}", "  clusterQueue: {{ obj.cluster_queue | upper | q }}"),
     ('  clusterQueue: "{{ obj.cluster_queue }}"', '  clusterQueue: "{{ obj.cluster_queue | upper }}"')),
    ("Topology", ("    - nodeLabel: {{ level | q }}", "    - nodeLabel: {{ level | q }}\n      index: {{ loop.index | q }}"),
     ('      nodeLabel: "{{ level }}"', '      nodeLabel: "{{ level }}"\n      index: "{{ obj.levels.index(level) + 1 }}"')),
    ("ClusterQueue", ("  stopPolicy: {{ obj.stop_policy | q }}", "  stopPolicy: {{ obj.stop_policy | q }}\n  extra: {{ obj.flavors | length | q }}"),
     ('  stopPolicy: "{{ obj.stop_policy }}"', '  stopPolicy: "{{ obj.stop_policy }}"\n  extra: "{{ obj.flavors | length }}"')),
    ("ResourceFlavor", ("  topologyName: {{ obj.topology_name | q }}", "  topologyName: {{ obj.topology_name | q }}\n  nodes: {{ obj.nodes | q }}"),
     ('  topologyName: "{{ obj.topology_name }}"', '  topologyName: "{{ obj.topology_name }}"\n  nodes: "{{ obj.nodes }}"')),
    ("InstanceType", ("  os: {{ obj.os | q }}", "  os: {{ obj.os | q }}\n  flags: {{ {'b': obj.acceleratable, 'a': [obj.unit_cpu, 1.5]} | q }}"),
     ('  os: "{{ obj.os }}"', '  os: "{{ obj.os }}"\n  flags: "{{ {\'b\': obj.acceleratable, \'a\': [obj.unit_cpu, 1.5]} }}"')),
]


class Worker:
    def __init__(self, python: Path, cwd: Path) -> None:
        self.proc = subprocess.Popen([str(python), str(HERE / "worker.py")], cwd=cwd, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run(self, args: list[str]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(args) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait()


def snapshot(rng: random.Random, path: Path) -> Path:
    doc = gen_snapshot.generate(rng.randint(1, 40), rng.randint(0, 4), rng.randint(0, 10**6))
    for item in doc["items"]:
        meta = item.get("metadata") or {}
        if item.get("kind") == "Node" and rng.random() < 0.15:
            labels = meta.setdefault("labels", {})
            for _ in range(rng.randint(1, 2)):
                key = rng.choice(list(labels) or ["x"])
                labels[key] = rng.choice(AWKWARD if rng.random() < 0.9 else INVALID)
            if rng.random() < 0.5:
                labels[f"team.example.com/{rng.choice(AWKWARD)}"] = rng.choice(AWKWARD)
            if rng.random() < 0.2 and labels:
                del labels[rng.choice(list(labels))]
        if item.get("kind") == "Namespace" and rng.random() < 0.2:
            meta.setdefault("annotations", {})["note"] = rng.choice(AWKWARD)
    path.write_text(json.dumps(doc))
    return path


def edited_copy(source: Path, dest: Path, edits: list[tuple[str, str, str]]) -> Path | None:
    shutil.copytree(source, dest)
    for name, old, new in edits:
        file = dest / name
        text = file.read_text()
        if old not in text:
            return None
        file.write_text(text.replace(old, new, 1))
    return dest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, default=Path("/work/base"))
    ap.add_argument("--snapshots", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="differential-"))
    ours = Worker(REPO / ".venv" / "bin" / "python", REPO)
    theirs = Worker(args.baseline / ".venv" / "bin" / "python", args.baseline)
    runs = same = 0
    differences: list[str] = []
    codes: dict[int, int] = {}

    def compare(ours_args: list[str], theirs_args: list[str], what: str) -> None:
        nonlocal runs, same
        a, b = ours.run(ours_args), theirs.run(theirs_args)
        runs += 1
        codes[a["code"]] = codes.get(a["code"], 0) + 1
        if (a["code"], a["sha"]) == (b["code"], b["sha"]):
            same += 1
        else:
            differences.append(f"{what}: ours {a} / baseline {b}")

    inputs = [str(REPO / "fixtures" / "demo"), str(REPO / "fixtures" / "capacity" / "mixed")]
    inputs += sorted(str(p) for p in (REPO / "fixtures" / "snapshots").iterdir())
    inputs += [str(snapshot(rng, work / f"snap-{i}.json")) for i in range(args.snapshots)]
    for snap in inputs:
        for command in COMMANDS:
            compare([*command, snap], [*command, snap], f"{' '.join(command)} {snap}")
    for index, edit in enumerate(RULE_EDITS):
        rules_ours = edited_copy(REPO / "rules", work / f"rules-ours-{index}", [edit])
        rules_theirs = edited_copy(args.baseline / "rules", work / f"rules-base-{index}", [edit])
        assert rules_ours and rules_theirs, edit
        for snap in inputs[:1] + rng.sample(inputs, min(40, len(inputs))):
            for command in COMMANDS[:2]:
                compare([*command, snap, "--rules", str(rules_ours)], [*command, snap, "--rules", str(rules_theirs)],
                        f"rule edit {index} {' '.join(command)} {snap}")
    for index, (kind, old_edit, new_edit) in enumerate(TEMPLATE_EDITS):
        ours_dir = edited_copy(REPO / "templates", work / f"tpl-ours-{index}", [(f"{kind}.yaml", *new_edit)])
        theirs_dir = edited_copy(args.baseline / "templates", work / f"tpl-base-{index}", [(f"{kind}.yaml.j2", *old_edit)])
        assert ours_dir and theirs_dir, kind
        for snap in inputs[:1] + rng.sample(inputs, min(40, len(inputs))):
            for command in COMMANDS[:2]:
                compare([*command, snap, "--templates", str(ours_dir)], [*command, snap, "--templates", str(theirs_dir)],
                        f"template edit {index} ({kind}) {' '.join(command)} {snap}")
    ours.close()
    theirs.close()
    print(f"differential: {runs} runs over {len(inputs)} snapshots, {len(RULE_EDITS)} rule edits, "
          f"{len(TEMPLATE_EDITS)} template edits: {same} identical, {runs - same} different; exit codes "
          + ", ".join(f"{code}: {count}" for code, count in sorted(codes.items())))
    for line in differences[:50]:
        print(line)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
