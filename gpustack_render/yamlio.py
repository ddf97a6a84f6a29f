"""YAML and JSON input/output.

Two loaders on purpose: bulk snapshot data goes through stdlib ``json`` or libyaml (PyYAML's C
loader), because pure-Python YAML loaders take minutes on 40 MB snapshots; rule files go through
ruamel's round-trip loader, slow but it remembers line and column for error messages.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.resolver import implicit_resolvers as _ruamel_implicit_resolvers

from gpustack_render.errors import Problem, UserError

_CLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class BulkLoader(_CLoader):  # type: ignore[misc, valid-type]
    """libyaml safe loader that keeps timestamps as the strings kubectl printed."""


BulkLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _CLoader.yaml_implicit_resolvers.items()
}


# Which plain scalars must be quoted is decided where PyYAML decides it: implicit resolution. The
# serializer asks the dumper's resolver what a plain scalar would be read as and quotes a string
# whenever the answer is not ``str``. PyYAML's own resolver knows only its YAML 1.1 subset, but the
# output is read by many readers: kubectl / Argo CD (sigs.k8s.io/yaml, go-yaml v2: YAML 1.1 with
# ``y``/``n``, Go number syntax), kustomize and Go yaml.v3, ruamel.yaml (YAML 1.1 or 1.2), PyYAML.
# So the dumper's resolver answers "not a string" when any of them would read something else.
_STR_TAG = "tag:yaml.org,2002:str"
_AMBIGUOUS_TAG = "tag:yaml.org,2002:x-ambiguous-plain-scalar"  # never written: the scalar is quoted

# The YAML 1.1 spec and YAML 1.2 core schema tables as ruamel.yaml ships them (booleans incl.
# y/n/on/off, ints in every base with ``_``, sexagesimals, floats, ``.inf``/``.nan``, null, ``<<``,
# ``=``, timestamps): every entry whose tag is not ``str``, whatever the version.
_SPEC_NON_STRING = tuple(regexp for _versions, tag, regexp, _first in _ruamel_implicit_resolvers
                         if tag != _STR_TAG)

# Go readers (go-yaml v2/v3 behind kubectl, Argo CD, kustomize) drop every ``_`` from a scalar that
# starts like a number, then accept what Go's strconv accepts: base prefixes in either case
# (``0X1F``, ``0O17``, ``0B1``), a leading-zero octal, a decimal float without a digit before the
# point or with an unsigned exponent (``.5e3``), and ``08`` as a float.
_GO_NUMBER_START = frozenset("0123456789+-.")
_GO_NUMBER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|[0-9]+"
                        r"|(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?)")
# go-yaml's timestamp layouts allow one-digit month, day, hour, minute and second (2006-1-2 3:4:5).
_GO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
                           r"(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]*)?"
                           r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::?[0-9]{2})?))?)?")
# The reserved words in any spelling of their case: no reader should have to agree on ``tRUE``.
_WORDS_ANY_CASE = re.compile(r"(?i:y|n|yes|no|on|off|true|false|null|~|[-+]?\.inf|\.nan)")


@lru_cache(maxsize=1 << 16)
def read_as_non_string(value: str) -> bool:
    """Whether some YAML reader of our output would read the plain scalar ``value`` as something
    other than that same string (cached: label values repeat across thousands of objects)."""
    if any(regexp.match(value) for regexp in _SPEC_NON_STRING):
        return True
    if _WORDS_ANY_CASE.fullmatch(value) or _GO_TIMESTAMP.fullmatch(value):
        return True
    return bool(value) and value[0] in _GO_NUMBER_START and bool(_GO_NUMBER.fullmatch(value.replace("_", "")))


class StreamDumper(_CDumper):  # type: ignore[misc, valid-type]
    """libyaml dumper; key order is decided by the caller, never re-sorted here. Strings that any
    reader would take for another type are quoted (see :func:`read_as_non_string`)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)
        if kind is yaml.ScalarNode and implicit[0] and tag == _STR_TAG and read_as_non_string(value):
            return _AMBIGUOUS_TAG
        return tag


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
