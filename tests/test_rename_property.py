"""Issue 11.2: renaming the operator's vocabulary in rules/, templates/, a snapshot and the --set
names renames the output and changes nothing else.

For each substitution set (:data:`RENAMINGS`; where each part applies and why the sentinel
``generic`` is renamed only at its sentinel sites in snapshots is in tests/rename_support.py), each
scenario (a snapshot and settings) and each command, the output for the renamed inputs must equal
the renamed output for the original inputs: same exit code, same stdout, same stderr (workspace
root replaced), after every ``fnv64-`` + 16 hex digits became a placeholder on both sides.
A failure names the renaming, the scenario and the command; its message shows the first lines of
the difference, which point at the literal the Python code still holds.

Commands: ``render``, ``node-patches``, ``catalog``, ``diff --against`` a previous render (the
original inputs' render of a partner scenario, renamed, hashes of renamed names re-hashed) and
``diff`` against the snapshot's own objects (markdown: pool tables and diagram too), ``pin`` over
fixtures/pin (queue names re-hashed the same way). All run in process (tests/cli_invoke.py), each
original run once and shared by every renaming.

The first set, ``all``, runs the whole matrix; each single substitution runs a smaller one, so a
failure says which part of the vocabulary leaks.
"""

from __future__ import annotations

import difflib
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_invoke import invoke  # noqa: E402
from rename_support import (FIXTURES, REPO, Renaming, build_workspace, normalise,  # noqa: E402
                            renamed_setting, same_up_to_order, setting_names, sorted_text, stray_sentinels,
                            translate_hashes)

# A valid DNS subdomain, so every renamed label key stays valid (the prefix may be 253 characters;
# the name part after the slash, which has the 63-character limit, is not touched).
DOMAIN = ("gpustack.ai", "acme.example")
NAMESPACE = ("gpustack-system", "acme-system")
# The pool and queue prefixes; with them every other `gpustack-` name prefix, because the Topology
# name `gpustack-{profile}` renders as `gpustack-fnv64-...`, which no text substitution can tell
# from a LocalQueue name (and diff's owned-name prefix `gpustack-` must follow the names it owns).
# The namespace is left to its own set (an identity pair: the longer literal wins); the tool's
# name `gpustack-render` is protected (rename_support.PROTECTED).
PREFIXES = (("gpustack--", "acme--"), ("gpustack-fnv64-", "acme-fnv64-"), ("gpustack-", "acme-"),
            ("gpustack-system", "gpustack-system"))
SETTINGS = tuple((name, renamed_setting(name)) for name in setting_names())
SENTINEL_NEW = "unbranded"

RENAMINGS: dict[str, Renaming] = {
    "all": Renaming("all", plain=(DOMAIN, NAMESPACE, *PREFIXES[:-1]), settings=SETTINGS,
                    sentinel=SENTINEL_NEW),
    "domain": Renaming("domain", plain=(DOMAIN,)),
    "namespace": Renaming("namespace", plain=(NAMESPACE,)),
    "prefixes": Renaming("prefixes", plain=PREFIXES),
    "settings": Renaming("settings", settings=SETTINGS),
    "sentinel": Renaming("sentinel", sentinel=SENTINEL_NEW),
}

AWARE = "instance-type-aware-cpu-manufacturer=true"
CPU_ONLY = "instance-type-mixed-on-node=false"
MANUAL = "node-management-manual=true"
NO_FIT = "workload-fit-affinity=false"


@dataclass(frozen=True)
class Scenario:
    """A snapshot (paths under fixtures/) with --set values and the commands run on it;
    ``against``: the scenario whose render is the previous render for ``diff-against``."""

    name: str
    snapshot: tuple[str, ...]
    sets: tuple[str, ...]
    commands: tuple[str, ...]
    against: str | None = None


def case(name: str, commands: tuple[str, ...]) -> Scenario:
    """A fixture case's snapshot and settings (fixtures/cases/NAME/case.yaml)."""
    spec = yaml.safe_load((FIXTURES / "cases" / name / "case.yaml").read_text(encoding="utf-8"))
    base = FIXTURES / "cases" / name
    paths = tuple(str((base / p).resolve().relative_to(FIXTURES)) for p in spec["snapshot"])
    return Scenario(f"case-{name}", paths, tuple(spec.get("set") or ()), commands)


