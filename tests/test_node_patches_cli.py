"""`node-patches` command contract (cli-contract.md, README output conventions, inputs.md §10) and the
hand-derived fixture `fixtures/capacity/mixed/`.

Expected values are derived by hand from stage3-node.md §4-§5; see the comments next to them.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from cli_invoke import CliResult, invoke

from test_capacity import (  # shared builders (same tests/ directory)
    A100_PROFILES, REPO, SHARED, SLICED, add, cap, entry_ops, group, lab, ledger, logical_card, make_devices,
    make_node, mig_card, patches, rep, rm, row, run_node_patches, run_objects, write_snapshot,
)

MIXED = REPO / "fixtures" / "capacity" / "mixed"


# --------------------------------------------------------------------------------------------------
# 9. fixtures/capacity/mixed — full expected patch list (hand-derived)
# --------------------------------------------------------------------------------------------------

A100 = "nvidia-a100-sxm4-80gb"
PPU = "thead-ppu-zw810e"

MIXED_EXPECTED: list[dict[str, Any]] = [
    # a100-mixed: GPU-a0, GPU-a1 partitioned (P=2), GPU-a2 logical (L=1, 128 slices, overcommit on),
    # vram 80Gi = 81920 MiB.
    #   fit: only GPU-a2 is sliceable/whole-card capable: 0 slices used -> remaining 1440000;
    #        mode 2 (Shared) with 1440000 >= 160000 -> 1 shared card.
    {"node": "a100-mixed", "subresource": "", "patch": [
        add(lab(SHARED + A100), "1"),
        add(lab(SLICED + A100), "1440000"),
    ]},
    #   GPU-a0 ready row: 3g.40gb 1 (allocated) + 1 (remaining); 1g.10gb 3; 2g.20gb 1; 7g.80gb 0.
    #   GPU-a1 no row: static 7, 3, 2, 1.  Sums: 1g.10gb 10, 2g.20gb 4, 3g.40gb 4, 7g.80gb 1.
    #   partitioned.units 2*M = 3200k; sliced.units 1*M = 1600k already there as "1600000" (no op);
    #   cores 128*100 = 12800; memory-percentage 100; memory-mib 81920 replaces 40960.
    {"node": "a100-mixed", "subresource": "status", "patch": [
        add(cap("nvidia.com/gpu.partitioned.mig-1g.10gb"), "10"),
        add(cap("nvidia.com/gpu.partitioned.mig-2g.20gb"), "4"),
        add(cap("nvidia.com/gpu.partitioned.mig-3g.40gb"), "4"),
        add(cap("nvidia.com/gpu.partitioned.mig-7g.80gb"), "1"),
        add(cap("nvidia.com/gpu.partitioned.units"), "3200k"),
        add(cap("nvidia.com/gpu.sliced.cores-percentage"), "12800"),
        rep(cap("nvidia.com/gpu.sliced.memory-mib"), "81920"),
        add(cap("nvidia.com/gpu.sliced.memory-percentage"), "100"),
    ]},
    # ppu-1: PPU-p1 logical (L=1, 32 slices, group overcommit off -> cores 1*100), vram 96Gi = 98304.
    #   fit: PPU-p1 mode None, remaining 1600000, allocatedSlices absent (0) < 32.
    {"node": "ppu-1", "subresource": "", "patch": [
        add(lab(SHARED + PPU), "1"),
        add(lab(SLICED + PPU), "1600000"),
    ]},
    #   PPU-p0 (P=1) ready row: "4g48gb" 1 -> 4g.48gb; "2g24gb" 2 -> 2g.24gb; static names
    #   "PPU 2g24gb" / "4g48gb" publish to the same two names with 0.
    {"node": "ppu-1", "subresource": "status", "patch": [
        add(cap("alibabacloud.com/ppu.partitioned.mig-2g.24gb"), "2"),
        add(cap("alibabacloud.com/ppu.partitioned.mig-4g.48gb"), "1"),
        add(cap("alibabacloud.com/ppu.partitioned.units"), "1600k"),
        add(cap("alibabacloud.com/ppu.sliced.cores-percentage"), "100"),
        add(cap("alibabacloud.com/ppu.sliced.memory-mib"), "98304"),
        add(cap("alibabacloud.com/ppu.sliced.memory-percentage"), "100"),
        add(cap("alibabacloud.com/ppu.sliced.units"), "1600k"),
    ]},
    # stale-1: fit labels are not pool-gated: GPU-l0 is Exclusive with 0 remaining -> both "0";
    #   the nvidia-tesla-t4 label has no group -> removed.
    {"node": "stale-1", "subresource": "", "patch": [
        rep(lab(SHARED + "nvidia-l4"), "0"),
        rep(lab(SLICED + "nvidia-l4"), "0"),
        rm(lab(SLICED + "nvidia-tesla-t4")),
    ]},
    #   both pools "0": every owned key goes; amd has no aKey at all; the superseded
    #   nvidia.com/gpu.sliced.mig-1g.10gb is not owned and stays.
    {"node": "stale-1", "subresource": "status", "patch": [
        rm(cap("amd.com/gpu.sliced.units")),
        rm(cap("nvidia.com/gpu.partitioned.mig-1g.10gb")),
        rm(cap("nvidia.com/gpu.partitioned.units")),
        rm(cap("nvidia.com/gpu.sliced.cores-percentage")),
        rm(cap("nvidia.com/gpu.sliced.memory-mib")),
        rm(cap("nvidia.com/gpu.sliced.memory-percentage")),
        rm(cap("nvidia.com/gpu.sliced.units")),
    ]},
    # unmanaged-1: owned keys and fit labels removed; rdma label, example.com key, pools stay.
    {"node": "unmanaged-1", "subresource": "", "patch": [
        rm(lab(SHARED + "nvidia-tesla-t4")),
    ]},
    {"node": "unmanaged-1", "subresource": "status", "patch": [
        rm(cap("nvidia.com/gpu.sliced.memory-mib")),
        rm(cap("nvidia.com/gpu.sliced.units")),
    ]},
    # cpu-1: nothing to change -> no entry.
]


def _json_run(args: list[str], stdin: str | None = None) -> list[dict]:
    proc = run_node_patches([*args, "--format", "json"], stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def test_fixture_mixed_full_patch_list() -> None:
    assert _json_run([str(MIXED / "nodes.yaml"), str(MIXED / "devices.yaml")]) == MIXED_EXPECTED


@pytest.mark.parametrize("args", [
    pytest.param(["DIR"], id="directory"),
    pytest.param(["devices.yaml", "nodes.yaml"], id="files-reversed"),
    pytest.param(["DIR", "nodes.yaml"], id="same-objects-twice"),
])
def test_fixture_mixed_input_order_irrelevant(args: list[str]) -> None:
    paths = [str(MIXED) if a == "DIR" else str(MIXED / a) for a in args]
    assert _json_run(paths) == MIXED_EXPECTED


def test_fixture_mixed_from_stdin() -> None:
    text = (MIXED / "nodes.yaml").read_text() + "\n---\n" + (MIXED / "devices.yaml").read_text()
    assert _json_run(["-"], stdin=text) == MIXED_EXPECTED


def _load_nodes() -> list[dict]:
    return yaml.safe_load((MIXED / "nodes.yaml").read_text())["items"]


def test_fixture_mixed_apply_then_render_again_is_empty(tmp_path: Path) -> None:
    entries = _json_run([str(MIXED)])
    nodes = {n["metadata"]["name"]: n for n in _load_nodes()}
    applied = dict(nodes)
    for entry in entries:
        applied[entry["node"]] = jsonpatch.apply_patch(applied[entry["node"]], entry["patch"])
    # nothing but owned keys changed
    unmanaged = applied["unmanaged-1"]
    assert unmanaged["status"]["capacity"] == {
        "cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1", "nvidia.com/gpu.shared": "10",
        "nvidia.com/gpu.sliced": "128", "example.com/foo.sliced.units": "3"}
    assert "feature.gpustack.ai/rdma.capable" in unmanaged["metadata"]["labels"]
    assert applied["stale-1"]["status"]["capacity"]["nvidia.com/gpu.sliced.mig-1g.10gb"] == "7"
    assert applied["a100-mixed"]["status"]["allocatable"] == nodes["a100-mixed"]["status"]["allocatable"]
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                     "items": list(applied.values())}))
    shutil.copy(MIXED / "devices.yaml", tmp_path / "devices.yaml")
    assert _json_run([str(tmp_path)]) == []


# --------------------------------------------------------------------------------------------------
# 7. Output contract
# --------------------------------------------------------------------------------------------------

def _contract_objects() -> list[dict]:
    """Three nodes in reverse order, each with a label and a status entry; keys contain '/'."""
    objs = []
    for name in ["zeta", "alpha", "mid"]:
        objs.append(make_node(name, akeys={"nvidia-l4": {"memory": "24Gi"}},
                              capacity={"nvidia.com/gpu.sliced": "128"}))
        objs.append(make_devices(name, [group("nvidia", "l4", [logical_card("c0")])],
                                 [ledger("nvidia", "l4", [row("c0", 0, remaining=1600000)])]))
    return objs


def test_entries_sorted_by_node_metadata_before_status(tmp_path: Path) -> None:
    entries = patches(tmp_path, _contract_objects())
    assert [(e["node"], e["subresource"]) for e in entries] == [
        ("alpha", ""), ("alpha", "status"), ("mid", ""), ("mid", "status"), ("zeta", ""), ("zeta", "status")]
    for e in entries:
        assert set(e) == {"node", "subresource", "patch"}
        paths = [op["path"] for op in e["patch"]]
        assert paths == sorted(paths)
        for op in e["patch"]:
            assert "/" not in op["path"].split("/", 3)[3], f"unescaped '/' in {op['path']}"
    assert entries[1]["patch"] == [
        add("/status/capacity/nvidia.com~1gpu.sliced.cores-percentage", "12800"),
        add("/status/capacity/nvidia.com~1gpu.sliced.memory-mib", "24576"),
        add("/status/capacity/nvidia.com~1gpu.sliced.memory-percentage", "100"),
        add("/status/capacity/nvidia.com~1gpu.sliced.units", "1600k"),
    ]
    assert entries[0]["patch"] == [
        add("/metadata/labels/shared-free-cards.fit.gpustack.ai~1nvidia-l4", "1"),
        add("/metadata/labels/sliced-max-free-units.fit.gpustack.ai~1nvidia-l4", "1600000"),
    ]


def test_values_are_strings(tmp_path: Path) -> None:
    for entry in patches(tmp_path, _contract_objects()):
        for op in entry["patch"]:
            assert isinstance(op["value"], str), op


def test_output_deterministic_across_input_order(tmp_path: Path) -> None:
    objs = _contract_objects()
    a = run_objects(tmp_path, objs)
    b = run_objects(tmp_path, list(reversed(objs)))
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_yaml_format_is_the_same_list(tmp_path: Path) -> None:
    objs = _contract_objects()
    as_json = json.loads(run_objects(tmp_path, objs, fmt="json").stdout)
    proc = run_objects(tmp_path, objs, fmt="yaml")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout) == as_json  # strings stay strings ("100", "0" quoted)


def test_yaml_is_the_default_format(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, _contract_objects())
    default = run_node_patches([str(path)])
    explicit = run_node_patches([str(path), "--format", "yaml"])
    assert default.returncode == 0 and default.stdout == explicit.stdout


def test_mixed_fixture_yaml_equals_json() -> None:
    proc = run_node_patches([str(MIXED), "--format", "yaml"])
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(proc.stdout) == MIXED_EXPECTED


def _kubectl_tokens(line: str) -> list[str]:
    return shlex.split(line)


def test_kubectl_format_lines_match_json() -> None:
    proc = run_node_patches([str(MIXED), "--format", "kubectl"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(MIXED_EXPECTED)
    for line, entry in zip(lines, MIXED_EXPECTED):
        tokens = _kubectl_tokens(line)
        sub = ["--subresource=status"] if entry["subresource"] == "status" else []
        assert tokens[:-1] == ["kubectl", "patch", "node", entry["node"], *sub, "--type=json", "-p"], line
        assert json.loads(tokens[-1]) == entry["patch"]


@pytest.mark.parametrize("fmt, expected", [("json", []), ("yaml", [])])
def test_no_changes_prints_empty_list(tmp_path: Path, fmt: str, expected: list) -> None:
    proc = run_objects(tmp_path, [make_node("n1")], fmt=fmt)
    assert proc.returncode == 0, proc.stderr
    parsed = json.loads(proc.stdout) if fmt == "json" else yaml.safe_load(proc.stdout)
    assert parsed == expected


def test_no_changes_kubectl_prints_nothing(tmp_path: Path) -> None:
    proc = run_objects(tmp_path, [make_node("n1")], fmt="kubectl")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def _kubectl_binary() -> str | None:
    local = REPO / ".venv" / "bin" / "kubectl"
    return str(local) if local.exists() else shutil.which("kubectl")


@pytest.mark.skipif(_kubectl_binary() is None, reason="kubectl not installed")
def test_kubectl_lines_apply_with_real_kubectl(tmp_path: Path) -> None:
    """Each -p document, applied by kubectl itself (offline, --local), yields the desired keys."""
    kubectl = _kubectl_binary()
    proc = run_node_patches([str(MIXED), "--format", "kubectl"])
    assert proc.returncode == 0, proc.stderr
    nodes = {n["metadata"]["name"]: n for n in _load_nodes()}
    for line in proc.stdout.splitlines():
        tokens = _kubectl_tokens(line)
        name, patch = tokens[3], tokens[-1]
        node_file = tmp_path / f"{name}.json"
        node_file.write_text(json.dumps(nodes[name]))
        out = subprocess.run([kubectl, "patch", "--local", "-f", str(node_file), "--type=json", "-p", patch,
                              "-o", "json"], capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(tmp_path / "none")})
        assert out.returncode == 0, out.stderr
        nodes[name] = json.loads(out.stdout)
    assert nodes["a100-mixed"]["status"]["capacity"]["nvidia.com/gpu.partitioned.mig-1g.10gb"] == "10"
    assert "nvidia.com/gpu.sliced.units" not in nodes["stale-1"]["status"]["capacity"]
    assert nodes["ppu-1"]["metadata"]["labels"][SLICED + PPU] == "1600000"


# --------------------------------------------------------------------------------------------------
# --rules: an admin can give Hygon a partition kind (stage3-node.md §4.1 note)
# --------------------------------------------------------------------------------------------------

def test_rules_dir_hygon_partition_kind(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    manu = rules / "manufacturers.yaml"
    text = manu.read_text()
    assert "    resourceBase: hygon.com/dcu\n" in text
    manu.write_text(text.replace("    resourceBase: hygon.com/dcu\n",
                                 "    resourceBase: hygon.com/dcu\n    partitionKind: mig\n"))
    node = make_node("n1", akeys={"hygon-k100": {"memory": "64Gi"}}, capacity={"hygon.com/dcu.partitioned": "4"})
    devices = make_devices("n1", [group("hygon", "k100", [mig_card("h0", [("1g.16gb", 4), ("2g.32gb", 2)])])])
    snap = tmp_path / "snap"
    snap.mkdir()
    proc = run_objects(snap, [node, devices], "--rules", str(rules))
    assert proc.returncode == 0, proc.stderr
    assert entry_ops(json.loads(proc.stdout), "n1", "status") == [
        add(cap("hygon.com/dcu.partitioned.mig-1g.16gb"), "4"),
        add(cap("hygon.com/dcu.partitioned.mig-2g.32gb"), "2"),
        add(cap("hygon.com/dcu.partitioned.units"), "1600k"),
    ]
    # with the built-in rules the same snapshot gives nothing
    proc = run_objects(snap, [node, devices])
    assert proc.returncode == 0 and json.loads(proc.stdout) == []


# --------------------------------------------------------------------------------------------------
# 8. Bad input (inputs.md §10): exit 2, one stderr line per problem, nothing on stdout, no traceback
# --------------------------------------------------------------------------------------------------

def _good_devices() -> dict:
    return make_devices("n1", [group("nvidia", "l4", [logical_card("c0"), mig_card("m0", A100_PROFILES)])],
                        [ledger("nvidia", "l4", [row("c0", 3, remaining=1200000, allocated_slices=1),
                                                 row("m0", 4, remaining_profiles=[("1g.10gb", 7)])])])


def _good_node() -> dict:
    return make_node("n1", akeys={"nvidia-l4": {"memory": "24Gi"}},
                     capacity={"cpu": "8", "nvidia.com/gpu.sliced": "128"})


def _spec_card(d: dict, i: int = 0) -> dict:
    return d["spec"]["groups"][0]["accelerators"][i]


def _ledger_row(d: dict, i: int = 0) -> dict:
    return d["status"]["groups"][0]["accelerators"][i]


def _set(obj: dict, fn) -> dict:
    fn(obj)
    return obj


IDX = r"(\[0\]|\.0)"
IDX1 = r"(\[1\]|\.1)"
BAD_DEVICES = [
    pytest.param(lambda d: d["spec"]["groups"][0].__setitem__("accelerators", "GPU-0"),
                 rf"spec\.groups{IDX}\.accelerators\b", id="accelerators-not-a-list"),
    pytest.param(lambda d: d["spec"]["groups"][0].__setitem__("accelerators", {"id": "c0"}),
                 rf"spec\.groups{IDX}\.accelerators\b", id="accelerators-a-map"),
    pytest.param(lambda d: _spec_card(d).pop("id"),
                 rf"spec\.groups{IDX}\.accelerators{IDX}\.id\b", id="accelerator-without-id"),
    pytest.param(lambda d: _spec_card(d)["status"]["logicalSliced"].__setitem__("count", "eight"),
                 rf"spec\.groups{IDX}\.accelerators{IDX}\.status\.logicalSliced\.count\b", id="logical-count-eight"),
    pytest.param(lambda d: _spec_card(d)["status"]["logicalSliced"].__setitem__("count", 1.5),
                 rf"spec\.groups{IDX}\.accelerators{IDX}\.status\.logicalSliced\.count\b", id="logical-count-1.5"),
    pytest.param(lambda d: _spec_card(d)["status"]["logicalSliced"].__setitem__("coresPercentageOvercommit", "yes"),
                 rf"spec\.groups{IDX}\.accelerators{IDX}\.status\.logicalSliced\.coresPercentageOvercommit\b",
                 id="overcommit-not-bool"),
    pytest.param(lambda d: _spec_card(d, 1)["status"]["physicalSliced"]["profiles"][0].__setitem__("count", "7"),
                 rf"spec\.groups{IDX}\.accelerators{IDX1}\.status\.physicalSliced\.profiles{IDX}\.count\b",
                 id="profile-count-string"),
    pytest.param(lambda d: _spec_card(d, 1)["status"]["physicalSliced"].__setitem__("count", "7"),
                 rf"spec\.groups{IDX}\.accelerators{IDX1}\.status\.physicalSliced\.count\b",
                 id="physical-count-string"),
    pytest.param(lambda d: d["spec"]["groups"][0].pop("id"), rf"spec\.groups{IDX}\.id\b", id="group-without-id"),
    pytest.param(lambda d: _ledger_row(d).__setitem__("mode", 9),
                 rf"status\.groups{IDX}\.accelerators{IDX}\.mode\b", id="ledger-mode-9"),
    pytest.param(lambda d: _ledger_row(d).__setitem__("mode", "sideways"),
                 rf"status\.groups{IDX}\.accelerators{IDX}\.mode\b", id="ledger-mode-unknown-name"),
    pytest.param(lambda d: _ledger_row(d).__setitem__("allocatedSlices", "1"),
                 rf"status\.groups{IDX}\.accelerators{IDX}\.allocatedSlices\b", id="ledger-allocated-slices-string"),
    pytest.param(lambda d: _ledger_row(d).__setitem__("remaining", 1.5),
                 rf"status\.groups{IDX}\.accelerators{IDX}\.remaining\b", id="ledger-remaining-float"),
    pytest.param(lambda d: _ledger_row(d, 1)["remainingProfiles"][0].__setitem__("count", "seven"),
                 rf"status\.groups{IDX}\.accelerators{IDX1}\.remainingProfiles{IDX}\.count\b",
                 id="ledger-profile-count-string"),
]


def _assert_one_error(proc: CliResult, obj: str, path_re: str, file_name: str) -> None:
    assert proc.returncode == 2, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert obj in lines[0], lines[0]
    assert file_name in lines[0], lines[0]
    assert re.search(path_re, lines[0]), f"{path_re!r} not in {lines[0]!r}"


@pytest.mark.parametrize("mutate, path_re", BAD_DEVICES)
def test_bad_devices_input(tmp_path: Path, mutate, path_re: str) -> None:
    path = write_snapshot(tmp_path, [_good_node(), _set(_good_devices(), mutate)])
    proc = run_node_patches([str(path), "--format", "json"])
    _assert_one_error(proc, "Devices/n1", path_re, path.name)


def test_good_devices_input_is_fine(tmp_path: Path) -> None:
    """Control for the bad-input table: the unmutated snapshot renders."""
    proc = run_objects(tmp_path, [_good_node(), _good_devices()])
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("mode", [0, 5, "none", "Exclusive", "PARTITIONED", "visibility"])
def test_ledger_mode_accepted_as_integer_or_name(tmp_path: Path, mode: Any) -> None:
    devices = _good_devices()
    _ledger_row(devices)["mode"] = mode
    proc = run_objects(tmp_path, [_good_node(), devices])
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("key, value", [
    pytest.param("cpu", "12x", id="cpu-12x"),
    pytest.param("cpu", "eight", id="cpu-eight"),
    pytest.param("nvidia.com/gpu.sliced", "12x", id="pool-12x"),
    pytest.param("nvidia.com/gpu.sliced.units", "1.6 M", id="owned-key-with-space"),
])
def test_bad_node_capacity_quantity(tmp_path: Path, key: str, value: str) -> None:
    node = _good_node()
    node["status"]["capacity"][key] = value
    path = write_snapshot(tmp_path, [node, _good_devices()])
    proc = run_node_patches([str(path), "--format", "json"])
    _assert_one_error(proc, "Node/n1", r"status\.capacity\b", path.name)
    assert key in proc.stderr and value in proc.stderr


def test_bad_input_in_yaml_names_file_and_line(tmp_path: Path) -> None:
    text = (MIXED / "devices.yaml").read_text().replace("mode: 4\n", "mode: 9\n", 1)
    (tmp_path / "devices.yaml").write_text(text)
    shutil.copy(MIXED / "nodes.yaml", tmp_path / "nodes.yaml")
    proc = run_node_patches([str(tmp_path), "--format", "json"])
    _assert_one_error(proc, "Devices/a100-mixed", rf"status\.groups{IDX}\.accelerators{IDX}\.mode\b", "devices.yaml")


def test_every_problem_reported_in_one_pass(tmp_path: Path) -> None:
    d1 = _good_devices()
    _spec_card(d1)["status"]["logicalSliced"]["count"] = "eight"
    d2 = make_devices("n2", [group("nvidia", "l4", [logical_card("c0")])],
                      [ledger("nvidia", "l4", [row("c0", 9)])])
    proc = run_objects(tmp_path, [_good_node(), d1, make_node("n2"), d2])
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2, proc.stderr
    assert any("Devices/n1" in ln and "logicalSliced.count" in ln for ln in lines)
    assert any("Devices/n2" in ln and "mode" in ln for ln in lines)


@pytest.mark.parametrize("args", [
    pytest.param(["--set", "no-such-setting=true"], id="unknown-setting"),
    pytest.param(["--set", "node-management-manual=maybe"], id="non-boolean-setting"),
    pytest.param(["--format", "xml"], id="unknown-format"),
])
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    path = write_snapshot(tmp_path, [_good_node(), _good_devices()])
    proc = run_node_patches([str(path), *args])
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------------------------
# 10. Missing Devices never remove data silently (stage3-node.md §4.3, issue 10.5), in-process
# --------------------------------------------------------------------------------------------------

L4 = "nvidia-l4"
# gpu-* Nodes already carry exactly what their Devices (below) give: one logical L4 card of 128
# slices, 24Gi -> 24576 MiB; row: mode None, 1600000 free -> sliced 1600000, 1 shared card.
L4_KEYS = {"nvidia.com/gpu.sliced.units": "1600k", "nvidia.com/gpu.sliced.cores-percentage": "12800",
           "nvidia.com/gpu.sliced.memory-percentage": "100", "nvidia.com/gpu.sliced.memory-mib": "24576"}
L4_LABELS = {SLICED + L4: "1600000", SHARED + L4: "1"}
REMOVE_L4_KEYS = [rm(cap(k)) for k in sorted(L4_KEYS)]
REMOVE_L4_LABELS = [rm(lab(SHARED + L4)), rm(lab(SLICED + L4))]


def _gpu_node(name: str, managed: str = "true") -> dict:
    return make_node(name, managed=managed, akeys={L4: {"memory": "24Gi", "count": "1"}}, labels=dict(L4_LABELS),
                     capacity={"cpu": "16", "nvidia.com/gpu.sliced": "128", **L4_KEYS})


def _l4_devices(name: str) -> dict:
    return make_devices(name, [group("nvidia", "l4", [logical_card(f"{name}-c0")])],
                        [ledger("nvidia", "l4", [row(f"{name}-c0", 0, remaining=1600000)])])


def _fleet() -> list[dict]:
    """Two managed GPU Nodes with owned keys, a fresh GPU Node (accelerator labels only), an unmanaged
    GPU Node with stale keys, and a CPU Node."""
    return [_gpu_node("gpu-1"), _gpu_node("gpu-2"), make_node("fresh-gpu", akeys={L4: {"memory": "24Gi", "count": "1"}}),
            _gpu_node("gpu-u", managed="false"), make_node("cpu-1", capacity={"cpu": "8"})]


def _invoke(tmp_path: Path, objects: list[dict], *args: str, command: str = "node-patches") -> CliResult:
    snap = write_snapshot(tmp_path, objects)
    return invoke(command, snap, *args, "--format", "json")


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("gpustack-render: warning: ")]


def test_no_devices_at_all_leaves_gpu_nodes_untouched(tmp_path: Path) -> None:
    result = _invoke(tmp_path, _fleet())
    assert result.exit_code == 0, result.output
    # only the unmanaged Node loses its keys: that removal does not depend on Devices
    assert json.loads(result.stdout) == [
        {"node": "gpu-u", "subresource": "", "patch": REMOVE_L4_LABELS},
        {"node": "gpu-u", "subresource": "status", "patch": REMOVE_L4_KEYS},
    ]
    warnings = _warnings(result.stderr)
    assert len(warnings) == 1, result.stderr
    assert "no Devices object at all" in warnings[0] and "3 managed Node(s)" in warnings[0]
    assert "(fresh-gpu, gpu-1, gpu-2)" in warnings[0]
    assert "captured without Devices" in warnings[0] and "left untouched" in warnings[0]
    assert "gpu-u" not in warnings[0] and "cpu-1" not in warnings[0]


def test_no_devices_warning_names_five_then_counts(tmp_path: Path) -> None:
    nodes = [_gpu_node(f"gpu-{i}") for i in range(8)]
    result = _invoke(tmp_path, nodes)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    warnings = _warnings(result.stderr)
    assert len(warnings) == 1, result.stderr
    assert "8 managed Node(s) show accelerators (gpu-0, gpu-1, gpu-2, gpu-3, gpu-4 and 3 more)" in warnings[0]
    assert "gpu-5" not in warnings[0]


def test_no_devices_at_all_strict_devices_exits_2(tmp_path: Path) -> None:
    result = _invoke(tmp_path, _fleet(), "--strict-devices")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("gpustack-render: error: ")]
    assert len(errors) == 1, result.stderr
    assert "no Devices object at all" in errors[0] and "(fresh-gpu, gpu-1, gpu-2)" in errors[0]
    assert "--strict-devices" in errors[0]
    assert "Traceback" not in result.stderr and not _warnings(result.stderr)


def test_strict_devices_accepts_a_snapshot_without_gpu_nodes(tmp_path: Path) -> None:
    # no Devices, but nothing shows an accelerator: nothing could be lost, nothing to refuse
    result = _invoke(tmp_path, [make_node("cpu-1", capacity={"cpu": "8"})], "--strict-devices")
    assert (result.exit_code, json.loads(result.stdout), result.stderr) == (0, [], "")


def test_diff_include_node_patches_skips_the_same_nodes(tmp_path: Path) -> None:
    result = _invoke(tmp_path, _fleet(), "--include-node-patches", command="diff")
    assert result.exit_code == 1, result.output  # there are differences (the whole chain is new)
    data = json.loads(result.stdout)
    changes = data["changes"] if isinstance(data, dict) else data
    assert sorted((c["name"], c["subresource"]) for c in changes if c["kind"] == "Node") == [
        ("gpu-u", ""), ("gpu-u", "status")]
    assert [w for w in _warnings(result.stderr) if "no Devices object at all" in w], result.stderr


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict-devices"])
def test_devices_for_others_one_gpu_node_without_removes_with_warning(tmp_path: Path, strict: bool) -> None:
    objects = [*_fleet(), _l4_devices("gpu-1")]
    result = _invoke(tmp_path, objects, *(["--strict-devices"] if strict else []))
    assert result.exit_code == 0, result.output
    # gpu-1 is already right; gpu-2 has no Devices of its own: §4.3 removes its keys; gpu-u is unmanaged
    assert json.loads(result.stdout) == [
        {"node": "gpu-2", "subresource": "", "patch": REMOVE_L4_LABELS},
        {"node": "gpu-2", "subresource": "status", "patch": REMOVE_L4_KEYS},
        {"node": "gpu-u", "subresource": "", "patch": REMOVE_L4_LABELS},
        {"node": "gpu-u", "subresource": "status", "patch": REMOVE_L4_KEYS},
    ]
    # one warning, naming gpu-2 only: fresh-gpu loses nothing, gpu-u goes for being unmanaged
    assert _warnings(result.stderr) == [
        "gpustack-render: warning: Node/gpu-2: no Devices object of that name in the snapshot (it holds "
        "Devices for other Nodes): removing its 4 capacity key(s) and 2 fit label(s)"], result.stderr


@pytest.mark.parametrize("devices", [
    pytest.param({"spec": {"groups": []}}, id="no-groups"),
    pytest.param({"spec": {"groups": [group("nvidia", "l4", [])]},
                  "status": {"groups": [ledger("nvidia", "l4", [])]}}, id="group-without-cards-or-rows"),
])
def test_devices_say_cards_gone_removal_is_quiet(tmp_path: Path, devices: dict) -> None:
    gone = {"apiVersion": "worker.gpustack.ai/v1alpha1", "kind": "Devices", "metadata": {"name": "gpu-1"},
            **devices}
    result = _invoke(tmp_path, [_gpu_node("gpu-1"), gone])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"node": "gpu-1", "subresource": "", "patch": REMOVE_L4_LABELS},
        {"node": "gpu-1", "subresource": "status", "patch": REMOVE_L4_KEYS},
    ]
    assert result.stderr == ""


# --------------------------------------------------------------------------------------------------
# 11. fixtures/cases/fit-ledger-rows(-applied): the two cases form a fixed point
# --------------------------------------------------------------------------------------------------

CASES = REPO / "fixtures" / "cases"


def _items(path: Path) -> list[dict]:
    out: list[dict] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            out.extend(doc["items"] if doc.get("kind") == "List" else [doc])
    return out


def test_fit_ledger_rows_applied_is_the_patched_snapshot() -> None:
    """fit-ledger-rows-applied holds exactly fit-ledger-rows' Nodes with that case's expected
    (hand-derived) patches applied, and the same Devices; its own case expects no patches."""
    before, after = CASES / "fit-ledger-rows", CASES / "fit-ledger-rows-applied"
    nodes = {n["metadata"]["name"]: n for n in _items(before / "nodes.yaml")}
    for entry in yaml.safe_load((before / "expected.yaml").read_text()):
        nodes[entry["node"]] = jsonpatch.apply_patch(nodes[entry["node"]], entry["patch"])
    assert {n["metadata"]["name"]: n for n in _items(after / "nodes.yaml")} == nodes
    assert _items(after / "devices.yaml") == _items(before / "devices.yaml")
    assert yaml.safe_load((after / "expected.yaml").read_text()) == []
