#!/usr/bin/env python3
"""Scale benchmark for gpustack-render (`make bench`).

For each size N (default 1,000, 10,000 and 65,000 Nodes) a synthetic snapshot is generated into
bench-out/ by gen_snapshot.py (cached while the parameters and the generator are unchanged), and
for the YAML sizes (default 10,000 and 65,000) the same snapshot is written as a YAML ``List`` (as
``kubectl get -o yaml`` prints one). Every command runs as its own child process:

    gpustack-render render SNAP                      (stdout to a file under bench-out/)
    gpustack-render render SNAP --format json
    gpustack-render catalog SNAP
    gpustack-render node-patches SNAP --format json
    gpustack-render diff SNAP --against DIR          (DIR: a previous `render -o`, written untimed)
    gpustack-render render YAML-SNAP --format json   (the YAML List form)
    gpustack-render admit SNAP WORKLOADS --format json (10,000 Nodes: 50,000 Workloads by gen_workloads.py)
    gpustack-render render fixtures/demo, gpustack-render --help

The rows are run interleaved (round after round over every row, so a burst of load on this
shared machine hits all rows alike) and the medians of ``--repeat`` rounds are reported: wall time
(time.perf_counter() around the child), peak RSS (the child's own rusage, os.wait4), and the floor:
reading and parsing that snapshot and writing that output with the fastest libraries the tool
uses (floor.py, plus a bare interpreter's start), so how far the tool is from its inputs' and
outputs' own cost is visible. Rows with a goal (issue 14) say whether the median meets it. The
load average before and after is printed, since other processes skew every number.

``--baseline DIR`` benches another checkout (its ``.venv``'s gpustack-render, in DIR) alongside:
every row is run by both, one right after the other in each round (which goes first alternates), and
the report gives both medians and their ratio. ``--template-edits`` adds rows rendering the largest
snapshot of at most 10,000 Nodes with the NodeFeature template edited (a ``| trim`` on a value, a
conditional, a loop), each edit written in the checkout's own template language.

Exit status: 0 when every command succeeded, 1 when one failed or timed out (or, with --strict,
missed a goal), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GENERATOR = HERE / "gen_snapshot.py"
WORKLOAD_GENERATOR = HERE / "gen_workloads.py"
ADMIT_NODES, ADMIT_WORKLOADS = 10_000, 50_000  # issue 23's admit row
FLOOR = HERE / "floor.py"
DEMO = REPO / "fixtures" / "demo"

# Issue 14's goals: (row label, nodes, snapshot form) -> (wall s, peak RSS MiB or None).
# A YAML row's wall goal is relative: 1.5x the JSON row of the same size.
GOALS: dict[tuple[str, int, str], tuple[float, float | None]] = {
    ("render --format json", 10_000, "json"): (0.6, 250),
    ("render", 10_000, "json"): (0.8, None),
    ("node-patches --format json", 10_000, "json"): (0.6, None),
    ("catalog", 10_000, "json"): (0.5, None),
    ("diff --against DIR", 10_000, "json"): (1.0, None),
    ("render", 65_000, "json"): (5.0, 1229),
    ("render --format json", 65_000, "json"): (5.0, 1229),
    ("node-patches --format json", 65_000, "json"): (5.0, 1229),
    ("render --format json", 65_000, "yaml"): (30.0, 3072),
    ("render", 0, "demo"): (0.15, None),
    ("--help", 0, "demo"): (0.1, None),
    ("admit --format json", 10_000, "json"): (10.0, 1536),  # issue 23: 50,000 Workloads
}
YAML_FACTOR = 1.5
YAML_RSS_GOAL_10K = 1024.0

STDERR_TAIL_LINES = 15


# ------------------------------------------------------------------------------------------
# Snapshot generation (cached)
# ------------------------------------------------------------------------------------------
def generator_digest() -> str:
    return hashlib.sha256(GENERATOR.read_bytes()).hexdigest()


@dataclass
class Snapshot:
    nodes: int
    path: Path
    size: int
    cached: bool
    gen_seconds: float | None
    form: str = "json"   # json, yaml (a YAML List of the same objects) or demo


def ensure_yaml(json_snap: Snapshot) -> Snapshot:
    """The YAML List form of a generated snapshot (libyaml's block style, written by a child)."""
    path = json_snap.path.with_suffix(".yaml")
    meta_path = path.with_name(path.name + ".meta")
    want = {"from": json_snap.path.name, "from_bytes": json_snap.size}
    if path.is_file() and meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            meta = {}
        if {k: meta.get(k) for k in want} == want and meta.get("bytes") == path.stat().st_size:
            return Snapshot(json_snap.nodes, path, path.stat().st_size, True, None, "yaml")
    t0 = time.perf_counter()
    script = ("import json, sys, yaml\n"
              "doc = json.load(open(sys.argv[1], encoding='utf-8'))\n"
              "with open(sys.argv[2], 'w', encoding='utf-8') as out:\n"
              "    yaml.dump(doc, out, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False,"
              " allow_unicode=True, width=1 << 20)\n")
    done = subprocess.run([sys.executable, "-c", script, str(json_snap.path), str(path)],
                          stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench: writing {path} failed:\n{stderr_tail(done.stderr)}")
    seconds = time.perf_counter() - t0
    size = path.stat().st_size
    meta_path.write_text(json.dumps({**want, "bytes": size, "generated_seconds": round(seconds, 3)}) + "\n")
    return Snapshot(json_snap.nodes, path, size, False, seconds, "yaml")


def ensure_snapshot(out_dir: Path, nodes: int, namespaces: int, seed: int) -> Snapshot:
    path = out_dir / f"snapshot-n{nodes}-ns{namespaces}-seed{seed}.json"
    meta_path = path.with_name(path.name + ".meta")
    want = {"nodes": nodes, "namespaces": namespaces, "seed": seed,
            "generator_sha256": generator_digest()}
    if path.is_file() and meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            meta = {}
        if ({k: meta.get(k) for k in want} == want
                and meta.get("bytes") == path.stat().st_size):
            return Snapshot(nodes, path, path.stat().st_size, True, None)
    # Generate in a child process, never in this one: on Linux a child's ru_maxrss starts from
    # the parent's high-water mark (fork/vfork + exec carry it over), so a bench process that
    # once held a 10,000-Node snapshot in memory would inflate every later RSS measurement.
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, str(GENERATOR), "--nodes", str(nodes),
                           "--namespaces", str(namespaces), "--seed", str(seed),
                           "-o", str(path)], stdin=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"bench: generating {path} failed (exit {done.returncode}):\n"
                         f"{stderr_tail(done.stderr)}")
    size = path.stat().st_size
    meta_path.write_text(json.dumps({**want, "bytes": size,
                                     "generated_seconds": round(seconds, 3)}, indent=2) + "\n")
    return Snapshot(nodes, path, size, False, seconds)


