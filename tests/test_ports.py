"""Port rules over real recorded task environments, edge cases and properties."""

from __future__ import annotations

import itertools
import random
import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import observed
from tfslurm import hostlist
from tfslurm.errors import LayoutError, PortError, SlurmEnvError
from tfslurm.layout import layout_for
from tfslurm.ports import (
    DEFAULT_EPHEMERAL_RANGE,
    PORT_KINDS,
    SPAN_RESERVE,
    STEP_STRIDE,
    PortRule,
    derived_base,
    derived_window,
    format_port_list,
    parse_port_list,
    port_rule,
    read_ephemeral_range,
)
from tfslurm.step import FIELD_VARIABLES, Step

# the same on every Slurm version: tests/matrix.sh leaves these to the host's run
pytestmark = pytest.mark.pure

FIXTURES = {observed.fixture_id(p): observed.load(p) for p in observed.all_paths()}
STEPS = [(fid, label) for fid, fx in sorted(FIXTURES.items()) for label in fx.steps]
LINUX = DEFAULT_EPHEMERAL_RANGE


def rules_of(fid: str, label: str) -> list[tuple[observed.Task, Step, PortRule]]:
    out = []
    for task in FIXTURES[fid].steps[label]:
        step = Step.from_environ(task.env)
        try:
            layout = layout_for(step)
        except LayoutError:  # the arbitrary fixture's hostfile is gone
            layout = None
        max_tpn = max(hostlist.expand_counts(step.tasks_per_node))
        out.append((task, step, port_rule(step, max_tpn, ephemeral_range=LINUX, layout=layout)))
    return out


@pytest.mark.parametrize("fid, label", STEPS)
def test_recorded_steps_agree_on_a_rule_with_distinct_node_ports(fid: str, label: str) -> None:
    results = rules_of(fid, label)
    assert len({rule for _, _, rule in results}) == 1, "tasks of one step computed different rules"
    by_node: dict[str, list[int]] = defaultdict(list)
    for task, step, rule in results:
        by_node[task.hostname].append(rule.port(step.localid))
    for node, ports in by_node.items():
        assert len(ports) == len(set(ports)), f"{fid}/{label}: two tasks on {node} share a port: {ports}"


def components_used(fid: str, label: str) -> int:
    """How many het components the step's tasks really ran in (from their hostnames)."""
    owner: dict[str, int] = {}
    for task in FIXTURES[fid].steps[label]:
        for name, value in task.env.items():
            match = re.fullmatch(r"SLURM_JOB_NODELIST_(?:HET|PACK)_GROUP_(\d+)", name)
            if match:
                owner.update({node: int(match.group(1)) for node in hostlist.expand(value)})
    return len({owner.get(task.hostname, 0) for task in FIXTURES[fid].steps[label]})


@pytest.mark.parametrize("fid, label", STEPS)
def test_slurm_reserved_ports_are_used_by_local_id(fid: str, label: str) -> None:
    multi_het = components_used(fid, label) > 1
    for task, step, rule in rules_of(fid, label):
        reserved = task.env.get("SLURM_STEP_RESV_PORTS")
        if reserved and not multi_het:
            assert rule.kind == "reserved"
            assert rule.port(step.localid) == parse_port_list(reserved)[step.localid]
        else:
            assert rule.kind == "derived"
            low, high = derived_window(LINUX)
            assert low <= rule.port(step.localid) <= high


def test_het_step_does_not_trust_the_union_of_reservations() -> None:
    # Every task of the 2-component step sees the same union; node2's tasks would take
    # ports reserved only on node1. The derived rule is used instead.
    multi = [(f, label) for f, label in STEPS if components_used(f, label) > 1]
    assert ("10_het_srun", "s0") in multi and ("21_sbatch_hetjob", "s0_het01") in multi
    for fid, label in multi:
        for _task, step, rule in rules_of(fid, label):
            assert rule.kind == "derived"
            # ... also without the layout's help:
            assert port_rule(step, 3, ephemeral_range=LINUX).kind == "derived"
    for _task, _step, rule in rules_of("21_sbatch_hetjob", "s1_het1"):  # one component: fine
        assert rule == PortRule("reserved", ports=(20079, 20080, 20081, 20082))


# Ranges sites give MpiParams=ports: Slurm's documented example, Cray's, this suite's.
USUAL_MPI_RANGES = [(12000, 12999), (20000, 32767), (20000, 20100)]


