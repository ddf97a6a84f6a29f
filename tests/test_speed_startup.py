"""Start-up, rule loading and ``diff --against DIR`` on their fast paths, with the same results as
the slow ones (issue 14). No timings are asserted: what is checked is that the fast path is taken
where it should be and that it gives exactly what the slow one gives.

- ``--help`` imports none of the heavy libraries (a fresh interpreter, checked through sys.modules);
  importing the CLI leaves the importer's collector setting as it was;
- rule files are read by libyaml (:mod:`gpustack_render.yamlpos`) into exactly the data, types and
  positions ruamel's round-trip loader gives, on every built-in rule file and on seeded random
  edits of them; what it declines goes to ruamel unchanged;
- ``diff --against DIR`` takes a file byte-identical to what ``render -o`` writes as its object
  without parsing it, reads any other file as before, and reports the same as against a stream.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_invoke import invoke
from ruamel.yaml import YAML

from gpustack_render import yamlio, yamlpos
from gpustack_render.snapshot import yamlread
from gpustack_render.diff import DiffPolicy
from gpustack_render.errors import UserError
from gpustack_render.rules import load_rules
from gpustack_render.diff import manifests

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
RULE_FILES = sorted((REPO / "rules").glob("*.yaml")) + sorted((REPO / "deploy").glob("*/rules-*.yaml"))
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


# --- rule files: libyaml with ruamel's data and positions ------------------------------------------

def _ruamel(text: str) -> Any:
    return YAML(typ="rt").load(text)


def _assert_same(mine: Any, theirs: Any, path: tuple[Any, ...] = ()) -> None:
    """The same data, of the same types, with the same position of every key, value and item."""
    if isinstance(mine, yamlpos.PositionedMap):
        assert type(theirs).__name__ == "CommentedMap", path
        assert list(mine) == list(theirs), path
        assert [type(k) for k in mine] == [type(k) for k in theirs], path
        assert mine.positions.start == (theirs.lc.line, theirs.lc.col), path
        for key in mine:
            assert mine.positions.keys[key] == theirs.lc.key(key), (path, key)
            assert mine.positions.values[key] == theirs.lc.value(key), (path, key)
            _assert_same(mine[key], theirs[key], path + (key,))
    elif isinstance(mine, yamlpos.PositionedSeq):
        assert type(theirs).__name__ == "CommentedSeq", path
        assert len(mine) == len(theirs), path
        assert mine.positions.start == (theirs.lc.line, theirs.lc.col), path
        for index, (a, b) in enumerate(zip(mine, theirs)):
            assert mine.positions.items[index] == theirs.lc.item(index), (path, index)
            _assert_same(a, b, path + (index,))
    else:
        assert type(mine) is type(theirs) and mine == theirs, (path, mine, theirs)
        assert getattr(mine, "__dict__", None) == getattr(theirs, "__dict__", None), path  # ScalarInt's width


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_built_in_rule_files_are_read_by_libyaml_exactly_as_by_ruamel(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    mine = yamlpos.load(text)  # raises Declined if the fast path were not taken
    _assert_same(mine, _ruamel(text))
    assert yamlio.load_roundtrip(path, str(path)) == mine


@pytest.mark.parametrize("text, reason", [
    ("a: 1.5\n", "float"), ("a: 0x1F\n", "int"), ("a: 1_000\n", "int"), ("a: 2024-01-02\n", "timestamp"),
    ("a: |\n  x\n", "multi-line"), ("a: 'x\n  y'\n", "multi-line"), ('a: "x\\ty"\n', "escapes"),
    ("a: &x 1\nb: *x\n", "anchor"), ("a: !!str 1\n", "tag"), ("<<: {a: 1}\n", "merge"), ("a:\n", "empty"),
    ("a: 1\na: 2\n", "duplicate"), ("%YAML 1.1\n---\na: yes\n", "directives"), ("a: 1\n---\nb: 2\n", "document"),
    ("a: [b\n", "Error"), ("a:\tb\n", "characters"), ("? [a]\n: b\n", "complex"), ("a: ['b':c]\n", "glued"),
])
def test_what_libyaml_might_read_otherwise_is_left_to_ruamel(tmp_path: Path, text: str, reason: str) -> None:
    """Outside the plain subset the reader declines, and ``load_roundtrip`` gives ruamel's own
    result: its values and types, or its error as one ``invalid YAML`` problem."""
    with pytest.raises(yamlpos.Declined, match=reason):
        yamlpos.load(text)
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        expected: Any = ("ok", _ruamel(text))
    except Exception:  # noqa: BLE001 - ruamel refuses: load_roundtrip words it as a problem
        expected = ("error", None)
    try:
        got: Any = ("ok", yamlio.load_roundtrip(path, str(path)))
    except UserError as err:
        assert err.problems[0].message.startswith("invalid YAML"), err.problems
        got = ("error", None)
    assert got[0] == expected[0]
    if got[0] == "ok":
        assert type(got[1]) is type(expected[1]) and repr(got[1]) == repr(expected[1])  # TaggedScalar has no ==


def test_yaml_12_readings_of_plain_scalars_are_ruamels() -> None:
    """``yes``/``on``/``y`` stay strings (YAML 1.2), ``0`` and ``007`` are ruamel's ScalarInt with
    their width, ``true``/``True``/``~``/``null`` as ruamel reads them."""
    text = "a: yes\nb: on\nc: y\nd: 0\ne: 007\nf: -12\ng: True\nh: ~\ni: nUll\nj: 0777\nk: +5\nl: FALSE\n"
    mine = yamlpos.load(text)
    _assert_same(mine, _ruamel(text))
    assert mine["a"] == "yes" and mine["d"] == 0 and mine["j"] == 777 and mine["i"] == "nUll"


_NOISE = list(": -#'\"[]{},\n&*!|>%@`?\\~=<") + ["  ", "\n  ", "- ", ": ", "é"]
_VALUES = ["yes", "0", "-0", "007", "+5", "1e3", "1.5", "0x1F", "~", "null", "2024-01-01", "1_000", "=", "<<",
           "True", "y", "12:30", "'q'", '"d"', '"a\\tb"', "[]", "{}", "[a, b]", "{a: 1}", "&x 1", "*x", "!!str 5",
           "|\n  lit", "'multi\n  line'", "[b: c]", "['b':c]", ""]


def _mutated(rng: random.Random, text: str) -> str:
    for _ in range(rng.choice((1, 1, 2, 3))):
        at, choice = rng.randrange(len(text) + 1), rng.random()
        if choice < 0.3:
            text = text[:at] + rng.choice(_NOISE) + text[at:]
        elif choice < 0.5:
            text = text[:at] + text[at + rng.randint(1, 3):]
        else:
            lines = text.split("\n")
            row = rng.randrange(len(lines))
            if ": " in lines[row]:
                lines[row] = lines[row][:lines[row].index(": ") + 2] + rng.choice(_VALUES)
            else:
                lines.insert(row, lines[row])
            text = "\n".join(lines)
    return text


def test_random_edits_of_rule_files_read_the_same_or_go_to_ruamel() -> None:
    """Seeded random edits (syntax errors, odd scalars, duplicated lines): whatever libyaml reads
    is exactly what ruamel reads, positions included, and it never accepts what ruamel refuses."""
    rng = random.Random(14)
    texts = [p.read_text(encoding="utf-8") for p in RULE_FILES]
    taken = 0
    for _ in range(int(os.environ.get("YAMLPOS_EXAMPLES", "300"))):
        text = _mutated(rng, rng.choice(texts))
        try:
            mine = yamlpos.load(text)
        except yamlpos.Declined:
            continue
        taken += 1
        _assert_same(mine, _ruamel(text))  # ruamel raising here would be a text libyaml wrongly took
    assert taken > 50  # the check is about the fast path: most edits stay on it


def test_lint_positions_of_a_fast_path_file_are_ruamels(tmp_path: Path) -> None:
    """A wrong value in a file on the fast path is reported at ruamel's line and column."""
    rules = tmp_path / "rules"
    shutil.copytree(REPO / "rules", rules)
    path = rules / "namespaces.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "bogus: [1, 2]\n", encoding="utf-8")
    yamlpos.load(path.read_text(encoding="utf-8"))  # still the fast path
    code, out, _ = invoke("lint", "--rules", str(rules))
    data = _ruamel(path.read_text(encoding="utf-8"))
    line, col = data.lc.key("bogus")
    assert code == 1
    assert f"{path}:{line + 1}:{col + 1}: error: bogus: unknown key 'bogus'" in out


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