# ------------------------------------------------------------------------------------------
# Running one measured child
# ------------------------------------------------------------------------------------------
def cli_prefix() -> list[str]:
    console = Path(sys.executable).parent / "gpustack-render"
    if console.is_file() and os.access(console, os.X_OK):
        return [str(console)]
    return [sys.executable, "-m", "gpustack_render"]


def maxrss_mib(ru_maxrss: int) -> float:
    # Linux reports KiB, macOS bytes.
    return ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else ru_maxrss / 1024


def self_maxrss_mib() -> float:
    return maxrss_mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


@dataclass
class Run:
    wall: float
    rss_mib: float
    exit_code: int | None          # None when killed by the timeout
    stderr: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def run_measured(cmd: list[str], timeout: float, cwd: Path, stdout_path: Path | None = None) -> Run:
    """Run cmd with stdout to ``stdout_path`` (else /dev/null); wall time and the child's own peak RSS."""
    with tempfile.TemporaryFile() as err, open(stdout_path or os.devnull, "wb") as devnull:
        lock = threading.Lock()
        state = {"done": False, "timed_out": False}
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=devnull, stderr=err,
                                cwd=cwd)

        def on_timeout() -> None:
            with lock:
                if not state["done"]:   # the child is not reaped yet: its pid is still ours
                    state["timed_out"] = True
                    proc.kill()

        timer = threading.Timer(timeout, on_timeout)
        timer.daemon = True
        timer.start()
        try:
            # Wait for the exit without reaping (WNOWAIT), so the timer can never signal a
            # recycled pid; then reap with wait4 to get the child's rusage.
            if hasattr(os, "waitid"):
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                wall = time.perf_counter() - t0
                with lock:
                    state["done"] = True
                timer.cancel()
                _, status, rusage = os.wait4(proc.pid, 0)
            else:  # macOS: no waitid; the timer/reap race is harmless in practice
                _, status, rusage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - t0
                with lock:
                    state["done"] = True
                timer.cancel()
        except BaseException:
            timer.cancel()
            if proc.returncode is None:
                proc.kill()
                proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    return Run(wall=wall, rss_mib=maxrss_mib(rusage.ru_maxrss),
               exit_code=None if state["timed_out"] else proc.returncode,
               stderr=stderr, timed_out=state["timed_out"])


