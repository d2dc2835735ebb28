"""Starting the program inside a container: ``TFSLURM_CONTAINER``.

``tfslurm run`` works the plan out where tfslurm is installed (outside the image) and starts
``TFSLURM_CONTAINER`` (a command prefix such as ``ch-run /img --`` or
``podman run IMAGE``) with the program after it. The container runtimes treat the
environment and the start differently, so the prefix is completed per runtime
(docs/containers.md):

* Charliecloud (``ch-run``) passes the caller's environment on, but starts in ``/`` and
  refuses to start without ``$USER``: it gets ``--cd=<the task's directory>`` and a
  ``USER`` from the password database where none is set.
* podman (``podman``, ``podman-hpc``) passes only the variables named with ``-e``: it gets
  ``-e NAME`` for every variable of the program's environment but the host's own paths
  (``PATH``, ``HOME``, ``PYTHONPATH`` ...: the image's win), ``--network=host`` (TF's
  servers listen on the node's ports) and ``-w <the task's directory>``, each unless the
  prefix already gives that option; options in the prefix come later and win.
* Any other command is started as given, with the program's environment.

A stop signal reaches a Python program in the container as the preemption signal, as it
does a bare one (``runtime.launch``): the decision is made on the program after the prefix.

The same prefix may be typed before the program instead (``tfslurm run -- ch-run /img --
python train.py``, ``tfslurm run -- podman run IMAGE python train.py``): :func:`given_program`
splits it off there, and it is then started just as ``TFSLURM_CONTAINER`` would be. Apptainer
and Singularity typed there are refused with one line: their options, and so where the
program starts, were not verified here (docs/containers.md).
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Final

from tfslurm.errors import ContainerError, clip
from tfslurm.settings import CONTAINER_VARIABLE, WATCHED_IN_CONTAINER, WATCHED_VARIABLE
from tfslurm.value import Value

CHARLIECLOUD = ("ch-run",)
PODMAN = ("podman", "podman-hpc")
APPTAINER = ("apptainer", "singularity")

# podman run's options that take no value (podman 4.3's, and --no-hostname of later
# releases); every other option takes one, as the next word unless given with "=".
PODMAN_RUN_FLAGS = frozenset(
    {
        "--detach",
        "--disable-content-trust",
        "--env-host",
        "--help",
        "--http-proxy",
        "--init",
        "--interactive",
        "--no-healthcheck",
        "--no-hostname",
        "--no-hosts",
        "--oom-kill-disable",
        "--passwd",
        "--privileged",
        "--publish-all",
        "--quiet",
        "--read-only",
        "--read-only-tmpfs",
        "--replace",
        "--rm",
        "--rmi",
        "--rootfs",
        "--sig-proxy",
        "--tls-verify",
        "--tty",
        "--unsetenv-all",
    }
)
PODMAN_RUN_SHORT_FLAGS = frozenset("diPqt")

# The host's own paths and shell state: inside an image its own values must win.
HOST_ONLY = frozenset(
    {
        "PATH",
        "HOME",
        "HOSTNAME",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "TMPDIR",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONUSERBASE",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
    }
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ContainerStart(Value):
    """The command that starts the program in its container, that command's environment,
    and, where the runtime's own passing on of signals can fail, a command that signals the
    program in the container directly (the signal's number appended; empty: none)."""

    __slots__ = ("argv", "env", "signaller")
    __match_args__ = ("argv", "env", "signaller")

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], signaller: Sequence[str] = ()) -> None:
        self.argv: Final = tuple(argv)
        self.env: Final[Mapping[str, str]] = dict(env)
        self.signaller: Final = tuple(signaller)


class GivenProgram(Value):
    """``tfslurm run``'s program as typed: the container command before it (``ch-run /img
    --``, ``podman run IMAGE``; empty: none) and the program to run in it."""

    __slots__ = ("container", "program")
    __match_args__ = ("container", "program")

    def __init__(self, container: Sequence[str], program: Sequence[str]) -> None:
        self.container: Final = tuple(container)
        self.program: Final = tuple(program)


def given_program(argv: Sequence[str]) -> GivenProgram:
    """``argv`` split into the container command it starts with, if any, and the program
    after it; a ContainerError (one line, the form and the fix) for a container command
    whose program cannot be told apart or that is not started here."""
    name = os.path.basename(argv[0]) if argv else ""
    if name in CHARLIECLOUD:
        if "--" not in argv[1:]:
            raise ContainerError(
                f"{clip(shlex.join(argv))!r}: ch-run needs -- between the image and the program: "
                "tfslurm run -- ch-run IMAGE -- python train.py"
            )
        return _split(argv, argv.index("--", 1) + 1, "ch-run IMAGE -- python train.py")
    if name in PODMAN and "run" in argv[1:]:
        at = _podman_program_at(argv, argv.index("run", 1) + 1)
        return _split(argv, at, f"{name} run IMAGE python train.py")
    if name in APPTAINER and len(argv) > 1 and argv[1] in ("exec", "run"):
        raise ContainerError(
            f"{clip(shlex.join(argv))!r} after -- is not supported (a stop signal would not reach "
            f"the program as the preemption signal): set TFSLURM_CONTAINER='{name} exec IMAGE' "
            "and run tfslurm run -- python train.py"
        )
    return GivenProgram((), argv)


def _split(argv: Sequence[str], at: int, example: str) -> GivenProgram:
    if at >= len(argv):
        raise ContainerError(
            f"{clip(shlex.join(argv))!r} names no program to run in the container: "
            f"name it after the image: tfslurm run -- {example}"
        )
    return GivenProgram(argv[:at], argv[at:])


