"""What tfslurm asks Slurm's controller, behind one small interface.

The runtime needs a few answers from ``slurmctld`` that no task variable gives: the job's
nodes *now* (``SLURM_JOB_NODELIST`` is a snapshot from the job's start, and a ``--no-kill``
job loses nodes), the job's state and restart count, which nodes are down, which steps run
where; and it asks for a few actions: requeue (with or without hold) and release. Every
such call in tfslurm goes through a :class:`Controller`, so that a site with a matching
pyslurm can answer them in-process and every other site with the commands Slurm ships::

    from tfslurm.controller import controller
    job = controller().job("1234")
    job.nodes, job.state, job.restart_count

``controller()`` picks the backend: pyslurm where it is installed, starts safely and is
built for the Slurm release the controller runs (``pyslurm_backend``), else the commands;
``TFSLURM_CONTROLLER=commands`` or ``=pyslurm`` asks for one (docs/pyslurm.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from tfslurm.controller import pyslurm_backend
from tfslurm.controller.commands import CommandController
from tfslurm.controller.interface import Controller, JobInfo, NodeInfo, StepInfo
from tfslurm.errors import ControllerError
from tfslurm.settings import CONTROLLER_VARIABLE, Settings

__all__ = [
    "CONTROLLER_VARIABLE",
    "Controller",
    "ControllerError",
    "JobInfo",
    "NodeInfo",
    "StepInfo",
    "controller",
]


def controller(settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> Controller:
    """The backend for this process, as ``TFSLURM_CONTROLLER`` of ``settings`` asks
    (default: read from the environment); ``environ`` is what Slurm's commands run with
    (default: this process's)."""
    if settings is None:
        settings = Settings.from_environ()
    choice = settings.controller_backend()  # an unknown name is an error, whatever is installed
    if choice != "commands":
        chosen = pyslurm_backend.load(lambda: CommandController(environ), required=choice == "pyslurm")
        if chosen is not None:
            return chosen
    return CommandController(environ)
