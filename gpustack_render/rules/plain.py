"""Rule-file models built from plainly valid data without pydantic's validators (issue 14).

Why: a process that validates its rule files with pydantic first builds the 14 kinds' validators
(schema generation, ~15 ms) and, on the first build, lets pydantic discover its plugins, which
imports ``importlib.metadata`` (~20 ms). Rule files are almost always valid, so a render paid
that in every process for a check that finds nothing.

This reads the schema from the models themselves (their ``model_fields`` and annotations in
:mod:`gpustack_render.rules.schema`; nothing of the schema is restated here) and walks the data
over a deliberately small subset of pydantic's vocabulary: exact ``str``/``int``/``bool``/``None``,
``Literal``, ``list``, ``dict``, unions of scalars, discriminated unions with a callable
discriminator, nested models, and the constraints ``StringConstraints`` (lengths, pattern),
``MinLen``/``MaxLen``, ``Gt``/``Ge``/``Lt``/``Le`` and ``AfterValidator``. Whatever lies outside
that subset (another annotation, config key, validator or alias form; a str subclass; a float
where an int is wanted; a value that fails any check) raises :class:`Declined`, and the caller
validates with pydantic exactly as before: every error (message, position) still comes from
pydantic's own path, and the fast path only ever produces what pydantic produces
(``tests/test_speed_start_plain.py`` compares both on the built-in rules and seeded edits).
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Callable, ForwardRef, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import AfterValidator, BaseModel, Discriminator, StringConstraints, Tag
from pydantic.fields import FieldInfo

Check = Callable[[Any], Any]


class Declined(Exception):
    """The data (or the model) is outside the plain subset: validate with pydantic instead."""


class Unsupported(Declined):
    """The model uses something this walker does not read; every value of it is declined."""


# Model config keys that change nothing about how data is validated into the model's fields.
_HARMLESS_CONFIG = {"extra", "frozen", "defer_build", "populate_by_name", "title"}
_PLANS: dict[type[BaseModel], Check] = {}


def construct(model: type[BaseModel], data: Any) -> BaseModel:
    """``model.model_validate(data)`` for plainly valid data, built with ``model_construct``;
    raises :class:`Declined` for anything else (the caller then validates with pydantic)."""
    return _model_check(model)(data)


def supported(model: type[BaseModel]) -> bool:
    """Whether the walker reads every annotation of ``model`` and the models it nests."""
    try:
        _model_check(model)({})  # an unreadable model declines every value as Unsupported
    except Unsupported:
        return False
    except Declined:
        pass
    return True


_PLANNING: set[type[BaseModel]] = set()


def _model_check(model: type[BaseModel]) -> Check:
    """The check of one model and of every model it nests, planned once per process; a model
    that refers to itself (``Condition``) calls its own check once that is planned. A model the
    walker cannot read is remembered as such: each of its values is declined at once."""
    plan = _PLANS.get(model)
    if plan is not None:
        return plan
    if model in _PLANNING:
        return lambda value: _PLANS[model](value)
    _PLANNING.add(model)
    planned: Check | None = None
    try:
        planned = _plan_model(model)
    except Unsupported as err:
        planned = _unsupported(err)
        raise
    finally:
        _PLANNING.discard(model)
        if planned is not None:
            _PLANS[model] = planned
    return planned


def _unsupported(err: Unsupported) -> Check:
    def check(_value: Any) -> Any:
        raise Unsupported(*err.args)
    return check


def _plan_model(model: type[BaseModel]) -> Check:
    config = dict(model.model_config)
    if set(config) - _HARMLESS_CONFIG or config.get("extra") != "forbid":
        raise Unsupported(f"{model.__name__}: model config {sorted(config)}")
    # BaseModel's documented class attributes (pydantic's API reference): its decorators, private
    # attributes and whether it is a RootModel.
    decorators = model.__pydantic_decorators__
    if (decorators.validators or decorators.field_validators or decorators.root_validators
            or decorators.model_validators or model.__private_attributes__
            or model.__pydantic_root_model__ or model.model_post_init is not BaseModel.model_post_init):
        raise Unsupported(f"{model.__name__}: validators or private state")
    fields: dict[str, tuple[str, Check]] = {}  # the input key → (field name, check)
    required: set[str] = set()
    hints: dict[str, Any] | None = None
    for name, info in model.model_fields.items():
        _plain_field(model, name, info)
        annotation = info.annotation
        if _has_forward_ref(annotation):  # left unresolved at class creation (recursive)
            hints = hints if hints is not None else typing.get_type_hints(model, include_extras=True)
            annotation = hints[name]
        key = info.alias if info.alias is not None else name
        fields[key] = (name, _checker(annotation, tuple(info.metadata)))
        if info.is_required():
            required.add(key)

    def check(data: Any) -> BaseModel:
        if not isinstance(data, dict) or not required <= data.keys():
            raise Declined(model.__name__)
        values: dict[str, Any] = {}
        for key, value in data.items():
            entry = fields.get(key) if type(key) is str else None
            if entry is None:
                raise Declined(f"{model.__name__}: key {key!r}")
            values[entry[0]] = entry[1](value)
        return model.model_construct(set(values), **values)

    return check


def _plain_field(model: type[BaseModel], name: str, info: FieldInfo) -> None:
    """A field whose input key is its alias or name, and whose default is taken as it is."""
    if info.validation_alias not in (None, info.alias) or info.validate_default or info.discriminator is not None:
        raise Unsupported(f"{model.__name__}.{name}: field options")


def _has_forward_ref(annotation: Any) -> bool:
    if isinstance(annotation, (ForwardRef, str)):
        return True
    if get_origin(annotation) is Literal:
        return False
    return any(_has_forward_ref(arg) for arg in get_args(annotation))


def _checker(annotation: Any, metadata: tuple[Any, ...]) -> Check:
    """The check of one annotation and its constraints (applied in their order, after the type)."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        inner, extra = _strip_annotated(annotation)
        return _checker(inner, (*_expanded(extra), *metadata))
    discriminators = [m for m in metadata if isinstance(m, Discriminator)]
    rest = tuple(m for m in metadata if not isinstance(m, (Discriminator, Tag)))
    if discriminators:
        if origin not in (Union, types.UnionType) or len(discriminators) > 1:
            raise Unsupported(f"discriminator on {annotation!r}")
        base = _tagged_union(annotation, discriminators[0])
    else:
        base = _type_check(annotation)
    constraints = [_constraint(m) for m in rest]
    if not constraints:
        return base

    def check(value: Any) -> Any:
        value = base(value)
        for constraint in constraints:
            constraint(value)
        return value

    return check