def with_ids(step: Step, job_id: int, step_id: int) -> Step:
    """``step`` as a step of another job and step id."""
    fields = {name: getattr(step, name) for name in FIELD_VARIABLES}
    fields.update(job_id=job_id, step_id=step_id)
    return Step(step.context, **fields, gpus=step.gpus, settings=step.settings, env=step.env)


def test_het_step_derived_ports_avoid_usual_mpiparams_ranges() -> None:
    """Recorded het steps (MpiParams=ports=20000-20100): for every job id, their derived
    ports stay outside every usual MpiParams range and every port they were shown (a plain
    derived_base(2, 2, 4) = 20018 would sit inside 20000-20100)."""
    multi = [(f, label) for f, label in STEPS if components_used(f, label) > 1]
    for fid, label in multi:
        _task, step, _rule = rules_of(fid, label)[0]
        shown = parse_port_list(step.resv_ports)
        for job_id in [*range(1, 3000), 2, 4242, 2**31 + 7]:
            for step_id in (0, 1, 2, 7):
                rule = port_rule(with_ids(step, job_id, step_id), 4, ephemeral_range=LINUX)
                ports = [rule.port(i) for i in range(4)]
                assert rule.kind == "derived"
                assert not any(lo <= p <= hi for p in ports for lo, hi in USUAL_MPI_RANGES), (job_id, ports)
                assert not set(ports) & set(shown)


def test_mpi_clear_window_moves_past_the_shown_ports() -> None:
    assert derived_window(LINUX, reserved=(20007, 20011)) == (13000, 19999)
    assert derived_window(LINUX, reserved=()) == (13000, 19999)
    assert derived_window(LINUX, reserved=(15000, 15001)) == (61000, 65535)
    with pytest.raises(PortError, match="reserved ports leave no room"):
        derived_window((10000, 65535), reserved=(15000,))
    # without MpiParams (reserved None) the wide window and its values stay as they were
    assert derived_window(LINUX) == (10000, 32767)
    assert derived_base(2, 2, 4) == 20018
    assert 13000 <= derived_base(2, 2, 4, LINUX, reserved=()) <= 19999 - 4


def test_bare_resv_ports_reserves_nothing_so_ports_are_derived() -> None:
    for _task, step, rule in rules_of("14_resv_ports", "s0"):
        assert step.resv_ports is None and rule.kind == "derived"


def test_explicit_port_base_wins_over_reservation() -> None:
    step = Step.from_environ(FIXTURES["15_resv_ports_3"].steps["s0"][1].env)
    rule = port_rule(step, 2, port_base=8888)
    assert rule == PortRule("explicit", base=8888) and rule.port(1) == 8889
    env = dict(FIXTURES["15_resv_ports_3"].steps["s0"][1].env, TFSLURM_PORT_BASE="15000")
    assert port_rule(Step.from_environ(env), 2) == PortRule("explicit", base=15000)
    assert port_rule(Step.from_environ(env), 2, port_base=9000).base == 9000


@pytest.mark.parametrize("bad", [0, -1, 65536, True, "8888", 2.5])
def test_bad_port_base(bad: object) -> None:
    step = Step.from_environ(FIXTURES["01_block_N3_tpn2"].steps["s0"][0].env)
    with pytest.raises(PortError, match=r"^port_base=.* is not a port \(1..65535\)$"):
        port_rule(step, 2, port_base=bad)  # type: ignore[arg-type]


def test_bad_tfslurm_port_base() -> None:
    env = dict(FIXTURES["01_block_N3_tpn2"].steps["s0"][0].env, TFSLURM_PORT_BASE="80a")
    with pytest.raises(PortError, match=r"^TFSLURM_PORT_BASE='80a' is not a port"):
        port_rule(Step.from_environ(env), 2)


def test_port_base_too_high_for_the_tasks() -> None:
    step = Step.from_environ(FIXTURES["01_block_N3_tpn2"].steps["s0"][0].env)
    with pytest.raises(
        PortError, match="port_base=65535 leaves ports for 1 tasks per node, but a node runs 2"
    ):
        port_rule(step, 2, port_base=65535)


