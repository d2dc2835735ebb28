"""Session fixtures: a real local Slurm cluster (see docs/test-cluster.md).

``slurm_cluster``: 4 nodes ``node[1-4]``, each in its own namespaces, 4 fake GPUs per
node, ``MpiParams=ports=20000-20100``, no TaskProlog, empty plugstack.
``slurm_cluster_factory(**options)``: a cached running cluster per distinct set of
``ClusterConfig`` options (``gpus=0``, ``node_prefix="tf-gpu", node_digits=3``,
``task_prolog=...``, ``plugstack_lines=[...]``, ``num_nodes=N``, ``cpus=N``,
``resv_ports=None`` (no MpiParams)...).

Without root or Slurm the cluster tests skip with the reason; with ``CI=true`` they fail
instead, so a CI run can never pass by skipping the tests that matter.
"""

from __future__ import annotations

import collections
import functools
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from xdist.scheduler import LoadScopeScheduling

from tfslurm.errors import ClusterError
from tfslurm.localcluster import (
    ClusterConfig,
    LocalCluster,
    missing_requirements,
    reap_orphans,
)

# Input generation and examples timed against the wall clock fail a property test on a busy
# machine (the cluster tests share its CPUs); the properties themselves are checked all the
# same. Speed is measured in bench/, not here.
settings.register_profile("tfslurm", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("tfslurm")

pytest_plugins = ["pytester"]  # tests/test_localcluster.py runs inner sessions


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


# install.sh writes, into the venv, one line per optional runtime it cannot install on this
# machine ("torch: no PyTorch CPU build for Python 3.13 here"). Tests needing such a runtime
# skip with that reason even in CI; any other missing runtime is a failure in CI.
ABSENT_RUNTIMES = Path(sys.prefix) / "tfslurm-absent-runtimes.txt"
DECLARED = "[declared absent by install.sh]"


def declared_absent() -> dict[str, str]:
    """Runtime module -> why install.sh could not install it here."""
    try:
        lines = ABSENT_RUNTIMES.read_text().splitlines()
    except OSError:
        return {}
    return {name.strip(): why.strip() for name, _, why in (line.partition(":") for line in lines) if why}


def skip_without(*modules: str) -> None:
    """Skip the calling test unless every module imports (in CI: fail, unless declared absent)."""
    for module in modules:
        if importlib.util.find_spec(module) is not None:
            continue
        why = declared_absent().get(module)
        if why:
            pytest.skip(f"{module} is not installed: {why} {DECLARED}")
        pytest.skip(f"{module} is not installed")


def needs(module: str) -> pytest.MarkDecorator:
    """A mark: skip unless ``module`` imports (the reason says whether install.sh declared it absent)."""
    why = declared_absent().get(module)
    reason = f"{module} is not installed" + (f": {why} {DECLARED}" if why else "")
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=reason)


def skip_or_fail(reason: str) -> None:
    """pytest.skip outside CI; in CI a skipped cluster test is a failure."""
    if in_ci():
        pytest.fail(f"CI=true and the cluster tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def tfslurm_cli(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m tfslurm ARGS`` run to its end (in ``cwd``) with ``env`` over this session's
    environment less its SLURM_*, TFSLURM_*, TF_CONFIG and CUDA* variables."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "TFSLURM", "TF_CONFIG", "CUDA"))
    }
    return subprocess.run(
        [sys.executable, "-m", "tfslurm", *args],
        env=clean | (env or {}),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )


