"""The one idiom for plain data: a class with ``__slots__`` and an ``__init__`` written out.

Why not dataclasses: the TaskProlog hook imports the core once per node of every step at a
site, and importing ``dataclasses`` (which imports ``inspect``, ``ast`` and ``tokenize``) and
generating the hook path's classes with it costs more than the rest of a hook run. A class
written out compiles nothing at import, and ``mypy`` checks its ``__init__`` as it is.

A value type:

* lists its attributes in ``__slots__`` and assigns each once in ``__init__``, annotated
  ``Final`` (``self.rank: Final = rank``): the type checker refuses any later assignment
  (``tests/typing_checks.py`` holds that). Nothing checks it at run time: a Python-level
  ``__setattr__`` guarding every assignment adds about 2 % to a hook run;
* names the attributes that make up its identity in ``__match_args__`` (which also gives it
  positional ``case Point(x, y)`` patterns); :class:`Value` derives ``==``, ``hash()`` and
  ``repr()`` from them. An attribute left out (a cache, a note) is ignored by all three.

Classes that hold changing state (a supervisor, a watcher) are plain classes without
:class:`Value`.

A value derived from the others and kept after first use (a node's index, a cluster's JSON)
is a :class:`cached` method; the class then has ``"__dict__"`` in its ``__slots__``.

A choice among a few named cases (a layout's distribution, a port rule's kind) is a short
lowercase ``str`` typed as a ``typing.Literal`` alias, defined under ``TYPE_CHECKING``, with a
module tuple of every value where code iterates or checks (``DISTRIBUTIONS``) and, where people
read a longer text, one dict from value to that text (``CONTEXT_TEXT``). Not ``enum``: its
import and classes cost the hook more than the rest of its work, and a ``str`` is already
what JSON, the environment and messages carry. :func:`one_of` turns text into such a value.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

__all__ = ["Value", "cached", "one_of"]


class Value:
    """Base of the value types: equal, hashed and shown by the names in ``__match_args__``."""

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    def _identity(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self.__match_args__])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Value)
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash((self.__class__.__name__, *self._identity()))

    def __repr__(self) -> str:
        shown = ", ".join([f"{name}={getattr(self, name)!r}" for name in self.__match_args__])
        return f"{self.__class__.__name__}({shown})"


def one_of(given: object, values: tuple[T, ...]) -> T | None:
    """The element of ``values`` equal to ``given`` (so typed as the values' Literal), or
    None: the check of text that should name one of a few cases."""
    for value in values:
        if value == given:
            return value
    return None


# Type checkers read ``cached`` as functools.cached_property, which behaves the same (without
# its lock), so every use is typed; the class below is what runs.
if TYPE_CHECKING:
    from functools import cached_property as cached
else:

    class cached:
        """``functools.cached_property`` without importing functools on the hook path: the
        method runs once, on first access; its result is kept in the instance's ``__dict__``,
        which then answers every later access without calling this descriptor again."""

        __slots__ = ("method",)

        def __init__(self, method):
            self.method = method

        def __get__(self, instance, owner=None):
            if instance is None:
                return self
            value = instance.__dict__[self.method.__name__] = self.method(instance)
            return value
