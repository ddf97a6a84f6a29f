"""Rule files and templates have one reader, :mod:`gpustack_render.rulesyaml` (ruamel's round-trip
loader, YAML 1.2), which gives every key, value and item its position (issue 22, point 4).

- plain scalars are typed as YAML 1.2 reads them: ``yes``/``on``/``y`` stay strings, ``0777`` is a
  whole number (ruamel's ScalarInt keeps its width), ``True``/``~`` as YAML 1.2 has them;
- the positions of keys, values, items and a collection's start are ruamel's marks;
- text that is not YAML is one ``invalid YAML`` problem at its ``file:line:col``;
- nothing else in the package reads rule files or templates (no second reader beside it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ruamel.yaml.scalarint import ScalarInt

from gpustack_render import rulesyaml
from gpustack_render.errors import UserError

PACKAGE = Path(__file__).resolve().parents[1] / "gpustack_render"


def test_plain_scalars_are_read_as_yaml_1_2() -> None:
    text = "a: yes\nb: on\nc: y\nd: 0\ne: 007\nf: -12\ng: True\nh: ~\ni: nUll\nj: 0777\nk: +5\nl: FALSE\nm: 1.5\n"
    data = rulesyaml.parse(text, "r.yaml")
    assert [data[k] for k in "abc"] == ["yes", "on", "y"] and all(type(data[k]) is str for k in "abc")
    assert data["d"] == 0 and data["e"] == 7 and data["f"] == -12 and data["j"] == 777 and data["k"] == 5
    assert isinstance(data["e"], ScalarInt) and data["e"]._width == 3  # noqa: SLF001 - the width it keeps
    assert data["g"] is True and data["l"] is False and data["h"] is None
    assert data["i"] == "nUll" and data["m"] == 1.5


def test_positions_are_those_of_the_file() -> None:
    text = "kind: X\nitems:\n  - a\n  - {b: 1}\nmap:\n    deep: v\n"
    data = rulesyaml.parse(text, "r.yaml")
    assert rulesyaml.key_at(data, "items") == (1, 0)
    assert rulesyaml.value_at(data, "kind") == (0, 6)
    assert rulesyaml.item_at(data["items"], 1) == (3, 4)
    assert rulesyaml.value_at(data["items"][1], "b") == (3, 8)
    assert rulesyaml.start_of(data["map"]) == (5, 4)
    assert rulesyaml.start_of(data) == (0, 0)


def test_data_not_read_from_a_file_has_no_positions() -> None:
    plain = {"a": [1]}
    assert rulesyaml.key_at(plain, "a") is None and rulesyaml.item_at(plain["a"], 0) is None
    assert rulesyaml.start_of(plain) is None


@pytest.mark.parametrize("text, line, column, words", [
    ("a: [b\n", 2, 1, "expected ',' or ']'"),
    ("a: 1\na: 2\n", 2, 1, 'found duplicate key "a"'),
    ("a:\tb\n", 1, 3, "found character '\\t' that cannot start any token"),
    ('a: "\\q"\n', 1, 6, "found unknown escape character 'q'"),
])
def test_text_that_is_not_yaml_is_one_problem_at_its_place(text: str, line: int, column: int, words: str) -> None:
    with pytest.raises(UserError) as raised:
        rulesyaml.parse(text, "r.yaml")
    [problem] = raised.value.problems
    assert problem.file == "r.yaml" and problem.message.startswith("invalid YAML: ")
    assert words in problem.message and (problem.line, problem.column) == (line, column)


def test_no_other_module_reads_rule_files_or_templates() -> None:
    """ruamel's loader is used by rulesyaml alone; yamlpos is gone."""
    assert not (PACKAGE / "yamlpos.py").exists()
    users = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "ruamel.yaml" and \
                    any(alias.name == "YAML" for alias in node.names):
                users.append(path.relative_to(PACKAGE).as_posix())
    assert users == ["rulesyaml.py"]


def test_lint_reads_each_rule_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``lint`` tells where each kind comes from and every problem from one reading of the files
    (it used to resolve the directory twice: once for the sources, once to load), and a directory
    with a file of every kind does not read the built-in files it inherits none of."""
    from gpustack_render.rules.lint import lint_rules
    rules = tmp_path / "rules"
    rules.mkdir()
    for path in sorted((PACKAGE.parent / "rules").glob("*.yaml")):
        (rules / path.name).write_text(path.read_text(encoding="utf-8") + f"# {tmp_path.name}\n", encoding="utf-8")
    read: list[str] = []
    real = rulesyaml.load

    def counted(path: Path, display: str) -> object:
        read.append(display)
        return real(path, display)

    monkeypatch.setattr(rulesyaml, "load", counted)
    result = lint_rules(rules)
    assert result.ok and len(result.kinds) > 10
    assert sorted(read) == sorted(set(read)) and len(read) == len(list(rules.glob("*.yaml")))
