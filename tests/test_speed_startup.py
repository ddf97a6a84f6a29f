"""Start-up, rule loading and ``diff --against DIR`` on their fast paths, with the same results as
the slow ones (issue 14). No timings are asserted: what is checked is that the fast path is taken
where it should be and that it gives exactly what the slow one gives.

- ``--help`` imports none of the heavy libraries (a fresh interpreter, checked through sys.modules);
  importing the CLI leaves the importer's collector setting as it was;
- ``diff --against DIR`` takes a file byte-identical to what ``render -o`` writes as its object
  without parsing it, reads any other file as before, and reports the same as against a stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_invoke import invoke

from gpustack_render import yamlio
from gpustack_render.snapshot import yamlread
from gpustack_render.diff import DiffPolicy
from gpustack_render.errors import UserError
from gpustack_render.rules import load_rules
from gpustack_render.diff import manifests

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
HEAVY = ("pydantic", "jinja2", "jsonschema", "kubernetes", "deepdiff", "celpy", "yaml", "ruamel", "orjson",
         "msgspec", "jsonpatch")


# --- start-up ---------------------------------------------------------------------------------------

def test_help_imports_none_of_the_heavy_libraries() -> None:
    """``--help`` of the group and of every command, in a fresh interpreter: only click and our own
    small modules are imported (a command imports what it needs when it runs)."""
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from gpustack_render.cli import main\n"
        "names = [None, *sorted(main.commands)]\n"
        "for name in names:\n"
        "    result = CliRunner().invoke(main, ([name] if name else []) + ['--help'])\n"
        "    assert result.exit_code == 0 and 'Usage:' in result.output, (name, result.output)\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "print(len(names), ' '.join(heavy))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    count, _, heavy = proc.stdout.strip().partition(" ")
    assert int(count) > 10
    assert heavy == "", f"--help imported {heavy}"


@pytest.mark.parametrize("collecting", [True, False])
def test_importing_the_cli_keeps_the_importers_collector_setting(collecting: bool) -> None:
    """The CLI imports with the cyclic collector off and freezes what it built (``cli/__init__``),
    then leaves the collector as the importer had it."""
    script = ("import gc\n"
              f"gc.enable() if {collecting!r} else gc.disable()\n"
              "import gpustack_render.cli\n"
              "print(gc.isenabled(), gc.get_freeze_count() > 1000)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(collecting), "True"]


# --- diff --against DIR -----------------------------------------------------------------------------

def _render_dir(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "rendered"
    code, _, err = invoke("render", str(DEMO), "-o", str(out), *args)
    assert code == 0, err
    return out


def _stream_of(directory: Path, tmp_path: Path) -> Path:
    """The directory's objects as one YAML stream: the form read by parsing, never by the shortcut."""
    names = yamlread.parse_documents((directory / "kustomization.yaml").read_text(encoding="utf-8"), "k")[0]
    docs = []
    for name in names["resources"]:
        docs.extend(yamlread.parse_documents((directory / name).read_text(encoding="utf-8"), name))
    stream = tmp_path / "stream.yaml"
    stream.write_text(yamlio.dump_yaml_stream(docs), encoding="utf-8")
    return stream


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("report", ["text", "json", "markdown"])
def test_diff_against_a_directory_equals_diff_against_its_stream(tmp_path: Path, fmt: str, report: str) -> None:
    """A directory some of whose files are byte-identical to the render (taken without parsing), one
    only reformatted (parsed, equal), one changed (parsed, reported): the same report as against the
    same objects in one stream, which is always parsed."""
    directory = _render_dir(tmp_path, "--format", fmt, "--set", "instance-type-aware-cpu-manufacturer=true")
    files = sorted(p for p in directory.iterdir() if p.name != "kustomization.yaml")
    reformatted = next(p for p in files if p.name.startswith("nodefeature-"))
    reformatted.write_text("# kept by hand\n" + reformatted.read_text(encoding="utf-8")
                           if fmt == "yaml" else json.dumps(json.loads(reformatted.read_text(encoding="utf-8"))),
                           encoding="utf-8")
    changed = next(p for p in files if p.name.startswith("clusterqueue-"))
    obj = json.loads(changed.read_text(encoding="utf-8")) if fmt == "json" else \
        yamlread.parse_documents(changed.read_text(encoding="utf-8"), "x")[0]
    obj["spec"]["stopPolicy"] = "Hold"
    changed.write_text(yamlio.dump_json(obj) if fmt == "json" else yamlio.dump_yaml(obj), encoding="utf-8")
    stream = _stream_of(directory, tmp_path)
    against_dir = invoke("diff", str(DEMO), "--against", str(directory), "--format", report)
    against_stream = invoke("diff", str(DEMO), "--against", str(stream), "--format", report)
    assert against_dir.exit_code == against_stream.exit_code == 1, against_dir.stderr
    assert against_dir.stdout.replace(str(directory), "X") == against_stream.stdout.replace(str(stream), "X")
    assert against_dir.stderr == against_stream.stderr
    assert "ClusterQueue" in against_dir.stdout


