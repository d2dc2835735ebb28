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
"""

from __future__ import annotations

__all__ = ["Value"]


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
