"""ps and worker tasks under ParameterServerStrategy: run a standard TF server, then stop.

``tf.distribute.Server.join()`` blocks forever and a Python signal handler never runs while
the main thread is inside it (measured with TF 2.x: the handler waits until ``join()``
returns, which it never does). So: SIGTERM/SIGINT are blocked
before TF starts any thread, ``join()`` runs in a daemon thread, the main thread waits in
``sigwait``, and a watcher ends the process with status 0 once the chief's port, which was
open, is refused twice (the chief finished). ``os._exit`` skips the finaliser of a Server
whose C++ join is still running. No launcher is needed: this works across nodes under srun.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import ModuleType
from typing import NoReturn

from tfslurm.runtime.exits import EXIT_PEER_TIMEOUT
from tfslurm.runtime.peers import ChiefWatch, wait_for_peers
from tfslurm.runtime.roles import Role
from tfslurm.runtime.tfimport import tensorflow

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


#: What ``import tensorflow`` loads when installed only for parts a server never runs:
#: TF Lite's converter imports JAX if it can (1.0 of the 6.5 CPU-s of the import here),
#: and a server process runs no program that could want it.
SERVER_SKIPS = ("jax",)


def server_tensorflow() -> ModuleType:
    """TensorFlow for a process that runs only a TF server: without :data:`SERVER_SKIPS`
    (a None in ``sys.modules`` makes their import fail, which TF expects of an optional
    package), so that a relaunch's servers start sooner on CPUs they share."""
    for name in SERVER_SKIPS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None: "not importable"
    return tensorflow()


def _log(role: Role, text: str) -> None:
    print(f"tfslurm run: {role.job}:{role.index}: {text}", file=sys.stderr, flush=True)


def serve(role: Role, *, peer_timeout: float, ignore_signals: tuple[int, ...] = ()) -> NoReturn:
    """Run this task's TF server until the chief finishes, SIGINT, or a second SIGTERM
    (the first one waits for the chief to checkpoint); exit 0.

    Exits 3 when the chief never comes up within ``peer_timeout`` seconds.
    """
    # Block before TensorFlow creates threads, so every thread inherits the mask and the
    # signal stays pending for sigwait instead of killing the process by default action.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for signum in ignore_signals:  # e.g. the preemption signal: the chief checkpoints
        signal.signal(signum, signal.SIG_IGN)
    os.environ["TF_CONFIG"] = role.tf_config()
    # No user code runs here: keep TF's start-up chatter (server defs, oneDNN) out of the log.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = server_tensorflow()

    spec = tf.train.ClusterSpec(role.training_cluster())
    server = tf.distribute.Server(
        spec, job_name=role.job, task_index=role.index, protocol=role.rpc_layer, start=True
    )
    started = time.time()
    _log(role, f"server up on port {role.address().port}; waiting for {role.chief}")
    threading.Thread(target=server.join, name="tfslurm-server-join", daemon=True).start()

    def finished() -> None:
        _log(role, f"chief finished, exiting 0 (t={time.time():.3f}, up {time.time() - started:.1f} s)")
        os._exit(0)

    # TF is blocked inside C++ here: a chief that never comes up ends the process at once.
    wait_for_peers(role, peer_timeout, lambda: os._exit(EXIT_PEER_TIMEOUT))
    ChiefWatch(role.chief, on_finished=finished).start()
    received = signal.sigwait(STOP_SIGNALS)
    if received == signal.SIGTERM:
        # Preemption, scancel, scontrol requeue: every task got SIGTERM, and the chief is
        # now checkpointing, which reads the variables from the parameter servers. Stay up
        # until the chief has finished (the watch above ends this process) or a second
        # SIGTERM / SIGINT comes; Slurm's SIGKILL ends it after GraceTime in any case.
        _log(role, "SIGTERM received: staying up until the chief has checkpointed and finished")
        received = signal.sigwait(STOP_SIGNALS)
    _log(role, f"{signal.Signals(received).name} received, exiting 0 (t={time.time():.3f})")
    os._exit(0)