def test_too_few_reserved_ports_is_a_clear_error() -> None:
    step = Step.from_environ(FIXTURES["15_resv_ports_3"].steps["s0"][0].env)
    with pytest.raises(PortError, match=r"reserves 3 port\(s\) but a node runs 4 tasks; use --resv-ports=4"):
        port_rule(step, 4)


def test_reserved_rule_has_no_port_past_its_list() -> None:
    rule = PortRule("reserved", ports=(20060, 20061))
    with pytest.raises(
        PortError, match=r"local id 2 has no port: Slurm reserved 2 \(SLURM_STEP_RESV_PORTS=20060-20061\)"
    ):
        rule.port(2)
    with pytest.raises(PortError, match="local id -1 must be a non-negative integer"):
        rule.port(-1)


def test_derived_needs_a_job_id() -> None:
    with pytest.raises(SlurmEnvError, match="SLURM_JOB_ID is not set: not running under Slurm"):
        port_rule(Step.from_environ({}), 1, ephemeral_range=LINUX)


def test_max_tasks_per_node_must_be_positive() -> None:
    step = Step.from_environ(FIXTURES["01_block_N3_tpn2"].steps["s0"][0].env)
    with pytest.raises(PortError, match="max tasks per node 0 must be a positive integer"):
        port_rule(step, 0)


# --- port lists and encoding ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, ports",
    [
        ("20060-20062", (20060, 20061, 20062)),
        ("12005,12007-12009", (12005, 12007, 12008, 12009)),
        ("1", (1,)),
        ("65535", (65535,)),
    ],
)
def test_parse_port_list(text: str, ports: tuple[int, ...]) -> None:
    assert parse_port_list(text) == ports
    assert format_port_list(ports) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        "20000-",
        "-5",
        "0",
        "65536",
        "20005-20001",
        "1,1",
        "1-65535,2",
        "[1-3]",
        "1 2",
        "123456",
        "+5",
        "1- 3",
        "2000\u0661",
        "1,,2",
        "1--2",
    ],
)
def test_parse_port_list_rejects_garbage(text: str) -> None:
    with pytest.raises(PortError, match=r"^SLURM_STEP_RESV_PORTS=") as info:
        parse_port_list(text)
    assert "\n" not in str(info.value)


@given(
    st.one_of(
        st.lists(st.integers(1, 65535), min_size=1, max_size=40, unique=True).map(
            lambda ports: PortRule("reserved", ports=tuple(sorted(ports)))
        ),
        st.builds(PortRule, st.sampled_from(["derived", "explicit"]), base=st.integers(1, 65535)),
    )
)
def test_encode_decode_round_trip(rule: PortRule) -> None:
    text = rule.encode()
    assert PortRule.decode(text) == rule
    assert "," not in text or rule.kind == "reserved"
    assert len(text) < 16 or rule.kind == "reserved"


@pytest.mark.parametrize("text", ["", "r", "d", "x123", "d-1", "d65536", "e12a", "rfoo", "d123456", None, 5])
def test_decode_rejects_garbage(text: object) -> None:
    with pytest.raises(PortError):
        PortRule.decode(text)  # type: ignore[arg-type]


def test_rule_validation() -> None:
    with pytest.raises(PortError, match="port rule kind 'random' is not one of reserved, derived, explicit"):
        PortRule("random", base=1)
    with pytest.raises(PortError):
        PortRule("reserved")
    with pytest.raises(PortError):
        PortRule("derived", base=None)
    with pytest.raises(PortError, match="past 65535"):
        PortRule("explicit", base=65535).port(1)


def test_every_port_kind_is_shown_encoded_and_decoded() -> None:
    """A kind is its name: shown as is, one letter in the descriptor, read back the same."""
    rules = [
        PortRule("reserved", ports=(20000,)),
        PortRule("derived", base=23456),
        PortRule("explicit", base=8888),
    ]
    assert tuple(rule.kind for rule in rules) == PORT_KINDS
    assert [rule.encode() for rule in rules] == ["r20000", "d23456", "e8888"]
    assert [PortRule.decode(rule.encode()) for rule in rules] == rules
    assert [rule.describe() for rule in rules[1:]] == [
        "derived: 23456 + local id",
        "explicit: 8888 + local id",
    ]


# --- the derived rule ------------------------------------------------------------------------


