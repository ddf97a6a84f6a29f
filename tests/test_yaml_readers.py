"""One YAML reader of data (issue 22, point 4), the scalar rules in one module, no private APIs (point 6).

Snapshots, CRDs, kustomization files, kubeconfigs and case files are read by
``gpustack_render.snapshot.yamlread`` alone (rapidyaml behind the YAML 1.1 pre-scan, libyaml for the
rest); rule files and templates by the rules reader (``rulesyaml``: ruamel). The package reads no private attribute of another library.
"""

from __future__ import annotations

import ast
from pathlib import Path
import pytest
import yaml
from test_speed_snapshot import _typed
from test_yaml_quoting import TRICKY_VALUES

from gpustack_render import yamlio, yamlscalars
from gpustack_render.errors import UserError
from gpustack_render.snapshot import yamlread

PACKAGE = Path(__file__).resolve().parent.parent / "gpustack_render"
# yaml.<name> that parse text; PyYAML's loaders (naming one chooses a reader).
_YAML_READING = {"load", "load_all", "safe_load", "safe_load_all", "full_load", "full_load_all", "unsafe_load",
                 "compose", "compose_all", "parse", "scan", "SafeLoader", "CSafeLoader", "Loader", "CLoader",
                 "FullLoader", "CFullLoader", "BaseLoader", "CBaseLoader", "UnsafeLoader"}
# The readers: data (yamlread) and the rule files' positional one (rulesyaml, ruamel's round-trip loader).
_READERS = {"snapshot/yamlread.py", "rulesyaml.py"}
# Names with a leading underscore that are their library's documented API.
_DOCUMENTED = {"os._exit", "sys._getframe"}
# BaseModel's class attributes listed in pydantic's API reference (``__pydantic_fields_complete__``,
# which is not, was read before).
_PYDANTIC_DOCUMENTED = {"__pydantic_decorators__", "__pydantic_root_model__", "__pydantic_complete__",
                        "__pydantic_post_init__", "__pydantic_custom_init__", "__pydantic_fields__"}


