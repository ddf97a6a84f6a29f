"""A snapshot object its model refuses, worded: every refusal as (field, message), from msgspec's own
``ValidationError`` (its path ``$.status.capacity`` and its reason) and the value at that path.

msgspec stops at an object's first refusal; :func:`convert` asks again with the refused value
replaced by one the model accepts (:func:`_stand_in`, from the model's own type information) until
the model accepts what is left, so an object with several problems is reported with all of them,
in the model's field order, as a user fixing a file by hand needs. The words are the snapshot's
own: ``required field is missing``, ``expected an integer, got 'x'``, ``expected a mapping, got
list``, and a conversion's refusal (a quantity, a label value, an allocation mode) as the model
words it (:class:`inputs.FieldError`).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gpustack_render.snapshot.inputs import MODE_FIELD, FieldError, Loc, Model, mode_refusal

_MOST = 20  # refusals of one object at most (each costs a conversion)
_ERROR = re.compile(r"(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?\Z", re.S)
_KEY_ERROR = re.compile(r"(?P<msg>.*) - at `key` in `\$(?P<path>[^`]*)`\Z", re.S)  # a mapping's key refused
_PART = re.compile(r"\.(?P<key>[^.\[]+)|\[(?P<index>\d+|\.\.\.)\]")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]*)`\Z")
_EXPECTED = re.compile(r"Expected `(?P<want>[^`]*)`(?:, got `[^`]*`)?(?P<rest>.*)\Z", re.S)
_WORDS = {"str": "a string", "int": "an integer", "bool": "a boolean", "array": "a list", "object": "a mapping",
          "float": "a number"}
_NON_EMPTY = " of length >= 1"
_KEY = ("[key]",)  # after a mapping's key in a field's path: the key itself is refused


class Refused(Exception):
    """The model refused the object: ``refusals`` is every (field, message)."""

    def __init__(self, refusals: list[tuple[Loc, str]]) -> None:
        super().__init__(refusals)
        self.refusals = refusals


def convert(model: Model, obj: dict[str, Any]) -> Any:
    """``obj`` (plain data) typed by ``model``; raises :class:`Refused` with every refusal.

    A key that is not a string (a YAML number) where the model has an object's fields is ignored,
    as any other key the model does not name is: msgspec refuses it, so it is left out and ``obj``
    converted again (only plain data from a YAML file, on this refusal, pays for that)."""
    try:
        return msgspec.convert(obj, model)
    except msgspec.ValidationError:
        pass
    info = msgspec.inspect.type_info(model)
    obj, typed, err = _converted(model, info, obj)
    if err is None:
        return typed
    raise Refused(_every(model, info, obj, err))


def _converted(model: Model, info: _Type, obj: Any) -> tuple[Any, Any, msgspec.ValidationError | None]:
    """(``obj`` without the keys :func:`_without_other_keys` leaves out, it typed or its refusal)."""
    while True:
        try:
            return obj, msgspec.convert(obj, model), None
        except msgspec.ValidationError as err:
            fewer = _without_other_keys(info, obj, str(err))
            if fewer is _NOWHERE:
                return obj, None, err
            obj = fewer


def _without_other_keys(info: _Type, obj: Any, text: str) -> Any:
    """``obj`` without the keys that are not strings of the object msgspec refused them in, when
    the model has fields there (not a mapping of its own); else :data:`_NOWHERE`."""
    key_refused = _KEY_ERROR.match(split(text)[0])
    if not key_refused:
        return _NOWHERE
    loc = _loc(key_refused["path"])
    kind, value = _type_at(info, loc), _at(obj, loc)
    if kind is None or not isinstance(_member(kind, ""), msgspec.inspect.StructType) or not isinstance(value, dict):
        return _NOWHERE
    return _replaced(obj, loc, {key: item for key, item in value.items() if isinstance(key, str)})


def _every(model: Model, info: _Type, obj: dict[str, Any], err: msgspec.ValidationError) -> list[tuple[Loc, str]]:
    found: dict[Loc, str] = {}
    rest: Any = obj
    while len(found) < _MOST:
        loc, message, at = worded(err, rest)
        if loc[-1:] == _KEY:
            loc, message, at = _value_first(model, rest, at) or (loc, message, at)
        if loc in found:
            break
        found[loc] = message
        kind = _type_at(info, at)
        rest = _NOWHERE if kind is None else _replaced(rest, at, _stand_in(kind))
        if rest is _NOWHERE:
            break
        rest, _, again = _converted(model, info, rest)
        if again is None:
            break
        err = again
    return sorted(found.items(), key=lambda item: _field_order(info, item[0]))


def _value_first(model: Model, obj: Any, at: Loc) -> tuple[Loc, str, Loc] | None:
    """A mapping with a key that is not a string (refused first by msgspec) and a value its model
    refuses: the value's refusal, as the model words it about the key as text."""
    value = _at(obj, at)
    if not isinstance(value, dict):
        return None
    try:
        msgspec.convert(_replaced(obj, at, {str(key): item for key, item in value.items()}), model)
    except msgspec.ValidationError as err:
        if isinstance(err.__cause__, FieldError):
            refused = worded(err, obj)
            return refused if refused[0][:len(at)] == at else None
    return None


