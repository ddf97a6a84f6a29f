"""Which plain YAML scalars mean something other than their string, for both directions.

Output (:mod:`gpustack_render.yamlio`'s writers): a string is written plain only when no reader of
the output would read it back as another type. The output is read by many readers: kubectl / Argo
CD (sigs.k8s.io/yaml, go-yaml v2: YAML 1.1 with ``y``/``n``, Go number syntax), kustomize and Go
yaml.v3, ruamel.yaml (YAML 1.1 or 1.2), PyYAML; so :func:`read_as_non_string` answers "not a string"
when any of them would read something else, and :func:`plainly_plain` says which short words are
written as they are.

Input (:mod:`gpustack_render.snapshot.yamlread`): snapshots are read as YAML 1.1, as PyYAML (and
kubectl) read them, but by rapidyaml, a YAML 1.2 reader, whenever the two agree; the ``GUARD_*``
expressions below are the scalars on which they may not, which send a file to libyaml.

The tables are the YAML 1.1 spec and the YAML 1.2 core schema as ruamel.yaml ships them (public:
``ruamel.yaml.resolver.implicit_resolvers``, each entry with the first characters its expression can
start with), PyYAML's resolver table (keyed by first character) and the Go readers' extensions below.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml
from ruamel.yaml.resolver import implicit_resolvers as _ruamel_implicit_resolvers

STR_TAG = "tag:yaml.org,2002:str"
_ANY_FIRST = None  # an expression that may start with any character (or match the empty string)

# The YAML 1.1 spec and YAML 1.2 core schema tables (booleans incl. y/n/on/off, ints in every base
# with ``_``, sexagesimals, floats, ``.inf``/``.nan``, null, ``<<``, ``=``, timestamps): every entry
# whose tag is not ``str``, whatever the version, with the characters it can start with.
_SPEC: tuple[tuple[Any, frozenset[str] | None], ...] = tuple(
    (regexp, _ANY_FIRST if "" in first else frozenset(first))
    for _versions, tag, regexp, first in _ruamel_implicit_resolvers if tag != STR_TAG)
SPEC_NON_STRING = tuple(regexp for regexp, _first in _SPEC)

# PyYAML's own resolver (the writer's dumper and the libyaml loader resolve plain scalars by it):
# first character (None: any) → [(tag, regexp)].
PYYAML_RESOLVERS: dict[Any, list[tuple[str, Any]]] = yaml.resolver.Resolver.yaml_implicit_resolvers

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
_GO_TIMESTAMP_FIRST = frozenset("0123456789")
# The reserved words in any spelling of their case: no reader should have to agree on ``tRUE``.
_WORDS_ANY_CASE = re.compile(r"(?i:y|n|yes|no|on|off|true|false|null|~|[-+]?\.inf|\.nan)")
_WORDS_ANY_CASE_FIRST = frozenset("yYnNoOtTfF~+-.")


def _branch(regexp: Any) -> str:
    """``regexp`` as one branch of a combined expression (its flags scoped to it)."""
    pattern, flags = regexp.pattern, regexp.flags
    if flags & ~(re.VERBOSE | re.UNICODE):
        raise AssertionError(f"cannot combine {pattern!r}")
    # verbose: the newline ends a trailing comment before the group closes
    return f"(?x:{pattern}\n)" if flags & re.VERBOSE else f"(?:{pattern})"


@lru_cache(maxsize=None)
def _spec_non_string() -> re.Pattern[str]:
    """:data:`SPEC_NON_STRING` as one expression: ``match`` succeeds exactly when one of them does.
    Tried one by one through ruamel's lazy wrappers they cost 20 us per distinct string, a tenth of
    a second for the values of a 10,000-Node render."""
    return re.compile("|".join(map(_branch, SPEC_NON_STRING)))


_SPEC_ONE_BY_ONE = [2_000]  # strings tried one expression at a time before the combined one pays its compile


def _spec_match(value: str) -> bool:
    """Whether one of :data:`SPEC_NON_STRING` matches ``value`` (the same answer either way)."""
    if _SPEC_ONE_BY_ONE[0] > 0:
        _SPEC_ONE_BY_ONE[0] -= 1
        return any(regexp.match(value) for regexp in SPEC_NON_STRING)
    return _spec_non_string().match(value) is not None


@lru_cache(maxsize=1 << 16)
def read_as_non_string(value: str) -> bool:
    """Whether some YAML reader of our output would read the plain scalar ``value`` as something
    other than that same string (cached: label values repeat across thousands of objects)."""
    if _spec_match(value):
        return True
    if _WORDS_ANY_CASE.fullmatch(value) or _GO_TIMESTAMP.fullmatch(value):
        return True
    return bool(value) and value[0] in _GO_NUMBER_START and bool(_GO_NUMBER.fullmatch(value.replace("_", "")))


_PLAINLY_PLAIN = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./+-]*\Z")


def plainly_plain(value: str) -> bool:
    """A short word of safe characters that every reader takes for a string: written as it is."""
    if len(value) > 128:
        return False
    fast = LETTER_WORD[0]
    if fast is not None:
        if fast.match(value):
            return True
    elif _ONE_BY_ONE[0] > 0:
        _ONE_BY_ONE[0] -= 1
    else:
        LETTER_WORD[0] = _letter_word()
    if not _PLAINLY_PLAIN.match(value) or value.startswith("..."):
        return False
    if read_as_non_string(value):
        return False
    return not any(regexp.match(value)
                   for _tag, regexp in PYYAML_RESOLVERS.get(value[0], []) + PYYAML_RESOLVERS.get(None, []))


_ONE_BY_ONE = [250]  # words judged the long way before the combined expression pays its compile (the demo: 173)
LETTER_WORD: list[re.Pattern[str] | None] = [None]  # _letter_word(), once compiled


def _letter_word() -> re.Pattern[str]:
    """What :func:`plainly_plain` says yes to for a word starting with an ASCII letter, in one
    expression: a :data:`_PLAINLY_PLAIN` word (a letter never starts ``...`` nor a Go number) that
    no expression able to start with a letter matches (:func:`_letter_checks`). One that matches
    nothing when they cannot be combined: every word is then judged the long way."""
    try:
        return re.compile(f"(?!{_letter_checks()})[A-Za-z][A-Za-z0-9_./+-]*\\Z")
    except (AssertionError, re.error):
        return re.compile("(?!)")


_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _checked_first_characters() -> dict[tuple[Any, bool], frozenset[str] | None]:
    """Every expression :func:`plainly_plain` asks (whole: matched to the end), in the order it asks
    them, with the characters it can start with as its table says: ruamel's list, PyYAML's keys
    (every key it is filed under), ours as written beside them; ``None`` for any."""
    found: dict[tuple[Any, bool], frozenset[str] | None] = {}

    def add(regexp: Any, whole: bool, first: frozenset[str] | None) -> None:
        known = found.get((regexp, whole), frozenset())
        found[(regexp, whole)] = None if known is None or first is None else known | first
    for regexp, first in _SPEC:
        add(regexp, False, first)
    add(_WORDS_ANY_CASE, True, _WORDS_ANY_CASE_FIRST)
    add(_GO_TIMESTAMP, True, _GO_TIMESTAMP_FIRST)
    for key, resolvers in PYYAML_RESOLVERS.items():
        for _tag, regexp in resolvers:
            add(regexp, False, _ANY_FIRST if not key else frozenset(key))
    return found


def _letter_checks() -> str:
    """One expression (its text) whose ``match`` succeeds on a word starting with an ASCII letter
    whenever one of those :func:`plainly_plain` asks does: each expression that can start with a
    letter (:func:`_checked_first_characters`), the reserved words and Go timestamps whole."""
    branches = []
    for (regexp, whole), first in _checked_first_characters().items():
        if first is not None and first.isdisjoint(_ASCII_LETTERS):
            continue
        branch = _branch(regexp)
        branches.append(branch + r"\Z" if whole else branch)
    return "|".join(branches) or "(?!)"


# --- the input guard: what rapidyaml (YAML 1.2) may read otherwise than PyYAML (YAML 1.1) ---------
# RE2 syntax (bytes, no look-around), matched by snapshot.yamlread's pre-scan at a plain value or key.
# YAML 1.1's other booleans and nulls (``yes``, ``On``, ``True``, ``Null``, ``~``), ``inf``/``nan`` in
# any spelling, ``<<`` and ``=`` (the spec tables' bool, null, float, merge and value entries beyond
# YAML 1.2's lower-case ``true``/``false``/``null``):
GUARD_WORDS = (rb"yes|Yes|YES|no|No|NO|True|TRUE|False|FALSE|on|On|ON|off|Off|OFF|Null|NULL|~|<<|="
               rb"|[-+]?\.?(?i:inf|infinity|nan)")
# As a key, the lower-case words too: PyYAML makes them a bool or None, not a string key.
GUARD_KEY_WORDS = GUARD_WORDS + rb"|true|false|null"
# Every int but a plain decimal of at most 18 digits (the spec tables' int entries: octal, hex,
# binary, ``_``, sexagesimal, ``+``; and what rapidyaml's JSON would write past 64 bits):
GUARD_ODD_INT = (rb"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?0x[0-9a-fA-F_]+"
                 rb"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"
                 rb"|\+[0-9_]+|-?[0-9]*_[0-9_]*|-?[1-9][0-9]{18,}")
# Every float (YAML 1.1 wants a ``.`` where 1.2 takes ``1e3``; rapidyaml's JSON rewrites ``5.``):
GUARD_ANY_FLOAT = rb"[-+]?[0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
# A plain key that does not start as a word does: a number, ``~``, ``<<``, ``=``, ``.inf``, ...
GUARD_KEY_START = rb"[+.0-9~<=]"
