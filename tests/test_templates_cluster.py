"""The sbatch templates run for real (tensorflow-cpu) on the local Slurm cluster.

* ``ps-evaluator.sbatch`` without the plugin (``tfslurm run`` plans from the step):
  chief + ps + evaluator + 2 workers; every scheduled step runs, the ps and the workers exit
  0 within 2 s of the chief, the evaluator follows the checkpoints and ends after the chief.
* ``mwms.sbatch`` submitted with ``sbatch --tf-dist=worker:*`` through the SPANK plugin:
  the tasks start with the plugin's TF_CONFIG and train in sync.
(``mwms.sbatch`` and ``ps.sbatch`` without the plugin: tests/test_runtime_cluster.py.)
"""

from __future__ import annotations

import re
import time

import pytest

from conftest import needs
from jobs import completed, example, final_digests, finish_times, job_env, ps_done, submit

pytestmark = [pytest.mark.cluster, pytest.mark.train, pytest.mark.tf, needs("tensorflow")]


def test_ps_evaluator_template(slurm_cluster, tmp_path):
    started = time.monotonic()
    program = example("ps", steps=60, log_every=20, checkpoint_every=20, step_delay=0.02)
    job, log = submit(slurm_cluster, tmp_path, "ps-evaluator.sbatch", *program)
    text = completed(slurm_cluster, job, log)
    rows = re.findall(r"^0: +(\d) +(\w+) +(\d) +node\d:\d+", text, re.MULTILINE)  # rank 0's plan table
    assert rows == [
        ("0", "chief", "0"),
        ("1", "ps", "0"),
        ("2", "evaluator", "0"),
        ("3", "worker", "0"),
        ("4", "worker", "1"),
    ], text[:3000]
    assert ps_done(text) == (60, 60), text[-3000:]
    times = finish_times(text)
    assert {"chief:0", "ps:0", "worker:0", "worker:1"} <= set(times), text[-3000:]
    for role in ("ps:0", "worker:0", "worker:1"):
        assert 0 <= times[role] - times["chief:0"] < 2.0, (role, times)
    evaluated = re.findall(r"\[evaluator:0\] evaluated \S+ \(step (\d+)\)", text)
    assert evaluated and int(evaluated[-1]) == 60, text[-3000:]
    assert "[evaluator:0] chief finished; evaluated" in text
    print(
        f"\nps-evaluator.sbatch (5 TF processes) end to end: {time.monotonic() - started:.1f} s; "
        f"servers exited {max(times[r] - times['chief:0'] for r in ('ps:0', 'worker:0', 'worker:1')):.2f} s "
        "after the chief"
    )


@pytest.fixture(scope="module")
def plugin_cluster(slurm_cluster_factory, tmp_path_factory):
    from plugin_build import build_plugin, build_tools_missing
    from tfslurm import prolog

    missing = build_tools_missing()
    if missing:
        pytest.skip(f"cannot build the plugin: {missing}")
    work = tmp_path_factory.mktemp("tplugin")
    work.chmod(0o755)
    plugin = build_plugin(work / "build")
    wrapper = prolog.write_wrapper(work / "tfslurm-taskprolog")
    return slurm_cluster_factory(plugstack_lines=[f"optional {plugin} prolog={wrapper}"])


def test_mwms_template_with_the_plugin(plugin_cluster, tmp_path):
    started = time.monotonic()
    program = example("mwms", steps=60)
    job, log = submit(plugin_cluster, tmp_path, "mwms.sbatch", *program, options=("--tf-dist=worker:*",))
    text = completed(plugin_cluster, job, log, timeout=120)
    assert len(re.findall(r"tfslurm run: worker:\d \(mwms, from TF_CONFIG\)", text)) == 2, text[:3000]
    finals = final_digests(text, 60)
    assert len(finals) == 2 and len(set(finals.values())) == 1, text[-3000:]
    print(f"\nmwms.sbatch --tf-dist through the plugin end to end: {time.monotonic() - started:.1f} s")


@pytest.mark.parametrize("template", ["mwms.sbatch", "ps.sbatch", "ps-evaluator.sbatch"])
def test_template_without_tfslurm_on_path_fails_naming_the_fix(slurm_cluster, tmp_path, template):
    """Submitted from a shell where the tfslurm environment is not active: the job fails in
    its first second with one line naming the fix, instead of execve() errors per task."""
    from tfslurm.runtime.templates import template_path

    tmp_path.chmod(0o755)
    env = dict(job_env(tmp_path), PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    env.pop("TFSLURM", None)
    out = slurm_cluster.run(["sbatch", "--parsable", "--output", str(tmp_path / "job.out"), template_path(template)],
                            env_extra=env, cwd=str(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    job = int(out.stdout.strip().split(";")[0])
    assert slurm_cluster.wait_job(job, timeout=60) == "FAILED"
    lines = (tmp_path / "job.out").read_text().splitlines()
    assert len(lines) == 1, lines
    assert (
        lines[0].startswith("tfslurm: command 'tfslurm' not found on ")
        and "activate the environment" in lines[0]
    )
    assert "TFSLURM=/path/to/bin/tfslurm" in lines[0]