def worded(err: msgspec.ValidationError, obj: Any) -> tuple[Loc, str, Loc]:
    """The field msgspec's refusal of ``obj`` names, why, in the snapshot's words, and the field a
    value the model accepts must stand in for to find the next refusal."""
    message, loc = split(str(err))
    key_refused = _KEY_ERROR.match(message)
    if key_refused:
        message, loc = key_refused["msg"], _loc(key_refused["path"])
    cause = err.__cause__
    if isinstance(cause, FieldError):
        return loc + cause.loc, str(cause), loc + cause.field
    missing = _MISSING.match(message)
    if missing:
        return loc + (missing["field"],), "required field is missing", loc + (missing["field"],)
    value = _at(obj, loc)
    if key_refused and isinstance(value, dict):  # a mapping's key of another type than a string (a YAML number)
        key: Any = next((key for key in value if not isinstance(key, str)), "")
        return loc + (key,) + _KEY, f"expected a string, got {_shown(key)}", loc  # (the mapping stands in)
    if loc[-1:] == (MODE_FIELD,):
        return loc, mode_refusal(value), loc
    expected = _EXPECTED.match(message)
    if expected:
        wanted = [_WORDS.get(w, w) for w in expected["want"].split(" | ") if w != "null"]
        if expected["rest"] == _NON_EMPTY and wanted == ["a string"]:
            wanted = ["a non-empty string"]
        return loc, f"expected {' or '.join(wanted)}, got {_shown(value)}", loc
    return loc, message[:1].lower() + message[1:], loc


def _shown(value: Any) -> str:
    return "null" if value is None else type(value).__name__ if isinstance(value, (dict, list)) else repr(value)


def split(text: str) -> tuple[str, Loc]:
    """A msgspec refusal's text → its reason and the field it names (``$.spec.podSets[0]`` → ``("spec",
    "podSets", 0)``; ``()`` where it names none)."""
    match = _ERROR.match(text)
    assert match is not None  # (the pattern matches any text)
    return match["msg"], _loc(match["path"] or "")


def _loc(path: str) -> Loc:
    parts: list[str | int] = []
    for part in _PART.finditer(path):
        if part["key"] is not None:
            parts.append(part["key"])
        elif part["index"] != "...":  # a mapping's value: msgspec does not say which key
            parts.append(int(part["index"]))
    return tuple(parts)


def _at(obj: Any, loc: Loc) -> Any:
    """The value at ``loc`` inside ``obj`` (``None`` where there is none)."""
    for part in loc:
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, list) and isinstance(part, int) and part < len(obj):
            obj = obj[part]
        else:
            return None
    return obj


_NOWHERE = object()  # (a path that does not lead anywhere in the object)


def _replaced(obj: Any, loc: Loc, value: Any) -> Any:
    """A copy of ``obj`` with ``value`` at ``loc`` (a missing mapping entry added); :data:`_NOWHERE`
    when ``loc`` does not lead there."""
    if not loc:
        return value
    head, rest = loc[0], loc[1:]
    if isinstance(obj, dict) and isinstance(head, str) and (head in obj or not rest):
        inner = _replaced(obj.get(head), rest, value)
        return _NOWHERE if inner is _NOWHERE else {**obj, head: inner}
    if isinstance(obj, list) and isinstance(head, int) and head < len(obj):
        inner = _replaced(obj[head], rest, value)
        return _NOWHERE if inner is _NOWHERE else [*obj[:head], inner, *obj[head + 1:]]
    return _NOWHERE


_Type = msgspec.inspect.Type


def _member(kind: _Type, part: str | int) -> _Type:
    """Of a union, the member a path goes on through (a struct or mapping by key, a list by index)."""
    if isinstance(kind, msgspec.inspect.UnionType):
        want = (msgspec.inspect.StructType, msgspec.inspect.DictType) if isinstance(part, str) \
            else (msgspec.inspect.ListType,)
        return next((member for member in kind.types if isinstance(member, want)), kind)
    return kind


def _step(kind: _Type, part: str | int) -> tuple[int, _Type | None]:
    """The position of ``part`` in ``kind`` (a field's index, an item's) and the type there."""
    kind = _member(kind, part)
    if isinstance(kind, msgspec.inspect.StructType) and isinstance(part, str):
        names = [field.encode_name for field in kind.fields]
        return (names.index(part), kind.fields[names.index(part)].type) if part in names else (len(names), None)
    if isinstance(kind, msgspec.inspect.ListType) and isinstance(part, int):
        return part, kind.item_type
    if isinstance(kind, msgspec.inspect.DictType):
        return 0, kind.value_type
    return 0, None


def _type_at(kind: _Type | None, loc: Loc) -> _Type | None:
    for part in loc:
        if kind is None:
            return None
        kind = _step(kind, part)[1]
    return kind


def _field_order(kind: _Type | None, loc: Loc) -> tuple[int, ...]:
    """Where ``loc`` comes in the model's field order (the order its refusals are reported in)."""
    order = []
    for part in loc:
        position, kind = _step(kind, part) if kind is not None else (0, None)
        order.append(position)
    return tuple(order)


def _stand_in(kind: _Type) -> Any:
    """A value of type ``kind`` the model accepts, put where a refused one was to find the next refusal."""
    kind = _member(kind, "")
    if isinstance(kind, msgspec.inspect.UnionType):
        kind = kind.types[0]
    if isinstance(kind, msgspec.inspect.StructType):
        return {field.encode_name: _stand_in(field.type) for field in kind.fields if field.required}
    if isinstance(kind, msgspec.inspect.StrType):
        return "x" * (kind.min_length or 0)
    if isinstance(kind, msgspec.inspect.IntType):
        return kind.ge or 0
    stand_ins: dict[type, Any] = {msgspec.inspect.BoolType: False, msgspec.inspect.FloatType: 0.0,
                                  msgspec.inspect.ListType: [], msgspec.inspect.DictType: {},
                                  msgspec.inspect.AnyType: "0"}  # (Any: a quantity's text, say)
    return stand_ins.get(type(kind))
