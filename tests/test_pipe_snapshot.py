"""A snapshot given as a pipe (``render <(kubectl get ... -o yaml)``) is read once, as stdin is: a
pipe read a second time is empty, so a file the fast readers declined lost its objects (a render
without them) and a duplicate across files was called "changed while it was read"."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Callable

import pytest

from cli_invoke import REPO, CliResult

DEMO = REPO / "fixtures/demo"
REST = [str(DEMO / "devices.yaml"), str(DEMO / "namespaces.json")]


def _fifo(tmp_path: Path, text: str) -> Path:
    """A named pipe that gives ``text`` to its first reader and nothing to any later one (a later
    open gets end of file at once, as ``<(...)`` gives, instead of waiting for a writer forever)."""
    path = tmp_path / "nodes.yaml"
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w", encoding="utf-8") as pipe:
            pipe.write(text)
        while True:  # a daemon thread: it ends with the test process
            with open(path, "w", encoding="utf-8"):
                pass
    threading.Thread(target=write, daemon=True).start()
    return path


def _declined_by_the_fast_reader() -> str:
    """The demo Nodes with a YAML 1.1 boolean, which the rapidyaml pre-scan sends to libyaml."""
    text = (DEMO / "nodes.yaml").read_text()
    return text.replace("metadata:\n", "metadata:\n  annotations:\n    note: yes\n", 1)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("text", [(DEMO / "nodes.yaml").read_text(), _declined_by_the_fast_reader()],
                         ids=["fast-reader", "libyaml"])
def test_a_pipe_renders_as_the_file(cli: Callable[..., CliResult], tmp_path: Path, text: str) -> None:
    regular = tmp_path / "regular.yaml"
    regular.write_text(text)
    expected = cli("render", regular, *REST)
    assert expected.exit_code == 0, expected.output
    piped = cli("render", _fifo(tmp_path, text), *REST)
    assert (piped.exit_code, piped.stdout) == (0, expected.stdout), piped.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_pipe_holding_a_duplicate_is_no_conflict(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    text = (DEMO / "nodes.yaml").read_text()
    piped = cli("render", DEMO, _fifo(tmp_path, text))
    assert (piped.exit_code, piped.stdout) == (0, cli("render", DEMO).stdout), piped.output


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("edit", [("", ""), ("node-a10g", "node-zzz")], ids=["unchanged", "changed"])
def test_a_previous_render_from_a_pipe_diffs_as_the_file(cli: Callable[..., CliResult], tmp_path: Path,
                                                         edit: tuple[str, str]) -> None:
    """``diff --against <(cat prev.yaml)``: was "listed in kustomization.yaml but missing", exit 2."""
    previous = cli("render", DEMO).stdout.replace(*edit)
    regular = tmp_path / "prev.yaml"
    regular.write_text(previous)
    expected = cli("diff", "--against", regular, DEMO)
    assert expected.exit_code in (0, 1), expected.output
    piped = cli("diff", "--against", _fifo(tmp_path, previous), DEMO)
    assert (piped.exit_code, piped.stdout, piped.stderr) == (expected.exit_code, expected.stdout, expected.stderr)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("reader", ["diff --against", "read_manifests"])
def test_a_named_pipe_given_is_not_probed(cli: Callable[..., CliResult], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """The non-blocking probe of regular files (``manifests._read_bytes``) must not open a named
    pipe given as the path: its writer's one open can meet the probe, which closes without reading,
    and the real read then gets nothing (a previous render read as empty: everything "added") or
    waits for ever. Both places that probe (``diff/current`` and ``manifests``) are watched."""
    from gpustack_render.diff import current
    from gpustack_render.diff import manifests

    probed: list[str] = []
    real = manifests._read_bytes

    def probe(file: Path | str, dir_fd: int | None = None) -> bytes | None:
        probed.append(str(file))
        if stat.S_ISFIFO(os.stat(file, dir_fd=dir_fd).st_mode):  # not opened: a failure, not a hang
            return None
        return real(file, dir_fd)

    monkeypatch.setattr(manifests, "_read_bytes", probe)
    monkeypatch.setattr(current, "_read_bytes", probe)
    previous = cli("render", DEMO).stdout
    regular = tmp_path / "prev.yaml"
    regular.write_text(previous)

    def read(path: Path) -> object:
        if reader == "read_manifests":
            return manifests.read_manifests(path)
        result = cli("diff", "--against", path, DEMO)
        return result.exit_code, result.stdout, result.stderr

    expected = read(regular)
    assert str(regular) in probed  # a regular file is probed: the watch sees the probes
    pipe = _fifo(tmp_path, previous)
    assert read(pipe) == expected
    assert str(pipe) not in probed
