"""Smoke tests of the real entry points, each in a child process: the console script, ``python -m
gpustack_render``, a closed stdout (SIGPIPE), a non-editable wheel, and the case runner's
child-process invoker. Everything else runs the CLI in process (tests/cli_invoke.py); these few
prove that the in-process runs stand for the real thing. (kubectl is run on in-process output in
test_node_patches_cli, test_output_consumers and test_yaml_quoting; the GitOps and workflow tests
run the console script from shell steps.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpustack_render import casetest

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
CONSOLE_SCRIPT = Path(sys.executable).parent / "gpustack-render"


def spawn(*argv: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The one child-process runner of the suite."""
    return subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, timeout=300)


def ok(proc: subprocess.CompletedProcess[bytes]) -> bytes:
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.args}\n{proc.stderr.decode(errors='replace')}"
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    return proc.stdout


def test_smoke_console_script_prints_the_make_run_golden() -> None:
    """`make run` is the console script on fixtures/demo: byte for byte tests/golden/demo-render.yaml."""
    assert CONSOLE_SCRIPT.is_file(), f"{CONSOLE_SCRIPT}: the console script is not installed in the venv"
    assert ok(spawn(str(CONSOLE_SCRIPT), "render", "fixtures/demo")) == \
        (REPO / "tests" / "golden" / "demo-render.yaml").read_bytes()


def test_smoke_python_m_lists_the_commands_and_exits_2_on_bad_input(tmp_path: Path) -> None:
    help_text = ok(spawn(sys.executable, "-m", "gpustack_render", "--help")).decode()
    for command in ("render", "node-patches", "diff", "validate", "snapshot", "pin", "test"):
        assert f"  {command} " in help_text, command
    bad = tmp_path / "nodes.yaml"
    bad.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {capacity: {cpu: eight}}\n")
    proc = spawn(sys.executable, "-m", "gpustack_render", "render", str(bad))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and proc.stdout == b"", err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and '"eight"' in err


def test_smoke_closed_stdout_ends_quietly() -> None:
    """``render | head -1`` where the reader is gone before the render writes: no message, no
    traceback; the exit status is SIGPIPE's (141), as kubectl's."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "gpustack_render", "render", str(DEMO)], stdout=write_end,
                              stderr=subprocess.PIPE, cwd=REPO, timeout=60)
    finally:
        os.close(write_end)
    assert proc.stderr.decode() == ""
    assert proc.returncode == 141


SMOKE_CASES = ["demo-default", "demo-catalog", "demo-node-patches", "set-invalid"]


@pytest.mark.parametrize("name", SMOKE_CASES)
def test_smoke_case_runner_in_process_equals_the_child_process(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process invoker (``gpustack-render test``, the pytest driver) prints what the CLI
    prints as a child process: same exit code, stdout and stderr (render, catalog, node-patches
    and an expected exit 2)."""
    case_dir = REPO / "fixtures" / "cases" / name
    assert (case_dir / casetest.CASE_FILE).is_file(), f"{case_dir}: smoke case missing"
    monkeypatch.chdir(REPO)
    argv = casetest.command_argv(casetest.load_case(case_dir), REPO)
    assert casetest.inprocess_invoker(argv, REPO) == casetest.subprocess_invoker(argv, REPO)


# --------------------------------------------------------------------------------------------
# a non-editable wheel
# --------------------------------------------------------------------------------------------

WHEEL_DATA = (
    "gpustack_render/_data/rules/naming.yaml",
    "gpustack_render/_data/templates/ClusterQueue.yaml",
)


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", str(out)]
    proc = subprocess.run([*pip, "--no-build-isolation", "."], cwd=REPO, capture_output=True, timeout=300)
    if proc.returncode != 0:
        # hatchling is not installed in the venv: let pip fetch it into an isolated build env
        first = proc.stderr.decode(errors="replace")[-2000:]
        proc = subprocess.run([*pip, "."], cwd=REPO, capture_output=True, timeout=600)
        assert proc.returncode == 0, (
            f"pip wheel failed with and without --no-build-isolation:\n{first}\n---\n"
            f"{proc.stderr.decode(errors='replace')[-3000:]}")
    wheels = sorted(out.glob("gpustack_render-*.whl"))
    assert len(wheels) == 1, f"expected one gpustack_render wheel in {out}: {os.listdir(out)}"
    unpacked = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheels[0]) as zf:
        names = set(zf.namelist())
        missing = [n for n in WHEEL_DATA if n not in names]
        assert not missing, f"wheel lacks package data {missing}; it has " + ", ".join(
            sorted(n for n in names if "_data" in n))
        zf.extractall(unpacked)
    return unpacked


def test_smoke_wheel_ships_default_rules_and_templates(unpacked_wheel):
    data = unpacked_wheel / "gpustack_render" / "_data"
    for sub in ("rules", "templates"):
        shipped = sorted(p.name for p in (data / sub).iterdir())
        source = sorted(p.name for p in (REPO / sub).iterdir() if p.is_file())
        assert shipped == source, f"{sub}: wheel {shipped} != source tree {source}"
        for name in source:
            assert (data / sub / name).read_bytes() == (REPO / sub / name).read_bytes(), f"{sub}/{name}"
    eps = list(unpacked_wheel.glob("gpustack_render-*.dist-info/entry_points.txt"))
    assert eps and "gpustack-render = gpustack_render.cli:main" in eps[0].read_text(), \
        "console script gpustack-render missing from the wheel"


def test_smoke_wheel_renders_like_the_source_tree(unpacked_wheel, tmp_path):
    empty = tmp_path / "empty-cwd"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(unpacked_wheel)}
    where = subprocess.run([sys.executable, "-c", "import gpustack_render; print(gpustack_render.__file__)"],
                           cwd=empty, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(unpacked_wheel.resolve()), (
        f"imported {where.stdout.strip()}, not the unpacked wheel: the test would prove nothing")
    proc = spawn(sys.executable, "-m", "gpustack_render", "render", str(DEMO.resolve()), cwd=empty, env=env)
    got = ok(proc)
    assert got == (REPO / "tests" / "golden" / "demo-render.yaml").read_bytes(), \
        "the wheel's render differs from the source tree's golden"
    assert list(empty.iterdir()) == [], "render wrote into the working directory"
    catalog = ok(spawn(sys.executable, "-m", "gpustack_render", "catalog", str(DEMO.resolve()), cwd=empty, env=env))
    assert catalog == (REPO / "tests" / "golden" / "demo-catalog.yaml").read_bytes()