DATA = ("render", "node-patches", "catalog")
EXISTING = case("existing-instance-type", ()).snapshot
# diff-live (against the snapshot's own objects) only where the snapshot holds some of them.
SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("demo", ("demo",), (), (*DATA, "diff-against"), "demo-aware"),
    Scenario("demo-aware", ("demo",), (AWARE,), (*DATA, "diff-against"), "demo"),
    Scenario("demo-cpu-only", ("demo",), (CPU_ONLY,), ("render", "catalog", "diff-against"), "demo"),
    Scenario("demo-manual", ("demo",), (MANUAL,), ("render", "node-patches", "diff-against"), "demo"),
    Scenario("mixed", ("capacity/mixed",), (), DATA),
    Scenario("mixed-aware", ("capacity/mixed",), (AWARE,), ("render", "catalog", "diff-against"), "mixed"),
    Scenario("admin-it", EXISTING, (), ("render", "catalog", "diff-against", "diff-live"), "demo"),
    Scenario("admin-it-aware", EXISTING, (AWARE,), ("render", "catalog", "diff-against", "diff-live"),
             "demo-aware"),
    Scenario("admin-it-cpu-only-manual", EXISTING, (CPU_ONLY, MANUAL), ("render", "diff-live")),
    case("demo-manual", ("render", "node-patches")),
    case("settings-secret", ("render",)),
    case("drain", ("render", "diff-live")),
    case("drain-disabled", ("render",)),
    case("lifecycle-inactive-hold", ("render", "diff-live")),
    case("lifecycle-refused-return-applied", ("render", "diff-live")),
    case("lifecycle-too-many-flavors-boundary", ("render",)),
    case("overlapping-selectors-keep-plan", ("render", "diff-live")),
    case("topology-profile-snapshot", ("render",)),
    case("fit-ledger-rows", ("node-patches",)),
    # admit: the Admission rules (credits resources, .sliced/.shared inputs) rename with Queues/Capacity.
    Scenario("admit-cluster", ("admit/cluster",), (), ("admit-rendered", "admit-live")),
]}
PIN_RUNS = {
    "pin-shapes": (("pin/workloads/shapes.yaml",), ("demo",), ("--format", "yaml")),
    "pin-list-patch": (("pin/workloads/list.json",), ("demo",), ("--format", "patch", "--explain-nodes")),
    "pin-extra": (("pin/extra-workloads.yaml",), ("demo", "pin/snapshot-extra"), ("--format", "patch")),
}
PIN_SETTINGS = {"default": (), "aware": (AWARE,), "cpu-only": (CPU_ONLY,), "no-fit": (NO_FIT,)}
ALL_PINS = [("pin-shapes", s) for s in PIN_SETTINGS] + [("pin-list-patch", "default"), ("pin-extra", "default")]
SMALL = ("demo", "admin-it-aware")
SMALL_PINS = [("pin-shapes", "default"), ("pin-shapes", "no-fit")]


def matrix() -> list[tuple[str, str, str]]:
    """(renaming, scenario, command): everything for ``all``, a smaller matrix for the others."""
    items: list[tuple[str, str, str]] = []
    for renaming in RENAMINGS:
        for name in SCENARIOS if renaming == "all" else SMALL:
            items += [(renaming, name, cmd) for cmd in SCENARIOS[name].commands]
        items += [(renaming, f"pin:{s}", p) for p, s in (ALL_PINS if renaming == "all" else SMALL_PINS)]
    return items


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


class Workspaces:
    """Copies of rules/, templates/ and fixtures/ per renaming (``None``: the originals) and a
    cache of command runs, so each original run is shared by every renaming."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @functools.cache
    def path(self, renaming: str | None) -> Path:
        target = self.root / (renaming or "original")
        return build_workspace(target, RENAMINGS[renaming] if renaming else None)

    @functools.cache
    def run(self, renaming: str | None, argv: tuple[str, ...]) -> Outcome:
        result = invoke(*argv)
        if result.exit_code == 3:
            pytest.fail(f"internal error (exit {result.exit_code}) for {' '.join(argv)}:\n{result.stderr}")
        return Outcome(result.exit_code, result.stdout, normalise(result.stderr, self.path(renaming)))

    def common(self, renaming: str | None, sets: tuple[str, ...], templates: bool = True) -> list[str]:
        """--rules (and --templates) of the workspace and the --set values, renamed."""
        ws = self.path(renaming)
        args = ["--rules", str(ws / "rules")] + (["--templates", str(ws / "templates")] if templates else [])
        for assignment in sets:
            args += ["--set", RENAMINGS[renaming].set_arg(assignment) if renaming else assignment]
        return args

    def snapshot_argv(self, renaming: str | None, scenario: Scenario, command: str) -> tuple[str, ...]:
        ws = self.path(renaming)
        snaps = [str(ws / "fixtures" / p) for p in scenario.snapshot]
        if command in ("render", "catalog"):
            return (command, *snaps, *self.common(renaming, scenario.sets))
        if command == "node-patches":
            return (command, *snaps, *self.common(renaming, scenario.sets, templates=False), "--format", "json")
        if command.startswith("admit-"):
            return ("admit", *snaps, *self.common(renaming, scenario.sets), "--format", "json",
                    "--chain", command.removeprefix("admit-"))
        if command == "diff-live":
            return ("diff", *snaps, *self.common(renaming, scenario.sets), "--format", "markdown")
        assert command == "diff-against" and scenario.against
        previous = self.previous_render(renaming, SCENARIOS[scenario.against])
        return ("diff", *snaps, *self.common(renaming, scenario.sets), "--against", str(previous))

    def previous_render(self, renaming: str | None, scenario: Scenario) -> Path:
        """The original inputs' render of ``scenario``, renamed (and re-hashed) for a renaming."""
        original = self.run(None, self.snapshot_argv(None, scenario, "render"))
        assert original.code == 0, original.stderr
        text = original.stdout
        if renaming:
            rn = RENAMINGS[renaming]
            text = translate_hashes(rn.apply(text, "output"), rn, "output")
        target = self.path(renaming) / "previous" / f"{scenario.name}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return target

    def pin_argv(self, renaming: str | None, run: str, settings: str) -> tuple[str, ...]:
        workloads, snapshot, options = PIN_RUNS[run]
        fixtures = self.path(renaming) / "fixtures"
        return ("pin", *(str(fixtures / w) for w in workloads), "--snapshot", *(str(fixtures / s) for s in snapshot),
                *self.common(renaming, PIN_SETTINGS[settings], templates=False), *options)


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Workspaces:
    return Workspaces(tmp_path_factory.mktemp("rename"))


