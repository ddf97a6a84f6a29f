"""YAML and JSON input/output.

Two loaders on purpose: bulk snapshot data goes through stdlib ``json`` or libyaml (PyYAML's C
loader), because pure-Python YAML loaders take minutes on 40 MB snapshots; rule files go through
ruamel's round-trip loader, slow but it remembers line and column for error messages.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError

from gpustack_render.errors import Problem, UserError

_CLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class BulkLoader(_CLoader):  # type: ignore[misc, valid-type]
    """libyaml safe loader that keeps timestamps as the strings kubectl printed."""


BulkLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _CLoader.yaml_implicit_resolvers.items()
}


class StreamDumper(_CDumper):  # type: ignore[misc, valid-type]
    """libyaml dumper; key order is decided by the caller, never re-sorted here."""


# Plain scalars that a YAML 1.2 reader (kustomize, kubectl, Go yaml.v3) would not read as strings.
# PyYAML only knows YAML 1.1's resolvers, which miss e.g. ``1e3`` and ``0o17``.
_YAML12_NON_STRING = re.compile(
    r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+"
    r"|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|true|True|TRUE|false|False|FALSE|null|Null|NULL|~|)$")


def _represent_str(dumper: Any, value: str) -> Any:
    if _YAML12_NON_STRING.match(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    return dumper.represent_str(value)


StreamDumper.add_representer(str, _represent_str)


_JSON_START = re.compile(r"\s*[\[{]")


def parse_documents(text: str, source: str) -> list[Any]:
    """Parse a snapshot file's text (JSON, or a YAML stream) into its documents.

    JSON is tried first only when the text looks like JSON: every JSON document is YAML, but the
    JSON parser is an order of magnitude faster.
    """
    if _JSON_START.match(text):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as err:
            if source.endswith(".json"):
                raise UserError([Problem(f"invalid JSON: {err.msg}", file=source, line=err.lineno,
                                         column=err.colno)]) from None
    try:
        return [doc for doc in yaml.load_all(text, Loader=BulkLoader) if doc is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        reason = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError([Problem(f"invalid YAML: {reason}", file=source,
                                 line=mark.line + 1 if mark else None,
                                 column=mark.column + 1 if mark else None)]) from None


def read_text(path: Path, display: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError.single("not UTF-8 text", file=display) from None
    except OSError as err:
        raise UserError.single(f"cannot read: {err.strerror or err}", file=display) from None


def load_roundtrip(path: Path, display: str) -> Any:
    """Load one rule file with positions (ruamel round-trip) for ``file:line:col`` messages."""
    text = read_text(path, display)
    loader = YAML(typ="rt")
    try:
        return loader.load(text)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise UserError([Problem(f"invalid YAML: {err.problem or err.context}", file=display,
                                 line=mark.line + 1 if mark else None,
                                 column=mark.column + 1 if mark else None)]) from None
    except Exception as err:  # ruamel raises a few non-marked errors (duplicate keys, ...)
        raise UserError([Problem(f"invalid YAML: {str(err).splitlines()[0]}", file=display)]) from None


def dump_yaml_stream(objects: Iterable[Any]) -> str:
    """A multi-document YAML stream, every document opened by ``---``."""
    return yaml.dump_all(list(objects), Dumper=StreamDumper, sort_keys=False, explicit_start=True,
                         default_flow_style=False, allow_unicode=True, width=1 << 20)


def dump_yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=StreamDumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 20)


def load_yaml_text(text: str) -> Iterator[Any]:
    """Fast parse of text the tool produced itself (rendered templates)."""
    return yaml.load_all(text, Loader=BulkLoader)


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
