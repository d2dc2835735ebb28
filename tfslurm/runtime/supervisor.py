"""The process that runs a step's srun for ``tfslurm supervise`` and relaunches it as
:mod:`tfslurm.runtime.nodeloss` decides: it passes srun's output and signals on, probes the
job's nodes when the step shows trouble (:mod:`tfslurm.runtime.probe`), ends a step with a
silent node without waiting for it, and times each relaunch from the failure to the
program's first step line after it.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

from tfslurm.runtime.exits import EXIT_STOPPED, FINAL_STATUSES
from tfslurm.runtime.jobend import drop_silent
from tfslurm.runtime.nodeloss import (
    NO_JOB,
    PREFIX,
    SPARE_WAIT_S,
    BatchJob,
    Decision,
    Placement,
    Recovery,
    after_failure,
    again_line,
    ask_until,
    first_placement,
    short_of_spares,
    shrink_line,
)
from tfslurm.runtime.probe import TROUBLE, probe_due
from tfslurm.runtime.progress import hang_window, hung_ranks
from tfslurm.runtime.straggler import STRAGGLER_STEPS, stragglers
from tfslurm.settings import HEARTBEAT_VARIABLE, PROGRESS_VARIABLE, STRAGGLER_VARIABLE

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import IO, TextIO

    from tfslurm.runtime.probe import Prober
    from tfslurm.runtime.progress import ProgressBoard, RankState


#: Hangs of a node's ranks after which the node is left out for the rest of the allocation.
HANGS_PER_BAD_NODE = 2
#: Seconds between pairs of SIGINTs to the srun of a stuck step, until it exits.
END_AGAIN_S = 2.0
#: Seconds srun may take to end a step with a silent node before it is killed: srun ends
#: the survivors' tasks at once, then waits for the silent node's messages to time out.
ABANDON_S = 0.5


def _last_step(step: int) -> str:
    """A rank's last step as the hang line says it: a TF server (ps, PS worker) and a
    program before its first ``ctx.step`` have reported none."""
    return f"last step {step}" if step >= 0 else "no step reported"


def _steps_at(others: Sequence[RankState]) -> str:
    """``", at step N"`` or ``", at steps N-M"`` of the ranks that report steps; empty if none."""
    steps = sorted({s.step for s in others if s.step >= 0})
    if not steps:
        return ""
    return f", at step {steps[0]}" if len(steps) == 1 else f", at steps {steps[0]}-{steps[-1]}"


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
        "_bad", "_checked", "_dead", "_hangs", "_job_nodes", "_last_line", "_named", "_pattern", "_pending", "_proc",
        "_stepped", "_stopping", "_swapping", "_trouble", "argv", "ask", "batch_per_worker", "board", "checkpoint_signal",
        "drop", "env", "err", "host", "job",
        "out", "prober", "recovery",
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
        board: ProgressBoard | None = None,
        host: str = "",
        checkpoint_signal: int = signal.SIGUSR1,
    ) -> None:
        self.argv = list(argv)
        self.board = board  # the ranks' heartbeats and steps: a hung rank is found there
        self.host = host  # this host's name as the ranks reach it (the board's address)
        # the preemption signal: srun passes it on to every task, which checkpoint and exit 85
        # (srun itself ends the step on a SIGTERM)
        self.checkpoint_signal = checkpoint_signal
        self._hangs: dict[str, int] = {}  # node -> hangs of its ranks in this allocation
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
        self._bad: dict[str, None] = {}  # nodes whose ranks hung too often: alive, left out too
        self._stepped = False  # the step printed a step line
        self._trouble = False  # srun reported a task's failure since the last probe
        self._named: set[int] = set()  # ranks named stragglers in this launch
        self._checked: int | None = None  # the newest step the stragglers were looked for at
        self._swapping = False  # the step was stopped to swap a straggler's node for a spare

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
        if self.board is not None:
            env[PROGRESS_VARIABLE] = self.board.address(self.host)
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
        if self.board is not None:
            self.board.next_launch()
        argv, env = self.command(placement, relaunch)
        self._last_line = time.monotonic()
        self._stepped = self._trouble = self._swapping = False
        self._named = set()
        self._checked = None
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
            hung = self._hung(now) if not ending and not self._stopping else None
            if not hung and not ending and not self._stopping and not self._swapping:
                self._straggling(proc, step_nodes)
            if hung:
                self.say(hung)
            elif beat and not ending and not self._stopping and now - self._last_line > beat:
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

    def _hung(self, now: float) -> str | None:
        """The line that names the hung ranks of the step, None when no rank is hung. The
        second hang on a node leaves it out like a silent one (a spare takes its place)."""
        if self.board is None:
            return None
        states, intervals = self.board.snapshot()
        window = hang_window(intervals)
        hung = hung_ranks(states, now, window)
        if not hung:
            return None
        others = [s for s in states.values() if s not in hung]
        names = "; ".join(
            f"rank {s.rank} ({s.task} on {s.node}) hung: no heartbeat for {now - s.beat:.1f} s "
            f"(window {window:.1f} s), {_last_step(s.step)}"
            for s in hung
        )
        bad = []
        for node in dict.fromkeys(s.node for s in hung):
            self._hangs[node] = self._hangs.get(node, 0) + 1
            if self._hangs[node] >= HANGS_PER_BAD_NODE:
                self._bad[node] = None
                bad.append(node)
        line = f"{names}; the other {len(others)} rank(s) beat{_steps_at(others)}: ending the step"
        if bad:
            line += f" (node {','.join(bad)}: {HANGS_PER_BAD_NODE} hangs in this allocation, left out)"
        return f"{line} (at {time.time():.3f})"

    def _straggling(self, proc: subprocess.Popen[bytes], step_nodes: Sequence[str]) -> None:
        """Name each rank found a straggler (once a launch); with ``TFSLURM_STRAGGLER=replace``
        and a spare free, stop the step with the preemption signal (the ranks checkpoint) and leave the
        straggler's node out, so that the relaunch puts a spare in its place."""
        if self.board is None:
            return
        newest = self.board.newest_own_step()
        if newest == self._checked:  # no step since the last look: nothing new to find
            return
        self._checked = newest
        found = [s for s in stragglers(self.board.own_times()) if s.rank not in self._named]
        if not found:
            return
        states = self.board.snapshot()[0]
        for slow in found:
            self._named.add(slow.rank)
            state = states.get(slow.rank)
            task, node = (state.task, state.node) if state is not None else ("?", "?")
            line = (
                f"rank {slow.rank} ({task} on {node}) straggles: {slow.own * 1000:.1f} ms of its own "
                f"work a step, {slow.ratio:.2f}x the others' {slow.others * 1000:.1f} ms, over the last "
                f"{STRAGGLER_STEPS} steps (to step {slow.step})"
            )
            if self.recovery.replace_stragglers and not self._swapping and node in step_nodes:
                spares = [n for n in self._view()[1] if n not in step_nodes]
                if spares:
                    self._bad[node] = None
                    self._swapping = True
                    proc.send_signal(self.checkpoint_signal)
                    line += (
                        f": {STRAGGLER_VARIABLE}=replace: stopping the step at a checkpoint, node "
                        f"{node} left out for a spare"
                    )
                else:
                    line += f": {STRAGGLER_VARIABLE}=replace, but no spare node is free: training goes on"
            self.say(f"{line} (at {time.time():.3f})")

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
        return self._job_nodes, tuple(n for n in usable if n not in self._dead and n not in self._bad)

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
        (85: requeue the job). After a finished training the silent nodes leave the job
        (:func:`tfslurm.runtime.jobend.drop_silent`), so that it ends with its script."""
        status = self._relaunching()
        if status == 0 and self._dead:
            line = drop_silent(self.ask, self.drop, tuple(self._dead), self.job.job_id)
            if line:
                self.say(line)
        return status

    def _relaunching(self) -> int:
        placement = self.place() if self.recovery.places_nodes else None
        left, number = self.recovery.restarts, 0
        while True:
            if placement is None and self.job.no_kill:  # the nodes a lost one is missed from
                self._view()
            started_on = self._job_nodes
            status = self.launch(placement, relaunch=number > 0)
            self._pending = None
            # a step stopped to swap a straggler's node ends like a preempted one (85)
            swapped = self._swapping and status == EXIT_STOPPED
            if (status in FINAL_STATUSES and not swapped) or self._stopping:
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
            return Decision("relaunch", None, (), again_line(status, left))
        job_nodes, usable = self._view()
        decision = after_failure(self.recovery, placement, job_nodes, usable, status, left)
        waiting = short_of_spares(decision, placement, job_nodes, usable, self._dead)
        if waiting and not as_given:
            self.say(
                f"node {','.join(waiting)} of the job not usable now: asking the controller again "
                f"for up to {SPARE_WAIT_S:g} s before giving up on it"
            )

            def settled(view: tuple[tuple[str, ...], tuple[str, ...]]) -> bool:
                again = after_failure(self.recovery, placement, *view, status, left)
                return not short_of_spares(again, placement, *view, self._dead)

            job_nodes, usable = ask_until(self._view, settled, SPARE_WAIT_S, answer=(job_nodes, usable))
            decision = after_failure(self.recovery, placement, job_nodes, usable, status, left)
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