def argv_for(ws: Workspaces, renaming: str | None, scenario: str, command: str) -> tuple[str, ...]:
    if scenario.startswith("pin:"):
        return ws.pin_argv(renaming, command, scenario.removeprefix("pin:"))
    return ws.snapshot_argv(renaming, SCENARIOS[scenario], command)


def expected_for(original: Outcome, renaming: Renaming) -> Outcome:
    """The original outcome renamed, hashes as placeholders."""
    return Outcome(original.code, normalise(renaming.apply(original.stdout, "output")),
                   normalise(renaming.apply(original.stderr, "output")))


def difference(expected: Outcome, actual: Outcome, structured: bool, limit: int = 40) -> str:
    """'' when equivalent; else the exit codes and the first lines of a unified diff per stream.

    A rename may reorder what the tool sorts by name (label keys, objects, flavors), so streams
    that differ as text are compared again up to that order (rename_support.same_up_to_order).
    """
    parts: list[str] = []
    if expected.code != actual.code:
        parts.append(f"exit code: expected {expected.code}, got {actual.code}")
    for stream in ("stdout", "stderr"):
        want, got = getattr(expected, stream), normalise(getattr(actual, stream))
        if want == got or same_up_to_order(want, got, structured and stream == "stdout"):
            continue
        if structured and stream == "stdout":
            want, got = sorted_text(want), sorted_text(got)
        lines = list(difflib.unified_diff(want.splitlines(), got.splitlines(), f"expected {stream}",
                                          f"renamed-input {stream}", n=1, lineterm=""))
        parts.append("\n".join(lines[:limit]) + (f"\n... ({len(lines) - limit} more lines)"
                                                 if len(lines) > limit else ""))
    return "\n".join(parts)


@pytest.mark.parametrize(("renaming", "scenario", "command"), matrix())
def test_renamed_inputs_give_renamed_outputs(workspaces: Workspaces, renaming: str, scenario: str,
                                             command: str) -> None:
    original = workspaces.run(None, argv_for(workspaces, None, scenario, command))
    # The original must do real work, or the property would hold vacuously.
    assert original.code in (0, 1), original.stderr
    assert original.stdout.strip(), f"{scenario} {command}: empty output"
    actual = workspaces.run(renaming, argv_for(workspaces, renaming, scenario, command))
    structured = command not in ("diff-against", "diff-live")
    problem = difference(expected_for(original, RENAMINGS[renaming]), actual, structured)
    left = RENAMINGS[renaming].leftovers(actual.stdout + actual.stderr)
    hint = f"\nold vocabulary left in the renamed-input output: {', '.join(left[:8])}" if left else ""
    assert not problem, f"[{renaming}] {scenario} {command}:{hint}\n{problem}"


def test_renamings_really_rename(workspaces: Workspaces) -> None:
    """Each renaming changes the demo's render (else a failing substitution would pass unseen)."""
    original = workspaces.run(None, workspaces.snapshot_argv(None, SCENARIOS["demo"], "render"))
    for name, renaming in RENAMINGS.items():
        if name == "settings":   # setting names never reach the render's stdout
            continue
        assert renaming.apply(original.stdout, "output") != original.stdout, name


