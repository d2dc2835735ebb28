"""Jobs specs: which TF job (chief, worker, ps, evaluator) each rank of a step plays.

A spec is written ``"ps:1,worker:3"`` (the ``--tf-dist`` / ``TFSLURM_TF_DIST`` form) or as a
mapping ``{"ps": 1, "worker": 3}``. One job may take ``*``: all ranks the others leave.
Ranks are given jobs **in the order written**: with ``"chief:1,worker:*"`` rank 0 is the
chief, ranks 1.. are workers 0... :data:`JobOrder` names the other order a caller may want
(alphabetical: TF's own ``SlurmClusterResolver``, see ``tfslurm.tfcompat``).

Only the standard library is used: this runs in the TaskProlog of every task.
"""

from __future__ import annotations

from tfslurm.errors import JobSpecError
from tfslurm.errors import shown as _shown
from tfslurm.numbers import ascii_int, is_int_in

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the TaskProlog path)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final, Literal, NoReturn, TypeGuard

    #: A jobs spec as callers give it: the ``--tf-dist`` text, a mapping, or None (all workers).
    JobsSpec = str | Mapping[str, int | str] | None
    #: The order in which jobs take ranks: ``"written"`` (as the spec lists them:
    #: ``"chief:1,worker:*"`` makes rank 0 the chief) or ``"alphabetical"`` (by job name).
    JobOrder = Literal["written", "alphabetical"]

__all__ = [
    "JOB_ORDERS",
    "REST",
    "TF_JOB_NAMES",
    "format_jobs",
    "near_tf_name",
    "order_jobs",
    "parse_jobs",
    "split_spec",
]

REST = "*"
#: Every JobOrder.
JOB_ORDERS: Final[tuple[JobOrder, ...]] = ("written", "alphabetical")

# TF's ClusterSpec accepts these names; the job names TF's strategies understand are
# chief/worker/ps/evaluator, but a plan can name any job (e.g. for a custom server setup).
# A name within one typo of TF's (near_tf_name) is refused: TF would not know it, and the
# strategy would fail far from the cause.  plugin/src/spec.c applies the same rule.
TF_JOB_NAMES = ("chief", "worker", "ps", "evaluator")
_MAX_COUNT_DIGITS = 18
# TF's multi_worker_util rejects clusters with more than one of these.
_AT_MOST_ONE = ("chief", "evaluator")
_MAX_SPEC_CHARS = 4096  # bytes of UTF-8, as spec.c counts them (TFD_SPEC_MAX)
_SHOWN = 80  # characters of a spec quoted in a message (TFD_SPEC_SHOWN in spec.h)


def split_spec(spec: str) -> list[tuple[str, int | None]]:
    """Parse ``"ps:1,worker:*"`` into ``[("ps", 1), ("worker", None)]`` (None = the rest).

    Checks the grammar and what no step could run (every count 0, a fixed chief or
    evaluator count above 1); :func:`parse_jobs` checks the counts against a step.
    """
    if not isinstance(spec, str):
        raise JobSpecError(f"jobs spec {spec!r} is not a string")
    return _walk(spec if spec.isascii() else _as_bytes(spec))


# The walk below is plugin/src/spec.c's tfd_spec_check, step for step, on the same bytes:
# the first error it meets is the one the plugin reports at submit time, and the message
# comes from the same table (data/spec_messages.def), so a bad spec reads the same in srun's
# error and here. Keep the two in step (tests/test_spec_messages.py compares them).
_SPACE = " \t"
_DIGITS = "0123456789"
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NAME_CHARS = _LETTERS + _DIGITS + "_"
_SHOWN_NAME = 60  # characters of a job name quoted in a message (spec.c's buffer holds 60)


def _as_bytes(spec: str) -> str:
    """``spec`` as the plugin sees it: its UTF-8 bytes (undecodable bytes from the
    environment back as they were), one character per byte."""
    try:
        data = spec.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = spec.encode("utf-8", "surrogatepass")
    return data.decode("latin-1")


