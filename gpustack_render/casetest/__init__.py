"""Rule test cases: folders run through the renderer and compared semantically with a golden.

Used by ``gpustack-render test`` and by the project's pytest driver ``tests/test_fixture_cases.py``,
both in process (through the pipeline and the CLI's one error handler); both share every rule
below, so a case means the same in both. A child process (:func:`subprocess_invoker`) gives the
same result; a smoke test checks that on a few cases.

A case is a folder (kyverno test-case style) holding:

``case.yaml``
    ``description`` (str, required), ``command`` (``render`` | ``catalog`` | ``node-patches`` |
    ``admit``, default ``render``), ``snapshot`` (list of paths relative to the case folder, required; may point
    outside it, e.g. ``../../demo``), ``set`` (list of ``NAME=VALUE``), ``rules`` (a directory
    relative to the case folder; it wins over ``test --rules DIR``, which replaces the built-in rules
    of the cases that name none), ``expectExitCode`` (int, default 0), ``expectStderr`` (list of
    substrings that must all occur in stderr), ``expect`` (which objects the case is about, below).
    ``admit`` only: ``chain`` (``rendered`` | ``live`` | ``compare``, default ``rendered``),
    ``workloads`` (paths relative to the case folder, passed as ``--workloads``), ``reserve``
    (``RESOURCE=QTY`` strings, passed as ``--reserve``).
    Unknown fields are an error, so typos do not pass silently.
``expected.yaml``
    ``render`` / ``catalog``: the expected objects as a YAML stream (for ``catalog`` the items of the
    List). ``node-patches``: one document, the expected list of ``{node, subresource, patch}``.
    ``admit``: one document, the ``--format json`` output of admission.md §9 holding what the case
    is about: ``workloads`` (required: every Workload the run lists), ``queues`` and ``chain`` when
    given; for ``chain: compare``, ``changed`` (required) and ``live`` / ``rendered`` views when given.
    For a case that expects a non-zero exit code the stream is empty (stdout must be empty too),
    except ``admit --chain compare``'s exit 1 (some outcome differs), which prints its document.
    With ``expect``, it holds only the selected objects.
the snapshot files the case needs, or paths to shared snapshots (``../../snapshots/<name>/...``,
``../../demo``); a case never reads another case's folder.

``expect`` (optional): ``{kinds: [Kind, ...], names: [glob, ...]}``. Only the output objects that
match (kind in ``kinds`` when given, and ``metadata.name`` matching one of the ``names`` globs when
given; for ``node-patches`` only ``names``, matched against the Node) are compared; every other
object of the output is ignored. Within the selection nothing is loosened: missing, extra and
changed objects are reported as without it. ``expected.yaml`` must hold only selected objects, and
``--update`` writes only those, so a golden shows what its description is about and a change to an
unrelated kind (a naming rule, say) leaves it alone.

Goldens are rewritten by ``gpustack-render test --update`` and by the pytest driver with
``--update-goldens`` or ``GPUSTACK_RENDER_UPDATE_GOLDENS=1`` (:data:`UPDATE_ENV`, which ``test
--update`` reads too): one code path (:func:`run_case` with ``update=True``), and the header of each
golden names the command that wrote it (``writer``). A golden whose objects did not change is left
alone, whoever asks.

Semantics (shared by the pytest driver and ``gpustack-render test``):

* the command is ``<python> -m gpustack_render <command> SNAPSHOT... [--set N=V]... [--rules DIR]
  --format json`` with the working directory given by the caller (the repository root); snapshot
  and rules paths are passed relative to that directory so diagnostics stay short and stable. An
  *invoker* runs it: :func:`subprocess_invoker` as a child process, :func:`inprocess_invoker`
  through :mod:`gpustack_render.pipeline` in this process, with the same stdout, stderr and exit
  code as the CLI (the tests check that both agree on every fixture case);
* the exit code must equal ``expectExitCode``; every ``expectStderr`` substring must occur in stderr;
  stderr must never show a Python traceback or the tool's "internal error" line (a crash must not
  pass as an expected exit 2);
* ``render`` / ``catalog``: stdout must be exactly ``{"apiVersion": "v1", "kind": "List",
  "items": [...]}``; items are matched with expected objects by identity (apiVersion *group*, kind,
  namespace, name). Missing, extra and changed objects are reported; a changed object is reported
  field by field. Nothing inside an object is ignored, and comparison is type-strict (``"1"`` is
  not ``1``, ``true`` is not ``"true"``). The version part of ``apiVersion`` is not part of the
  identity but is compared as a field. Stream order is not compared (identity matching is the
  point); the order of list elements inside an object is;
* ``node-patches``: entries are matched by (node, subresource); each entry's ``patch`` list is
  compared element by element, in order (RFC 6902 operations are ordered);
* ``admit``: stdout must be exactly the document of admission.md §9 for the case's ``chain`` (every
  field it names, no other; :mod:`.admission`); Workload entries (and ``changed`` entries) are
  matched by (namespace, name), queues by name, and each is compared whole, field by field and
  type-strict, as objects are (missing, extra and changed entries reported). ``admit`` runs in
  process through the CLI's own entry point (the pipeline has no single call for it); ``expect:``
  does not apply to it;
* goldens are rewritten (``update=True``) only from a run whose exit code is the expected one; the
  rest of the checks still run, so an update never hides a wrong exit code or missing diagnostics.

Only the standard library and PyYAML are used for the comparison itself (:mod:`.semantic`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Any, Callable, Sequence

import yaml

from gpustack_render.casetest import admission
from gpustack_render.casetest.semantic import (compare_objects, compare_patches, describe, diff_values, identity,
                                              show as _show)
from gpustack_render.snapshot import yamlread

__all__ = ["compare_objects", "compare_patches", "describe", "diff_values", "identity"]

CASE_FILE = "case.yaml"
UPDATE_ENV = "GPUSTACK_RENDER_UPDATE_GOLDENS"
TEST_UPDATE_WRITER = "gpustack-render test --update"
EXPECTED_FILE = "expected.yaml"
COMMANDS = ("render", "catalog", "node-patches", "admit")
LIST_COMMANDS = ("render", "catalog")
ADMIT = "admit"

_CASE_FIELDS = {"description", "command", "snapshot", "set", "rules", "expectExitCode", "expectStderr", "expect",
                "chain", "workloads", "reserve"}
_ADMIT_FIELDS = ("chain", "workloads", "reserve")
_EXPECT_FIELDS = {"kinds", "names"}
_WRITTEN_BY = "# Written by "
_CRASH_MARKERS = ("Traceback (most recent call last)", "internal error")

# (argv, cwd) -> (exit code, stdout, stderr)
Invoker = Callable[[Sequence[str], Path], "tuple[int, str, str]"]


def update_requested() -> bool:
    """``GPUSTACK_RENDER_UPDATE_GOLDENS`` set to anything but empty or ``0``: rewrite goldens (the
    one switch shared by ``gpustack-render test`` and pytest, which also maps ``--update-goldens``
    onto it)."""
    return os.environ.get(UPDATE_ENV, "") not in ("", "0")


class CaseDefinitionError(Exception):
    """A case folder that cannot be run as written (bad case.yaml, missing files, bad golden)."""


# ------------------------------------------------------------------------------------------------
# Case definition
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """Which output objects a case compares (``expect:``); empty fields select everything."""

    kinds: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return not self.kinds and not self.names

    def selects(self, command: str, item: Any) -> bool:
        """Whether ``item`` (an object, or a node-patches entry) is one the case is about."""
        if self.everything:
            return True
        if not isinstance(item, dict):
            return True  # no identity: kept, so the comparison reports it
        if command in LIST_COMMANDS:
            meta = item.get("metadata")
            kind, name = item.get("kind"), meta.get("name") if isinstance(meta, dict) else None
        else:
            kind, name = None, item.get("node")
        if self.kinds and kind not in self.kinds:
            return False
        return not self.names or (isinstance(name, str) and any(fnmatch.fnmatchcase(name, g) for g in self.names))

    def describe(self) -> str:
        parts = ([f"kinds {', '.join(self.kinds)}"] if self.kinds else []) + \
                ([f"names {', '.join(self.names)}"] if self.names else [])
        return "; ".join(parts)


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    description: str
    command: str = "render"
    snapshot: tuple[str, ...] = ()
    set: tuple[str, ...] = ()
    rules: str | None = None
    expect_exit_code: int = 0
    expect_stderr: tuple[str, ...] = ()
    expect: Selection = Selection()
    chain: str = "rendered"  # admit only, like workloads and reserve
    workloads: tuple[str, ...] = ()
    reserve: tuple[str, ...] = ()

    @property
    def expected_path(self) -> Path:
        return self.path / EXPECTED_FILE

    @property
    def output_exit_codes(self) -> tuple[int, ...]:
        """The exit codes that come with output to compare: 0, and for ``admit --chain compare`` 1
        (some outcome differs)."""
        return (0, 1) if self.command == ADMIT and self.chain == "compare" else (0,)


def _string_list(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise CaseDefinitionError(f"{where}: must be a list of strings")
    return tuple(raw)


def load_case(path: Path) -> Case:
    """Read and validate ``<path>/case.yaml``."""
    path = Path(path)
    case_file = path / CASE_FILE
    where = str(case_file)
    try:
        raw = yamlread.document(case_file.read_text(encoding="utf-8"))
    except (OSError, yamlread.Invalid) as err:
        raise CaseDefinitionError(f"{where}: cannot read: {err}") from err
    _check_fields(raw, _CASE_FIELDS, where, "must be a mapping")
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise CaseDefinitionError(f"{where}: description: required, a non-empty string")
    command = raw.get("command", "render")
    if command not in COMMANDS:
        raise CaseDefinitionError(f"{where}: command: {command!r} is not one of {', '.join(COMMANDS)}")
    snapshot = _paths(raw, "snapshot", path, where)
    if not snapshot:
        raise CaseDefinitionError(f"{where}: snapshot: required, at least one path")
    sets = _assignments(raw, "set", where)
    rules = raw.get("rules")
    if rules is not None:
        if not isinstance(rules, str) or not (path / rules).is_dir():
            raise CaseDefinitionError(f"{where}: rules: {rules!r} is not a directory (relative to {path})")
    exit_code = raw.get("expectExitCode", 0)
    if not isinstance(exit_code, int) or isinstance(exit_code, bool) or exit_code < 0:
        raise CaseDefinitionError(f"{where}: expectExitCode: must be a non-negative integer")
    stderr = _string_list(raw.get("expectStderr"), f"{where}: expectStderr")
    case = Case(name=path.name, path=path, description=description.strip(), command=command,
                snapshot=snapshot, set=sets, rules=rules, expect_exit_code=exit_code, expect_stderr=stderr,
                expect=_load_selection(raw.get("expect"), command, f"{where}: expect"))
    return _admit_fields(case, raw, where) if command == ADMIT else _no_admit_fields(case, raw, where)


def _paths(raw: dict[str, Any], key: str, path: Path, where: str) -> tuple[str, ...]:
    """A list of paths relative to the case folder, each of which exists."""
    paths = _string_list(raw.get(key), f"{where}: {key}")
    for rel in paths:
        if not (path / rel).exists():
            raise CaseDefinitionError(f"{where}: {key}: {rel!r} does not exist (relative to {path})")
    return paths


def _assignments(raw: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    """A list of ``NAME=VALUE`` strings (``set``, ``reserve``)."""
    items = _string_list(raw.get(key), f"{where}: {key}")
    for item in items:
        if "=" not in item:
            raise CaseDefinitionError(f"{where}: {key}: {item!r} is not NAME=VALUE")
    return items


def _admit_fields(case: Case, raw: dict[str, Any], where: str) -> Case:
    """``admit``'s own fields: ``chain``, ``workloads`` (paths), ``reserve`` (``RESOURCE=QTY``)."""
    chain = raw.get("chain", "rendered")
    if chain not in admission.CHAINS:
        raise CaseDefinitionError(f"{where}: chain: {chain!r} is not one of {', '.join(admission.CHAINS)}")
    if not case.expect.everything:
        raise CaseDefinitionError(f"{where}: expect: admit compares every Workload it lists (the golden's "
                                  f"`workloads`), so there is nothing to select")
    if case.expect_exit_code == 1 and chain != "compare":
        raise CaseDefinitionError(f"{where}: expectExitCode: admit exits 1 only with chain: compare")
    return dataclasses.replace(case, chain=chain, workloads=_paths(raw, "workloads", case.path, where),
                               reserve=_assignments(raw, "reserve", where))


