"""`gpustack-render snapshot`: capture the objects the renderer reads from a live cluster."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import click

from gpustack_render.cli.common import VERBOSITY, command_body, rules_option, write_stdout
from gpustack_render.errors import Diagnostics


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def show_progress() -> bool:
    """Progress only for a person watching: stderr is a terminal and ``-q`` was not given. In CI
    or a pipe the bar would be noise in the log (and a 10,000-Node capture would print pages)."""
    return VERBOSITY["level"] >= 0 and stderr_is_terminal()


@click.command("snapshot")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
              help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).")
@click.option("--context", metavar="NAME", help="Kubeconfig context (default: the current context).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Write the snapshot here (atomically: temporary file + rename) instead of stdout.")
@click.option("--page-size", type=click.IntRange(min=1), default=500, show_default=True,
              help="Objects per list request (paged with limit/continue).")
@rules_option
def command(kubeconfig: Path | None, context: str | None, output: Path | None, page_size: int,
            rules_dir: Path | None) -> None:
    """Capture Nodes, Devices, Namespaces, InstanceTypes, the Kueue chain, the Workloads of every
    namespace, NodeFeatures and the settings object as one JSON List, ready for render/diff/validate/admit.

    Each kind is read at the version the server prefers among those this tool reads. Workloads keep
    only the fields the admission preview reads; the settings Secret only the settings keys of
    rules/settings.yaml. A kind whose CRD is not installed is skipped with a warning. Exit 2, writing nothing, when the server is not a
    Kubernetes API, is unreachable, answers 401/403, cannot list Nodes or Namespaces, or a list
    fails midway, and when the kubeconfig cannot be used. Progress on stderr when it is a terminal.
    """
    def action(state: dict[str, Any]) -> None:
        from gpustack_render.snapshot.live import capture, write_atomically
        from gpustack_render.rules import load_rules
        from gpustack_render.yamlio import dump_json
        diag = Diagnostics()
        state["ctx"] = types.SimpleNamespace(diagnostics=diag)
        rules = load_rules(rules_dir)
        vocab = rules.vocabulary
        assert vocab is not None
        snapshot = capture(kubeconfig, context, page_size, rules.settings.source, rules.settings.defaults, diag,
                           progress=show_progress(), vocabulary=(vocab.workerApiGroup, vocab.nodeFeatureNamespace))
        text = dump_json(snapshot)
        if output is None:
            write_stdout(text)
        else:
            write_atomically(text, output)

    command_body(action)
