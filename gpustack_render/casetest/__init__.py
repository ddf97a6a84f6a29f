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
  process through the command body the CLI runs (``pipeline.admit_command``); ``expect:``
  does not apply to it;
* goldens are rewritten (``update=True``) only from a run whose exit code is the expected one; the
  rest of the checks still run, so an update never hides a wrong exit code or missing diagnostics.

Only the standard library and PyYAML are used for the comparison itself (:mod:`.semantic`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from gpustack_render.casetest import admission
from gpustack_render.casetest.case import (ADMIT, CASE_FILE, COMMANDS, EXPECTED_FILE, LIST_COMMANDS, Case,
                                          CaseDefinitionError, Selection, case_dirs, collect, discover, load_case)
from gpustack_render.casetest.golden import (TEST_UPDATE_WRITER, UPDATE_ENV, OutputError, compare, load_expected,
                                            parse_stdout, render_golden, select, update_requested, write_golden)
from gpustack_render.casetest.report import SuiteEntry, format_json, format_junit, format_table, summary_line
from gpustack_render.casetest.run import (BUILT_IN_RULES, PROGRAM, CaseOutcome, CaseRun, Invoker, _parse_argv,
                                         _rel, command_argv, rules_dir_for, rules_label, subprocess_invoker)
from gpustack_render.casetest.semantic import compare_objects, compare_patches, describe, diff_values, identity

__all__ = ["ADMIT", "BUILT_IN_RULES", "CASE_FILE", "COMMANDS", "EXPECTED_FILE", "LIST_COMMANDS", "PROGRAM",
           "TEST_UPDATE_WRITER", "UPDATE_ENV", "Case", "CaseDefinitionError", "CaseOutcome", "CaseRun", "Invoker",
           "OutputError", "Selection", "SuiteEntry", "_parse_argv", "admission", "case_dirs", "collect",
           "command_argv", "compare", "compare_objects", "compare_patches", "describe", "diff_values", "discover",
           "execute", "format_json", "format_junit", "format_table", "identity", "inprocess_invoker", "load_case",
           "load_expected", "parse_stdout", "render_golden", "rules_dir_for", "rules_label", "run_case",
           "run_suite", "select", "subprocess_invoker", "summary_line", "update_requested", "write_golden"]

_CRASH_MARKERS = ("Traceback (most recent call last)", "internal error")


# ------------------------------------------------------------------------------------------------
# Running in process (through the pipeline, as the CLI does)
# ------------------------------------------------------------------------------------------------


def inprocess_invoker(argv: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    """Run the command :func:`command_argv` built through the pipeline in this process.

    Output, diagnostics and exit code are the CLI's: the run goes through the one error handler
    (``errors.handle``), so warnings read ``gpustack-render: warning: …``, problems are printed
    as the CLI prints them with exit 2, and an unexpected exception is the one-line internal error
    with exit 3. Paths are taken relative to ``cwd``."""
    from gpustack_render import pipeline
    from gpustack_render.admit.command import AdmitRequest
    from gpustack_render.emit import format_objects
    from gpustack_render.errors import EXIT_USAGE, PROG, handle, note_text, warning_text
    from gpustack_render.yamlio import dump_json, dump_yaml

    args = _parse_argv(argv)
    command, sets, fmt = args.command, args.sets, args.fmt or "yaml"
    here = Path.cwd().resolve() == Path(cwd).resolve()

    def at(path: str) -> str:
        return path if here or Path(path).is_absolute() or path == "-" else str(Path(cwd) / path)

    snapshots, rules = [at(p) for p in args.snapshots], Path(at(args.rules)) if args.rules else None
    err: list[str] = []
    state: dict[str, Any] = {"out": ""}

    def body() -> int | None:
        if command == ADMIT:
            run = pipeline.admit_command(AdmitRequest(snapshots, sets, rules, [at(p) for p in args.workloads],
                                                      args.chain, args.reserve, args.fmt or "text"), state)
            err.extend(note_text(note) for note in run.notes)
            state["out"] = run.text
            return run.exit_code
        ctx = state["ctx"] = pipeline.prepare(snapshots, sets, rules)
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


def execute(case: Case, cwd: Path, invoker: Invoker | None = None, python: str = sys.executable,
            default_rules: Path | None = None) -> CaseRun:
    argv = command_argv(case, cwd, python, default_rules)
    code, out, err = (invoker or inprocess_invoker)(argv, cwd)
    return CaseRun(argv=argv, exit_code=code, stdout=out, stderr=err)


# ------------------------------------------------------------------------------------------------
# One case, end to end
# ------------------------------------------------------------------------------------------------


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