def _walk(text: str) -> list[tuple[str, int | None]]:
    """split_spec on ``text`` (one character per byte): the entries, or JobSpecError at the
    first error, the one tfd_spec_check reports."""
    end = len(text)
    if end > _MAX_SPEC_CHARS:
        _refuse(text, "TOO_LONG", str(_MAX_SPEC_CHARS))
    if _skip_space(text, 0) == end:
        _refuse(text, "EMPTY")
    entries: list[tuple[str, int | None]] = []
    pos = 0
    while True:
        name, shown, pos = _walk_name(text, pos, entries)
        count, pos = _walk_count(text, pos, name, shown, entries)
        entries.append((name, count))
        pos = _skip_space(text, pos)
        if pos == end:
            break
        if text[pos] != ",":
            _bad_byte(text, pos, "AFTER_COUNT", shown)
        pos += 1
    if all(count == 0 for _, count in entries):
        _refuse(text, "ALL_ZERO")
    return entries


def _walk_name(text: str, pos: int, entries: list[tuple[str, int | None]]) -> tuple[str, str, int]:
    """The job name from ``pos`` up to its ':', as quoted in messages, and where its count starts."""
    end = len(text)
    pos = _skip_space(text, pos)
    if pos == end or text[pos] == ",":
        _refuse(text, "EMPTY_ENTRY", str(pos))
    if text[pos] not in _LETTERS:
        _bad_byte(text, pos, "WHERE_NAME")
    start = pos
    while pos < end and text[pos] in _NAME_CHARS:
        pos += 1
    name = text[start:pos]
    shown = _c_quoted(name, _SHOWN_NAME)
    meant = near_tf_name(name)
    if meant:
        _refuse(text, "NEAR_TF_NAME", shown, meant, meant)
    pos = _skip_space(text, pos)
    if pos == end or text[pos] == ",":
        _refuse(text, "NO_COUNT", shown, shown, shown)
    if text[pos] != ":":
        _bad_byte(text, pos, "AFTER_NAME", shown)
    if any(name == seen for seen, _ in entries):
        _refuse(text, "TWICE", shown)
    return name, shown, _skip_space(text, pos + 1)


def _walk_count(
    text: str, pos: int, name: str, shown: str, entries: list[tuple[str, int | None]]
) -> tuple[int | None, int]:
    """The count at ``pos`` (None for '*') and where it ends."""
    end = len(text)
    if pos < end and text[pos] == REST:
        if any(count is None for _, count in entries):
            _refuse(text, "TWO_RESTS")
        return None, pos + 1
    if pos < end and text[pos] in _DIGITS:
        first = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        if pos - first > _MAX_COUNT_DIGITS:
            _refuse(text, "TOO_MANY_DIGITS", shown, str(_MAX_COUNT_DIGITS))
        count = int(text[first:pos])
        if count > 1 and name in _AT_MOST_ONE:
            _refuse(text, "AT_MOST_ONE", shown, str(count))
        return count, pos
    if pos == end or text[pos] == ",":
        _refuse(text, "COUNT_MISSING", shown)
    _bad_byte(text, pos, "IN_COUNT", shown)


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    return pos


def _bad_byte(text: str, pos: int, where: str, *args: str) -> NoReturn:
    """Refuse the byte at ``pos``; ``where`` names the message that says where it stands."""
    code = ord(text[pos])
    kind = "UNEXPECTED_BYTE"
    if code < 0x20 or code == 0x7F:
        kind = "CONTROL_BYTE"
    elif code >= 0x80:
        kind = "NON_ASCII_BYTE"
    _refuse(text, kind, _c_quoted(text[pos], 1), str(pos), spec_message(where, *args))


def _refuse(text: str, key: str, *args: str) -> NoReturn:
    raise JobSpecError(spec_message("SPEC_IS", _c_quoted(text, _SHOWN), spec_message(key, *args)))