def probe(cmd: list[str], cwd: Path) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=cwd, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------
def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Row:
    label: str
    snapshot: Snapshot
    cmd: list[str]
    output: Path | None = None          # the command's stdout (the floor writes it again)
    runs: list[Run] = field(default_factory=list)
    floors: list[float] = field(default_factory=list)
    baseline: "Row | None" = None       # the same command of the --baseline checkout
    cwd: Path = REPO

    @property
    def failed(self) -> Run | None:
        return next((r for r in self.runs if not r.ok), None)

    @property
    def wall(self) -> float:
        return median([r.wall for r in self.runs])

    @property
    def rss(self) -> float:
        return median([r.rss_mib for r in self.runs])

    @property
    def floor(self) -> float:
        return median(self.floors)


def goal_of(row: Row, rows: list[Row]) -> tuple[float, float | None] | None:
    goal = GOALS.get((row.label, row.snapshot.nodes, row.snapshot.form))
    if goal is None and row.snapshot.form == "yaml" and row.snapshot.nodes == 10_000:
        twin = next((r for r in rows if r.label == row.label and r.snapshot.nodes == row.snapshot.nodes
                     and r.snapshot.form == "json" and r.runs), None)
        if twin is not None:
            goal = (YAML_FACTOR * twin.wall, YAML_RSS_GOAL_10K)
    return goal


def goal_text(row: Row, rows: list[Row]) -> tuple[str, bool]:
    goal = goal_of(row, rows)
    if goal is None or row.failed:
        return "", True
    wall, rss = goal
    ok = row.wall <= wall and (rss is None or row.rss <= rss)
    text = f"<= {wall:.2f} s" + (f", <= {rss:.0f} MiB" if rss is not None else "")
    return (f"{text}: {'met' if ok else '**missed**'}"), ok


def fmt_mib(mib: float) -> str:
    return f"{mib / 1024:g} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib:g} MiB"


def stderr_tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    tail = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(tail) if tail else "(no stderr)"


def nodes_cell(row: Row) -> str:
    """A row's nodes column: the snapshot's Node count, or "demo" for the demo fixture."""
    return f"{row.snapshot.nodes:,}" if row.snapshot.form != "demo" else "demo"


