"""tfslurm.records behaves as frozen dataclasses do, for what the core uses of them."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Mapping
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfslurm import records
from tfslurm.records import FrozenInstanceError, field, record


@record
class Point:
    """A record with every kind of field the core has."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", compare=False)
    extra: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    seen: list[int] = field(default_factory=list, hash=False)
    KIND: ClassVar[str] = "point"


@dataclasses.dataclass(frozen=True)
class DataPoint:
    """The same as a frozen dataclass: the oracle."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = ()
    note: str = dataclasses.field(default="", compare=False)
    extra: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    seen: list[int] = dataclasses.field(default_factory=list, hash=False)
    KIND: ClassVar[str] = "point"


values = st.fixed_dictionaries(
    {"x": st.integers(-3, 3)},
    optional={
        "y": st.integers(-3, 3),
        "tags": st.tuples(st.sampled_from("ab")),
        "note": st.sampled_from(["", "n"]),
        "extra": st.dictionaries(st.sampled_from("kv"), st.sampled_from("12"), max_size=2),
        "seen": st.lists(st.integers(0, 2), max_size=2),
    },
)


@given(values, values)
def test_equality_hash_and_repr_are_those_of_a_frozen_dataclass(a: dict, b: dict) -> None:
    ra, rb, da, db = Point(**a), Point(**b), DataPoint(**a), DataPoint(**b)
    assert (ra == rb) == (da == db)
    assert (ra != rb) == (da != db)
    assert repr(ra) == repr(da).replace("DataPoint", "Point")
    assert hash(ra) == hash(da)  # the same fields hashed the same way (a list one left out)
    assert [f.name for f in records.fields(ra)] == [f.name for f in dataclasses.fields(da)]


def test_fields_are_frozen_and_defaults_are_fresh() -> None:
    p = Point(1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x' of a Point"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    assert Point(1).seen is not Point(1).seen  # each instance gets its own default_factory value
    assert Point.y == 0 and not hasattr(Point, "extra")  # class attributes as in a dataclass
    assert Point.KIND == "point" and "KIND" not in [f.name for f in records.fields(Point)]
    assert Point(1) != DataPoint(1) and Point(1) != (1,)


def test_positional_and_keyword_arguments_and_their_errors() -> None:
    assert Point(1, 2, ("a",)) == Point(x=1, y=2, tags=("a",)) == Point(1, tags=("a",), y=2)
    assert Point(1, 0, (), "", {}, []) == Point(1)  # every field positionally: the quick path
    with pytest.raises(TypeError, match=r"Point\(\) missing required arguments: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        Point(1, x=2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="takes 6 positional arguments but 7 were given"):
        Point(1, 0, (), "", {}, [], 9)  # type: ignore[call-arg]


def test_replace_copies_with_changes_and_runs_post_init_again() -> None:
    made = []

    @record
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError(f"value {self.value} is negative")
            made.append(self.value)

    one = Checked(1)
    assert records.replace(one, value=2) == Checked(2) and made == [1, 2, 2]
    with pytest.raises(ValueError, match="value -1 is negative"):
        records.replace(one, value=-1)
    with pytest.raises(TypeError):
        records.replace(one, other=1)
    with pytest.raises(TypeError, match="is not a record"):
        records.replace(DataPoint(1), x=2)


def test_eq_false_keeps_identity_equality_and_hash() -> None:
    @record(eq=False)
    class Big:
        items: tuple[int, ...]

    a, b = Big((1,)), Big((1,))
    assert a != b and a == a and hash(a) != hash(b) and len({a, b}) == 2


def test_a_required_field_after_a_default_is_refused_as_in_dataclasses() -> None:
    with pytest.raises(TypeError, match="record field 'b' without a default follows 'a'"):

        @record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_records_pickle_and_keep_cached_properties() -> None:
    from tfslurm.layout import block_layout

    layout = block_layout(("n1", "n2"), (3, 1))
    assert layout.task_counts == (3, 1)  # a cached_property, stored in the frozen instance
    assert pickle.loads(pickle.dumps(layout)) == layout
    assert records.is_record(layout) and not dataclasses.is_dataclass(layout)


def test_fields_come_from_annotations_with_or_without_the_future_import() -> None:
    """Python 3.14 keeps a class's annotations out of its __dict__ unless the module has
    ``from __future__ import annotations`` (the core's modules do); a record made in a
    module without it must still find its fields."""
    namespace: dict[str, object] = {}
    exec("class Plain:\n    x: int\n    y: 'list[str]' = ()\n", namespace)  # no future import
    made = record(namespace["Plain"])  # type: ignore[arg-type]
    assert [f.name for f in records.fields(made)] == ["x", "y"]
    assert made(1) == made(x=1, y=()) and repr(made(1)) == "Plain(x=1, y=())"