def _c_quoted(text: str, limit: int) -> str:
    """``text`` (one character per byte) shown as the plugin's tfd_quote shows it: bytes
    outside printable ASCII, and backslashes, as \\xNN; past ``limit`` bytes, "..."."""
    head = text[:limit]
    if not (head.isascii() and head.isprintable() and "\\" not in head):
        head = "".join(c if " " <= c <= "~" and c != "\\" else f"\\x{ord(c):02x}" for c in head)
    return head + ("..." if len(text) > limit else "")


_MESSAGES: dict[str, str] = {}


def spec_message(key: str, *args: str) -> str:
    """Message ``key`` of data/spec_messages.def (the table the plugin compiles in), its
    ``%s`` filled with ``args``. The table is read on the first refusal only: a valid spec
    (every task's TaskProlog) costs no file read."""
    if not _MESSAGES:
        import re
        from importlib.resources import files

        table = files("tfslurm").joinpath("data", "spec_messages.def").read_text("ascii")
        _MESSAGES.update(re.findall(r'^TFD_SPEC_MESSAGE\((\w+), "([^"\\]*)"\)$', table, re.MULTILINE))
    return _MESSAGES[key] % args


def parse_jobs(spec: JobsSpec, num_tasks: int) -> dict[str, int]:
    """Resolve a jobs spec against a step of ``num_tasks`` tasks: ``{job: count}`` in rank order.

    ``None`` means every task is a worker. Jobs with a count of 0 are left out. Raises
    :class:`JobSpecError` when the spec is malformed or does not add up to ``num_tasks``.
    """
    if not is_int_in(num_tasks, 1):
        raise JobSpecError(f"cannot assign jobs to {num_tasks!r} tasks: need at least one task")
    if spec is None:
        return {"worker": num_tasks}
    if isinstance(spec, str):
        entries = split_spec(spec)
        shown = _shown(spec, _SHOWN)
    elif _is_mapping(spec):
        entries = _mapping_entries(spec)
        shown = _show_mapping(spec)
    else:
        raise JobSpecError(
            f"jobs spec {spec!r} is neither a string like 'ps:1,worker:3' nor a dict like {{'worker': 4}}"
        )
    fixed = sum(count for _, count in entries if count is not None)
    has_rest = any(count is None for _, count in entries)
    if fixed > num_tasks or (fixed != num_tasks and not has_rest):
        raise JobSpecError(
            f"jobs spec {shown} asks for {fixed} task{'s' if fixed != 1 else ''} "
            f"but the step has {num_tasks}"
            + (
                ""
                if has_rest
                else "; give one job the rest with "
                + ("NAME:*" if isinstance(spec, str) else "{'NAME': '*'}")
            )
        )
    jobs: dict[str, int] = {}
    for name, count in entries:
        resolved = num_tasks - fixed if count is None else count
        if resolved:
            jobs[name] = resolved
    for name in _AT_MOST_ONE:
        if jobs.get(name, 0) > 1:
            raise JobSpecError(
                f"jobs spec {shown} gives {jobs[name]} tasks to {name!r}; TensorFlow allows at most one"
            )
    return jobs


def order_jobs(jobs: Mapping[str, int], order: JobOrder) -> dict[str, int]:
    """``jobs`` (resolved by :func:`parse_jobs`) in the ``order`` given."""
    if order == "alphabetical":
        return dict(sorted(jobs.items()))
    return dict(jobs)


def _is_mapping(spec: object) -> TypeGuard[Mapping[str, int | str]]:
    """Whether ``spec`` is a mapping; collections.abc is imported only for a spec that is
    neither a ``str`` nor a ``dict``, which the TaskProlog hook (a ``str``) never has."""
    if isinstance(spec, dict):
        return True
    from collections.abc import Mapping

    return isinstance(spec, Mapping)


