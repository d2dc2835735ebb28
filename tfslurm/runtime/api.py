"""``tfslurm.run(main)``: run a training function as this task's role.

* MWMS (no ``ps`` job): chief/workers create ``MultiWorkerMirroredStrategy`` and call
  ``main(ctx)``; a peer that never comes up ends every waiting task with a clear error.
* ParameterServerStrategy: ps and worker tasks run a standard TF server and exit 0 soon
  after the chief finishes (``main`` is not called there); the chief creates the strategy
  and calls ``main(ctx)`` (use ``ctx.coordinator`` to schedule steps), then the process
  ends with main's int result as status (TF's coordinator threads would keep it alive). A
  parameter server that fails raises ``ParameterServerFailure`` (CLI: exit 75, optionally
  ``scontrol requeue``).
* evaluator: ``main(ctx)`` with TF's default strategy; ``ctx.wait_for_checkpoint`` follows
  the chief's checkpoints and returns None once the chief has finished.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from tfslurm.controller import ControllerError, controller
from tfslurm.errors import ParameterServerFailure, RestartCapReached
from tfslurm.plan import TaskPlan
from tfslurm.runtime import exits
from tfslurm.runtime import preemption as _preemption
from tfslurm.runtime.checkpoints import Checkpoints
from tfslurm.runtime.environ import install_environ, task_environ
from tfslurm.runtime.life import RunConfig, TaskLife, cap_refusal
from tfslurm.runtime.peers import ChiefWatch
from tfslurm.runtime.progress import Beacon
from tfslurm.runtime.roles import Role
from tfslurm.runtime.stops import ignore_signals
from tfslurm.runtime.tfimport import tensorflow
from tfslurm.runtime.watcher import start_watcher
from tfslurm.settings import Settings

T = TypeVar("T")


def is_ps_failure(error: BaseException) -> bool:
    """True for the errors ClusterCoordinator raises when a parameter server is gone."""
    try:  # here, not at the top: importing the runtime never loads TensorFlow
        from tensorflow.python.distribute.coordinator import cluster_coordinator as cc

        if hasattr(cc, "_is_ps_failure") and cc._is_ps_failure(error):
            return True
    except ImportError:  # pragma: no cover - TF layout changed
        pass
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__name__
        if "/job:ps" in str(current) and name in (
            "UnavailableError",
            "AbortedError",
            "PSUnavailableError",
            "CancelledError",
        ):
            return True
        current = getattr(current, "original_exception", None) or current.__cause__
    return False


def prepare(role: Role, environ: Mapping[str, str]) -> None:
    """Make ``environ`` with this task's TF_CONFIG, role and GPU variables the process's
    environment (the strategy and TF read them there); keep gRPC off proxies
    (``runtime.environ``)."""
    install_environ(task_environ(role, environ))


class RunContext:
    """What ``main(ctx)`` gets: the role, the strategy and the preemption/checkpoint help."""

    __slots__ = (
        "_beacon",
        "_chief_watch",
        "_coordinator",
        "peer_timeout",
        "preemption",
        "restart_count",
        "role",
        "strategy",
    )

    def __init__(
        self,
        role: Role,
        strategy: Any,
        preemption: _preemption.Preemption,
        restart_count: int,
        peer_timeout: float,
        beacon: Beacon | None = None,
    ) -> None:
        self.role = role
        self._beacon = beacon  # under tfslurm supervise: heartbeats and steps to it
        self.strategy = strategy
        self.preemption = preemption
        self.restart_count = restart_count
        self.peer_timeout = peer_timeout
        self._coordinator: Any = None  # created on first use (PSS chief only)
        self._chief_watch: ChiefWatch | None = None  # started on first use (evaluator)

    @property
    def is_chief(self) -> bool:
        return self.role.is_chief

    @property
    def preempted(self) -> bool:
        """This process received the preemption signal."""
        return self.preemption.requested

    def step(self, number: int) -> None:
        """Say that step ``number`` is done (call it on every rank, every step: a few
        microseconds). Under ``tfslurm supervise`` it times the steps, from which the
        window that finds a hung rank is derived; elsewhere it does nothing."""
        if self._beacon is not None:
            self._beacon.step(number)

    def own_time(self) -> contextlib.AbstractContextManager[None]:
        """``with ctx.own_time(): ...`` around this rank's own work in a step, the part
        before it waits for the others (its input, its host-side work): under ``tfslurm
        supervise`` a rank whose own time stays well above the others' is named a
        straggler (two clock reads per block); elsewhere it does nothing."""
        if self._beacon is None:
            return contextlib.nullcontext()
        return self._beacon.own_time()

    def should_stop(self) -> bool:
        """True on every worker once any worker was signalled (call it at step boundaries;
        under MWMS every worker must call it at the same steps: it is a collective)."""
        return _preemption.agreed_stop(self.strategy, self.preemption.requested)

    @property
    def coordinator(self) -> Any:
        """The ``ClusterCoordinator`` (ParameterServerStrategy chief only)."""
        if self.role.strategy != "ps" or self.role.job != "chief":
            raise RuntimeError("ctx.coordinator exists only on the chief under ps strategy")
        if self._coordinator is None:
            import tensorflow as tf  # here: importing the runtime never loads TensorFlow

            self._coordinator = tf.distribute.coordinator.ClusterCoordinator(self.strategy)
        return self._coordinator

    def checkpoints(self, checkpoint: Any, directory: str, max_to_keep: int = 3) -> Checkpoints:
        """A checkpoint manager that follows the chief/non-chief rule (see checkpoints.py)."""
        return Checkpoints(checkpoint, directory, self.role, max_to_keep, self.strategy)

    def chief_finished(self) -> bool:
        """Evaluator: True once the chief's server was up and has gone away, or was never
        seen within the peer timeout (so an evaluator that started late still ends)."""
        if self._chief_watch is None:
            self._chief_watch = watch_chief(self.role, self.peer_timeout)
        return self._chief_watch.finished.is_set()

    def wait_for_checkpoint(self, directory: str, last: str | None = None, poll: float = 0.2) -> str | None:
        """Evaluator: the next checkpoint after ``last``; None once the chief has finished
        and no newer checkpoint appeared."""
        import tensorflow as tf  # here: importing the runtime never loads TensorFlow

        while True:
            done = self.chief_finished()
            path: str | None = tf.train.latest_checkpoint(directory)
            if path is not None and path != last:
                return path
            if done:
                return None
            time.sleep(poll)


def watch_chief(role: Role, timeout: float) -> ChiefWatch:
    """A started ChiefWatch whose ``finished`` is also set when the chief never shows up."""
    watch: ChiefWatch

    def never_seen(missing: list[TaskPlan], waited: float) -> None:
        print(
            f"tfslurm run: {role.job}:{role.index}: {role.chief} was not seen within "
            f"{waited:.0f} s; treating the training as finished",
            file=sys.stderr,
            flush=True,
        )
        watch.finished.set()

    watch = ChiefWatch(role.chief, timeout=timeout, on_timeout=never_seen)
    return watch.start()


def make_strategy(role: Role) -> Any:
    """The strategy for this role (TF_CONFIG must already be in os.environ)."""
    tf = tensorflow()

    if role.job == "evaluator":
        return tf.distribute.get_strategy()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if role.strategy == "ps":
        return tf.distribute.experimental.ParameterServerStrategy(resolver)
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)


def run(
    main: Callable[[RunContext], T],
    *,
    jobs: str | None = None,
    peer_timeout: float | None = None,
    preemption_signal: str | int | None = None,
    requeue_on_ps_failure: bool | None = None,
) -> T:
    """Run ``main(ctx)`` as this task's role; ps/worker servers under PSS never return.

    ``jobs`` is the program's default jobs spec (``"chief:1,ps:1,worker:*"``): the role
    comes from TF_CONFIG, else TFSLURM_DESCRIPTOR, else the step's plan with
    TFSLURM_TF_DIST, else ``jobs``, else every task a worker (``runtime.life.jobs_spec``).
    ``peer_timeout`` defaults to TFSLURM_PEER_TIMEOUT or 300 s; ``preemption_signal`` to
    TFSLURM_PREEMPT_SIGNAL or USR1 (TFSLURM_STOP_SIGNALS, default TERM, also count). If
    a stop signal came, the process exits 85 (``exits.EXIT_STOPPED``) after ``main``
    returns instead of returning: the training was cut short. When a parameter
    server fails the chief prints one line and exits 75, after ``scontrol requeue`` of its
    job if ``requeue_on_ps_failure`` (default: TFSLURM_REQUEUE_ON_PS_FAILURE=1). Over the
    restart cap (TFSLURM_MAX_RESTARTS) it prints one line and exits 86, as ``tfslurm run``.
    """
    settings = Settings.from_environ()  # tfslurm's settings, read once for this process
    config = RunConfig.for_program(
        settings,
        os.environ,
        jobs=jobs,
        peer_timeout=peer_timeout,
        preemption_signal=preemption_signal,
        requeue_on_ps_failure=requeue_on_ps_failure,
    )
    life = TaskLife(config, settings, os.environ)
    try:
        life.check_cap()  # under tfslurm run its parent checked the cap already
    except RestartCapReached as reached:
        raise SystemExit(cap_refusal(reached)) from None
    role = life.resolve_role()
    # Under tfslurm run the child already handles them (and its parent translates SIGTERM);
    # in a container it started, this process is not that child: Slurm's own SIGTERM to
    # every process of the step reaches it here.
    handled = config.watched and not config.in_container
    flag = life.install_preemption(also=() if handled else config.stop_signals)
    prepare(role, os.environ)
    beacon = life.start_beacon(role)
    if role.is_server:
        life.serve(role)
    if not config.watched:  # tfslurm run's parent already watches
        start_watcher(role, config.peer_timeout)
    strategy = make_strategy(role)
    ctx = RunContext(role, strategy, flag, config.restarts, config.peer_timeout, beacon)
    if role.job == "evaluator":  # watch from the start: the chief may finish early
        ctx._chief_watch = watch_chief(role, config.peer_timeout)
    with ps_failure_exit(role, config, settings):
        result = main(ctx)
    if flag.requested:  # stopped by a signal: training is not finished, never exit 0
        print(
            f"tfslurm run: {role.job}:{role.index}: the program stopped after a stop "
            f"signal: exit {exits.EXIT_STOPPED} so that the job is requeued, not COMPLETED",
            file=sys.stderr,
            flush=True,
        )
        result = exits.EXIT_STOPPED  # type: ignore[assignment]
        # The first task to exit 85 ends the step (srun --kill-on-bad-exit: SIGTERM to every
        # task, SIGKILL after KillWait): the checkpoint is written, let the rest exit too.
        # That SIGTERM also reaches this process as the preemption signal (tfslurm run
        # translates it), and Python's shutdown puts the default action (death) back for a
        # signal with a Python handler: ignore them all (SIG_IGN survives the shutdown).
        ignore_signals(tuple(dict.fromkeys((signal.SIGTERM, config.preempt, *config.stop_signals))))
        if not (role.strategy == "ps" and role.job == "chief"):
            sys.stdout.flush()
            raise SystemExit(exits.EXIT_STOPPED)
    if role.strategy == "ps" and role.job == "chief":
        exit_now(result)
    return result


def exit_now(result: Any) -> None:
    """End a PSS chief at once when its program is done: ClusterCoordinator's threads keep
    the interpreter from exiting (measured: forever once a worker has died). atexit
    handlers still run (for at most 5 s); the exit status is ``result`` if it is an int."""
    sys.stdout.flush()
    sys.stderr.flush()
    done = threading.Thread(target=atexit._run_exitfuncs, daemon=True)
    done.start()
    done.join(5.0)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(result if isinstance(result, int) and 0 <= result < 256 else 0)


@contextlib.contextmanager
def ps_failure_exit(role: Role, config: RunConfig, settings: Settings) -> Iterator[None]:
    """A parameter-server failure inside becomes one line on stderr, when the config says
    so an ``scontrol requeue`` of its job (read at the entry point: never fails, whatever
    else is set) through the controller ``settings`` name, and exit status 75."""
    try:
        yield
    except Exception as exc:
        if role.strategy != "ps" or not (isinstance(exc, ParameterServerFailure) or is_ps_failure(exc)):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(
            f"tfslurm run: error: {role.describe()}: a parameter server failed "
            f"({type(exc).__name__}: {first[:200]}); training cannot continue without its "
            "variables: restart the job from its last checkpoint",
            file=sys.stderr,
            flush=True,
        )
        if config.requeue:
            requeue_job("parameter server failure", config.requeue_job, settings)
        sys.stdout.flush()
        os._exit(exits.EXIT_PS_FAILED)


def requeue_job(reason: str, job: str, settings: Settings) -> bool:
    """Requeue ``job`` through the controller of ``settings`` (needs ``#SBATCH --requeue``
    or JobRequeue=1); ``""``: not in a Slurm job, nothing to requeue."""
    if not job:
        print("tfslurm run: not in a Slurm job, nothing to requeue", file=sys.stderr)
        return False
    print(f"tfslurm run: requeueing job {job} ({reason})", file=sys.stderr, flush=True)
    try:
        controller(settings).requeue(job)
    except ControllerError as exc:
        print(f"tfslurm run: error: {exc}", file=sys.stderr)
        return False
    return True
