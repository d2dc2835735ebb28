"""Shapes of steps for the tests: a hypothesis strategy of task layouts over nodes (block,
cyclic, plane and shuffled), and the Slurm environment of one task of a small uneven step.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tfslurm.layout import Layout, block_layout, cyclic_layout, plane_layout


def task_env(**extra: str) -> dict[str, str]:
    """A task of a 3-task step over n9,n10 (2,1), rank 1 on n9."""
    env = {
        "SLURM_JOB_ID": "4242",
        "SLURM_STEP_ID": "3",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "0",
        "SLURMD_NODENAME": "n9",
        "SLURM_GTIDS": "0,1",
        "SLURM_STEP_NODELIST": "n[9-10]",
        "SLURM_STEP_TASKS_PER_NODE": "2,1",
        "SLURM_STEP_NUM_TASKS": "3",
        "SLURM_STEP_NUM_NODES": "2",
    }
    env.update(extra)
    return env


counts_strategy = st.lists(st.integers(1, 6), min_size=1, max_size=8)


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    counts = draw(counts_strategy)
    names = draw(
        st.lists(
            st.from_regex(r"[a-z]{1,3}(-[a-z]{1,2})?[0-9]{0,3}", fullmatch=True),
            min_size=len(counts), max_size=len(counts), unique=True,
        )
    )  # fmt: skip
    kind = draw(st.sampled_from(["block", "cyclic", "plane", "shuffled"]))
    if kind == "block":
        return block_layout(names, counts)
    if kind == "cyclic":
        return cyclic_layout(names, counts)
    if kind == "plane":
        return plane_layout(names, counts, draw(st.integers(1, 4)))
    order = draw(st.permutations([i for i, c in enumerate(counts) for _ in range(c)]))
    seen = [0] * len(counts)
    local = []
    for node in order:
        local.append(seen[node])
        seen[node] += 1
    return Layout(tuple(names), tuple(order), tuple(local), "arbitrary")
