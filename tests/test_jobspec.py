"""Jobs specs: grammar, counts against the step, order, and one-line errors."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfslurm.errors import JobSpecError, TfslurmError
from tfslurm.jobspec import TF_JOB_NAMES, format_jobs, near_tf_name, order_jobs, parse_jobs, split_spec

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure


def test_string_spec_keeps_written_order():
    jobs = parse_jobs("worker:3,ps:1", 4)
    assert list(jobs.items()) == [("worker", 3), ("ps", 1)]


def test_rest_takes_what_the_others_leave():
    assert parse_jobs("chief:1,worker:*", 5) == {"chief": 1, "worker": 4}
    assert list(parse_jobs("worker:*,ps:2", 5).items()) == [("worker", 3), ("ps", 2)]


def test_blanks_around_tokens_are_ignored():
    assert parse_jobs(" ps : 1 , worker : * ", 3) == {"ps": 1, "worker": 2}


def test_none_means_all_workers():
    assert parse_jobs(None, 7) == {"worker": 7}


def test_mapping_spec_and_star_in_mapping():
    assert parse_jobs({"ps": 1, "worker": 3}, 4) == {"ps": 1, "worker": 3}
    assert parse_jobs({"chief": 1, "worker": "*"}, 3) == {"chief": 1, "worker": 2}
    assert parse_jobs(MappingProxyType({"chief": 1, "worker": "*"}), 3) == {"chief": 1, "worker": 2}
    with pytest.raises(JobSpecError, match=r"jobs spec \[\('worker', 3\)\] is neither a string"):
        parse_jobs([("worker", 3)], 3)


def test_zero_count_jobs_are_left_out():
    assert parse_jobs("ps:0,worker:*", 2) == {"worker": 2}
    assert parse_jobs("chief:1,worker:*", 1) == {"chief": 1}


def test_job_order_written_or_alphabetical():
    jobs = parse_jobs("worker:2,ps:1,chief:1,evaluator:1", 5)
    assert list(order_jobs(jobs, "written")) == ["worker", "ps", "chief", "evaluator"]
    assert list(order_jobs(jobs, "alphabetical")) == ["chief", "evaluator", "ps", "worker"]


@pytest.mark.parametrize(
    ("spec", "tasks", "needle"),
    [
        ("", 4, "empty"),
        ("   ", 4, "empty"),
        ("worker", 4, "job 'worker' has no count; write worker:N or worker:*"),
        ("worker:3", 4, "asks for 3 tasks but the step has 4"),
        ("ps:1,worker:4", 4, "asks for 5 tasks but the step has 4"),
        ("ps:5,worker:*", 4, "asks for 5 tasks"),
        ("ps:1,ps:2,worker:*", 4, "job 'ps' appears twice"),
        ("ps:*,worker:*", 4, "more than one job has the count *"),
        ("ps:-1,worker:*", 4, "unexpected '-' at byte 3 in the count of job 'ps'"),
        ("ps:one,worker:*", 4, "unexpected 'o' at byte 3 in the count of job 'ps'"),
        ("ps:1.5,worker:*", 4, "unexpected '.' at byte 4 after the count of job 'ps'"),
        ("1ps:1,worker:*", 4, "unexpected '1' at byte 0 where a job name should start"),
        (":1,worker:*", 4, "unexpected ':' at byte 0 where a job name should start"),
        ("ab c:1,worker:*", 4, "unexpected 'c' at byte 3 after job 'ab'"),
        ("w\u00e9:1,worker:*", 4, "non-ASCII byte '\\xc3' at byte 1 after job 'w'"),
        ("a-b:1,worker:*", 4, "unexpected '-' at byte 1 after job 'a'"),
        ("ps:\u0661,worker:*", 4, "non-ASCII byte '\\xd9' at byte 3 in the count of job 'ps'"),
        ("chief:2,worker:*", 4, "job 'chief' has count 2; TensorFlow allows at most one"),
        ("evaluator:2,worker:*", 4, "at most one"),
        ("ps:0,worker:0", 4, "every count is 0"),
        ("chief:*,worker:0", 3, "gives 3 tasks to 'chief'; TensorFlow allows at most one"),
        ("worker:1,,ps:1", 2, "empty entry at byte 9"),
        ({}, 4, "names no job"),
        ({"worker": True}, 1, "count True"),
        ({"worker": 1.0}, 1, "count 1.0"),
        ({"worker": -1}, 1, "negative count"),
        ({1: 1}, 1, "job name 1 is not a string"),
        (["worker", 4], 4, "neither a string"),
        ("worker:*", 0, "at least one task"),
    ],
)
def test_bad_specs_raise_one_line_job_spec_errors(spec, tasks, needle):
    with pytest.raises(JobSpecError) as info:
        parse_jobs(spec, tasks)
    message = str(info.value)
    assert needle in message
    assert "\n" not in message
    assert isinstance(info.value, (TfslurmError, ValueError))


def test_huge_spec_is_refused_before_parsing():
    with pytest.raises(JobSpecError, match="longer than"):
        split_spec("worker:1," * 10_000)


def test_huge_count_is_a_mismatch_not_a_crash():
    with pytest.raises(JobSpecError, match="asks for 999999999999999999 tasks"):
        parse_jobs("worker:999999999999999999", 4)


names = st.sampled_from(["chief", "worker", "ps", "evaluator", "sidecar", "w2_x"])


@given(
    st.lists(st.tuples(names, st.integers(0, 50)), min_size=1, max_size=5, unique_by=lambda e: e[0]),
    st.data(),
)
def test_parsed_jobs_cover_every_task_in_written_order(entries, data):
    entries = [(n, 1 if n in ("chief", "evaluator") and c > 1 else c) for n, c in entries]
    rest_at = data.draw(st.sampled_from([None, *range(len(entries))]))
    fixed = sum(c for i, (_, c) in enumerate(entries) if i != rest_at)
    extra = data.draw(st.integers(0, 20)) if rest_at is not None else 0
    if rest_at is not None and entries[rest_at][0] in ("chief", "evaluator"):
        extra = min(extra, 1)
    tasks = fixed + extra
    if tasks == 0:
        tasks, entries = 1, [*entries, ("filler", 1)]
    spec = ",".join(f"{n}:{'*' if i == rest_at else c}" for i, (n, c) in enumerate(entries))
    jobs = parse_jobs(spec, tasks)
    assert sum(jobs.values()) == tasks
    assert all(count > 0 for count in jobs.values())
    written = [n for n, _ in entries]
    assert list(jobs) == [n for n in written if n in jobs]  # order kept
    assert parse_jobs(format_jobs(jobs), tasks) == jobs  # round trip
    assert split_spec(spec) == [(n, None if i == rest_at else c) for i, (n, c) in enumerate(entries)]
    # A spec one task short or one too many never parses unless '*' absorbs it.
    if rest_at is None:
        with pytest.raises(JobSpecError):
            parse_jobs(spec, tasks + 1)


@given(st.text(max_size=40))
def test_arbitrary_text_parses_or_raises_job_spec_error(text):
    try:
        jobs = parse_jobs(text, 8)
    except JobSpecError as exc:
        assert "\n" not in str(exc)
    else:
        assert sum(jobs.values()) == 8


# --- TF's job names are exact --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "meant"),
    [("Worker", "worker"), ("WORKER", "worker"), ("wokrer", "worker"), ("workers", "worker"),
     ("worke", "worker"), ("Chief", "chief"), ("chef", "chief"), ("PS", "ps"), ("pss", "ps"),
     ("sp", "ps"), ("evaluatr", "evaluator"), ("Evaluator", "evaluator")],
)  # fmt: skip
def test_near_miss_of_a_tf_job_name_is_refused_naming_it(name: str, meant: str) -> None:
    for spec in (f"{name}:*", {name: "*"}):
        with pytest.raises(JobSpecError, match=f"is not TensorFlow's '{meant}'.*write {meant}$"):
            parse_jobs(spec, 4)


@pytest.mark.parametrize(
    "name", ["chief", "worker", "ps", "evaluator", "wrkr", "server", "learner", "ps2x", "x"]
)
def test_exact_and_distant_names_are_allowed(name: str) -> None:
    assert parse_jobs(f"{name}:1", 1) == {name: 1}


def _osa_distance(a: str, b: str) -> int:
    """Textbook optimal-string-alignment distance: the model near_tf_name must match."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


