"""Command line: parse arguments, call the pipeline, map results to exit codes. No logic here."""

from __future__ import annotations

import gc
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import click

from gpustack_render import pipeline
from gpustack_render.emit import format_objects, write_directory
from gpustack_render.errors import EXIT_USAGE, PROG, Diagnostics, UserError
from gpustack_render.yamlio import dump_json, dump_yaml

_DEBUG = {"on": False}


def _run(action: Callable[[], int | None], diagnostics: Callable[[], Diagnostics | None] = lambda: None) -> None:
    """The one error handler: user errors and internal failures become one-line messages, exit 2."""
    # A snapshot is one large, acyclic object graph that lives for the whole (short) run: the
    # cyclic collector would rescan it on every generation-2 pass and triple the run time.
    gc.disable()
    try:
        code = action() or 0
    except UserError as err:
        _flush_warnings(diagnostics())
        for problem in err.problems:
            click.echo(problem.format() if problem.compiler_style else f"{PROG}: {problem.format()}", err=True)
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:  # a bug: one line, traceback only with --debug
        if _DEBUG["on"]:
            traceback.print_exc()
        click.echo(f"{PROG}: error: internal error: {type(err).__name__}: {err} "
                   f"(run with --debug for a traceback and please report it)", err=True)
        sys.exit(EXIT_USAGE)
    _flush_warnings(diagnostics())
    sys.exit(code)


def _command(body: Callable[[dict[str, Any]], None]) -> None:
    """Run a command body; whatever context it stores under ``"ctx"`` supplies the warnings."""
    state: dict[str, Any] = {}
    _run(lambda: body(state), lambda: state["ctx"].diagnostics if "ctx" in state else None)


def _flush_warnings(diag: Diagnostics | None) -> None:
    for warning in diag.warnings if diag else []:
        click.echo(f"{PROG}: warning: {warning}", err=True)


def _write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


snapshot_args = click.argument("snapshot", nargs=-1, required=True, metavar="SNAPSHOT...")
set_option = click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
                          help="Override a setting (repeatable); wins over the snapshot's gpustack-settings.")
rules_option = click.option("--rules", "rules_dir", type=click.Path(file_okay=False, path_type=Path),
                            help="Rules directory (default: the built-in rules).")
def chain_inputs(command: Callable[..., Any]) -> Callable[..., Any]:
    """SNAPSHOT..., --set, --rules: the inputs every rendering command takes."""
    return snapshot_args(set_option(rules_option(command)))


templates_option = click.option("--templates", "templates_dir", type=click.Path(file_okay=False, path_type=Path),
                                help="Templates directory (default: the built-in templates).")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show a traceback for internal errors.")
@click.version_option(package_name="gpustack-render", prog_name=PROG)
def main(debug: bool) -> None:
    """Render GPUStack's worker NodeFeatures and Kueue chain from a cluster snapshot.

    SNAPSHOT is one or more files or directories (read recursively: *.yaml, *.yml, *.json) or -
    for standard input, as `kubectl get -o yaml|json` prints them. Exit codes: 0 success, 1 a
    negative answer, 2 the job could not be done.
    """
    _DEBUG["on"] = debug


@main.command()
@chain_inputs
@templates_option
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
@click.option("-o", "--output-dir", type=click.Path(path_type=Path),
              help="Write one file per object plus kustomization.yaml here (atomically) instead of stdout.")
def render(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
           fmt: str, output_dir: Path | None) -> None:
    """Render NodeFeature, Topology, AdmissionCheck, ResourceFlavor, InstanceType, ClusterQueue, LocalQueue."""
    def action(state: dict[str, Any]) -> None:
        ctx = state["ctx"] = pipeline.prepare(snapshot, sets, rules_dir)
        objects = pipeline.render_objects(ctx, templates_dir)
        if output_dir is not None:
            write_directory(objects, output_dir)
        else:
            _write_stdout(format_objects(objects, fmt))

    _command(action)


@main.command()
@chain_inputs
@templates_option
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def catalog(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, templates_dir: Path | None,
            fmt: str) -> None:
    """Print the read-only InstanceTypeFlavor catalog as a List."""
    def action(state: dict[str, Any]) -> None:
        ctx = state["ctx"] = pipeline.prepare(snapshot, sets, rules_dir)
        listing = pipeline.render_catalog(ctx, templates_dir)
        _write_stdout(dump_json(listing) if fmt == "json" else dump_yaml(listing))

    _command(action)


@main.command("node-patches")
@chain_inputs
@click.option("--format", "fmt", type=click.Choice(["yaml", "json", "kubectl"]), default="yaml", show_default=True,
              help="kubectl: ready-to-run `kubectl patch node` lines.")
def node_patches(snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None, fmt: str) -> None:
    """RFC 6902 patches the worker applies to Nodes: capacity keys ("status") and fit labels ("")."""
    def action(state: dict[str, Any]) -> None:
        from gpustack_render.patches import kubectl_lines
        ctx = state["ctx"] = pipeline.prepare(snapshot, sets, rules_dir)
        entries = pipeline.node_patches(ctx)
        if fmt == "json":
            _write_stdout(dump_json(entries))
        elif fmt == "kubectl":
            _write_stdout(kubectl_lines(entries))
        else:
            _write_stdout(dump_yaml(entries) if entries else "[]\n")

    _command(action)