def _no_admit_fields(case: Case, raw: dict[str, Any], where: str) -> Case:
    given = [key for key in _ADMIT_FIELDS if key in raw]
    if given:
        raise CaseDefinitionError(f"{where}: {', '.join(given)}: only for command: admit")
    return case


def _check_fields(raw: Any, known: AbstractSet[str], where: str, not_mapping: str) -> None:
    """A case-file mapping: a mapping, with no field outside ``known``."""
    if not isinstance(raw, dict):
        raise CaseDefinitionError(f"{where}: {not_mapping}")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise CaseDefinitionError(f"{where}: unknown field(s) {', '.join(unknown)} "
                                  f"(known: {', '.join(sorted(known))})")


def _load_selection(raw: Any, command: str, where: str) -> Selection:
    if raw is None:
        return Selection()
    _check_fields(raw, _EXPECT_FIELDS, where, "must be a mapping with kinds and/or names")
    selection = Selection(kinds=_string_list(raw.get("kinds"), f"{where}.kinds"),
                          names=_string_list(raw.get("names"), f"{where}.names"))
    if selection.everything:
        raise CaseDefinitionError(f"{where}: selects nothing in particular (give kinds and/or names, or drop it)")
    if selection.kinds and command not in LIST_COMMANDS:
        raise CaseDefinitionError(f"{where}.kinds: {command} prints patch entries, not objects (use names)")
    return selection