@given(
    st.sampled_from(["chief", "worker", "ps", "evaluator"]),
    st.text("abcdefhikloprstuvwxyzCEKOPRSW_2", max_size=3),
    st.integers(0, 9),
)
def test_near_tf_name_is_one_edit_ignoring_case(base: str, noise: str, at: int) -> None:
    at = min(at, len(base))
    for name in (base[:at] + noise + base[at:], base[:at] + noise + base[at + 1 :], base.upper()):
        if not name[:1].isalpha():
            continue
        expected = None
        if name not in TF_JOB_NAMES:
            expected = next((t for t in TF_JOB_NAMES if _osa_distance(name.lower(), t) <= 1), None)
        assert near_tf_name(name) == expected, name


def test_count_mismatch_advice_is_in_the_form_the_user_wrote() -> None:
    """A dict (TF's resolver takes jobs={...}) gets dict advice, a string gets spec grammar."""
    with pytest.raises(JobSpecError) as caught:
        parse_jobs({"ps": 1, "worker": 1}, 3)
    assert str(caught.value) == (
        "jobs spec {'ps': 1, 'worker': 1} asks for 2 tasks but the step has 3; "
        "give one job the rest with {'NAME': '*'}"
    )
    with pytest.raises(JobSpecError, match=r"^jobs spec 'ps:1,worker:1' asks .* rest with NAME:\*$"):
        parse_jobs("ps:1,worker:1", 3)
