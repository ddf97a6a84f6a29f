"""Byte-exact goldens of the demo render (what ``make run`` prints), its JSON form and the catalog.

The goldens live in ``tests/golden/``. After an intended output change, regenerate them with

    .venv/bin/python -m pytest tests/test_golden.py --update-goldens
    (or GPUSTACK_RENDER_UPDATE_GOLDENS=1, the switch `gpustack-render test` reads too)

and review ``git diff tests/golden`` before committing: a golden is only as good as that review.
Without the flag a missing golden fails (it is never written silently).
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from cli_invoke import invoke

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
DIFF_LINES = 60

GOLDENS = {
    # golden file: command line after `python -m gpustack_render`
    "demo-render.yaml": ("render", "fixtures/demo"),  # = `make run`
    "demo-render.json": ("render", "fixtures/demo", "--format", "json"),
    "demo-catalog.yaml": ("catalog", "fixtures/demo"),
}


def run(args: tuple[str, ...]) -> bytes:
    """The command's stdout, byte for byte (in process; test_smoke.py checks the console script
    prints the same for ``make run``)."""
    proc = invoke(*args)
    assert proc.returncode == 0, f"gpustack-render {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout_bytes


def first_lines_of_diff(want: bytes, got: bytes, name: str) -> str:
    diff = list(difflib.unified_diff(
        want.decode("utf-8", errors="replace").splitlines(keepends=True),
        got.decode("utf-8", errors="replace").splitlines(keepends=True),
        fromfile=f"tests/golden/{name} (golden)", tofile=f"{name} (current output)",
    ))
    shown = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                    for line in diff[:DIFF_LINES])
    if len(diff) > DIFF_LINES:
        shown += f"... ({len(diff) - DIFF_LINES} more diff lines)\n"
    if not diff:  # same text lines, so the bytes differ in a way splitlines hides (e.g. \r\n)
        shown = f"(no line differences; bytes differ: golden {len(want)} B, current {len(got)} B)\n"
    return shown


@pytest.mark.parametrize("name", GOLDENS)
def test_golden(name, update_goldens):
    args = GOLDENS[name]
    got = run(args)
    path = GOLDEN_DIR / name
    if update_goldens:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != got:
            path.write_bytes(got)
        return
    if not path.is_file():
        pytest.fail(f"golden tests/golden/{name} is missing: run "
                    f"`.venv/bin/python -m pytest tests/test_golden.py --update-goldens` "
                    f"and review the diff (git diff tests/golden) before committing", pytrace=False)
    want = path.read_bytes()
    if got != want:
        pytest.fail(
            f"`gpustack-render {' '.join(args)}` no longer matches tests/golden/{name}.\n"
            f"If the change is intended, run `.venv/bin/python -m pytest tests/test_golden.py "
            f"--update-goldens` and review the diff.\n"
            + first_lines_of_diff(want, got, name),
            pytrace=False,
        )


def test_make_run_is_the_render_golden():
    """`make run` renders `fixtures/demo` with the console script; the golden is that output."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "gpustack-render render fixtures/demo" in makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0], \
        "`make run` no longer renders fixtures/demo; update GOLDENS['demo-render.yaml']"
