#!/usr/bin/env python3
"""Scale benchmark for gpustack-render (`make bench`).

For each size N (default 1,000 and 10,000 Nodes) a synthetic snapshot is generated into
bench-out/ by gen_snapshot.py (cached: reused while the parameters and the generator are
unchanged), then every command runs as its own child process:

    gpustack-render render SNAP                      (stdout to /dev/null, like all of them)
    gpustack-render render SNAP --format json
    gpustack-render catalog SNAP
    gpustack-render node-patches SNAP --format json  (only if `node-patches --help` exits 0)

Wall time is measured with time.perf_counter() around the child, peak RSS from the child's own
rusage (os.wait4). Results are printed as a Markdown table and written to bench-out/results.md.
Rows over the targets (10 s wall, 2 GiB peak RSS) are flagged; the wall-time ratio between the
largest and the smallest size is printed as a linearity check.

Exit status: 0 when every command succeeded, 1 when one failed or timed out (or, with --strict,
went over a target), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
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

WALL_TARGET_S = 10.0
RSS_TARGET_MIB = 2048.0
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


def run_measured(cmd: list[str], timeout: float, cwd: Path) -> Run:
    """Run cmd with stdout to /dev/null; wall time and the child's own peak RSS."""
    with tempfile.TemporaryFile() as err, open(os.devnull, "wb") as devnull:
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
@dataclass
class Row:
    label: str
    snapshot: Snapshot
    runs: list[Run] = field(default_factory=list)

    @property
    def failed(self) -> Run | None:
        return next((r for r in self.runs if not r.ok), None)

    @property
    def wall(self) -> float:
        return min(r.wall for r in self.runs)

    @property
    def rss(self) -> float:
        return max(r.rss_mib for r in self.runs)

    @property
    def over_wall(self) -> bool:
        return self.wall > WALL_TARGET_S

    @property
    def over_rss(self) -> bool:
        return self.rss > RSS_TARGET_MIB


def fmt_mib(mib: float) -> str:
    return f"{mib / 1024:g} GiB" if mib >= 1024 and mib % 1024 == 0 else f"{mib:g} MiB"


def stderr_tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    tail = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(tail) if tail else "(no stderr)"


def render_report(rows: list[Row], snapshots: list[Snapshot], args, cli: list[str],
                  startup: float | None, skipped: list[str]) -> str:
    out: list[str] = []
    out.append("# gpustack-render benchmark\n")
    out.append(f"- CLI: `{' '.join(cli)}`")
    out.append(f"- Python {platform.python_version()} on {platform.platform()}, "
               f"{os.cpu_count()} CPUs")
    out.append(f"- snapshots: seed {args.seed}, {args.namespaces} team namespaces; "
               + ", ".join(f"{s.nodes} nodes = {s.size / 1e6:.1f} MB"
                           + (" (cached)" if s.cached else f" (generated in {s.gen_seconds:.2f} s)")
                           for s in snapshots))
    out.append(f"- targets: wall <= {WALL_TARGET_S:g} s, peak RSS <= {fmt_mib(RSS_TARGET_MIB)};"
               f" best wall of {args.repeat} run(s), worst RSS")
    if startup is not None:
        out.append(f"- startup (`gpustack-render --help`): {startup:.2f} s")
    out.append(f"- RSS floor: a child's peak RSS includes this bench process's own high-water "
               f"mark, {self_maxrss_mib():.0f} MiB")
    for note in skipped:
        out.append(f"- skipped: {note}")
    out.append("")
    out.append("| command | nodes | snapshot MB | wall s | peak RSS MiB |")
    out.append("|---|---:|---:|---:|---:|")
    for row in rows:
        bad = row.failed
        wall = f"{row.wall:.2f}"
        rss = f"{row.rss:.0f}"
        if bad is not None:
            reason = "TIMEOUT" if bad.timed_out else f"exit {bad.exit_code}"
            wall = f"**FAILED ({reason})** {bad.wall:.2f}"
        elif row.over_wall:
            wall = f"**{wall} (over {WALL_TARGET_S:g} s)**"
        if row.over_rss:
            rss = f"**{rss} (over {fmt_mib(RSS_TARGET_MIB)})**"
        out.append(f"| `{row.label}` | {row.snapshot.nodes:,} | "
                   f"{row.snapshot.size / 1e6:.1f} | {wall} | {rss} |")

    sizes = sorted({r.snapshot.nodes for r in rows})
    if len(sizes) >= 2:
        lo, hi = sizes[0], sizes[-1]
        ideal = hi / lo
        out.append("")
        out.append(f"Linearity ({hi:,} vs {lo:,} nodes; linear = {ideal:.1f}x):")
        out.append("")
        for label in dict.fromkeys(r.label for r in rows):
            a = next((r for r in rows if r.label == label and r.snapshot.nodes == lo), None)
            b = next((r for r in rows if r.label == label and r.snapshot.nodes == hi), None)
            if a is None or b is None or a.failed or b.failed:
                out.append(f"- `{label}`: n/a (a run failed)")
                continue
            ratio = b.wall / a.wall if a.wall > 0 else float("inf")
            line = f"- `{label}`: wall {a.wall:.2f} s -> {b.wall:.2f} s = {ratio:.1f}x"
            if startup is not None and a.wall > startup * 1.05:
                net = (b.wall - startup) / (a.wall - startup)
                line += f" ({net:.1f}x net of startup)"
            if ratio > 1.5 * ideal:
                line += "  **superlinear**"
            rss_ratio = b.rss / a.rss if a.rss else float("inf")
            line += f"; peak RSS {a.rss:.0f} -> {b.rss:.0f} MiB = {rss_ratio:.1f}x"
            out.append(line)

    failures = [r for r in rows if r.failed]
    if failures:
        out.append("")
        out.append("Failures:")
        for row in failures:
            bad = row.failed
            what = (f"timed out after {args.timeout:g} s" if bad.timed_out
                    else f"exit code {bad.exit_code}")
            out.append("")
            out.append(f"- FAILED `{row.label}` on {row.snapshot.nodes:,} nodes: {what}; "
                       f"stderr tail:")
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


