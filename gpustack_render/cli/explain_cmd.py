"""`gpustack-render explain TARGET SNAPSHOT...`: where each field of a rendered object came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gpustack_render.cli.common import chain_inputs, command_body, prepare, templates_option, write_stdout


@click.command("explain")
@click.argument("target", metavar="TARGET")
@chain_inputs
@templates_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def command(target: str, snapshot: tuple[str, ...], sets: tuple[str, ...], rules_dir: Path | None,
            templates_dir: Path | None, fmt: str) -> None:
    """Explain one rendered object or one Node: each field's value and where it came from.

    TARGET comes first (SNAPSHOT takes any number of paths): KIND/NAME for ResourceFlavor,
    ClusterQueue, InstanceType, NodeFeature, Topology or AdmissionCheck; LocalQueue/NAMESPACE/NAME;
    or node/NAME for a Node's gKey/aKey derivation, managed state, flavors and capacity keys;
    or workload/NAMESPACE/NAME for a snapshot Workload's admission under the rendered chain (every
    flavor tried, and the Nodes that could or could not hold its Pods).
    Kinds are case-insensitive and take kubectl's plural and short names: rf (flavor), cq,
    lq (queue), topo, ac, no (nodes), wl (workloads). Example:

    \b
      gpustack-render explain ClusterQueue/gpustack--nvidia-tesla-t4-linux-amd64 fixtures/demo
      gpustack-render explain cq/gpustack--nvidia-tesla-t4-linux-amd64 fixtures/demo
      gpustack-render explain node/node-t4-b fixtures/demo --format json
    """
    def action(state: dict[str, Any]) -> None:
        from gpustack_render import pipeline
        from gpustack_render.explain import explain, format_text, parse_target
        from gpustack_render.yamlio import dump_json
        parse_target(target)  # a malformed target fails before the snapshot is read
        ctx = state["ctx"] = prepare(snapshot, sets, rules_dir)
        report = explain(ctx, target, pipeline.setting_sources(ctx, sets), templates_dir,
                         lambda: pipeline.admit_preview(ctx, (), "rendered", {}, templates_dir).runs["rendered"])
        write_stdout(dump_json(report.as_json()) if fmt == "json" else format_text(report))

    command_body(action)