def case_dirs(root: Path) -> list[Path]:
    """Every direct sub-folder of ``root`` (each must be a case), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def discover(root: Path) -> list[Case]:
    return [load_case(p) for p in case_dirs(root)]


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------


def _rel(target: Path, cwd: Path) -> str:
    try:
        return os.path.relpath(target, cwd)
    except ValueError:  # another drive (Windows)
        return str(target)


PROGRAM = "gpustack-render"


BUILT_IN_RULES = "built-in"


def rules_dir_for(case: Case, default_rules: Path | None = None) -> Path | None:
    """The rules a case runs with: its own ``rules:`` wins (a case about a rule edit carries it),
    else ``test --rules DIR`` (``default_rules``), else the built-in rules (``None``)."""
    return case.path / case.rules if case.rules is not None else default_rules


def rules_label(case: Case, cwd: Path, default_rules: Path | None = None) -> str:
    """What ``test`` prints per case: the rules directory relative to ``cwd``, or ``built-in``."""
    rules = rules_dir_for(case, default_rules)
    return BUILT_IN_RULES if rules is None else _rel(rules, cwd)


def command_argv(case: Case, cwd: Path, python: str = sys.executable,
                 default_rules: Path | None = None) -> list[str]:
    """``python -m gpustack_render <command> …``; ``python="gpustack-render"`` gives ``gpustack-render <command> …``."""
    argv = ([python] if Path(python).name == PROGRAM else [python, "-m", "gpustack_render"]) + [case.command]
    argv += [_rel(case.path / rel, cwd) for rel in case.snapshot]
    for item in case.set:
        argv += ["--set", item]
    rules = rules_dir_for(case, default_rules)
    if rules is not None:
        argv += ["--rules", _rel(rules, cwd)]
    if case.command == ADMIT:
        argv += ["--chain", case.chain]
        for rel in case.workloads:
            argv += ["--workloads", _rel(case.path / rel, cwd)]
        for item in case.reserve:
            argv += ["--reserve", item]
    argv += ["--format", "json"]
    return argv


def subprocess_invoker(argv: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def _parse_argv(argv: Sequence[str]) -> tuple[str, list[str], list[str], str | None, str]:
    """The argv :func:`command_argv` builds → (command, snapshots, sets, rules, format)."""
    command, rest = _split_argv(argv)
    snapshots: list[str] = []
    sets: list[str] = []
    rules: str | None = None
    fmt = "yaml"
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg in ("--set", "--rules", "--format") and i + 1 < len(rest):
            value = rest[i + 1]
            if arg == "--set":
                sets.append(value)
            elif arg == "--rules":
                rules = value
            else:
                fmt = value
            i += 2
            continue
        snapshots.append(arg)
        i += 1
    return command, snapshots, sets, rules, fmt


def _split_argv(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The argv :func:`command_argv` builds → (command, the arguments after it)."""
    args = list(argv)
    if "gpustack_render" in args:
        start = args.index("gpustack_render") + 1
    else:
        start = 1 if args and Path(args[0]).name == PROGRAM else 0
    return args[start], args[start + 1:]


