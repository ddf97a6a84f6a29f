"""Kubernetes grammar, in one place: object names, label keys and values, annotation keys,
object identity and field paths; quantities, canonical SI strings and FNV-1a 64 hashing.

Names and keys follow apimachinery's validation (``IsDNS1123Label``, ``IsQualifiedName``, …): Go's
``$`` is the end of the text, so every pattern ends in ``\\Z`` (Python's ``$`` would also accept a
trailing newline).

Capacity values in a snapshot are compared by numeric value, never by text, so every quantity is
parsed once into an exact ``Fraction`` (no float rounding, no ``Decimal`` context surprises).
Output strings must be byte-identical to what Kubernetes and the device manager write, so the
formatters follow stage3-node.md §3.2 and §3.3 literally.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from functools import lru_cache, reduce
from typing import Any, Iterable, Literal, Mapping

__all__ = [
    "QuantityError",
    "parse_quantity",
    "format_decimal_si",
    "format_binary_si",
    "quantity_ceil",
    "memory_label_mib",
    "format_binary_si_from_mib",
    "fnv1a64_hex",
    "Key",
    "identity",
    "label",
    "join_field",
    "field_path",
    "dns_label",
    "dns_subdomain",
    "qualified_name",
    "label_value",
    "valid_qualified_name",
    "valid_label_value",
    "LABEL_NAME",
    "QUALIFIED_KEY",
]


class QuantityError(ValueError):
    """A value is not a usable quantity; the message is a short phrase naming the value."""


# sign, integer digits, fraction digits, then an SI suffix or a decimal exponent. The lookahead
# demands at least one digit, so "5.", ".5" pass (as in Kubernetes) and ".", "+", "" do not.
_QUANTITY_RE = re.compile(
    r"([+-]?)(?=\.?[0-9])([0-9]*)(?:\.([0-9]*))?(?:([KMGTPE]i|[numkMGTPE])|[eE]([+-]?[0-9]+))?"
)
_DECIMAL_SUFFIX: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_BINARY_SUFFIX: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SI_BY_EXPONENT: dict[int, str] = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_UNITS: tuple[tuple[str, int], ...] = tuple(
    (unit, 1 << bits) for unit, bits in reversed(_BINARY_SUFFIX.items())
)
# Kubernetes itself bounds exponents (int32 scale); we bound them much lower so that a hostile or
# mistyped "1e999999999" cannot make an exact big-integer computation freeze the renderer.
_MAX_EXPONENT = 1000
_MIB = 1 << 20
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_U64 = 0xFFFFFFFFFFFFFFFF


def _invalid(value: object, what: str = "a valid quantity") -> QuantityError:
    """Build the error, quoting strings (cut if huge) so the offending text is visible."""
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:77] + "..."
        return QuantityError(f'"{shown}" is not {what}')
    return QuantityError(f"{value!r} is not {what}")


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    """Parse one quantity string; cached because snapshots repeat the same few values endlessly."""
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise _invalid(text)
    sign, whole, frac, suffix, exponent = match.groups()
    frac = frac or ""
    try:
        digits = int(whole + frac or "0")
        scale = -len(frac)
        if exponent is not None:
            scale += int(exponent)
        else:
            scale += _DECIMAL_SUFFIX.get(suffix or "", 0)
    except ValueError:  # more digits than int() accepts (sys.get_int_max_str_digits)
        raise _invalid(text, "a quantity in range") from None
    if digits == 0:
        return Fraction(0)  # "-0", "0e99999": zero whatever the scale
    if abs(scale) > _MAX_EXPONENT:
        raise _invalid(text, "a quantity in range")
    result = Fraction(digits * 10**scale) if scale >= 0 else Fraction(digits, 10**-scale)
    if suffix in _BINARY_SUFFIX:
        result *= 1 << _BINARY_SUFFIX[suffix]
    return -result if sign == "-" else result


def parse_quantity(value: str | int | float) -> Fraction:
    """Read a Kubernetes quantity (string, YAML int or finite float) as an exact value."""
    if isinstance(value, str):
        return _parse_text(value)
    if isinstance(value, bool):  # checked before int: bool is an int subclass, but never a size
        raise _invalid(value)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float) and math.isfinite(value):
        return Fraction(str(value))  # str() keeps what the YAML said: 0.1 stays 1/10
    raise _invalid(value)


def format_decimal_si(value: int) -> str:
    """Canonical DecimalSI text of an integer, as Kubernetes prints it (stage3-node.md §3.3)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"format_decimal_si needs an int, not {type(value).__name__}")
    if value == 0:
        return "0"
    digits = str(abs(value))
    zeros = len(digits) - len(digits.rstrip("0"))
    exponent = min(zeros - zeros % 3, 18)  # above 10**18 the mantissa grows: 10**21 -> "1000E"
    mantissa = digits[: len(digits) - exponent]
    return ("-" if value < 0 else "") + mantissa + _SI_BY_EXPONENT[exponent]