def render_report(rows: list[Row], snapshots: list[Snapshot], args, cli: list[str],
                  loads: tuple[str, str], interpreter: float) -> str:
    out: list[str] = []
    out.append("# gpustack-render benchmark\n")
    out.append(f"- CLI: `{' '.join(cli)}`")
    out.append(f"- Python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs")
    out.append(f"- load average before: {loads[0]}; after: {loads[1]}")
    out.append(f"- snapshots: seed {args.seed}, {args.namespaces} team namespaces; "
               + ", ".join(f"{s.nodes} nodes {s.form} = {s.size / 1e6:.1f} MB"
                           + (" (cached)" if s.cached else f" (generated in {s.gen_seconds:.2f} s)")
                           for s in snapshots))
    out.append(f"- medians of {args.repeat} interleaved round(s); floor = read + parse the snapshot and write "
               f"the output with the fastest libraries the tool uses (floor.py), plus a bare interpreter "
               f"start ({interpreter:.3f} s)")
    out.append(f"- a child's peak RSS includes this bench process's own high-water mark, "
               f"{self_maxrss_mib():.0f} MiB")
    out.append("")
    compared = any(row.baseline is not None for row in rows)
    if compared:
        out.append(f"- baseline: `{' '.join(rows[0].baseline.cmd[:1])}` in {rows[0].baseline.cwd}, "  # type: ignore[union-attr]
                   f"interleaved with every row")
        out.append("")
        out.append("| command | nodes | snapshot | wall s | baseline wall s | ratio | peak RSS MiB | baseline RSS MiB |")
        out.append("|---|---:|---|---:|---:|---:|---:|---:|")
        for row in rows:
            twin = row.baseline
            if twin is None or row.failed or twin.failed:
                out.append(f"| `{row.label}` | {row.snapshot.nodes:,} | {row.snapshot.form} | "
                           f"{'FAILED' if row.failed else f'{row.wall:.2f}'} | "
                           f"{'FAILED' if twin is not None and twin.failed else ''} | | | |")
                continue
            nodes = nodes_cell(row)
            out.append(f"| `{row.label}` | {nodes} | {row.snapshot.form} | {row.wall:.3f} | {twin.wall:.3f} | "
                       f"{row.wall / twin.wall:.3f} | {row.rss:.0f} | {twin.rss:.0f} |")
        out.append("")
    out.append("| command | nodes | snapshot | MB | wall s | peak RSS MiB | floor s | goal |")
    out.append("|---|---:|---|---:|---:|---:|---:|---|")
    for row in rows:
        bad = row.failed
        wall = f"{row.wall:.2f}" if bad is None else \
            f"**FAILED ({'TIMEOUT' if bad.timed_out else f'exit {bad.exit_code}'})**"
        floor = f"{row.floor:.2f}" if row.floors else ""
        goal, _ok = goal_text(row, rows)
        nodes = nodes_cell(row)
        out.append(f"| `{row.label}` | {nodes} | {row.snapshot.form} | {row.snapshot.size / 1e6:.1f} | {wall} | "
                   f"{row.rss:.0f} | {floor} | {goal} |")

    sizes = sorted({r.snapshot.nodes for r in rows if r.snapshot.form == "json"})
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        out.append("")
        out.append(f"Linearity ({hi:,} vs {lo:,} nodes; linear = {hi / lo:.1f}x, net of the {interpreter:.2f} s "
                   f"interpreter start):")
        out.append("")
        for label in dict.fromkeys(r.label for r in rows if r.snapshot.form == "json"):
            a = next((r for r in rows if r.label == label and r.snapshot.nodes == lo and r.snapshot.form == "json"), None)
            b = next((r for r in rows if r.label == label and r.snapshot.nodes == hi and r.snapshot.form == "json"), None)
            if a is None or b is None or a.failed or b.failed:
                continue
            net = (b.wall - interpreter) / max(a.wall - interpreter, 1e-9)
            out.append(f"- `{label}`: {a.wall:.2f} s -> {b.wall:.2f} s = {b.wall / a.wall:.1f}x ({net:.1f}x net); "
                       f"peak RSS {a.rss:.0f} -> {b.rss:.0f} MiB")

    failures = [r for r in rows if r.failed]
    for row in failures:
        bad = row.failed
        out.append("")
        out.append(f"- FAILED `{row.label}` on {row.snapshot.nodes:,} nodes ({row.snapshot.form}): "
                   f"{'timed out' if bad.timed_out else f'exit code {bad.exit_code}'}; stderr tail:")
        out.append("")
        out.append("  ```")
        out.extend("  " + line for line in stderr_tail(bad.stderr).splitlines())
        out.append("  ```")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------
