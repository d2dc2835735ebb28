"""One task's life, the same behind ``tfslurm run`` and the in-program ``tfslurm.run(main)``.

Each entry point reads its options and settings once, into a :class:`RunConfig` (one
constructor per entry point), and hands it to a :class:`TaskLife`, whose steps run in this
order: the restart cap, the role, the preemption and stop signals, then the TF server (ps
and PSS worker tasks) or the program. Nothing below the entry points reads the environment:
the config, the settings and the environment mapping are passed down.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Final, NoReturn

from tfslurm.errors import RestartCapReached
from tfslurm.runtime import preemption
from tfslurm.runtime.container import container_prefix
from tfslurm.runtime.exits import EXIT_RESTART_CAP
from tfslurm.runtime.preemption import Preemption
from tfslurm.runtime.progress import Beacon, ProgressTarget, cut_off_line, progress_target, watch_reach
from tfslurm.runtime.roles import Role, resolve_role
from tfslurm.runtime.servers import serve
from tfslurm.runtime.stops import ignore_signals, restart_cap_message
from tfslurm.settings import (
    Settings,
    parse_max_restarts,
    parse_peer_timeout,
    parse_stop_grace,
    signal_number,
    stop_signals,
)
from tfslurm.step import requeue_job_name, restart_count_from_environ
from tfslurm.value import Value


def jobs_spec(option: str | None, settings: Settings, default: str | None = None) -> str | None:
    """The jobs spec a task's plan is made with, by the one rule: the ``--jobs`` option,
    else TFSLURM_TF_DIST, else the program's own default (``tfslurm.run(main, jobs=...)``),
    else None: every task a worker. (TF_CONFIG, then TFSLURM_DESCRIPTOR, come before any
    jobs spec: :func:`tfslurm.runtime.roles.resolve_role`.)"""
    return option or settings.tf_dist or default or None


class RunConfig(Value):
    """Everything a task's life needs, resolved once at its entry point: options over
    settings over defaults, each parsed (a bad one is a one-line error naming it)."""

    __match_args__ = (
        "jobs",
        "peer_timeout",
        "preempt",
        "stop_signals",
        "stop_grace",
        "max_restarts",
        "restarts",
        "requeue",
        "requeue_job",
        "container",
        "watched",
        "in_container",
        "progress",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        *,
        jobs: str | None = None,
        peer_timeout: float,
        preempt: int,
        stop_signals: tuple[int, ...],
        stop_grace: float | None = None,
        max_restarts: int | None = None,
        restarts: int = 0,
        requeue: bool = False,
        requeue_job: str = "",
        container: tuple[str, ...] = (),
        watched: bool = False,
        in_container: bool = False,
        progress: ProgressTarget | None = None,
    ) -> None:
        self.jobs: Final = jobs  # the jobs spec (jobs_spec); None: every task a worker
        self.peer_timeout: Final = peer_timeout  # seconds a missing peer is waited for
        self.preempt: Final = preempt  # the preemption signal a Python program handles
        self.stop_signals: Final = stop_signals  # the signals that mean checkpoint-and-stop
        self.stop_grace: Final = stop_grace  # seconds from a stop signal to SIGKILL; None: Slurm's
        self.max_restarts: Final = max_restarts  # the restart cap; None: none to check here
        self.restarts: Final = restarts  # SLURM_RESTART_COUNT
        self.requeue: Final = requeue  # requeue the job when a parameter server fails
        self.requeue_job: Final = requeue_job  # the job scontrol requeue takes; "": none
        self.container: Final = container  # the container command's words; empty: no container
        self.watched: Final = watched  # tfslurm run's parent watches this process (TFSLURM_WATCHED)
        self.in_container: Final = in_container  # ... from outside the container it started
        self.progress: Final = progress  # where the program's heartbeats go (tfslurm supervise)

    @property
    def forwarded(self) -> tuple[int, ...]:
        """The signals ``tfslurm run``'s parent passes on: SIGTERM, SIGINT and the stop signals."""
        return tuple(dict.fromkeys((signal.SIGTERM, signal.SIGINT, *self.stop_signals)))

    @classmethod
    def for_command(
        cls,
        settings: Settings,
        environ: Mapping[str, str],
        *,
        jobs: str | None = None,
        peer_timeout: float | None = None,
        preempt_signal: str | None = None,
        stop_signals_text: str | None = None,
        stop_grace: str | None = None,
        max_restarts: str | None = None,
        requeue_on_ps_failure: bool = False,
        container: Sequence[str] = (),
    ) -> RunConfig:
        """``tfslurm run``'s options (None: not given) over ``settings`` (``environ``'s);
        ``container``: the container command typed before the program (empty: none), over
        TFSLURM_CONTAINER."""
        cap = settings.max_restarts() if max_restarts is None else parse_max_restarts(max_restarts)
        grace = settings.stop_grace() if stop_grace is None else parse_stop_grace(stop_grace)
        restarts = restart_count_from_environ(environ)
        timeout = settings.peer_timeout() if peer_timeout is None else parse_peer_timeout(str(peer_timeout))
        preempt = settings.preempt_signal() if preempt_signal is None else signal_number(preempt_signal)
        stops = (
            settings.stop_signals(preempt)
            if stop_signals_text is None
            else stop_signals(stop_signals_text, preempt)
        )
        requeue = requeue_on_ps_failure or settings.requeue_on_ps_failure
        configured = container_prefix(settings.container) if settings.container and not container else ()
        return cls(
            jobs=jobs_spec(jobs, settings),
            peer_timeout=timeout,
            preempt=preempt,
            stop_signals=stops,
            stop_grace=grace,
            max_restarts=cap,
            restarts=restarts,
            requeue=requeue,
            requeue_job=requeue_job_name(environ) if requeue else "",
            container=tuple(container) or configured,
            progress=progress_target(settings.progress_text),
        )

    @classmethod
    def for_program(
        cls,
        settings: Settings,
        environ: Mapping[str, str],
        *,
        jobs: str | None = None,
        peer_timeout: float | None = None,
        preemption_signal: str | int | None = None,
        requeue_on_ps_failure: bool | None = None,
    ) -> RunConfig:
        """``tfslurm.run(main, ...)``'s arguments (None: not given) over ``settings``
        (``environ``'s). ``jobs`` is the program's default jobs spec (:func:`jobs_spec`).
        Under ``tfslurm run`` (TFSLURM_WATCHED) its parent checked the restart cap already."""
        timeout = settings.peer_timeout() if peer_timeout is None else parse_peer_timeout(str(peer_timeout))
        restarts = restart_count_from_environ(environ)
        cap = None if settings.watched else settings.max_restarts()
        preempt = settings.preempt_signal() if preemption_signal is None else signal_number(preemption_signal)
        requeue = settings.requeue_on_ps_failure if requeue_on_ps_failure is None else requeue_on_ps_failure
        return cls(
            jobs=jobs_spec(None, settings, jobs),
            peer_timeout=timeout,
            preempt=preempt,
            stop_signals=settings.stop_signals(preempt),
            max_restarts=cap,
            restarts=restarts,
            requeue=requeue,
            requeue_job=requeue_job_name(environ) if requeue else "",
            watched=settings.watched,
            in_container=settings.watched_in_container,
            progress=progress_target(settings.progress_text),
        )