def inprocess_invoker(argv: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    """Run the command :func:`command_argv` built through the pipeline in this process.

    Output, diagnostics and exit code are the CLI's: the run goes through the one error handler
    (``errors.handle``), so warnings read ``gpustack-render: warning: …``, problems are printed
    as the CLI prints them with exit 2, and an unexpected exception is the one-line internal error
    with exit 3. Paths are taken relative to ``cwd``."""
    from gpustack_render import pipeline
    from gpustack_render.emit import format_objects
    from gpustack_render.errors import EXIT_USAGE, PROG, handle, warning_text
    from gpustack_render.yamlio import dump_json, dump_yaml

    command, snapshots, sets, rules, fmt = _parse_argv(argv)
    here = Path.cwd().resolve() == Path(cwd).resolve()

    def at(path: str) -> str:
        return path if here or Path(path).is_absolute() or path == "-" else str(Path(cwd) / path)

    if command == ADMIT:
        return _cli_invoker(_cli_args(argv, at))
    err: list[str] = []
    state: dict[str, Any] = {"out": ""}

    def body() -> int | None:
        ctx = state["ctx"] = pipeline.prepare([at(p) for p in snapshots], sets, Path(at(rules)) if rules else None)
        if command == "render":
            state["out"] = format_objects(pipeline.render_objects(ctx, None), fmt)
        elif command == "catalog":
            listing = pipeline.render_catalog(ctx, None)
            state["out"] = dump_json(listing) if fmt == "json" else dump_yaml(listing)
        elif command == "node-patches":
            entries = pipeline.node_patches(ctx)
            state["out"] = dump_json(entries) if fmt == "json" else (dump_yaml(entries) if entries else "[]\n")
        else:
            state["unknown"] = True
            return EXIT_USAGE
        return None

    code, finished = handle(body, lambda: state["ctx"].diagnostics if "ctx" in state else None,
                            err.append, lambda warning: err.append(warning_text(warning)))
    if state.get("unknown"):
        return EXIT_USAGE, "", f"{PROG}: error: unknown command {command!r}\n"
    return code, state["out"] if finished else "", "".join(line + "\n" for line in err)


_VALUE_OPTIONS = ("--set", "--rules", "--format", "--chain", "--workloads", "--reserve")
_PATH_OPTIONS = ("--rules", "--workloads")


def _cli_args(argv: Sequence[str], at: Callable[[str], str]) -> list[str]:
    """The arguments after the program in an argv of :func:`command_argv`, with every path (the
    snapshots, ``--rules``, ``--workloads``) passed through ``at``."""
    command, rest = _split_argv(argv)
    out = [command]
    i = 0
    while i < len(rest):
        if rest[i] in _VALUE_OPTIONS and i + 1 < len(rest):
            out += [rest[i], at(rest[i + 1]) if rest[i] in _PATH_OPTIONS else rest[i + 1]]
            i += 2
        else:
            out.append(at(rest[i]))
            i += 1
    return out


def _cli_invoker(args: list[str]) -> tuple[int, str, str]:
    """A command the pipeline has no single call for (``admit``) runs through the CLI's own entry
    point in this process: the same option parsing, error handler, output and exit code as the child
    process (the CLI gives in-process callers click's ``SystemExit``)."""
    import contextlib
    import gc
    import io

    from gpustack_render.cli import main
    from gpustack_render.errors import PROG
    out, err = io.StringIO(), io.StringIO()
    collecting = gc.isenabled()  # the CLI's run turns the cyclic collector off for its process
    code: int = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main.main(args=args, prog_name=PROG, standalone_mode=True)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        if collecting:
            gc.enable()
    return code, out.getvalue(), err.getvalue()


@dataclass
class CaseRun:
    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str


def execute(case: Case, cwd: Path, invoker: Invoker | None = None, python: str = sys.executable,
            default_rules: Path | None = None) -> CaseRun:
    argv = command_argv(case, cwd, python, default_rules)
    code, out, err = (invoker or inprocess_invoker)(argv, cwd)
    return CaseRun(argv=argv, exit_code=code, stdout=out, stderr=err)


# ------------------------------------------------------------------------------------------------
# Parsing output and goldens
# ------------------------------------------------------------------------------------------------


class OutputError(Exception):
    """stdout is not what the command contract promises."""


def parse_stdout(command: str, stdout: str, chain: str = "rendered") -> Any:
    """The objects (render/catalog) or entries (node-patches) printed with ``--format json``; for
    ``admit`` the one document of admission.md §9 for ``chain``, checked for its shape."""
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as err:
        raise OutputError(f"stdout is not JSON: {err}") from err
    if command == ADMIT:
        try:
            return admission.check_output(data, chain)
        except admission.ShapeError as err:
            raise OutputError(str(err)) from err
    if command in LIST_COMMANDS:
        if not isinstance(data, dict):
            raise OutputError(f"stdout is not a List object but a {type(data).__name__}")
        problems = []
        if data.get("apiVersion") != "v1":
            problems.append(f"apiVersion is {data.get('apiVersion')!r}, expected 'v1'")
        if data.get("kind") != "List":
            problems.append(f"kind is {data.get('kind')!r}, expected 'List'")
        if not isinstance(data.get("items"), list):
            problems.append("items is not a list")
        extra = sorted(set(data) - {"apiVersion", "kind", "items"})
        if extra:
            problems.append(f"unexpected top-level field(s) {', '.join(extra)}")
        if problems:
            raise OutputError("stdout List wrapper: " + "; ".join(problems))
        items: list[Any] = data["items"]  # a list: checked above
        return items
    if not isinstance(data, list):
        raise OutputError(f"stdout is not a JSON array but a {type(data).__name__}")
    return data


def load_expected(case: Case) -> Any:
    path = case.expected_path
    if not path.exists():
        raise CaseDefinitionError(f"{path}: missing (write it by hand or run `gpustack-render test --update`)")
    try:
        docs = yamlread.documents(path.read_text(encoding="utf-8"))
    except yamlread.Invalid as err:
        raise CaseDefinitionError(f"{path}: invalid YAML: {err}") from err
    if case.command == ADMIT:
        return _admit_golden(case, docs)
    if case.command in LIST_COMMANDS:
        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                raise CaseDefinitionError(f"{path}: document {i + 1} is not an object")
        return _only_selected(case, docs)
    if not docs:
        return []
    if len(docs) != 1 or not isinstance(docs[0], list):
        raise CaseDefinitionError(f"{path}: node-patches golden must be one document holding a list")
    return _only_selected(case, docs[0])


def _admit_golden(case: Case, docs: list[Any]) -> Any:
    """An admit golden: one document (admission.md §9's, with only what the case is about), or none
    for a case that expects exit 2."""
    if case.expect_exit_code not in case.output_exit_codes:
        return docs
    if len(docs) != 1:
        raise CaseDefinitionError(f"{case.expected_path}: an admit golden is one document, not {len(docs)}")
    try:
        return admission.check_golden(docs[0], case.chain, str(case.expected_path))
    except admission.ShapeError as err:
        raise CaseDefinitionError(str(err)) from err


def _only_selected(case: Case, items: list[Any]) -> list[Any]:
    """A golden holding an object its ``expect:`` does not select could never be compared: an error."""
    for pos, item in enumerate(items):
        if not case.expect.selects(case.command, item):
            raise CaseDefinitionError(f"{case.expected_path}: item {pos + 1} ({_show(item)[:80]}) is outside the "
                                      f"case's expect selection ({case.expect.describe()})")
    return items


def select(case: Case, actual: Any) -> Any:
    """The output items the case is about (all of them without ``expect:``), in output order; an
    admit document whole."""
    if case.command == ADMIT:
        return actual
    return [item for item in actual if case.expect.selects(case.command, item)]


def _header(case: Case, cwd: Path, default_rules: Path | None = None, writer: str = TEST_UPDATE_WRITER) -> str:
    """The golden's comment header: the case, its command, and ``writer``, the command that wrote it."""
    argv = command_argv(case, cwd, python="python", default_rules=default_rules)
    shown = " ".join(shlex.quote(a) for a in argv[:-2])  # without --format json
    lines = ["# " + line for line in textwrap.wrap(f"Golden for fixtures case {case.name!r}: {case.description}", 98)]
    lines += [
        f"# Command: {shown}",
        f"{_WRITTEN_BY}`{writer}`; review every change against the spec before committing.",
        "# Compared semantically (gpustack_render.casetest).",
    ]
    if not case.expect.everything:
        lines.append(f"# Only the selected objects are compared ({case.expect.describe()}); others are ignored.")
    if case.expect_exit_code not in case.output_exit_codes:
        lines.append(f"# The case expects exit code {case.expect_exit_code}: nothing on stdout.")
    return "\n".join(lines) + "\n"


def _dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)


