"""``diff --guard-removals``: the per-kind half rule as a CI guard (issue 24 point 5). A snapshot whose
count labels are typed as words (``four``) gives those Nodes no flavor, and their pools leave the
render; the guard refuses that (exit 2, nothing on stdout) where ``diff`` alone only warns."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from cli_invoke import invoke

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"


def _miscounted(tmp: Path, *cards: str) -> Path:
    target = tmp / "snapshot"
    shutil.copytree(DEMO, target)
    nodes = target / "nodes.yaml"
    text = nodes.read_text(encoding="utf-8")
    for card in cards:
        text, n = re.subn(rf"(acceleratable\.feature\.gpustack\.ai/{card}\.count: )\S+", r"\1four", text)
        assert n, card
    nodes.write_text(text, encoding="utf-8")
    return target


def _previous(tmp: Path) -> Path:
    result = invoke("render", DEMO, "-o", tmp / "previous")
    assert result.exit_code == 0, result.stderr
    return tmp / "previous"


def test_guard_refuses_a_kind_losing_more_than_half(tmp_path: Path) -> None:
    previous, snapshot = _previous(tmp_path), _miscounted(tmp_path, "nvidia-a10g", "nvidia-tesla-t4")
    warned = invoke("diff", snapshot, "--against", previous)
    assert warned.exit_code == 1 and "removed" in warned.stdout   # without the flag: a diff and warnings
    assert "diff: 2 of 3 owned ClusterQueue objects would be removed (more than half)" in warned.stderr
    guarded = invoke("diff", snapshot, "--against", previous, "--guard-removals", "--format", "markdown")
    assert (guarded.exit_code, guarded.stdout) == (2, "")
    assert guarded.stderr.splitlines()[-1] == (
        "gpustack-render: error: more than half of a kind's owned objects would be removed (InstanceType 2 of 3, "
        "ClusterQueue 2 of 3, LocalQueue 4 of 6); refused by --guard-removals: check the snapshot and the rules")


def test_guard_lets_smaller_removals_through_and_max_removals_caps_them(tmp_path: Path) -> None:
    previous, snapshot = _previous(tmp_path), _miscounted(tmp_path, "nvidia-a10g")  # one pool of three
    result = invoke("diff", snapshot, "--against", previous, "--guard-removals")
    assert result.exit_code == 1 and "0 added, 0 changed, 5 removed" in result.stdout, result.stderr
    capped = invoke("diff", snapshot, "--against", previous, "--guard-removals", "--max-removals", "2")
    assert (capped.exit_code, capped.stdout) == (2, "")
    assert "5 owned objects would be removed (ResourceFlavor 1, InstanceType 1, ClusterQueue 1, LocalQueue 2), " \
           "more than --max-removals 2" in capped.stderr
    # Nothing removed: the guard says nothing.
    same = invoke("diff", DEMO, "--against", previous, "--guard-removals")
    assert (same.exit_code, same.stderr) == (0, ""), same.stderr