def _modules() -> list[tuple[str, ast.AST]]:
    return [(str(path.relative_to(PACKAGE)), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(PACKAGE.rglob("*.py"))]


def test_yaml_text_is_read_only_by_the_readers() -> None:
    """No module but the two readers asks PyYAML (or rapidyaml) to read text."""
    found = []
    for name, tree in _modules():
        if name in _READERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml" \
                    and node.attr in _YAML_READING:
                found.append(f"{name}:{node.lineno}: yaml.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module == "yaml" \
                    and any(alias.name in _YAML_READING for alias in node.names):
                found.append(f"{name}:{node.lineno}: from yaml import ...")
            elif isinstance(node, ast.Import) and any(alias.name == "ryml" for alias in node.names):
                found.append(f"{name}:{node.lineno}: import ryml")
    assert not found, "YAML read outside the readers:\n" + "\n".join(found)


def test_no_private_attribute_of_another_library() -> None:
    """``from re import _parser``, ``json.decoder.scanstring`` (typeshed leaves it out: it is not
    json's API) and the like: a module of another library and a name of it starting with ``_``."""
    found = []
    for name, tree in _modules():
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                                if not alias.name.startswith("gpustack_render"))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level \
                    and not node.module.startswith(("gpustack_render", "__future__")):
                if any(alias.name.startswith("_") for alias in node.names) or "._" in f".{node.module}":
                    found.append(f"{name}:{node.lineno}: from {node.module} import "
                                 + ", ".join(alias.name for alias in node.names))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (node.attr in ("scanstring", "_parser", "_constants")
                                                    or node.attr.startswith("__pydantic_")
                                                    and node.attr not in _PYDANTIC_DOCUMENTED):
                found.append(f"{name}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in imported and node.attr.startswith("_") and not node.attr.startswith("__") \
                    and f"{node.value.id}.{node.attr}" not in _DOCUMENTED:
                found.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, "private attributes of other libraries:\n" + "\n".join(found)


def test_the_writer_uses_the_shared_scalar_rules() -> None:
    """The writer's quoting decisions are yamlscalars' (one copy): the dumper's resolver table is
    the one the rules read, and the helpers the writer calls are those of yamlscalars."""
    assert yamlio.StreamDumper.yaml_implicit_resolvers is yamlscalars.PYYAML_RESOLVERS
    assert yamlio.read_as_non_string is yamlscalars.read_as_non_string
    assert yamlio._plainly_plain is yamlscalars.plainly_plain


def test_letter_word_expression_needs_no_regexp_parser() -> None:
    """The combined letter-word expression (built from the tables' first characters) agrees with the
    long way on words that start with a letter, reserved words in odd case included."""
    fast = yamlscalars._letter_word()
    words = ["gpustack", "nvidia-l4", "yes", "Yes", "yEs", "No", "n", "y", "on", "OFF", "true", "tRUE", "Null",
             "nULL", "null", "e3", "inf", "nan", "a1:2", "x=y", "v1beta2", "NaN", "Infinity", "true1", "nope"]
    for word in words:
        long_way = bool(yamlscalars._PLAINLY_PLAIN.match(word)) and not yamlscalars.read_as_non_string(word) \
            and not any(regexp.match(word) for _tag, regexp in
                        yamlscalars.PYYAML_RESOLVERS.get(word[0], []) + yamlscalars.PYYAML_RESOLVERS.get(None, []))
        assert bool(fast.match(word)) == long_way, word


@pytest.mark.parametrize("value", TRICKY_VALUES)
def test_every_string_the_writer_quotes_is_sent_to_libyaml_or_read_alike(value: str) -> None:
    """Both directions of the rules: a plain scalar the writer would quote (some reader takes it for
    another type) is, on input, either sent by the pre-scan to libyaml or read by rapidyaml exactly
    as libyaml reads it (types included)."""
    assert yamlscalars.read_as_non_string(value) or value == ""
    for where in ("k: {}\n", "{}: v\n", "- {}\n", "a:\n  - {}\n", "- {}: 1\n"):
        text = where.format(value)
        fast = yamlread._rapid_documents(text)
        try:
            slow = [doc for doc in yaml.load_all(text, Loader=yamlread.BulkLoader) if doc is not None]
        except yaml.YAMLError:
            assert fast is None, text
            continue
        assert fast is None or _typed(fast) == _typed(slow), text


def test_documents_read_yaml_1_1_and_keep_timestamps_as_text() -> None:
    text = "a: yes\nb: 0777\nc: 1:20\nd: 2001-12-14\ne: plain\n"
    assert yamlread.documents(text) == [{"a": True, "b": 511, "c": 80, "d": "2001-12-14", "e": "plain"}]
    assert yamlread._rapid_documents(text) is None  # (the pre-scan sent it to libyaml)
    clean = "kind: List\nitems:\n- name: x\n  count: 3\n---\n---\nother: true\n"
    assert yamlread._rapid_documents(clean) == yamlread.documents(clean) == [
        {"kind": "List", "items": [{"name": "x", "count": 3}]}, {"other": True}]


def test_document_is_exactly_one_document() -> None:
    assert yamlread.document("a: 1\n") == {"a": 1}
    assert yamlread.document("") is None
    assert yamlread.document("---\na: 1\n") == {"a": 1}
    for stream in ("a: 1\n---\nb: 2\n", "---\na: 1\n---\n"):
        with pytest.raises(yamlread.Invalid) as caught:
            yamlread.document(stream)
        assert caught.value.reason == "but found another document" and caught.value.line is not None  # (libyaml's words)


def test_invalid_yaml_is_worded_with_its_position() -> None:
    with pytest.raises(yamlread.Invalid) as caught:
        yamlread.documents("a: 1\nb: [\n")
    assert (caught.value.line, caught.value.column) == (3, 1) and caught.value.reason


def test_verbose_names_libyaml_when_it_reads(tmp_path: Path) -> None:
    """-v names the one choice the reader makes: a file the pre-scan sends to libyaml; the demo's
    snapshot files are all read by rapidyaml."""
    from cli_invoke import invoke
    demo = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
    assert "by libyaml" not in invoke("-v", "render", str(demo)).stderr
    extra = tmp_path / "ns.yaml"
    extra.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-zz\n  labels:\n    x: yes\n")
    result = invoke("-v", "render", str(demo), str(extra))
    assert result.exit_code == 0 and "read: YAML by libyaml, not rapidyaml" in result.stderr


def test_nesting_past_libyaml_limit_is_invalid_yaml_to_every_caller() -> None:
    """Case files, kubeconfigs, a previous kustomization: an error their callers word (Invalid), not a
    RecursionError; parse_documents words it as the interpreter's limit, as for JSON."""
    deep = "x: " + "[" * 3000 + "]" * 3000 + "\n"
    with pytest.raises(yamlread.Invalid):
        yamlread.documents(deep)
    with pytest.raises(yamlread.Invalid):
        yamlread.document(deep)
    with pytest.raises(UserError) as caught:
        yamlread.parse_documents(deep, "f.yaml")
    assert str(caught.value).endswith("cannot be read: nested too deeply")
