"""In-allocation recovery from a lost node: what ``tfslurm supervise`` decides and runs.

The batch script runs ``tfslurm supervise -- srun ... tfslurm run -- PROGRAM``. With
``sbatch --no-kill`` Slurm keeps the allocation when one of its nodes fails: it kills that
node's steps and removes the node from the job, and new steps may run on the rest. The
supervisor launches the step on the training nodes (every node of the job but
``TFSLURM_SPARE_NODES``), and when the step fails asks the controller which of its nodes
the job lost; it relaunches on the survivors plus a spare (same worker count; the program
resumes from its newest checkpoint), or, without a spare, requeues the job (exit 85, the
templates' requeue path) or, with ``TFSLURM_ON_NODE_LOSS=shrink``, goes on with fewer
nodes. ``SLURM_JOB_NODELIST`` is the job's list at its start, and srun takes the batch
environment's node count as its default ``-N``: a relaunch passes ``-N`` and ``-w`` itself
and sets the job's node variables to the controller's answer.

A node that dies silently is listed up by Slurm for minutes: the supervisor probes the
nodes itself when the step shows trouble (``tfslurm.runtime.probe``) and ends the step
without waiting for a silent one, which stays out for the rest of the allocation.

Decisions (:func:`first_placement`, :func:`after_failure`) are pure functions of what the
controller said; :class:`Supervisor` runs srun, passes its output and signals on, and times
each relaunch from the failure to the program's first step line after it.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

from tfslurm.errors import NodeLossError
from tfslurm.errors import clip as _clip
from tfslurm.numbers import ascii_int
from tfslurm.runtime.exits import EXIT_STOPPED, FINAL_STATUSES
from tfslurm.runtime.jobend import drop_silent
from tfslurm.runtime.probe import TROUBLE, probe_due
from tfslurm.settings import (
    HEARTBEAT_VARIABLE,
    ON_NODE_LOSS_VARIABLE,
    SPARE_NODES_VARIABLE,
    STEP_LINE_VARIABLE,
    STEP_RESTARTS_VARIABLE,
    recovery_settings,
)
from tfslurm.step import batch_job
from tfslurm.value import Value

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import IO, Final, TextIO

    from tfslurm.runtime.probe import Prober


# Relaunches allowed in one allocation when spares, shrink or the heartbeat are on and
# TFSLURM_STEP_RESTARTS is not set (without them the default stays 0: no relaunch).
DEFAULT_NODE_RESTARTS = 3
DEFAULT_STEP_LINE = r"\bstep (\d+)/\d+"
PREFIX = "tfslurm:"  # as the templates' own lines


class RecoverySettings(Value):
    """The ``tfslurm supervise`` variables as set (None: unset), parsed by :class:`Recovery`."""

    __slots__ = ("heartbeat", "on_node_loss", "spares", "step_line", "step_restarts")
    __match_args__ = ("spares", "on_node_loss", "step_restarts", "heartbeat", "step_line")

    def __init__(
        self,
        spares: str | None = None,
        on_node_loss: str | None = None,
        step_restarts: str | None = None,
        heartbeat: str | None = None,
        step_line: str | None = None,
    ) -> None:
        self.spares: Final = spares
        self.on_node_loss: Final = on_node_loss
        self.step_restarts: Final = step_restarts
        self.heartbeat: Final = heartbeat
        self.step_line: Final = step_line

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> RecoverySettings:
        """The variables of ``env`` (the entry's snapshot of the environment)."""
        return cls(**recovery_settings(env))


class BatchJob(Value):
    """What ``tfslurm supervise`` needs of the batch script's environment: the job, the
    task count it asked for (None: srun's default, one per node unless set otherwise) and
    whether it was submitted to keep its allocation when a node fails. Slurm shows a job no
    sign of ``sbatch --no-kill`` (neither a variable nor ``scontrol show job`` on 22.05);
    ``SBATCH_NO_KILL=set`` at submission means the same to sbatch and reaches the job."""

    __slots__ = ("job_id", "no_kill", "ntasks", "ntasks_per_node")
    __match_args__ = ("job_id", "ntasks", "ntasks_per_node", "no_kill")

    def __init__(
        self, job_id: int | None, ntasks: int | None, ntasks_per_node: int | None, no_kill: bool
    ) -> None:
        self.job_id: Final = job_id
        self.ntasks: Final = ntasks  # SLURM_NTASKS: the whole job's, spares included
        self.ntasks_per_node: Final = ntasks_per_node  # SLURM_NTASKS_PER_NODE
        self.no_kill: Final = no_kill

    def tasks_on(self, nodes: int, job_nodes: int) -> int | None:
        """The task count of a step on ``nodes`` of the job's ``job_nodes``: the tasks per
        node it asked for, else its task count in proportion (None: srun's default)."""
        if self.ntasks_per_node:
            return self.ntasks_per_node * nodes
        if self.ntasks:
            return max(nodes, self.ntasks * nodes // max(job_nodes, 1))
        return None

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> BatchJob:
        """The variables of ``env`` (the entry's snapshot of the environment)."""
        return cls(*batch_job(env))


#: A job that is not a batch job: srun's defaults, killed with a lost node.
NO_JOB = BatchJob(None, None, None, False)


class Recovery(Value):
    """What to do when a step fails: spares kept idle, shrink allowed, relaunches allowed,
    seconds without a step line that mean a stuck step (None: no heartbeat), the step line."""

    __slots__ = ("heartbeat", "restarts", "shrink", "spares", "step_line")
    __match_args__ = ("spares", "shrink", "restarts", "heartbeat", "step_line")

    def __init__(
        self,
        spares: int = 0,
        shrink: bool = False,
        restarts: int = 0,
        heartbeat: float | None = None,
        step_line: str = DEFAULT_STEP_LINE,
    ) -> None:
        self.spares: Final = spares
        self.shrink: Final = shrink
        self.restarts: Final = restarts
        self.heartbeat: Final = heartbeat
        self.step_line: Final = step_line

    @property
    def places_nodes(self) -> bool:
        """Spares or shrink: the supervisor chooses the step's nodes (``-N``/``-w``)."""
        return self.spares > 0 or self.shrink

    @classmethod
    def parse(cls, settings: RecoverySettings, job: BatchJob) -> Recovery:
        """From the variables; a NodeLossError naming the variable and the fix."""
        spares = _count(SPARE_NODES_VARIABLE, settings.spares, 0)
        mode = (settings.on_node_loss or "requeue").strip().lower()
        if mode not in ("requeue", "shrink"):
            raise NodeLossError(
                f"{ON_NODE_LOSS_VARIABLE}={_clip(settings.on_node_loss or '')!r}: expected requeue or shrink"
            )
        shrink = mode == "shrink"
        heartbeat = None
        if settings.heartbeat is not None:
            try:
                heartbeat = float(settings.heartbeat)
            except ValueError:
                heartbeat = -1.0
            if not 0 < heartbeat < float("inf"):
                raise NodeLossError(
                    f"{HEARTBEAT_VARIABLE}={_clip(settings.heartbeat)!r}: expected a positive number of seconds"
                )
        default = DEFAULT_NODE_RESTARTS if spares or shrink or heartbeat else 0
        restarts = _count(STEP_RESTARTS_VARIABLE, settings.step_restarts, default)
        step_line = settings.step_line or DEFAULT_STEP_LINE
        try:
            re.compile(step_line)
        except re.error as exc:
            raise NodeLossError(
                f"{STEP_LINE_VARIABLE}={_clip(step_line)!r} is not a regular expression: {exc}"
            ) from None
        if (spares or shrink) and not job.no_kill:
            what = f"{SPARE_NODES_VARIABLE}={spares}" if spares else f"{ON_NODE_LOSS_VARIABLE}=shrink"
            raise NodeLossError(
                f"{what} needs a job that keeps its allocation when a node fails: submit with "
                "SBATCH_NO_KILL=set sbatch ... (sbatch --no-kill alone is invisible to the job)"
            )
        return cls(spares, shrink, restarts, heartbeat, step_line)


def _count(name: str, text: str | None, default: int) -> int:
    if text is None or not text.strip():
        return default
    value = ascii_int(text.strip())
    if value is None:
        raise NodeLossError(f"{name}={_clip(text)!r}: expected an integer >= 0")
    return value


class Placement(Value):
    """The nodes a step runs on and its task count (None: srun's default)."""

    __slots__ = ("nodes", "ntasks")
    __match_args__ = ("nodes", "ntasks")

    def __init__(self, nodes: tuple[str, ...], ntasks: int | None = None) -> None:
        self.nodes: Final = nodes
        self.ntasks: Final = ntasks

    def srun_options(self) -> list[str]:
        options = ["-N", str(len(self.nodes)), "-w", ",".join(self.nodes)]
        return options + (["-n", str(self.ntasks)] if self.ntasks is not None else [])


def first_placement(
    recovery: Recovery, job_nodes: Sequence[str], usable: Sequence[str], job: BatchJob
) -> Placement:
    """The training nodes: the job's usable nodes in Slurm's order but the last ``spares``;
    as many tasks on each as the job asked for (:meth:`BatchJob.tasks_on`)."""
    ready = [n for n in job_nodes if n in usable]
    if recovery.spares >= len(ready):
        raise NodeLossError(
            f"{SPARE_NODES_VARIABLE}={recovery.spares} leaves no node to train on: the job has "
            f"{len(ready)} usable node(s); ask for more nodes (sbatch --nodes={len(ready) + recovery.spares}) "
            "or fewer spares"
        )
    nodes = tuple(ready[: len(ready) - recovery.spares])
    return Placement(nodes, job.tasks_on(len(nodes), len(job_nodes)))


class Decision(Value):
    """After a failed step: ``relaunch`` on ``placement``, ``requeue`` (exit 85) or
    ``fail`` (the step's status); ``lost`` the step's nodes the job no longer has usable,
    ``line`` what the log says."""

    __slots__ = ("action", "line", "lost", "placement")
    __match_args__ = ("action", "placement", "lost", "line")

    def __init__(self, action: str, placement: Placement | None, lost: tuple[str, ...], line: str) -> None:
        self.action: Final = action
        self.placement: Final = placement
        self.lost: Final = lost
        self.line: Final = line


def after_failure(
    recovery: Recovery,
    placement: Placement,
    job_nodes: Sequence[str],
    usable: Sequence[str],
    status: int,
    relaunches_left: int,
) -> Decision:
    """What to do after the step on ``placement`` failed with ``status``, the job now having
    ``job_nodes`` of which ``usable`` can run a step."""
    lost = tuple(n for n in placement.nodes if n not in job_nodes or n not in usable)
    if not lost:  # a process failed, every node is fine: the same nodes again, if allowed
        if relaunches_left <= 0:  # silent when no relaunch was asked for
            line = f"step failed (exit {status}), no node lost: no relaunch left" if recovery.restarts else ""
            return Decision("fail", None, (), line)
        return Decision("relaunch", placement, (), _again(status, relaunches_left))
    names = ",".join(lost)
    survivors = [n for n in placement.nodes if n not in lost]
    spares = [n for n in job_nodes if n in usable and n not in placement.nodes]
    taken = spares[: len(lost)]
    nodes = tuple(survivors + taken)
    if (len(nodes) < len(placement.nodes) and not recovery.shrink) or not nodes:
        why = "no spare node left" if recovery.spares else "no spare nodes"
        return Decision(
            "requeue", None, lost, f"node {names} lost (step exit {status}), {why}: requeueing the job"
        )
    if relaunches_left <= 0:
        return Decision(
            "fail",
            None,
            lost,
            f"node {names} lost (step exit {status}): restart cap reached "
            f"({recovery.restarts} relaunches in this allocation, {STEP_RESTARTS_VARIABLE}): giving up",
        )
    ntasks = placement.ntasks
    if ntasks is not None and len(nodes) < len(placement.nodes):  # as many tasks per node
        ntasks = max(len(nodes), ntasks * len(nodes) // len(placement.nodes))
    line = f"node {names} lost (step exit {status}): relaunching on {','.join(nodes)}"
    if taken:
        line += f" (spare {','.join(taken)} in; {len(spares) - len(taken)} spare(s) left)"
    return Decision("relaunch", Placement(nodes, ntasks), lost, line)


def shrink_line(before: Placement, after: Placement, batch_per_worker: int | None) -> str | None:
    """The one line that says what a shrink changed, None when nothing shrank."""
    if len(after.nodes) >= len(before.nodes):
        return None
    old = before.ntasks or len(before.nodes)
    new = after.ntasks or len(after.nodes)
    batch = (
        f"global batch {old * batch_per_worker} -> {new * batch_per_worker}"
        if batch_per_worker
        else "global batch shrinks with them (the batch per worker stays)"
    )
    return f"shrinking: workers {old} -> {new} on nodes {len(before.nodes)} -> {len(after.nodes)}, {batch}"


#: Seconds a relaunch short of nodes waits for a node of the job that the controller lists
#: as not usable, not found silent and not lost from the step: a slurmd slow to answer
#: Slurm's ping (a loaded node) is flagged NOT_RESPONDING until its next answer.
SPARE_WAIT_S = 15.0


def short_of_spares(
    decision: Decision,
    placement: Placement,
    job_nodes: Sequence[str],
    usable: Sequence[str],
    dead: Mapping[str, None] | Sequence[str] = (),
) -> list[str]:
    """The job's nodes outside ``placement`` that the controller lists as not usable (and
    that were not found silent), when ``decision`` has fewer nodes than ``placement``
    (a requeue, a shrink): the nodes worth asking about again. Empty otherwise."""
    kept = decision.placement.nodes if decision.placement is not None else ()
    if decision.action == "fail" or len(kept) >= len(placement.nodes):
        return []
    return [n for n in job_nodes if n not in usable and n not in dead and n not in placement.nodes]


#: Seconds between pairs of SIGINTs to the srun of a stuck step, until it exits.
END_AGAIN_S = 2.0
#: Seconds srun may take to end a step with a silent node before it is killed: srun ends
#: the survivors' tasks at once, then waits for the silent node's messages to time out.
ABANDON_S = 0.5


class Supervisor:
    """Runs the srun command line, relaunching it as :func:`after_failure` decides.

    ``ask()`` is the controller's view of the job: (its nodes now, the usable ones among
    them). It is asked only where the answer can matter: when the supervisor places the
    step (spares, shrink) or the job keeps its allocation over a node failure
    (``job.no_kill``). ``env`` is the environment srun runs with.

    With a ``prober`` the supervisor does not wait for Slurm to notice a node that died
    silently: when the step shows trouble it probes the job's nodes, keeps the silent ones
    out for the rest of the allocation, and ends the step without waiting for them; ``drop``
    (:func:`tfslurm.runtime.jobend.drop_silent`) takes them out of the job."""

    __slots__ = (
        "_dead", "_job_nodes", "_last_line", "_pattern", "_pending", "_proc", "_stepped", "_stopping",
        "_trouble", "argv", "ask", "batch_per_worker", "drop", "env", "err", "job", "out", "prober", "recovery",
    )  # fmt: skip

    def __init__(
        self,
        argv: Sequence[str],
        recovery: Recovery,
        ask: Callable[[], tuple[tuple[str, ...], tuple[str, ...]]],
        env: Mapping[str, str],
        *,
        job: BatchJob = NO_JOB,
        out: TextIO | None = None,
        err: TextIO | None = None,
        batch_per_worker: int | None = None,
        prober: Prober | None = None,
        drop: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.recovery = recovery
        self.ask = ask
        self.env = dict(env)
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.prober = prober
        self.drop = drop
        self.job = job
        self.batch_per_worker = batch_per_worker
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = 0  # the stop signal that arrived; 0: none
        self._pattern = re.compile(recovery.step_line.encode())
        self._last_line = time.monotonic()
        # (relaunch number, lost nodes, step failed, controller answered, srun started):
        # reported with the first step line after that relaunch
        self._pending: tuple[int, tuple[str, ...], float, float, float] | None = None
        self._job_nodes: tuple[str, ...] = ()
        self._dead: dict[str, None] = {}  # silent nodes, never used again in this allocation
        self._stepped = False  # the step printed a step line
        self._trouble = False  # srun reported a task's failure since the last probe

    def say(self, text: str) -> None:
        self.out.write(f"{PREFIX} {text}\n")
        self.out.flush()

    # ------------------------------------------------------------------ signals
    def forward(self, signum: int, frame: object = None) -> None:
        """Pass ``signum`` on to srun (which passes it to every task); any signal but
        SIGINT is a stop (preemption, scancel): no relaunch after it."""
        if signum != signal.SIGINT:
            self._stopping = signum
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                pass

    def stop(self, signum: int, frame: object = None) -> None:
        """A stop that reached srun as well (Slurm signals the whole batch step): only
        remember it, so that the step is not relaunched."""
        self._stopping = signum

    # ------------------------------------------------------------------ one launch
    def command(
        self, placement: Placement | None, relaunch: bool = False
    ) -> tuple[list[str], dict[str, str]]:
        """srun's command line and environment for a launch on ``placement``.

        A relaunch after a lost node shares the CPUs with the failed step (``--overlap``):
        when the node died silently, Slurm keeps that step's record, and its CPUs on the
        survivors, until the dead node answers again (22.05), though its processes are
        gone; without it srun waits ("Requested nodes are busy")."""
        env = dict(self.env)
        argv = list(self.argv)
        if placement is not None:
            argv[1:1] = placement.srun_options() + (["--overlap"] if relaunch else [])
            # the batch environment holds the job's node count at its start, which srun
            # checks against the allocation's: give it the controller's count now
            env["SLURM_NNODES"] = env["SLURM_JOB_NUM_NODES"] = str(len(self._job_nodes))
            if placement.ntasks is not None:  # set for the whole job, spares included
                env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(placement.ntasks)
        return argv, env

    def _pump(self, stream: IO[bytes]) -> None:
        """Pass srun's output on line by line; time the first step line after a relaunch."""
        for line in iter(stream.readline, b""):
            _write(self.out, line)
            found = self._pattern.search(line)
            if found:
                self._last_line = time.monotonic()
                self._stepped = True
                if self._pending is not None:
                    step = found.group(1).decode(errors="replace") if found.groups() else "?"
                    self._report(self._pending, step, time.time())
                    self._pending = None

    def _pump_errors(self, stream: IO[bytes]) -> None:
        """Pass srun's error output on line by line; a task's failure is a trouble."""
        for line in iter(stream.readline, b""):
            _write(self.err, line)
            if TROUBLE.search(line):
                self._trouble = True

    def _report(
        self, pending: tuple[int, tuple[str, ...], float, float, float], step: str, now: float
    ) -> None:
        number, lost, failed, answered, started = pending
        what = f"node {','.join(lost)} lost" if lost else "no node lost"
        self.say(
            f"relaunch {number} ({what}): controller asked in {answered - failed:.2f} s, srun started "
            f"{started - failed:.2f} s, first step trained again (step {step}) {now - failed:.2f} s "
            f"after the step failed (failed at {failed:.3f}, step at {now:.3f})"
        )

    def launch(self, placement: Placement | None, relaunch: bool = False) -> int:
        """Run srun once on ``placement`` (None: as the command line says); its status."""
        argv, env = self.command(placement, relaunch)
        self._last_line = time.monotonic()
        self._stepped = self._trouble = False
        errors = subprocess.PIPE if self.prober is not None else None
        self._proc = proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=errors)
        assert proc.stdout is not None
        pumps = [threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True)]
        if proc.stderr is not None:
            pumps.append(threading.Thread(target=self._pump_errors, args=(proc.stderr,), daemon=True))
        for pump in pumps:
            pump.start()
        step_nodes = placement.nodes if placement is not None else self._job_nodes
        probed: float | None = None  # when the nodes were last probed
        ending = 0.0  # when the last pair of SIGINTs went to a stuck step's srun; 0: none
        while True:
            try:
                raw = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            beat = self.recovery.heartbeat
            now = time.monotonic()
            if self.prober is not None and not ending and not self._stopping:
                last = self._last_line if self._stepped else None
                if probe_due(now, last, self._trouble, probed, self.prober.quiet, self.prober.every):
                    probed = now
                    if self._probe(step_nodes, now - self._last_line):
                        self._abandon(proc)
                        continue
            if beat and not ending and not self._stopping and now - self._last_line > beat:
                self.say(f"no step line for {beat:g} s ({HEARTBEAT_VARIABLE}): ending the stuck step")
            elif not ending or now - ending < END_AGAIN_S:
                continue
            # Two SIGINTs within a second make srun kill the step. A busy srun can take the
            # second before handling the first, and the two then count as one: try again
            # until it exits.
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
            proc.send_signal(signal.SIGINT)
            ending = time.monotonic()
        for pump in pumps:
            pump.join(timeout=5)
        return 128 - raw if raw < 0 else raw

    def _probe(self, step_nodes: Sequence[str], quiet: float) -> bool:
        """Probe the step's nodes and the job's idle ones; keep the silent ones out from now
        on, one line for each kind. True when the step has a silent node."""
        assert self.prober is not None
        self._trouble = False
        nodes = [n for n in dict.fromkeys([*step_nodes, *self._job_nodes]) if n not in self._dead]
        silent = self.prober.silent(nodes)
        self._dead.update(dict.fromkeys(silent))
        in_step = [n for n in silent if n in step_nodes]
        idle = [n for n in silent if n not in step_nodes]
        how = f"no answer from its slurmd ({self.prober.describe()})"
        if idle:
            self.say(f"spare node {','.join(idle)} silent: {how}: left out of this allocation")
        if in_step:
            self.say(
                f"node {','.join(in_step)} silent: {how}, {quiet:.1f} s without a step line; "
                f"ending the step without waiting for it (at {time.time():.3f})"
            )
        line = drop_silent(self.ask, self.drop, tuple(self._dead), self.job.job_id) if silent else None
        if line:
            self.say(line)
        return bool(in_step)

    def _abandon(self, proc: subprocess.Popen[bytes]) -> None:
        """End a step with a silent node: srun's double SIGINT ends the tasks on the live
        nodes (through the controller, at once); srun would then wait for the silent node's
        messages to time out (12-16 s on 22.05), so it is killed after :data:`ABANDON_S`. Slurm keeps the step's record
        until the node is DOWN: the relaunch shares its CPUs (``--overlap``)."""
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=ABANDON_S)
        except subprocess.TimeoutExpired:
            proc.kill()

    # ------------------------------------------------------------------ the loop
    def _view(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The controller's view, less the nodes found silent (Slurm may list them up)."""
        job_nodes, usable = self.ask()
        self._job_nodes = tuple(job_nodes)
        return self._job_nodes, tuple(n for n in usable if n not in self._dead)

    def place(self) -> Placement:
        """The first launch's nodes (a NodeLossError when the spares leave none); says them."""
        job_nodes, usable = self._view()
        placement = first_placement(self.recovery, job_nodes, usable, self.job)
        spares = [n for n in job_nodes if n not in placement.nodes]
        self.say(
            f"training on {','.join(placement.nodes)}, spare(s) {','.join(spares) or 'none'}, "
            f"up to {self.recovery.restarts} relaunch(es) in this allocation"
        )
        return placement

    def run(self) -> int:
        """Launch, and relaunch after failures as decided; the status the script exits with
        (85: requeue the job)."""
        placement = self.place() if self.recovery.places_nodes else None
        left, number = self.recovery.restarts, 0
        while True:
            if placement is None and self.job.no_kill:  # the nodes a lost one is missed from
                self._view()
            started_on = self._job_nodes
            status = self.launch(placement, relaunch=number > 0)
            self._pending = None
            if status in FINAL_STATUSES or self._stopping:
                return status
            failed = time.time()
            decision = self.decide(placement or Placement(started_on), status, left, placement is None)
            answered = time.time()
            if decision.line:
                self.say(decision.line)
            if decision.action == "requeue":
                return EXIT_STOPPED
            if decision.action == "fail":
                return status
            if placement is not None and decision.placement is not None:
                shrunk = shrink_line(placement, decision.placement, self.batch_per_worker)
                if shrunk:
                    self.say(shrunk)
                placement = decision.placement
            left, number = left - 1, number + 1
            self._pending = (number, decision.lost, failed, answered, time.time())

    def decide(self, placement: Placement, status: int, left: int, as_given: bool = False) -> Decision:
        """What to do after the step on ``placement`` failed. ``as_given``: srun chose the
        nodes (no spares, no shrink), so a lost node means requeue. The controller is asked
        only when a node can have been lost without the job ending."""
        if as_given and not self.job.no_kill:  # a lost node would have ended the job
            if left <= 0:
                line = f"step failed (exit {status}): no relaunch left" if self.recovery.restarts else ""
                return Decision("fail", None, (), line)
            return Decision("relaunch", None, (), _again(status, left))
        job_nodes, usable = self._view()
        decision = after_failure(self.recovery, placement, job_nodes, usable, status, left)
        waiting = short_of_spares(decision, placement, job_nodes, usable, self._dead)
        if waiting and not as_given:
            self.say(
                f"node {','.join(waiting)} of the job not usable now: asking the controller again "
                f"for up to {SPARE_WAIT_S:g} s before giving up on it"
            )
            deadline = time.monotonic() + SPARE_WAIT_S
            while waiting and time.monotonic() < deadline:
                time.sleep(1.0)
                job_nodes, usable = self._view()
                decision = after_failure(self.recovery, placement, job_nodes, usable, status, left)
                waiting = short_of_spares(decision, placement, job_nodes, usable, self._dead)
        if not as_given:
            return decision
        if decision.lost:
            names = ",".join(decision.lost)
            return Decision("requeue", None, decision.lost,
                            f"node {names} lost (step exit {status}), no spare nodes: requeueing the job")  # fmt: skip
        return Decision(decision.action, None, (), decision.line)


def _write(stream: TextIO, line: bytes) -> None:
    sink = getattr(stream, "buffer", None)
    if sink is not None:
        sink.write(line)
        sink.flush()
    else:
        stream.write(line.decode(errors="replace"))
        stream.flush()


def _again(status: int, left: int) -> str:
    return f"step failed (exit {status}): running it again in this allocation ({left - 1} more)"