def format_binary_si(value: int) -> str:
    """BinarySI text of a whole number of bytes, as Kubernetes prints it: in the largest unit that
    divides it exactly, else plain bytes (``3Gi``, ``1536Mi``, ``1000``)."""
    for unit, factor in _BINARY_UNITS:  # largest unit first
        if value and value % factor == 0:
            return f"{value // factor}{unit}"
    return str(value)


def quantity_ceil(value: Fraction) -> int:
    """Round up to an integer: a fractional CPU still occupies a whole unit of capacity."""
    return math.ceil(value)


@lru_cache(maxsize=1024)
def memory_label_mib(text: str) -> int:
    """MiB read back from an ``<aKey>.memory`` label: floor(bytes / 2**20), lossy by design."""
    size = parse_quantity(text)
    if size < 0:
        raise _invalid(text, "a valid memory size")
    return size.numerator // (size.denominator * _MIB)


def format_binary_si_from_mib(mib: int) -> str:
    """The ``.memory`` label the device manager writes for a card's MiB (stage3-node.md §3.2)."""
    if isinstance(mib, bool) or not isinstance(mib, int) or mib < 0:
        raise _invalid(mib, "a valid MiB count")
    size = mib * _MIB
    for unit, factor in _BINARY_UNITS:  # largest unit first
        if size >= factor:
            return f"{(size + factor // 2) // factor}{unit}"  # round half up
    return str(size)  # below 1 Ki: plain bytes (only 0 here, since the input is whole MiB)


@lru_cache(maxsize=4096)
def fnv1a64_hex(text: str) -> str:
    """FNV-1a 64 of the UTF-8 bytes as 16 zero-padded hex digits: stable short names for objects."""
    h = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _U64
    return f"{h:016x}"


# ------------------------------------------------------------------------------------------------
# Names, label keys and values (apimachinery/pkg/util/validation)

_DNS_LABEL_PART = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_PART = rf"{_DNS_LABEL_PART}(\.{_DNS_LABEL_PART})*"
_NAME_PART = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_DNS_LABEL = re.compile(rf"{_DNS_LABEL_PART}\Z")
_DNS_SUBDOMAIN = re.compile(rf"{_DNS_SUBDOMAIN_PART}\Z")
_LABEL_VALUE = re.compile(rf"({_NAME_PART})?\Z")
# The name part of a label or annotation key (no length limit: callers apply their own).
LABEL_NAME = re.compile(rf"{_NAME_PART}\Z")
# A whole ``[prefix/]name`` key, prefix a DNS subdomain (no length limits).
QUALIFIED_KEY = re.compile(rf"({_DNS_SUBDOMAIN_PART}/)?{_NAME_PART}\Z")


def dns_label(value: str) -> str | None:
    if len(value) > 63:
        return f"{value!r} is longer than 63 characters (DNS-1123 label)"
    return None if _DNS_LABEL.match(value) else \
        f"{value!r} is not a DNS-1123 label (lower-case alphanumerics and '-', alphanumeric at both ends)"