def test_ephemeral_range_from_proc_and_fallbacks(tmp_path: Path) -> None:
    low, high = read_ephemeral_range()
    assert 1 <= low <= high <= 65535
    path = tmp_path / "range"
    path.write_text("15000\t61000\n")
    assert read_ephemeral_range(str(path)) == (15000, 61000)
    path.write_text("garbage")
    assert read_ephemeral_range(str(path)) == LINUX
    assert read_ephemeral_range(str(tmp_path / "missing")) == LINUX


@pytest.mark.parametrize(
    "ephemeral, window",
    [
        ((32768, 60999), (10000, 32767)),  # Linux default
        ((32768, 61000), (10000, 32767)),  # older kernels
        ((40000, 60999), (10000, 32767)),  # window does not grow: same answer on every node
        ((20000, 60999), (10000, 19999)),
        ((12000, 55000), (61000, 65535)),  # below is too small: above the range
        ((10000, 62000), (62001, 65535)),
    ],
)
def test_derived_window(ephemeral: tuple[int, int], window: tuple[int, int]) -> None:
    assert derived_window(ephemeral) == window


def test_no_room_for_derived_ports_is_a_clear_error() -> None:
    with pytest.raises(
        PortError, match=r"ephemeral port range 1024-65535 .* leaves no room for derived ports"
    ):
        derived_window((1024, 65535))


def test_derived_example_values_are_stable() -> None:
    # The formula is a contract between tasks (and versions): pin a few values.
    assert derived_base(1, 0, 4, LINUX) == 10000 + (2654435761 % (1 << 32)) % (22768 - 512)
    assert derived_base(12345, 2, 4, LINUX) == 10000 + ((12345 * 2654435761) % (1 << 32) + 128) % 22256
    assert derived_base(12345, 2, 1000, LINUX) == 10000 + ((12345 * 2654435761) % (1 << 32) + 128) % 21768


@given(
    job=st.integers(1, 2**32),
    step=st.integers(0, 2**32),
    tpn=st.integers(1, 2000),
    ephemeral=st.sampled_from([(32768, 60999), (20000, 60999), (12000, 55000), (16384, 65000)]),
)
def test_derived_ports_stay_in_window_and_out_of_ephemeral_range(
    job: int, step: int, tpn: int, ephemeral: tuple[int, int]
) -> None:
    low, high = derived_window(ephemeral)
    base = derived_base(job, step, tpn, ephemeral)
    assert low <= base and base + tpn - 1 <= high
    assert base + tpn - 1 < ephemeral[0] or base > ephemeral[1]


@settings(max_examples=300)
@given(
    job=st.integers(1, 2**31),
    step=st.integers(0, 10_000),
    apart=st.integers(1, (22256 - STEP_STRIDE) // STEP_STRIDE),
    tpn_a=st.integers(1, STEP_STRIDE),
    tpn_b=st.integers(1, STEP_STRIDE),
)
def test_steps_of_one_job_never_overlap(job: int, step: int, apart: int, tpn_a: int, tpn_b: int) -> None:
    a = derived_base(job, step, tpn_a, LINUX)
    b = derived_base(job, step + apart, tpn_b, LINUX)
    assert a + tpn_a <= b or b + tpn_b <= a, (a, b)


def test_nearby_jobs_land_far_apart() -> None:
    # 200 consecutive job ids (step 0, 8 tasks per node each): no two overlap.
    bases = sorted(derived_base(job, 0, 8, LINUX) for job in range(500_000, 500_200))
    assert min(b - a for a, b in itertools.pairwise(bases)) >= 8


@pytest.mark.parametrize("tpn", [4, 8])
def test_collision_odds_of_unrelated_jobs_match_the_docs(tpn: int) -> None:
    # All 1,124,250 pairs of 1500 random job ids, tpn tasks per node each: the share of
    # overlapping pairs is about (2 * tpn - 1) / M (measured 0.0305 % and 0.0672 %).
    ids = random.Random(5).sample(range(1, 10**7), 1500)
    bases = sorted(derived_base(job, 0, tpn, LINUX) for job in ids)
    overlaps = 0
    for i, a in enumerate(bases):
        j = i + 1
        while j < len(bases) and bases[j] < a + tpn:
            overlaps += 1
            j += 1
    share = overlaps / (len(bases) * (len(bases) - 1) // 2)
    expected = (2 * tpn - 1) / (22768 - SPAN_RESERVE)
    assert 0.5 * expected < share < 1.5 * expected