def main(argv: list[str] | None = None) -> int:
    global WALL_TARGET_S, RSS_TARGET_MIB
    ap = argparse.ArgumentParser(description="gpustack-render scale benchmark")
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1000,10000"),
                    help="comma-separated node counts (default 1000,10000)")
    ap.add_argument("--namespaces", type=int, default=100,
                    help="team namespaces in each snapshot (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    ap.add_argument("--out", type=Path, default=REPO / "bench-out",
                    help="snapshot cache and results directory (default bench-out/)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per command; the best wall time and the worst RSS are reported")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds before a command is killed (default 600)")
    ap.add_argument("--generate-only", action="store_true",
                    help="only generate (or reuse) the snapshots, then stop")
    ap.add_argument("--wall-target", type=float, default=WALL_TARGET_S,
                    help="flag rows slower than this many seconds (default %(default)g)")
    ap.add_argument("--rss-target-mib", type=float, default=RSS_TARGET_MIB,
                    help="flag rows whose peak RSS exceeds this (default %(default)g MiB)")
    ap.add_argument("--strict", action="store_true",
                    help="also exit 1 when a row is over the wall-time or RSS target")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.namespaces < 0 or args.timeout <= 0:
        ap.error("--repeat must be >= 1, --namespaces >= 0, --timeout > 0")
    WALL_TARGET_S, RSS_TARGET_MIB = args.wall_target, args.rss_target_mib

    out_dir: Path = args.out
    snapshots = []
    for n in args.sizes:
        snap = ensure_snapshot(out_dir, n, args.namespaces, args.seed)
        how = "cached" if snap.cached else f"generated in {snap.gen_seconds:.2f} s"
        print(f"snapshot {n:,} nodes: {snap.path} ({snap.size / 1e6:.1f} MB, {how})",
              file=sys.stderr, flush=True)
        snapshots.append(snap)
    if args.generate_only:
        return 0

    cli = cli_prefix()
    startup = None
    if probe(cli + ["--help"], REPO):   # also warms up bytecode caches
        startup = min(run_measured(cli + ["--help"], args.timeout, REPO).wall for _ in range(3))
    commands: list[tuple[str, list[str]]] = [
        ("render", ["render", "{snap}"]),
        ("render --format json", ["render", "{snap}", "--format", "json"]),
        ("catalog", ["catalog", "{snap}"]),
    ]
    skipped = []
    if probe(cli + ["node-patches", "--help"], REPO):
        commands.append(("node-patches --format json",
                         ["node-patches", "{snap}", "--format", "json"]))
    else:
        skipped.append("`node-patches` (`gpustack-render node-patches --help` did not exit 0)")

    rows: list[Row] = []
    for snap in snapshots:
        try:
            snap_arg = str(snap.path.relative_to(REPO))
        except ValueError:
            snap_arg = str(snap.path)
        for label, template in commands:
            row = Row(label, snap)
            cmd = cli + [snap_arg if part == "{snap}" else part for part in template]
            for _ in range(args.repeat):
                run = run_measured(cmd, args.timeout, REPO)
                row.runs.append(run)
                if not run.ok:
                    break
            r = row.runs[-1]
            status = "ok" if r.ok else ("TIMEOUT" if r.timed_out else f"exit {r.exit_code}")
            print(f"  {label:28s} {snap.nodes:>7,} nodes  {row.wall:7.2f} s  "
                  f"{row.rss:7.0f} MiB  {status}", file=sys.stderr, flush=True)
            rows.append(row)

    report = render_report(rows, snapshots, args, cli, startup, skipped)
    print()
    print(report, end="")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.md").write_text(report)
    print(f"\n(written to {out_dir / 'results.md'})", file=sys.stderr)

    if any(r.failed for r in rows):
        return 1
    if args.strict and any(r.over_wall or r.over_rss for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
