"""Python's own limits met by a snapshot or a previous render are bad input (exit 2, one line naming
the file), never an internal error: nesting deeper than the recursion limit (json.loads, msgspec
and libyaml's constructor all refuse it) and an integer longer than the digits Python converts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

import pytest

from cli_invoke import CliResult

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "8"}}}
DEEP = "[" * 3000 + "]" * 3000
LONG = "9" * (sys.get_int_max_str_digits() + 1)


def _json(extra: str, at: str = '"kind": "Node"') -> str:
    """A List of one Node with ``"x": extra`` after ``at`` (by default in the Node itself)."""
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [NODE]})
    return text.replace(at, f'{at}, "x": {extra}')


def _yaml(extra: str) -> str:
    return f"apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nx: {extra}\n"


CASES = {"json-deep": (_json(DEEP), ".json", "nested too deeply"),
         # (in an ignored field the typed reader skips the number unconverted: a capacity is read)
         "json-long": (_json(LONG, at='"cpu": "8"'), ".json", f"a number longer than {sys.get_int_max_str_digits()} digits"),
         "yaml-deep": (_yaml(DEEP), ".yaml", "nested too deeply"),
         "yaml-long": (_yaml(LONG), ".yaml", f"a number longer than {sys.get_int_max_str_digits()} digits")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_snapshot_file_past_a_limit_is_one_error_line(cli: Callable[..., CliResult], tmp_path: Path, case: str) -> None:
    text, suffix, reason = CASES[case]
    path = tmp_path / f"snap{suffix}"
    path.write_text(text)
    result = cli("render", path)
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr == f"gpustack-render: error: {path}: cannot be read: {reason}\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_stdin_past_a_limit_is_one_error_line(cli: Callable[..., CliResult], case: str) -> None:
    text, _, reason = CASES[case]
    result = cli("render", "-", input=text)
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr == f"gpustack-render: error: <stdin>: cannot be read: {reason}\n"


def test_previous_render_past_a_limit_is_one_error_line(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    previous = tmp_path / "previous.yaml"
    previous.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {DEEP}\n")
    result = cli("diff", "--against", previous, "fixtures/demo")
    assert result.exit_code == 2, result.output
    assert result.stderr.endswith(f"{previous}: cannot be read: nested too deeply\n")


def test_deep_but_within_the_limit_still_reads(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """The limit is Python's: nesting of a few dozen levels in an ignored field is just data."""
    path = tmp_path / "snap.json"
    path.write_text(_json("[" * 40 + "]" * 40))
    assert cli("render", path).exit_code == 0
