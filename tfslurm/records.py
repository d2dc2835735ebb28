"""Frozen records for the core's plain data, made without the ``dataclasses`` module.

Why not dataclasses there: the TaskProlog hook imports the core once per node of every step
at a site. On Python 3.11 importing ``dataclasses`` (it imports ``inspect``, ``ast``, ``dis``
and ``tokenize``) and creating the hook path's eleven classes with it took about 25 ms of a
62 ms hook run (issue 17, item 6), more than the work and the interpreter's start together.
Records compile nothing: every record shares one ``__init__``, ``__repr__``, ``__eq__`` and
``__hash__`` driven by its fields. A call giving every field positionally is about as quick
as a dataclass's generated ``__init__``; a call by keyword binds the names first (a few
microseconds, for values made once per process such as ``Step`` or ``Settings``).

What a record is, as a frozen dataclass would be: fields are the class's annotations in
order (``ClassVar`` ones excluded), with defaults or :func:`field`; ``__post_init__`` runs
after ``__init__``; ``eq=False`` keeps identity equality and hashing; assignment raises
:class:`FrozenInstanceError`; :func:`replace` copies with changes. Type checkers see a
dataclass (``dataclass_transform``). Modules off the hook path keep using dataclasses.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported at run time (it costs a hook run too)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    R = TypeVar("R")
else:

    def dataclass_transform(**kwargs):
        return lambda function: function


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a record (records are immutable, like frozen dataclasses)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """A field's options, as :func:`field` gives them (and the name, once its class is made)."""

    __slots__ = ("compare", "default", "default_factory", "hash", "name", "repr")

    def __init__(
        self, default: Any, default_factory: Any, compare: bool, hash: bool | None, repr: bool
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("a field takes a default or a default_factory, not both")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.compare = compare
        self.hash = compare if hash is None else hash
        self.repr = repr


def field(
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] = MISSING,
    compare: bool = True,
    hash: bool | None = None,
    repr: bool = True,
) -> Any:
    """A field with options: ``compare=False`` leaves it out of ``==`` and the hash."""
    return Field(default, default_factory, compare, hash, repr)


def _fields_of(cls: type) -> tuple[Field, ...]:
    found: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        found.update((f.name, f) for f in getattr(base, "__record_fields__", ()))
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063 - inspect is what this module avoids
    if own is None:  # Python 3.14 without `from __future__ import annotations`: made on demand
        own = getattr(cls, "__annotations__", None) or {}
    for name, annotation in own.items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, MISSING)
        made = value if isinstance(value, Field) else Field(value, MISSING, True, None, True)
        made.name = name
        if isinstance(value, Field):  # the class attribute becomes the plain default, if any
            if made.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, made.default)
        found[name] = made
    return tuple(found.values())


class _Signature:
    """What a record class's shared methods need, derived once from its fields: the field
    names in order, their defaults (a default_factory is called per instance), and the
    names ``==``, the hash and the repr use."""

    __slots__ = ("compared", "defaults", "factories", "hashed", "known", "names", "post_init", "shown")

    def __init__(self, fields: tuple[Field, ...], post_init: bool) -> None:
        defaulted = ""
        for f in fields:  # dataclasses' rule: no field without a default after one with
            if f.default is not MISSING or f.default_factory is not MISSING:
                defaulted = f.name
            elif defaulted:
                raise TypeError(f"record field {f.name!r} without a default follows {defaulted!r}")
        self.names = tuple(f.name for f in fields)
        self.known = frozenset(self.names)
        self.defaults = {f.name: f.default for f in fields if f.default is not MISSING}
        self.factories = {f.name: f.default_factory for f in fields if f.default_factory is not MISSING}
        self.post_init = post_init
        self.compared = tuple(f.name for f in fields if f.compare)
        self.hashed = tuple(f.name for f in fields if f.hash)
        self.shown = tuple(f.name for f in fields if f.repr)

    def bind(self, owner: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The field values of one call, or the TypeError Python gives for a bad call."""
        names = self.names
        if len(args) > len(names):
            raise TypeError(f"{owner}() takes {len(names)} positional arguments but {len(args)} were given")
        values = dict(self.defaults)
        if args:
            values.update(zip(names, args, strict=False))  # fewer args than fields: the rest by name
        if kwargs:
            if not kwargs.keys() <= self.known:
                unknown = next(name for name in kwargs if name not in self.known)
                raise TypeError(f"{owner}() got an unexpected keyword argument {unknown!r}")
            if args and not kwargs.keys().isdisjoint(names[: len(args)]):
                twice = next(name for name in names[: len(args)] if name in kwargs)
                raise TypeError(f"{owner}() got multiple values for argument {twice!r}")
            values.update(kwargs)
        if len(values) < len(names):
            for name, factory in self.factories.items():
                if name not in values:
                    values[name] = factory()
            if len(values) < len(names):
                missing = ", ".join(repr(name) for name in names if name not in values)
                raise TypeError(f"{owner}() missing required arguments: {missing}")
        return values


def _record_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """Every record's ``__init__`` (nothing is compiled per class: compiling the eleven
    ``__init__`` functions took 1.3-2 ms of each hook run). A call with every field
    positionally stores them at once; others are bound by name first."""
    signature: _Signature = self.__record_signature__
    if kwargs or len(args) != len(signature.names):
        self.__dict__.update(signature.bind(type(self).__name__, args, kwargs))
    else:
        self.__dict__.update(zip(signature.names, args, strict=True))
    if signature.post_init:
        self.__post_init__()


def _values(self: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple([getattr(self, name) for name in names])


def _record_repr(self: Any) -> str:
    names = self.__record_signature__.shown
    shown = ", ".join(map("{}={!r}".format, names, _values(self, names)))
    return f"{type(self).__qualname__}({shown})"


def _record_eq(self: Any, other: object) -> object:  # a bool, or NotImplemented
    names = self.__record_signature__.compared
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self, names) == _values(other, names)


def _record_hash(self: Any) -> int:
    return hash(_values(self, self.__record_signature__.hashed))


def _frozen_setattr(self: Any, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a {type(self).__name__}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of a {type(self).__name__}")


def _make(cls: type[R], eq: bool) -> type[R]:
    fields = _fields_of(cls)
    signature = _Signature(fields, hasattr(cls, "__post_init__"))
    attributes = {
        "__record_fields__": fields,
        "__record_signature__": signature,
        "__init__": _record_init,
        "__repr__": _record_repr,
        "__setattr__": _frozen_setattr,
        "__delattr__": _frozen_delattr,
    }
    if eq:
        attributes |= {"__eq__": _record_eq, "__hash__": _record_hash}
    for name, value in attributes.items():
        type.__setattr__(cls, name, value)
    return cls


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: Any = None, /, *, eq: bool = True) -> Any:
    """Make ``cls`` a frozen record: ``@record`` or ``@record(eq=False)``."""
    if cls is None:
        return lambda given: _make(given, eq)
    return _make(cls, eq)


def is_record(value: object) -> bool:
    """True for a record class or instance."""
    return hasattr(value, "__record_fields__")


def fields(value: object) -> tuple[Field, ...]:
    """The fields of a record class or instance, in order."""
    if not is_record(value):
        raise TypeError(f"{value!r} is not a record")
    return value.__record_fields__  # type: ignore[attr-defined, no-any-return]


def replace(value: R, /, **changes: Any) -> R:
    """A copy of the record ``value`` with ``changes`` (its ``__post_init__`` runs again)."""
    for f in fields(value):
        if f.name not in changes:
            changes[f.name] = getattr(value, f.name)
    return type(value)(**changes)
