"""Every `lint` problem has a position (issue 11): a file's frame — a missing top-level key, a
misspelt ``apiVersion``, a deleted or non-string ``kind``, a file that is a list — points at the
nearest key or, when there is none, at the document's first key. Lines are found in the edited text."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from gpustack_render.cli import main

RULES = Path(__file__).resolve().parents[1] / "rules"


def copy_rules(tmp_path: Path) -> Path:
    dest = tmp_path / "rules"
    shutil.copytree(RULES, dest)
    return dest


def line_of(path: Path, pattern: str) -> int:
    """The 1-based line of the first line matching ``pattern`` (a regex anchored at the line start)."""
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if re.match(pattern, text):
            return number
    raise AssertionError(f"{pattern!r} not in {path}")


def first_key_line(path: Path) -> int:
    """The first line that is neither a comment nor blank nor a document marker: where the data begins."""
    return line_of(path, r"(?!#|---|\s*$)")


def lint(rules: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["lint", "--rules", str(rules)])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    return result.exit_code, result.output.splitlines()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert re.search(old, text, flags=re.M), old
    path.write_text(re.sub(old, new, text, count=1, flags=re.M), encoding="utf-8")


def drop_block(path: Path, key: str) -> None:
    """Delete the top-level ``key`` and its indented lines."""
    lines, out, skipping = path.read_text(encoding="utf-8").splitlines(keepends=True), [], False
    for line in lines:
        if line.startswith(f"{key}:"):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\n"))):
            continue
        skipping = False
        out.append(line)
    path.write_text("".join(out), encoding="utf-8")


def test_missing_top_level_key_points_at_the_first_key(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    path = rules / "lifecycle.yaml"
    drop_block(path, "markers")
    code, lines = lint(rules)
    assert code == 1
    assert f"{path}:{first_key_line(path)}:1: error: markers: required key is missing" in lines, lines


def test_misspelt_apiversion_points_at_the_misspelt_key(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    path = rules / "topology.yaml"
    edit(path, r"^apiVersion:", "apiVersoin:")
    code, lines = lint(rules)
    assert code == 1
    assert (f"{path}:{line_of(path, 'apiVersoin:')}:1: error: apiVersion: apiVersion must be "
            "render.gpustack.ai/v1alpha1") in lines, lines


def test_deleted_kind_points_at_the_first_key(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    path = rules / "namespaces.yaml"
    edit(path, r"^kind:.*\n", "")
    code, lines = lint(rules)
    assert code == 1
    assert f"{path}:{first_key_line(path)}:1: error: kind: unknown rule kind None" in lines, lines


def test_a_list_file_points_at_its_first_item(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    path = rules / "output.yaml"
    path.write_text("# not a mapping\n- kind: Output\n- b\n", encoding="utf-8")
    code, lines = lint(rules)
    assert code == 1
    assert f"{path}:2:1: error: a rule file must be a mapping with apiVersion and kind" in lines, lines


def test_kind_as_a_list_or_mapping_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    """Found by the fuzz run: ``kind: [a, b]`` crashed with "unhashable type"."""
    rules = copy_rules(tmp_path)
    diff, vocab = rules / "diff.yaml", rules / "vocabulary.yaml"
    edit(diff, r"^kind:.*$", "kind: [Diff, Output]")
    edit(vocab, r"^kind:.*$", "kind: {name: Vocabulary}")
    code, lines = lint(rules)
    assert code == 1
    for path, shape in ((diff, "a list"), (vocab, "a mapping")):
        line = line_of(path, "kind:")  # a list or mapping is pointed at by its key, as everywhere
        assert f"{path}:{line}:1: error: kind: expected a string, got {shape}" in lines, lines
    render = CliRunner().invoke(main, ["render", "fixtures/demo", "--rules", str(rules)])
    assert render.exit_code == 2 and "expected a string, got a list" in render.output, render.output


def test_every_problem_of_a_broken_frame_has_a_position(tmp_path: Path) -> None:
    rules = copy_rules(tmp_path)
    drop_block(rules / "lifecycle.yaml", "markers")
    edit(rules / "topology.yaml", r"^apiVersion:", "apiVersoin:")
    edit(rules / "namespaces.yaml", r"^kind:.*\n", "")
    (rules / "output.yaml").write_text("- a\n", encoding="utf-8")
    code, lines = lint(rules)
    assert code == 1
    errors = [line for line in lines if ": error: " in line and not line.startswith(f"{rules}: ")]
    assert len(errors) == 4, lines
    assert all(re.match(rf"^{re.escape(str(rules))}/[\w.-]+:\d+:\d+: error: ", line) for line in errors), errors