# A TF_CONFIG of one worker on 127.0.0.1:1, for `tfslurm run` outside Slurm.
SINGLE_WORKER = json.dumps({"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}})


def tfslurm_run(
    *args: str, tf_config: str = SINGLE_WORKER, cwd: Path | None = None, **env: str
) -> subprocess.Popen[str]:
    """``tfslurm run ARGS`` outside Slurm (in ``cwd``), its role from ``tf_config``: none of
    this session's SLURM_* and TFSLURM_* variables, TF's start-up quiet, stdout and stderr
    piped as text."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "TFSLURM"))}
    full.update({"TF_CONFIG": tf_config, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"})
    full.update({"no_proxy": "*"}, **env)
    return subprocess.Popen(
        [sys.executable, "-m", "tfslurm", "run", *args],
        env=full,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# A program that waits up to 20 s for tfslurm's stop flag and says whether it came.
STOPPABLE = (
    "import sys, time, tfslurm.runtime as r\n"
    "print('ready', flush=True)\n"
    "end = time.time() + 20\n"
    "while not r.requested() and time.time() < end: time.sleep(0.05)\n"
    "print('stopped' if r.requested() else 'timeout', flush=True)\n"
)


def started(tmp: Path, program: str, *options: str) -> subprocess.Popen[str]:
    """``tfslurm run OPTIONS -- python prog.py``, ``program`` the text of a script that
    prints "ready" first, once it did."""
    script = tmp / "prog.py"
    script.write_text(program)
    proc = tfslurm_run(*options, "--", "python", str(script))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI, a cluster test that skips itself (for any reason) is reported as failed."""
    outcome = yield
    report = outcome.get_result()
    if (
        in_ci()
        and report.skipped
        and not hasattr(report, "wasxfail")
        and item.get_closest_marker("cluster") is not None
        and DECLARED not in _skip_reason(report)
    ):
        reason = _skip_reason(report)
        report.outcome = "failed"
        report.longrepr = f"CI=true: cluster test was skipped ({reason}); skips count as failures in CI"
    if report.failed and report.when == "call":
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, LocalCluster):
                report.sections.append(
                    (f"slurmctld of {name}: node and job events", controller_events(value))
                )


# What the controller decided about nodes and jobs: a failed cluster test's own output
# shows what the job saw (a "Node failure"), never why the controller decided it.
CONTROLLER_EVENT = re.compile(
    r"not responding|DOWN|Removing failed|requeue|Requeuing|update_node|drain", re.I
)


def controller_events(cluster: LocalCluster, last: int = 40) -> str:
    path = cluster.files.path("log", "slurmctld.log")
    try:
        with open(path, errors="replace") as log:
            lines = [line for line in log if CONTROLLER_EVENT.search(line)]
    except OSError as exc:
        return f"(no controller log: {exc})"
    return "".join(lines[-last:]) or "(none)"


# What marks a module `pure`: this line, exactly, at its top level. The xdist scheduler
# below sees only test ids, not marks, so it reads the modules; the collection hook checks
# that both readings agree. Likewise a module whose top-level `pytestmark` line names
# TRAIN_MARK: its Slurm tests run training programs.
PURE_LINE = "pytestmark = pytest.mark.pure"
TRAIN_MARK = "pytest.mark.train"
SLURM_GROUP = "slurm"
TRAIN_GROUP = "slurm-train"


@functools.cache
def module_group(path: Path) -> str | None:
    """The work unit of the test module at ``path``: None for a ``pure`` module (each of
    its tests a unit of its own), else its group of Slurm tests."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return SLURM_GROUP
    if PURE_LINE in lines:
        return None
    marks = [line for line in lines if line.startswith("pytestmark = ")]
    return TRAIN_GROUP if any(TRAIN_MARK in line for line in marks) else SLURM_GROUP


class SlurmGroupsScheduling(LoadScopeScheduling):
    """The Slurm tests in two work units, each run in one worker, in order: those that run
    training programs (TensorFlow and the other frameworks: most of the CPU) and the rest
    (the hook, the plugin, layouts, ports: mostly waiting on Slurm). Both start at once
    (xdist's loadscope gives the largest units out first); the ``pure`` tests fill the
    workers after them. Training beside training would double the heaviest load; the light
    group beside it shortens the run by its own length."""

    def _split_scope(self, nodeid: str) -> str:
        group = module_group(self.config.rootpath / nodeid.split("::", 1)[0])
        return nodeid if group is None else group


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> SlurmGroupsScheduling:
    return SlurmGroupsScheduling(config, log)


class GroupTimes:
    """Each work unit's summed test time, in the run's summary. A Slurm group runs one test
    after another in one worker, so its sum is about how long the run waits for it: which
    group is CI's tail, and by how much."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seconds: collections.Counter[str] = collections.Counter()
        self.tests: collections.Counter[str] = collections.Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        group = module_group(self.root / report.nodeid.split("::", 1)[0]) or "pure"
        self.seconds[group] += report.duration
        self.tests[group] += report.when == "call"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.seconds:
            groups = ", ".join(
                f"{group} {seconds / 60:.1f} min ({self.tests[group]} tests)"
                for group, seconds in self.seconds.most_common()
            )
            terminalreporter.write_line(f"summed test time by group: {groups}")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controlling process sees every report
        config.pluginmanager.register(GroupTimes(config.rootpath), "tfslurm-group-times")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = module_group(item.path)
        if (item.get_closest_marker("pure") is not None) != (group is None):
            raise pytest.UsageError(
                f"{item.nodeid}: mark a module pure only with the top-level line {PURE_LINE!r} "
                "(the scheduler that groups the Slurm tests reads that line)"
            )
        if (item.get_closest_marker("train") is not None) != (group == TRAIN_GROUP):
            raise pytest.UsageError(
                f"{item.nodeid}: mark a module train only in its top-level `pytestmark = ` line "
                "(the scheduler that groups the Slurm tests reads that line)"
            )


def _skip_reason(report: pytest.TestReport) -> str:
    return report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


class _ClusterPool:
    """One running cluster per configuration, all stopped at the end of the session."""

    def __init__(self) -> None:
        self.clusters: dict[tuple[Any, ...], LocalCluster] = {}
        self.failures: dict[tuple[Any, ...], str] = {}

    def get(self, **options: Any) -> LocalCluster:
        missing = missing_requirements()
        if missing:
            skip_or_fail("local Slurm cluster unavailable: " + "; ".join(missing))
        config = ClusterConfig.from_options(**options)
        key = config.cache_key()
        if key in self.failures:  # do not retry a start that already failed this session
            pytest.fail(self.failures[key], pytrace=False)
        cluster = self.clusters.get(key)
        if cluster is not None and len(cluster.live_daemons()) != len(cluster.nodes) + 1:
            cluster.stop()  # a test killed a daemon: start this configuration afresh
            cluster = None
        if cluster is None or not cluster.running:
            cluster = LocalCluster(config)
            try:
                cluster.start()
            except ClusterError as exc:
                self.failures[key] = f"local Slurm cluster {options or '(default)'} failed to start: {exc}"
                pytest.fail(self.failures[key], pytrace=False)
            self.clusters[key] = cluster
        return cluster

    def stop_all(self) -> None:
        threads = [threading.Thread(target=c.stop) for c in self.clusters.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.clusters.clear()


@pytest.fixture(scope="session")
def slurm_cluster_factory() -> Iterator[Callable[..., LocalCluster]]:
    """``factory(**options) -> LocalCluster``: a running cluster for these options (cached)."""
    if not missing_requirements():
        reap_orphans()  # clusters of earlier test runs that were killed before teardown
    pool = _ClusterPool()
    # A test run ended by SIGTERM (e.g. `timeout pytest`) still stops its clusters.
    previous = signal.getsignal(signal.SIGTERM)
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread and previous in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        yield pool.get
    finally:
        pool.stop_all()
        if main_thread and previous in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def slurm_cluster(slurm_cluster_factory: Callable[..., LocalCluster]) -> LocalCluster:
    """The default cluster: node[1-4], 4 fake GPUs each, no TaskProlog, empty plugstack."""
    return slurm_cluster_factory()
