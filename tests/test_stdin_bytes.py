"""Standard input that is not UTF-8 is bad input, worded as a file's is (exit 2, one line), for every
command that reads it — never an internal error. Python hands such bytes over either as a decode
error or, under a C locale, as lone surrogates that only fail once something writes them."""

from __future__ import annotations

import subprocess
import sys
from typing import Callable

import pytest

from cli_invoke import REPO, CliResult

NOT_UTF8 = b'apiVersion: v1\nkind: Node\nmetadata:\n  name: "n\xff1"\n'
COMMANDS = [("render", "-"), ("catalog", "-"), ("node-patches", "-"), ("validate", "-"),
            ("diff", "--against", "-", "fixtures/demo")]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_stdin_not_utf8_is_one_error_line(cli: Callable[..., CliResult], args: tuple[str, ...]) -> None:
    result = cli(*args, input=NOT_UTF8)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr == "gpustack-render: error: <stdin>: not UTF-8 text\n"


@pytest.mark.parametrize("encoding", ["utf-8:strict", "utf-8:surrogateescape"])
def test_stdin_not_utf8_in_a_real_process(encoding: str) -> None:
    """The two ways Python decodes a pipe (strict, or surrogateescape as under a C locale)."""
    done = subprocess.run([sys.executable, "-m", "gpustack_render", "render", "-"], input=NOT_UTF8,
                          capture_output=True, cwd=REPO, env={"PYTHONIOENCODING": encoding, "PATH": ""})
    assert (done.returncode, done.stdout, done.stderr) == (2, b"", b"gpustack-render: error: <stdin>: not UTF-8 text\n")


def test_utf8_stdin_reads_as_the_file(cli: Callable[..., CliResult]) -> None:
    piped = cli("render", "-", input=(REPO / "fixtures/demo/nodes.yaml").read_bytes())
    direct = cli("render", "fixtures/demo/nodes.yaml")
    assert piped.exit_code == direct.exit_code == 0
    assert piped.stdout == direct.stdout