def format_jobs(jobs: Mapping[str, int | str]) -> str:
    """``{"ps": 1, "worker": 3}`` -> ``"ps:1,worker:3"`` (the inverse of :func:`split_spec`)."""
    return ",".join(f"{name}:{count}" for name, count in jobs.items())


def _mapping_entries(spec: Mapping[str, int | str]) -> list[tuple[str, int | None]]:
    entries: list[tuple[str, int | None]] = []
    text = format_jobs(spec)
    shown = _shown(text, _SHOWN)
    for name, count in spec.items():
        if not isinstance(name, str):
            raise JobSpecError(f"jobs spec {shown}: job name {name!r} is not a string")
        _check_name(text, name)
        if isinstance(count, str):
            entries.append((name, _check_count(text, name, count.strip())))
        elif is_int_in(count):
            if count < 0:
                raise JobSpecError(f"jobs spec {shown}: {name!r} has a negative count {count}")
            entries.append((name, count))
        else:
            raise JobSpecError(f"jobs spec {shown}: count {count!r} of {name!r} is not a number or '*'")
    if not entries:
        raise JobSpecError("jobs spec {} names no job; give at least one, e.g. {'worker': 4}")
    _check_entries(text, entries)
    return entries


def is_job_name(name: str) -> bool:
    """A letter followed by letters, digits or ``_`` (ASCII): a name TF's ClusterSpec takes."""
    return name.isascii() and name[:1].isalpha() and name.replace("_", "0").isalnum()


def near_tf_name(name: str) -> str | None:
    """The TF job name ``name`` nearly is (another case, or one character changed, added,
    dropped or swapped with its neighbour), or None when it is one exactly or is further
    from all of them."""
    if name in TF_JOB_NAMES:
        return None
    folded = name.lower()
    for tf_name in TF_JOB_NAMES:
        if _within_one_edit(folded, tf_name):
            return tf_name
    return None


def _within_one_edit(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 1:
        return False
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        swapped = a[i : i + 2] == b[i : i + 2][::-1] and len(a[i : i + 2]) == 2
        return a[i + 2 :] == b[i + 2 :] if swapped else a[i + 1 :] == b[i + 1 :]
    return a[i + 1 :] == b[i:] if len(a) > len(b) else a[i:] == b[i + 1 :]


def _check_name(spec: str, name: str) -> str:
    if not is_job_name(name):
        what = "an empty job name" if not name else f"job name {name!r}"
        raise JobSpecError(
            f"jobs spec {_shown(spec, _SHOWN)}: {what} is not a letter followed by letters, digits or '_'"
        )
    meant = near_tf_name(name)
    if meant:
        raise JobSpecError(
            f"jobs spec {_shown(spec, _SHOWN)}: " + spec_message("NEAR_TF_NAME", name, meant, meant)
        )
    return name


def _check_count(spec: str, name: str, count: str) -> int | None:
    if count == REST:
        return None
    number = ascii_int(count, _MAX_COUNT_DIGITS)
    if number is None:
        raise JobSpecError(
            f"jobs spec {_shown(spec, _SHOWN)}: count {_shown(count)} of {_shown(name)} "
            "is not a non-negative integer or '*'"
        )
    return number


def _check_entries(spec: str, entries: list[tuple[str, int | None]]) -> None:
    seen: set[str] = set()
    for name, _ in entries:
        if name in seen:
            raise JobSpecError(f"jobs spec {_shown(spec, _SHOWN)} names {name!r} twice")
        seen.add(name)
    if sum(count is None for _, count in entries) > 1:
        raise JobSpecError(f"jobs spec {_shown(spec, _SHOWN)}: " + spec_message("TWO_RESTS"))


def _show_mapping(spec: Mapping[str, int | str], limit: int = 80) -> str:
    """A dict spec as the user wrote it (dict form), bounded like :func:`_show`."""
    text = "{" + ", ".join(f"{name!r}: {count!r}" for name, count in spec.items()) + "}"
    return text if len(text) <= limit else text[:limit] + "...}"