def _podman_program_at(argv: Sequence[str], at: int) -> int:
    """Where the program starts in ``podman run``'s words from ``at``: after the image, the
    first word that is neither an option nor an option's value."""
    while at < len(argv):
        word = argv[at]
        if word == "--":
            return at + 2  # the image, then the program
        if word.startswith("--"):
            at += 1 if "=" in word or word in PODMAN_RUN_FLAGS else 2
        elif word.startswith("-") and len(word) > 1:
            letters = word[1:]
            valued = [i for i, letter in enumerate(letters) if letter not in PODMAN_RUN_SHORT_FLAGS]
            # -it: flags only; -e NAME, -ie NAME: the next word is the value; -eNAME: in this word
            at += 2 if valued and valued[0] == len(letters) - 1 else 1
        else:
            return at + 1
    return at


def container_prefix(setting: str) -> tuple[str, ...]:
    """``TFSLURM_CONTAINER`` split as a shell would; a ContainerError if it cannot be."""
    try:
        words = tuple(shlex.split(setting))
    except ValueError as exc:
        raise ContainerError(
            f"{CONTAINER_VARIABLE}={clip(setting)!r} cannot be split into words ({exc}): "
            "quote it as in a shell, e.g. TFSLURM_CONTAINER='ch-run /images/tf --'"
        ) from None
    if not words:
        raise ContainerError(f"{CONTAINER_VARIABLE} is blank: unset it, or name a container command")
    return words


def runtime_of(prefix: Sequence[str]) -> str:
    """``charliecloud``, ``podman`` or ``other``, by the prefix's command name."""
    name = os.path.basename(prefix[0])
    if name in CHARLIECLOUD:
        return "charliecloud"
    if name in PODMAN:
        return "podman"
    return "other"


def container_start(
    prefix: Sequence[str], program: Sequence[str], env: Mapping[str, str], cwd: str, cidfile: str = ""
) -> ContainerStart:
    """``prefix`` completed for its runtime, then ``program``; the environment to start it
    with: ``env`` less TFSLURM_CONTAINER (a ``tfslurm run`` inside must not wrap again), and
    TFSLURM_WATCHED=container: ``tfslurm run``'s parent watches it from outside, and
    ``tfslurm.run`` in the program handles the stop signals Slurm sends every process of
    the step itself, as ``tfslurm run``'s own child does.

    podman passes a signal on by starting ``runc kill``, a process of the step that Slurm's
    own SIGTERM to the step can kill; podman then stops passing signals on for good
    (measured: in 3 of 5 preemptions neither worker's program heard of the stop). So podman
    writes the container's ID to ``cidfile`` (unless the prefix names one) and
    ``signaller`` is ``podman kill`` for it."""
    inner = {k: v for k, v in env.items() if k != CONTAINER_VARIABLE}
    inner[WATCHED_VARIABLE] = WATCHED_IN_CONTAINER
    runtime = runtime_of(prefix)
    if runtime == "charliecloud":
        added = [] if _has_option(prefix[1:], ("-c", "--cd")) else [f"--cd={cwd}"]
        if not inner.get("USER"):
            inner["USER"] = _user_name()
        return ContainerStart([prefix[0], *added, *prefix[1:], *program], inner)
    if runtime == "podman":
        at = _run_word(prefix)
        given = prefix[at + 1 :]
        options = _podman_options(given, inner, cwd)
        cidfile = _option_value(given, "--cidfile") or cidfile
        if cidfile and not _has_option(given, ("--cidfile",)):
            options += ["--cidfile", cidfile]
        signaller = [*prefix[:at], "kill", "--cidfile", cidfile, "--signal"] if cidfile else []
        return ContainerStart([*prefix[: at + 1], *options, *given, *program], inner, signaller)
    return ContainerStart([*prefix, *program], inner)


def passed_names(env: Mapping[str, str]) -> list[str]:
    """The variables podman is told to pass on: all but the host's own paths."""
    return sorted(name for name in env if name not in HOST_ONLY and _NAME.match(name))


def _podman_options(given: Sequence[str], env: Mapping[str, str], cwd: str) -> list[str]:
    options = [] if _has_option(given, ("--network", "--net")) else ["--network=host"]
    if not _has_option(given, ("-w", "--workdir")):
        options += ["-w", cwd]
    for name in passed_names(env):
        options += ["-e", name]
    return options


def _run_word(prefix: Sequence[str]) -> int:
    for index, word in enumerate(prefix[1:], start=1):
        if word == "run":
            return index
    raise ContainerError(
        f"{CONTAINER_VARIABLE}={clip(shlex.join(prefix))!r} is a podman command without 'run': "
        "use e.g. TFSLURM_CONTAINER='podman run IMAGE'"
    )


def _has_option(words: Sequence[str], names: Sequence[str]) -> bool:
    """Whether ``words`` give one of the options ``names`` (``-w DIR``, ``--cd=DIR`` ...)."""
    for word in words:
        if word == "--":
            return False
        if word in names or any(word.startswith(n + "=") for n in names if n.startswith("--")):
            return True
        if any(len(n) == 2 and word.startswith(n) and not word.startswith("--") for n in names):
            return True  # -wDIR
    return False


def _option_value(words: Sequence[str], name: str) -> str:
    """The value of the long option ``name`` in ``words`` (``--name V`` or ``--name=V``), or ''."""
    for index, word in enumerate(words):
        if word == "--":
            break
        if word.startswith(name + "="):
            return word[len(name) + 1 :]
        if word == name and index + 1 < len(words):
            return words[index + 1]
    return ""


def _user_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a passwd entry (a site's directory service is down)
        return str(os.getuid())