def render_golden(case: Case, actual: list[Any], cwd: Path, default_rules: Path | None = None,
                  writer: str = TEST_UPDATE_WRITER) -> str:
    """The golden text for ``actual`` (only the selected items), headed by :func:`_header`."""
    text = _header(case, cwd, default_rules, writer)
    if case.expect_exit_code not in case.output_exit_codes:
        return text
    chosen = select(case, actual)
    if case.command in LIST_COMMANDS:
        return text + "".join("---\n" + _dump(obj) for obj in chosen)
    return text + "---\n" + _dump(chosen)


def _without_writer(text: str) -> str:
    """A golden without its ``Written by`` line: who wrote it is no reason to rewrite it."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(_WRITTEN_BY))


def write_golden(case: Case, text: str) -> bool:
    """Write ``text`` unless the golden already says the same (apart from its writer); True when written."""
    path = case.expected_path
    if path.exists() and _without_writer(path.read_text(encoding="utf-8")) == _without_writer(text):
        return False
    path.write_text(text, encoding="utf-8")
    return True


def compare(case: Case, expected: Any, actual: Any) -> list[str]:
    """The golden against the (selected) output, as the case's command prints it; empty: equal."""
    if case.command == ADMIT:
        return admission.compare(expected, actual, case.chain)
    if case.command in LIST_COMMANDS:
        return compare_objects(expected, actual)
    return compare_patches(expected, actual)