def _expanded(metadata: tuple[Any, ...]) -> tuple[Any, ...]:
    """``Annotated[int, Field(ge=0)]`` inside a list: pydantic reads the Field's constraints."""
    out: list[Any] = []
    for meta in metadata:
        if isinstance(meta, FieldInfo):
            if meta.alias is not None or meta.validation_alias is not None or not meta.is_required():
                raise Unsupported(f"nested field {meta!r}")
            out.extend(meta.metadata)
        else:
            out.append(meta)
    return tuple(out)


def _type_check(annotation: Any) -> Check:
    origin = get_origin(annotation)
    if annotation is str:
        return _exact(str)
    if annotation is bool:
        return _exact(bool)
    if annotation is int:
        return _integer
    if annotation is type(None) or annotation is None:
        return _none
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_check(annotation)
    if origin is Literal:
        return _literal(get_args(annotation))
    if origin is list:
        (item,) = get_args(annotation)
        return _list(_checker(item, ()))
    if origin is dict:
        key, item = get_args(annotation)
        return _dict(_checker(key, ()), _checker(item, ()))
    if origin in (Union, types.UnionType):
        return _plain_union(get_args(annotation))
    raise Unsupported(f"annotation {annotation!r}")


def _exact(kind: type) -> Check:
    """Exactly ``kind``: a subclass (a ruamel ScalarString, say) is left to pydantic."""
    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise Declined(kind.__name__)
        return value
    return check


def _integer(value: Any) -> int:
    """An int or int subclass (ruamel's ScalarInt keeps a width), as the plain int pydantic gives;
    never a bool, float or string (pydantic's lax readings of those are its own)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise Declined("int")
    return int(value)


def _none(value: Any) -> None:
    if value is not None:
        raise Declined("None")
    return None


def _literal(choices: tuple[Any, ...]) -> Check:
    if not all(type(choice) in (str, bool, int) for choice in choices):
        raise Unsupported(f"Literal{choices!r}")

    def check(value: Any) -> Any:
        if not any(type(value) is type(choice) and value == choice for choice in choices):
            raise Declined("literal")
        return value

    return check


def _list(item: Check) -> Check:
    def check(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise Declined("list")
        return [item(entry) for entry in value]
    return check


def _dict(key: Check, item: Check) -> Check:
    def check(value: Any) -> dict[Any, Any]:
        if not isinstance(value, dict):
            raise Declined("dict")
        return {key(k): item(v) for k, v in value.items()}
    return check


# The input types a scalar member of a plain union takes, in pydantic's smart mode an exact match.
_SCALARS: dict[Any, tuple[type, ...]] = {str: (str,), bool: (bool,), int: (int,), type(None): (type(None),)}


def _plain_union(members: tuple[Any, ...]) -> Check:
    """``X | None`` for any X, or a union of distinct scalar types (``int | str | bool | None``):
    each value has exactly one member it can be, as pydantic's smart mode picks by exact type."""
    others = [m for m in members if m is not type(None)]
    if len(others) == 1 and len(members) == 2:
        inner = _checker(others[0], ())
        return lambda value: None if value is None else inner(value)
    by_type: dict[type, Check] = {}
    for member in members:
        bare, _ = _strip_annotated(member)
        if bare not in _SCALARS or any(t in by_type for t in _SCALARS[bare]):
            raise Unsupported(f"union member {member!r}")
        member_check = _checker(member, ())
        for kind in _SCALARS[bare]:
            by_type[kind] = member_check

    def check(value: Any) -> Any:
        kind = int if isinstance(value, int) and not isinstance(value, bool) else type(value)
        member_check = by_type.get(kind)
        if member_check is None:
            raise Declined("union")
        return member_check(value)

    return check


