"""A template that gives two objects one identity is the admin's mistake, worded as one line naming
both plan items (exit 2), whatever the plan item's class is made of (NodeFeaturePlan is slotted:
it has no ``__dict__``) — never an internal error."""

from __future__ import annotations

import re
import shutil
from typing import Callable

import pytest

from cli_invoke import REPO, CliResult

NAME_LINE = '  name: "{{ obj.name }}"'
TEMPLATES = sorted(p.name for p in (REPO / "templates").glob("*.yaml") if NAME_LINE in p.read_text())


@pytest.fixture(scope="module")
def kinds_with_twins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CliResult]:
    from cli_invoke import invoke
    results = {}
    for name in TEMPLATES:
        folder = tmp_path_factory.mktemp(name.split(".")[0])
        shutil.copytree(REPO / "templates", folder, dirs_exist_ok=True)
        path = folder / name
        path.write_text(path.read_text().replace(NAME_LINE, '  name: "same"'))
        results[name] = invoke("render", "fixtures/demo", "--templates", folder)
    return results


def test_some_kinds_have_several_objects_in_the_demo(kinds_with_twins: dict[str, CliResult]) -> None:
    """The test below must see twins of the one-per-Node kind and of another kind at least."""
    twins = [name for name, result in kinds_with_twins.items() if "rendered twice" in result.stderr]
    assert "NodeFeature.yaml" in twins and len(twins) >= 2, twins


@pytest.mark.parametrize("name", TEMPLATES)
def test_twins_are_one_error_line(kinds_with_twins: dict[str, CliResult], name: str) -> None:
    result = kinds_with_twins[name]
    if "rendered twice" not in result.stderr:  # one object of this kind in the demo: nothing to clash
        assert result.exit_code == 0, result.output
        return
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    line, = result.stderr.splitlines()
    kind = name.split(".")[0]
    assert re.fullmatch(rf"gpustack-render: error: \S+{re.escape(name)}: {kind}/(\S+/)?same: rendered twice: "
                        r"from \w+Plan\(name=[^)]*\) and from \w+Plan\(name=[^)]*\); .*", line), line