# ------------------------------------------------------------------------------------------------
# One case, end to end
# ------------------------------------------------------------------------------------------------


@dataclass
class CaseOutcome:
    case: Case
    run: CaseRun | None = None
    failures: list[str] = field(default_factory=list)
    updated: bool = False
    rules: str = BUILT_IN_RULES  # the rules directory it ran with, as printed

    @property
    def ok(self) -> bool:
        return not self.failures

    def report(self) -> str:
        lines = [f"case {self.case.name}: {self.case.description}"]
        if self.run is not None:
            lines.append("  command: " + " ".join(shlex.quote(a) for a in self.run.argv))
            lines.append(f"  rules: {self.rules}")
            lines.append(f"  exit code: {self.run.exit_code} (expected {self.case.expect_exit_code})")
        for failure in self.failures:
            lines += ["  " + line for line in failure.splitlines()]
        if self.run is not None and self.run.stderr.strip():
            lines.append("  stderr:")
            lines += ["    | " + line for line in self.run.stderr.rstrip().splitlines()[:40]]
        return "\n".join(lines)


def run_case(case: Case, cwd: Path, *, update: bool = False, invoker: Invoker | None = None,
             python: str = sys.executable, default_rules: Path | None = None,
             writer: str = TEST_UPDATE_WRITER) -> CaseOutcome:
    """Run one case; ``default_rules`` (``test --rules DIR``) replaces the built-in rules unless the
    case names its own. The run is in process unless another ``invoker`` is given; ``writer`` is
    the command an updated golden's header names."""
    invoker = invoker or inprocess_invoker
    outcome = CaseOutcome(case=case, rules=rules_label(case, cwd, default_rules))
    run = outcome.run = execute(case, cwd, invoker, python, default_rules)
    fail = outcome.failures.append

    if run.exit_code != case.expect_exit_code:
        fail(f"exit code {run.exit_code}, expected {case.expect_exit_code}")
    for marker in _CRASH_MARKERS:
        if marker in run.stderr:
            fail(f"stderr shows a crash ({marker!r})")
    for needle in case.expect_stderr:
        if needle not in run.stderr:
            fail(f"stderr lacks expected text {needle!r}")

    actual: Any = None
    if case.expect_exit_code not in case.output_exit_codes:
        if run.stdout.strip():
            fail(f"stdout must be empty for an expected exit code {case.expect_exit_code}, "
                 f"got {len(run.stdout)} characters")
        actual = []
    elif run.exit_code in case.output_exit_codes:
        try:
            actual = parse_stdout(case.command, run.stdout, case.chain)
        except OutputError as err:
            fail(str(err))

    if update and actual is not None and run.exit_code == case.expect_exit_code:
        outcome.updated = write_golden(case, render_golden(case, actual, cwd, default_rules, writer))

    try:
        expected = load_expected(case)
    except CaseDefinitionError as err:
        fail(str(err))
        return outcome
    if case.expect_exit_code not in case.output_exit_codes:
        if expected:
            fail(f"{case.expected_path}: must hold no documents for an expected exit code "
                 f"{case.expect_exit_code}")
        return outcome
    if actual is not None:
        outcome.failures += compare(case, expected, select(case, actual))
    return outcome