@pytest.mark.parametrize("renaming", list(RENAMINGS))
def test_renamed_copies_hold_no_old_word(workspaces: Workspaces, renaming: str) -> None:
    """The copies of rules/ and templates/ keep no old word (protected ones aside), so an old word
    in a renamed-input output can only come from the Python code."""
    ws = workspaces.path(renaming)
    for folder in ("rules", "templates"):
        for path in sorted((ws / folder).rglob("*")):
            if path.is_file():
                left = RENAMINGS[renaming].leftovers(path.read_text(encoding="utf-8"))
                assert not left, f"{path.relative_to(ws)}: {left}"


def test_sentinel_only_at_sentinel_sites() -> None:
    """The output side renames every `generic` token: right only while the snapshots used hold
    the word nowhere but at the sites renamed in snapshots too (see rename_support)."""
    files: set[Path] = set()
    for scenario in SCENARIOS.values():
        for rel in scenario.snapshot:
            path = FIXTURES / rel
            files.update(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file())
    files.update(p for p in (FIXTURES / "pin").rglob("*") if p.is_file() and p.suffix in (".yaml", ".json"))
    assert not stray_sentinels(sorted(files))


def test_sentinel_kept_as_ordinary_word_in_snapshots() -> None:
    """A kernel version's `generic` is an ordinary word: the snapshot substitution keeps it, while
    the sentinel sites are renamed."""
    text = ('kernelVersion: 6.8.0-49-generic\ngeneralGroup: generic\nname: gpustack--generic-linux-amd64\n'
            '"generalGroup": "generic"\n')
    renamed = RENAMINGS["all"].apply(text, "snapshot")
    assert renamed == ('kernelVersion: 6.8.0-49-generic\ngeneralGroup: unbranded\nname: acme--unbranded-linux-amd64\n'
                       '"generalGroup": "unbranded"\n')


@pytest.mark.parametrize("half", ["rules-only", "snapshot-only", "rules-but-naming"])
def test_comparison_catches_a_half_rename(tmp_path: Path, half: str) -> None:
    """The check can fail: a rename applied to only part of the inputs gives an output that the
    comparison tells from the renamed original. ``prefixes`` is used because it is the most
    widespread single renaming. rules-only: rules/ and the snapshot renamed, templates/ not
    (only meaningful while templates/ hold a word it renames, which is checked first);
    snapshot-only: neither rules/ nor templates/; rules-but-naming: rules/naming.yaml kept."""
    renaming = RENAMINGS["prefixes"]
    full = build_workspace(tmp_path / "orig", None)
    argv = ["render", str(full / "fixtures" / "demo"), "--rules", str(full / "rules"),
            "--templates", str(full / "templates")]
    original = invoke(*argv)
    assert original.exit_code == 0, original.stderr
    expected = Outcome(0, normalise(renaming.apply(original.stdout, "output")), "")
    flags = {"rules-only": {"rename_templates": False},
             "snapshot-only": {"rename_rules": False, "rename_templates": False},
             "rules-but-naming": {}}[half]
    ws = build_workspace(tmp_path / half, renaming, **flags)
    if half == "rules-only":
        assert any(renaming.leftovers(p.read_text(encoding="utf-8")) for p in (ws / "templates").iterdir()), \
            "templates/ hold no word the renaming replaces: pick a half rename that differs"
    if half == "rules-but-naming":
        (ws / "rules" / "naming.yaml").write_text((REPO / "rules" / "naming.yaml").read_text(encoding="utf-8"),
                                                  encoding="utf-8")
    result = invoke("render", ws / "fixtures" / "demo", "--rules", ws / "rules", "--templates", ws / "templates")
    actual = Outcome(result.exit_code, result.stdout, "")
    assert difference(expected, actual, structured=True), f"{half}: a half rename went unnoticed"


def test_report_comparison_ignores_only_diff_order() -> None:
    """Text reports: a unified diff whose context moved (label keys re-sorted by a rename) is the
    same report; an added line that differs, or another summary line, is not."""
    before = ("diff -u a/X b/X\n--- a/X\n+++ b/X\n@@ -8,6 +8,7 @@\n  a: 1\n+ b: 2\n  z: 3\n"
              "1 added (X 1), 0 changed, 0 removed\n")
    moved = ("diff -u a/X b/X\n--- a/X\n+++ b/X\n@@ -9,6 +9,7 @@\n  z: 3\n+ b: 2\n  a: 1\n"
             "1 added (X 1), 0 changed, 0 removed\n")
    assert same_up_to_order(before, moved, structured=False)
    assert not same_up_to_order(before, moved.replace("+ b: 2", "+ b: 3"), structured=False)
    assert not same_up_to_order(before, moved.replace("1 added", "2 added"), structured=False)