def dns_subdomain(value: str) -> str | None:
    if len(value) > 253:
        return f"{value!r} is longer than 253 characters (DNS-1123 subdomain)"
    return None if _DNS_SUBDOMAIN.match(value) else \
        f"{value!r} is not a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.', alphanumeric at both ends)"


def qualified_name(key: str) -> str | None:
    """Label and annotation keys: ``[prefix/]name``, prefix a DNS subdomain, name 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"key {key!r} has an empty prefix"
    if slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"key {key!r}: prefix is not a DNS-1123 subdomain of at most 253 characters"
    if not name or len(name) > 63:
        return f"key {key!r}: name part must be 1-63 characters"
    if not LABEL_NAME.match(name):
        return f"key {key!r}: name part must be alphanumerics, '-', '_' or '.', alphanumeric at both ends"
    return None


def label_value(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"value must be a string, got {value!r}"
    if len(value) > 63:
        return f"value {value!r} is longer than 63 characters"
    return None if _LABEL_VALUE.match(value) else \
        f"value {value!r} must be alphanumerics, '-', '_' or '.', alphanumeric at both ends"


def valid_qualified_name(key: str) -> bool:
    """Whether ``key`` is a valid label/annotation key (the yes/no of :func:`qualified_name`)."""
    return qualified_name(key) is None


def valid_label_value(value: str) -> bool:
    return label_value(value) is None


# ------------------------------------------------------------------------------------------------
# Object identity and field paths

Key = tuple[str, str, str, str]  # (API group, kind, namespace, name)


def mapping_field(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is a mapping, else an empty one: readers of manifests are lenient (a
    field of the wrong type is validation's to report), and typed callers need a mapping either way."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def is_list_kind(kind: Any) -> bool:
    """Whether ``kind`` names a list (``List``, ``NodeList``, ...): kubectl's way of holding many
    objects in one document, whose ``items`` are the objects."""
    return isinstance(kind, str) and kind.endswith("List")


def identity(obj: dict[str, Any]) -> Key:
    """What the API server keys an object by: apiVersion group (not version), kind, namespace,
    name; a missing part is ``""``. Callers that must refuse incomplete objects check first."""
    meta = obj.get("metadata") or {}
    api = str(obj.get("apiVersion") or "")
    return api.rpartition("/")[0], str(obj.get("kind") or ""), str(meta.get("namespace") or ""), \
        str(meta.get("name") or "")


def label(key: Key) -> str:
    """``Kind/name`` or ``Kind/namespace/name``, as every message of the tool names objects."""
    _, kind, namespace, name = key
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


KeyStyle = Literal["quoted", "json", "dotted"]
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _plain(key: str, style: KeyStyle) -> bool:
    if style == "dotted":
        return True
    if style == "json":
        return bool(key) and all(c.isalnum() or c == "_" for c in key)
    return bool(_PLAIN_KEY.match(key))


def _bracketed(key: str, style: KeyStyle) -> str:
    if style == "json":
        return json.dumps(key)
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def join_field(path: str, key: Any, style: KeyStyle = "quoted") -> str:
    """``path`` and one more step: ``[0]`` for an index, ``.key`` for a plain key, else the key
    bracketed and quoted. The style of a key is what each message kept from before they shared this
    helper: ``quoted`` (diff, validate: plain words dotted, others in escaped double quotes), ``json``
    (explain, test cases: word characters dotted, others as JSON strings) and ``dotted`` (input
    errors: every key dotted as it is)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if _plain(text, style):
        return f"{path}.{text}" if path else text
    return f"{path}[{_bracketed(text, style)}]"


def field_path(parts: Iterable[Any], style: KeyStyle = "quoted") -> str:
    """``spec.resourceGroups[0].flavors`` / ``metadata.labels["kubernetes.io/arch"]``."""
    return reduce(lambda path, key: join_field(path, key, style), parts, "")
