"""What an expression's value becomes in the object a template builds (tree.py): data, exactly
as the earlier text templates' ``q`` filter wrote it and YAML read it back; and the data maps'
tidying (labels and annotations: sorted, every value a string)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jinja2.runtime import Undefined

from gpustack_render.yamlio import is_text_map

# What PyYAML reads as a float (the JSON text of a float was read back by it): others stay text.
_YAML11_FLOAT = re.compile(r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?\Z")
_JSON_FLOAT = json.JSONEncoder().iterencode  # the stdlib's float text (repr, NaN, Infinity)


class Omit:
    """The ``omit`` marker."""

    def __repr__(self) -> str:
        return "omit"


OMIT = Omit()


class NotData(Exception):
    """A value that is not data (an object of the plan, a function, ``omit`` inside a value)."""


@dataclass
class Floats:
    """Whether a float was built (JSON output then takes the writer that formats floats)."""
    seen: bool = False


class Values:
    """How a value an expression gives becomes data, and the data maps' tidying."""

    def __init__(self) -> None:
        self.floats = Floats()

    def native(self, value: Any) -> Any:
        """:meth:`data`, or the ``omit`` marker itself (which a whole value may be)."""
        return value if value is OMIT else self.data(value)

    def data(self, value: Any, sort: bool | None = None) -> Any:
        """``value`` as data, exactly what its JSON read back as YAML gave (the earlier templates'
        ``q`` filter): mappings copied with keys written as JSON keys (and sorted, at every depth,
        when the value itself is a mapping: ``q`` sorted keys only then), tuples as lists, a float
        as the float or, when YAML 1.1 reads its JSON text as a string (``1e+16``, ``NaN``), that
        string."""
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            return value
        if sort is None:
            sort = isinstance(value, dict)
        if kind is dict:
            return {self._key(k): self.data(v, sort) for k, v in (sorted(value.items()) if sort else value.items())}
        if kind is list or kind is tuple:
            return [self.data(item, sort) for item in value]
        if isinstance(value, Undefined):
            str(value)  # raises the strict undefined's error
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, str):
            return str(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            text = next(_JSON_FLOAT(float(value)))
            if _YAML11_FLOAT.match(text):
                self.floats.seen = True
                return float(text)
            return text
        if isinstance(value, dict):
            return self.data(dict(value), sort)
        if isinstance(value, (list, tuple)):
            return self.data(list(value), sort)
        if value is OMIT:
            raise NotData("omit stands for a whole value (a key's or a list item's), not inside one")
        raise NotData(f"the value is a {kind.__name__}, not data (a string, number, boolean, null, "
                      f"mapping or list)")

    def _key(self, key: Any) -> str:
        if type(key) is str:
            return key
        value = self.key(key)
        return value if isinstance(value, str) else json.dumps(value)

    def key(self, key: Any) -> Any:
        """A key an expression gives: a string or another scalar, as data."""
        value = self.data(key)
        if isinstance(value, (dict, list)):
            raise NotData("a mapping key must be a scalar")
        return value

    def tidy(self, value: Any) -> Any:
        """A data map: sorted by key, every value a string (non-strings as their JSON)."""
        if type(value) is not dict:
            return value
        if is_text_map(value):
            return dict(sorted(value.items()))
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in sorted(value.items())}

    def tidy_native(self, value: Any) -> Any:
        """:meth:`tidy` of :meth:`native`: a mapping of strings is sorted once."""
        if type(value) is dict and is_text_map(value):
            return dict(sorted(value.items()))
        return self.tidy(self.native(value))

    def tidy_parent(self, value: Any, inner: tuple[str, ...]) -> Any:
        """``metadata`` or ``spec`` built as one value: its data maps tidied."""
        if type(value) is dict:
            for key in inner:
                if key in value:
                    value[key] = self.tidy(value[key])
        return value