# ------------------------------------------------------------------------------------------------
# Many cases: `gpustack-render test`
# ------------------------------------------------------------------------------------------------


def collect(paths: Sequence[Path]) -> list[Path]:
    """Case folders: a PATH holding ``case.yaml`` is one case, any other folder holds cases."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if (path / CASE_FILE).is_file():
            found.append(path)
        else:
            found.extend(case_dirs(path))
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


@dataclass
class SuiteEntry:
    outcome: CaseOutcome
    seconds: float
    label: str


def run_suite(paths: Sequence[Path], cwd: Path, *, update: bool = False,
              invoker: Invoker = inprocess_invoker, rules: Path | None = None) -> list[SuiteEntry]:
    """Run every case under ``paths``; a case that cannot be loaded is a failed entry, never a crash.

    ``rules`` (``test --rules DIR``) is the rules directory of every case that does not name its own."""
    import time
    dirs = collect(paths)
    names = [d.name for d in dirs]
    entries = []
    for case_dir in dirs:
        label = case_dir.name if names.count(case_dir.name) == 1 else _rel(case_dir, cwd)
        start = time.perf_counter()
        try:
            case = load_case(case_dir)
        except CaseDefinitionError as err:
            stub = Case(name=case_dir.name, path=case_dir, description="(case.yaml cannot be used)")
            entries.append(SuiteEntry(CaseOutcome(case=stub, failures=[str(err)], rules=rules_label(stub, cwd, rules)),
                                      time.perf_counter() - start, label))
            continue
        outcome = run_case(case, cwd, update=update, invoker=invoker,
                           python=PROGRAM if invoker is inprocess_invoker else sys.executable, default_rules=rules)
        entries.append(SuiteEntry(outcome, time.perf_counter() - start, label))
    return entries


def summary_line(entries: Sequence[SuiteEntry]) -> str:
    failed = sum(not e.outcome.ok for e in entries)
    return f"{len(entries) - failed} passed, {failed} failed"


def format_table(entries: Sequence[SuiteEntry]) -> str:
    """The result table, the report of every failure, then exactly one final ``N passed, M failed``."""
    width = max([len("CASE")] + [len(e.label) for e in entries])
    lines = [f"{'CASE':<{width}}  {'COMMAND':<12}  {'RESULT':<7}  {'TIME':<6}  RULES"]
    for e in entries:
        result = "FAIL" if not e.outcome.ok else ("updated" if e.outcome.updated else "pass")
        lines.append(f"{e.label:<{width}}  {e.outcome.case.command:<12}  {result:<7}  {e.seconds:>5.2f}s  "
                     f"{e.outcome.rules}")
    failures = [e for e in entries if not e.outcome.ok]
    for e in failures:
        lines += ["", "FAIL " + e.outcome.report().removeprefix("case ")]
    updated = sum(e.outcome.updated for e in entries)
    if updated:
        lines += ["", f"updated {updated} golden file(s): review `git diff` before committing"]
    lines += ["", summary_line(entries)]
    return "\n".join(lines) + "\n"


def _entry_json(e: SuiteEntry) -> dict[str, Any]:
    run = e.outcome.run
    return {
        "name": e.label, "path": str(e.outcome.case.path), "description": e.outcome.case.description,
        "command": e.outcome.case.command, "result": "pass" if e.outcome.ok else "fail",
        "updated": e.outcome.updated, "seconds": round(e.seconds, 3), "failures": list(e.outcome.failures),
        "exitCode": run.exit_code if run else None, "expectedExitCode": e.outcome.case.expect_exit_code,
        "argv": run.argv if run else None, "stderr": run.stderr if run else None, "rules": e.outcome.rules,
    }


def format_json(entries: Sequence[SuiteEntry]) -> str:
    failed = sum(not e.outcome.ok for e in entries)
    return json.dumps({"cases": [_entry_json(e) for e in entries], "passed": len(entries) - failed,
                       "failed": failed}, indent=2, ensure_ascii=False) + "\n"


def format_junit(entries: Sequence[SuiteEntry], suite: str = "gpustack-render") -> str:
    """JUnit XML (one testsuite) for CI systems that show test reports."""
    import xml.etree.ElementTree as ET
    failed = sum(not e.outcome.ok for e in entries)
    total = sum(e.seconds for e in entries)
    root = ET.Element("testsuites", name=suite, tests=str(len(entries)), failures=str(failed),
                      time=f"{total:.3f}")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(entries)), failures=str(failed),
                         errors="0", skipped="0", time=f"{total:.3f}")
    for e in entries:
        case = ET.SubElement(node, "testcase", classname=f"{suite}.{e.outcome.case.command}", name=e.label,
                             time=f"{e.seconds:.3f}")
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="rules", value=e.outcome.rules)
        if not e.outcome.ok:
            first = e.outcome.failures[0].splitlines()[0] if e.outcome.failures else "failed"
            failure = ET.SubElement(case, "failure", message=first, type="CaseFailure")
            failure.text = e.outcome.report()
        if e.outcome.run is not None and e.outcome.run.stderr:
            ET.SubElement(case, "system-err").text = e.outcome.run.stderr
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