def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}")
    if not sizes or sizes[0] <= 0:
        raise argparse.ArgumentTypeError("sizes must be positive integers")
    return sizes


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def snapshot_arg(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def ensure_workloads(snap: Snapshot, cli: list[str], out_dir: Path, timeout: float) -> Path | None:
    """The admit row's Workloads for ``snap`` (from its render; cached while both are unchanged)."""
    path = out_dir / f"workloads-{snap.path.stem}-{ADMIT_WORKLOADS}.json"
    meta_path = path.with_name(path.name + ".meta")
    want = {"snapshot": snap.path.name, "snapshot_bytes": snap.size, "count": ADMIT_WORKLOADS,
            "generator_sha256": hashlib.sha256(WORKLOAD_GENERATOR.read_bytes()).hexdigest()}
    if path.is_file() and meta_path.is_file():
        try:
            if {k: json.loads(meta_path.read_text()).get(k) for k in want} == want:
                return path
        except (OSError, ValueError):
            pass
    rendered = out_dir / f"render-{snap.path.stem}.json"
    if not run_measured(cli + ["render", str(snap.path), "--format", "json"], timeout, REPO, rendered).ok:
        return None
    done = subprocess.run([sys.executable, str(WORKLOAD_GENERATOR), "--render", str(rendered), "--snapshot",
                           str(snap.path), "--count", str(ADMIT_WORKLOADS), "-o", str(path)],
                          stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        print(f"bench: generating {path} failed:\n{stderr_tail(done.stderr)}", file=sys.stderr)
        return None
    meta_path.write_text(json.dumps(want, indent=2) + "\n")
    return path


def build_rows(snapshots: list[Snapshot], cli: list[str], out_dir: Path, timeout: float,
               cwd: Path = REPO) -> list[Row]:
    """Every row's command, run in ``cwd`` (another checkout's for --baseline: paths absolute)."""
    rows: list[Row] = []
    if cwd != REPO:
        out_dir = out_dir / "baseline"
        out_dir.mkdir(parents=True, exist_ok=True)
    json_commands = [("render", ["render", "{snap}"]), ("render --format json", ["render", "{snap}", "--format", "json"]),
                     ("catalog", ["catalog", "{snap}"]),
                     ("node-patches --format json", ["node-patches", "{snap}", "--format", "json"])]
    for snap in snapshots:
        arg = snapshot_arg(snap.path) if cwd == REPO else str(snap.path.resolve())
        tag = f"n{snap.nodes}-{snap.form}"
        commands = json_commands if snap.form == "json" else [json_commands[1]]
        for label, template in commands:
            cmd = cli + [arg if part == "{snap}" else part for part in template]
            rows.append(Row(label, snap, cmd, out_dir / f"out-{tag}-{label.replace(' ', '_')}"))
        if snap.form == "json":
            previous = out_dir / f"previous-{tag}"
            done = run_measured(cli + ["render", arg, "-o", str(previous.resolve())], timeout, cwd)
            if done.ok:
                rows.append(Row("diff --against DIR", snap, cli + ["diff", arg, "--against", str(previous.resolve())]))
            if snap.nodes == ADMIT_NODES and cwd == REPO:  # the baseline checkout may have no admit
                workloads = ensure_workloads(snap, cli, out_dir, timeout)
                if workloads is not None:
                    rows.append(Row("admit --format json", snap,
                                    cli + ["admit", arg, snapshot_arg(workloads), "--format", "json"]))
    demo = Snapshot(0, DEMO, sum(p.stat().st_size for p in DEMO.rglob("*") if p.is_file()), True, None, "demo")
    rows.append(Row("render", demo, cli + ["render", snapshot_arg(DEMO) if cwd == REPO else str(DEMO)]))
    rows.append(Row("--help", demo, cli + ["--help"]))
    for row in rows:
        row.cwd = cwd
    return rows


# Template edits that once took a slower path: (label, the .yaml template's (old, new), the
# .yaml.j2 template's (old, new)), on NodeFeature (one object per Node).
TEMPLATE_EDITS = [
    ("| trim", ('  name: "{{ obj.name }}"', '  name: "{{ obj.name | trim }}"'),
     ("  name: {{ obj.name | q }}", "  name: {{ obj.name | trim | q }}")),
    ("conditional", ('  namespace: "{{ obj.namespace }}"', '  namespace: "{{ obj.namespace if obj.namespace else omit }}"'),
     ("  namespace: {{ obj.namespace | q }}",
      "{%- if obj.namespace %}\n  namespace: {{ obj.namespace | q }}\n{%- endif %}")),
    ("loop", ('  labels: "{{ obj.labels }}"', '  labels:\n    $for: k, v in obj.labels | dictsort\n    "{{ k }}": "{{ v }}"'),
     ("  labels: {{ obj.labels | q }}",
      "  labels:\n{%- for k, v in obj.labels | dictsort %}\n    {{ k | q }}: {{ v | q }}\n{%- endfor %}")),
]


def template_edit_rows(snapshots: list[Snapshot], cli: list[str], out_dir: Path, cwd: Path) -> list[Row]:
    """``render`` of the largest JSON snapshot of at most 10,000 Nodes with the plain templates (a
    copy) and with each of TEMPLATE_EDITS, in the template language of the checkout in ``cwd``."""
    import shutil
    sizes = [s for s in snapshots if s.form == "json" and s.nodes <= 10_000]
    if not sizes:
        return []
    snap = max(sizes, key=lambda s: s.nodes)
    source = cwd / "templates"
    j2 = (source / "NodeFeature.yaml.j2").is_file()
    rows = []
    for label, yaml_edit, j2_edit in [("plain", ("", ""), ("", ""))] + TEMPLATE_EDITS:
        target = out_dir / f"templates-{'base' if cwd != REPO else 'this'}-{label.replace(' ', '').replace('|', 'pipe')}"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        path = target / ("NodeFeature.yaml.j2" if j2 else "NodeFeature.yaml")
        old, new = j2_edit if j2 else yaml_edit
        text = path.read_text(encoding="utf-8")
        if old and old not in text:
            raise SystemExit(f"bench: {path} has no {old!r} to edit")
        path.write_text(text.replace(old, new, 1) if old else text, encoding="utf-8")
        rows.append(Row(f"render, NodeFeature {label}", snap,
                        cli + ["render", str(snap.path.resolve()), "--templates", str(target.resolve())],
                        out_dir / f"out-{'base' if cwd != REPO else 'this'}-template-{label.replace(' ', '').replace('|', 'pipe')}",
                        cwd=cwd))
    return rows


def run_round(rows: list[Row], timeout: float, first: bool, baseline_first: bool = False) -> None:
    for row in rows:
        if row.failed:
            continue
        if row.baseline is not None and baseline_first:
            _run_baseline(row.baseline, timeout)
        run = run_measured(row.cmd, timeout, row.cwd, row.output)
        if row.baseline is not None and not baseline_first:
            _run_baseline(row.baseline, timeout)
        if row.label.startswith("diff") and run.exit_code == 1:   # differences found: a normal answer
            run.exit_code = 0
        row.runs.append(run)
        if row.output is not None and run.ok:
            floor = subprocess.run([sys.executable, str(FLOOR), str(row.snapshot.path), str(row.output)],
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=REPO)
            if floor.returncode == 0:
                row.floors.append(float(floor.stdout.strip()))
        if first:
            status = "ok" if run.ok else ("TIMEOUT" if run.timed_out else f"exit {run.exit_code}")
            print(f"  {row.label:28s} {row.snapshot.nodes:>7,} {row.snapshot.form:5s} {run.wall:7.2f} s "
                  f"{run.rss_mib:7.0f} MiB  {status}", file=sys.stderr, flush=True)


def _run_baseline(row: Row, timeout: float) -> None:
    if row.failed:
        return
    run = run_measured(row.cmd, timeout, row.cwd, row.output)
    if row.label.startswith("diff") and run.exit_code == 1:
        run.exit_code = 0
    row.runs.append(run)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="gpustack-render scale benchmark")
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1000,10000,65000"),
                    help="comma-separated node counts (default 1000,10000,65000)")
    ap.add_argument("--yaml-sizes", type=parse_sizes, default=parse_sizes("10000,65000"),
                    help="sizes also run from the YAML List form (default 10000,65000; must be in --sizes)")
    ap.add_argument("--namespaces", type=int, default=100,
                    help="team namespaces in each snapshot (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    ap.add_argument("--out", type=Path, default=REPO / "bench-out",
                    help="snapshot cache and results directory (default bench-out/)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="interleaved rounds; medians are reported (default 3)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds before a command is killed (default 600)")
    ap.add_argument("--generate-only", action="store_true",
                    help="only generate (or reuse) the snapshots, then stop")
    ap.add_argument("--strict", action="store_true", help="also exit 1 when a row misses its goal")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="another checkout (with its .venv) benched alongside, interleaved")
    ap.add_argument("--template-edits", action="store_true",
                    help="also render with the NodeFeature template edited (| trim, a conditional, a loop)")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.namespaces < 0 or args.timeout <= 0:
        ap.error("--repeat must be >= 1, --namespaces >= 0, --timeout > 0")
    if not set(args.yaml_sizes) <= set(args.sizes):
        ap.error("--yaml-sizes must be a subset of --sizes")

    out_dir: Path = args.out
    snapshots = []
    for n in args.sizes:
        snap = ensure_snapshot(out_dir, n, args.namespaces, args.seed)
        snapshots.append(snap)
        if n in args.yaml_sizes:
            snapshots.append(ensure_yaml(snap))
    for snap in snapshots:
        how = "cached" if snap.cached else f"generated in {snap.gen_seconds:.2f} s"
        print(f"snapshot {snap.nodes:,} nodes {snap.form}: {snap.path} ({snap.size / 1e6:.1f} MB, {how})",
              file=sys.stderr, flush=True)
    if args.generate_only:
        return 0

    cli = cli_prefix()
    # Bytecode for every module of the package, as an installed wheel has it: with
    # PYTHONDONTWRITEBYTECODE set (some CI images and this machine) every child would otherwise
    # compile the sources it imports again, or run stale caches through the compiler.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "gpustack_render")],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=False)
    probe(cli + ["--help"], REPO)   # warms up the file system caches
    before = load_average()
    rows = build_rows(snapshots, cli, out_dir, args.timeout)
    if args.template_edits:
        rows += template_edit_rows(snapshots, cli, out_dir, REPO)
    if args.baseline is not None:
        base_cli = [str(args.baseline.resolve() / ".venv" / "bin" / "gpustack-render")]
        subprocess.run([str(args.baseline / ".venv" / "bin" / "python"), "-m", "compileall", "-q",
                        str(args.baseline / "gpustack_render")], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, check=False)
        twins = build_rows(snapshots, base_cli, out_dir, args.timeout, args.baseline.resolve())
        if args.template_edits:
            twins += template_edit_rows(snapshots, base_cli, out_dir, args.baseline.resolve())
        # Paired by what they measure: a row the baseline has no command for (admit) runs alone.
        by_key = {(twin.label, twin.snapshot.nodes, twin.snapshot.form, twin.snapshot.path.name): twin
                  for twin in twins}
        for row in rows:
            row.baseline = by_key.get((row.label, row.snapshot.nodes, row.snapshot.form, row.snapshot.path.name))
    interpreters: list[float] = []
    for round_no in range(args.repeat):
        print(f"round {round_no + 1}/{args.repeat}", file=sys.stderr, flush=True)
        interpreters.append(run_measured([sys.executable, "-c", "pass"], args.timeout, REPO).wall)
        run_round(rows, args.timeout, round_no == 0, baseline_first=round_no % 2 == 1)
    interpreter = median(interpreters)
    for row in rows:
        row.floors = [f + interpreter for f in row.floors]
    report = render_report(rows, snapshots, args, cli, (before, load_average()), interpreter)
    print()
    print(report, end="")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.md").write_text(report)
    print(f"\n(written to {out_dir / 'results.md'})", file=sys.stderr)

    if any(r.failed for r in rows):
        return 1
    if args.strict and not all(goal_text(r, rows)[1] for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