def test_an_unchanged_render_directory_is_no_difference(tmp_path: Path) -> None:
    directory = _render_dir(tmp_path)
    code, out, _ = invoke("diff", str(DEMO), "--against", str(directory))
    assert (code, out.strip()) == (0, "0 added, 0 changed, 0 removed")


def test_identical_files_are_taken_as_the_desired_objects_and_others_are_parsed(tmp_path: Path) -> None:
    """``read_manifests`` with the desired objects: a byte-identical file is that very object (no
    parse), an edited one a parsed object; without them everything is parsed, to equal results."""
    directory = _render_dir(tmp_path)
    code, out, _ = invoke("render", str(DEMO), "--format", "json")
    desired = json.loads(out)["items"]
    edited = directory / "admissioncheck-gpustack-node-devices.yaml"
    edited.write_text(edited.read_text(encoding="utf-8") + "# a comment\n", encoding="utf-8")
    fast = manifests.read_manifests(directory, desired)
    slow = manifests.read_manifests(directory)
    assert fast == slow
    by_id = {id(obj) for obj in desired}
    taken = [obj["metadata"]["name"] for obj in fast if id(obj) in by_id]
    assert len(taken) == len(desired) - 1 and "gpustack-node-devices" not in taken


def test_objects_the_writers_would_not_read_back_are_parsed(tmp_path: Path) -> None:
    """A float, or a non-string key (JSON writes it as a string), is never taken by bytes."""
    for obj in ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": 1.5}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {1: "x"}}):
        written = manifests._Written([obj])
        for name, text in (("configmap-a.json", yamlio.dump_json(obj)), ("configmap-a.yaml", yamlio.dump_yaml(obj))):
            assert written.object(str(tmp_path / name), text.encode("utf-8")) is None


def test_a_listed_fifo_or_directory_is_missing_not_waited_on(tmp_path: Path) -> None:
    directory = _render_dir(tmp_path)
    names = yamlread.parse_documents((directory / "kustomization.yaml").read_text(encoding="utf-8"), "k")[0]
    (directory / names["resources"][0]).unlink()
    os.mkfifo(directory / names["resources"][0])
    (directory / names["resources"][1]).unlink()
    (directory / names["resources"][1]).mkdir()
    with pytest.raises(UserError) as err:
        manifests.read_manifests(directory, [])
    assert [p.message for p in err.value.problems] == ["listed in kustomization.yaml but missing"] * 2
    assert [p.file for p in err.value.problems] == [str(directory / n) for n in names["resources"][:2]]


def test_equal_objects_are_unchanged_in_every_form() -> None:
    """What lets ``compare`` skip equal objects: the current form of an object against its own
    desired form is that desired form, with server-owned fields and defaults present or not."""
    code, out, _ = invoke("render", str(DEMO), "--format", "json")
    policy = DiffPolicy(load_rules().diff)
    server = {"status": {"x": 1}, "metadata": {"resourceVersion": "7", "uid": "u", "managedFields": [{}],
                                               "annotations": {}, "finalizers": ["a/b"]}}
    for desired in json.loads(out)["items"]:
        for obj in (desired, _merged(desired, server)):
            target = policy.desired_form(json.loads(json.dumps(obj)))
            assert policy.current_form(json.loads(json.dumps(obj)), target) == target, obj["metadata"]["name"]


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(base))
    for key, value in extra.items():
        out[key] = {**out.get(key, {}), **value} if isinstance(value, dict) else value
    return out


# --- no teardown -------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["render", "fixtures/demo"], ["catalog", "fixtures/demo"],
                                  ["node-patches", "fixtures/demo"], ["diff", "fixtures/demo"],
                                  ["validate", "fixtures/demo", "--skip-schema"], ["summary", "fixtures/demo"],
                                  ["lint"], ["render", "no-such-snapshot"]], ids=lambda a: " ".join(a))
def test_the_process_ends_without_tearing_down_its_objects(args: list[str]) -> None:
    """As the process's entry point every command, whatever its exit code, ends with ``os._exit``
    once stdout and stderr are flushed (an ``atexit`` hook never runs), its output complete."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: sys.stderr.write('TORN DOWN\\n'))\n"
              "from gpustack_render.cli import main\n"
              f"sys.argv = ['gpustack-render', *{args!r}]\n"
              "main()\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=False)
    assert "TORN DOWN" not in proc.stderr
    if args[-1] == "no-such-snapshot":
        assert proc.returncode == 2 and "no-such-snapshot" in proc.stderr
    else:
        assert proc.returncode in (0, 1), proc.stderr
        assert proc.stdout.strip() or args[0] == "validate", proc.stderr  # validate prints problems only
    assert "Traceback" not in proc.stderr