def _strip_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if get_origin(annotation) is typing.Annotated:
        inner, *extra = get_args(annotation)
        return inner, tuple(extra)
    return annotation, ()


def _tagged_union(annotation: Any, discriminator: Discriminator) -> Check:
    """A union picked by a callable discriminator and ``Tag``s: the member the tag names."""
    pick = discriminator.discriminator
    if not callable(pick) or discriminator.custom_error_type is not None:
        raise Unsupported("discriminator")
    by_tag: dict[str, Check] = {}
    for member in get_args(annotation):
        bare, extra = _strip_annotated(member)
        tags = [m.tag for m in extra if isinstance(m, Tag)]
        if len(tags) != 1 or tags[0] in by_tag:
            raise Unsupported(f"union member {member!r}")
        by_tag[tags[0]] = _checker(bare, tuple(m for m in extra if not isinstance(m, Tag)))

    def check(value: Any) -> Any:
        tag: Any = pick(value)
        member_check = by_tag.get(tag) if isinstance(tag, str) else None
        if member_check is None:
            raise Declined("tag")
        return member_check(value)

    return check


def _constraint(meta: Any) -> Callable[[Any], None]:
    """One constraint as a check that declines when the value does not meet it."""
    if isinstance(meta, StringConstraints):
        return _string_constraints(meta)
    if isinstance(meta, annotated_types.MinLen):
        return _require(lambda v: len(v) >= meta.min_length, "min length")
    if isinstance(meta, annotated_types.MaxLen):
        return _require(lambda v: len(v) <= meta.max_length, "max length")
    if type(meta) in _BOUNDS:
        attr, holds = _BOUNDS[type(meta)]
        bound = getattr(meta, attr)
        if type(bound) is not int:
            raise Unsupported(f"bound {meta!r}")
        return _require(lambda v: type(v) is int and holds(v, bound), attr)
    if isinstance(meta, AfterValidator) and meta.func.__code__.co_argcount == 1:
        func = meta.func

        def after(value: Any) -> None:
            try:
                result = func(value)  # type: ignore[call-arg]
            except (ValueError, AssertionError) as err:  # what pydantic words as a validation error: let it
                raise Declined("validator") from err
            if result is not value:  # a transforming validator: its order against others matters
                raise Declined("validator result")

        return after
    raise Unsupported(f"constraint {meta!r}")


_BOUNDS: dict[type, tuple[str, Callable[[int, int], bool]]] = {
    annotated_types.Gt: ("gt", lambda v, b: v > b), annotated_types.Ge: ("ge", lambda v, b: v >= b),
    annotated_types.Lt: ("lt", lambda v, b: v < b), annotated_types.Le: ("le", lambda v, b: v <= b)}


def _require(holds: Callable[[Any], bool], what: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not holds(value):
            raise Declined(what)
    return check


def _string_constraints(meta: StringConstraints) -> Callable[[Any], None]:
    if (meta.strip_whitespace or meta.to_upper or meta.to_lower or meta.strict is not None
            or meta.ascii_only):
        raise Unsupported(f"string constraints {meta!r}")
    pattern = re.compile(meta.pattern) if meta.pattern is not None else None
    low, high = meta.min_length, meta.max_length

    def check(value: Any) -> None:
        if type(value) is not str:
            raise Declined("str")
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            raise Declined("length")
        # pydantic matches with Rust's regex, where ``$`` is the end of the text only; Python's
        # also matches before a final newline: a value with a line break is left to pydantic.
        if pattern is not None and ("\n" in value or pattern.search(value) is None):
            raise Declined("pattern")

    return check