def cap_refusal(reached: RestartCapReached) -> int:
    """What each entry point does when the restart cap refuses the run: one line on
    stderr, and the status to exit with."""
    print(f"tfslurm run: error: {reached}", file=sys.stderr, flush=True)
    return EXIT_RESTART_CAP


class TaskLife:
    """One task's life: its config, the settings and the environment it was resolved from,
    and the steps in order (cap, role, signals, server); the role and the preemption flag
    are this object's once their steps have run."""

    __slots__ = ("config", "environ", "flag", "role", "settings")

    def __init__(self, config: RunConfig, settings: Settings, environ: Mapping[str, str]) -> None:
        self.config: Final = config
        self.settings: Final = settings
        self.environ: Final = environ
        self.role: Role | None = None
        self.flag: Preemption | None = None

    def check_cap(self) -> None:
        """Raise RestartCapReached when the job was restarted more often than the cap."""
        refused = restart_cap_message(self.config.restarts, self.config.max_restarts)
        if refused:
            ignore_signals((signal.SIGTERM,))  # the other tasks' 86 ends the step: keep this status
            raise RestartCapReached(refused)

    def resolve_role(self) -> Role:
        """This task's role: TF_CONFIG, else TFSLURM_DESCRIPTOR, else the step's plan with
        the config's jobs spec."""
        self.role = resolve_role(self.environ, self.config.jobs, settings=self.settings)
        return self.role

    def install_preemption(self, also: tuple[int, ...] = ()) -> Preemption:
        """Handle the preemption signal (and ``also`` these) in this process: the flag."""
        self.flag = preemption.install(self.config.preempt, also)
        return self.flag

    def start_beacon(self, role: Role) -> Beacon | None:
        """Under ``tfslurm supervise``: this task's heartbeats, from a thread of this
        process (a TF server's too: a stopped one is then found hung like a program)."""
        if self.config.progress is None:
            return None
        node = role.cluster.nodes[role.cluster.rank_node[role.rank]]
        return Beacon(self.config.progress, role.rank, f"{role.job}:{role.index}", node).start()

    def serve(self, role: Role) -> NoReturn:
        """Run ``role``'s TF server (ps, PSS worker) in this process until the chief has
        finished; the stop signals other than SIGTERM are ignored (the chief checkpoints)."""
        target = self.config.progress
        if target is not None:  # under tfslurm supervise: end the server if cut off

            def on_cut_off(silent: float) -> None:
                print(
                    cut_off_line(f"{role.job}:{role.index}", target, silent, "its server"),
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(128 + signal.SIGKILL)  # as a program cut off ends: killed

            threading.Thread(target=watch_reach, args=(target, on_cut_off), daemon=True).start()
        late = tuple(n for n in self.config.stop_signals if n != signal.SIGTERM)
        serve(role, peer_timeout=self.config.peer_timeout, ignore_signals=late)
