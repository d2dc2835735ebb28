"""The TaskProlog hook: the ``export`` lines that give a task its TF cluster.

Slurm runs a TaskProlog in every task, after the SPANK plugin's ``task_init`` and before the
user's program, and reads its stdout line by line: ``export NAME=value``
sets a variable (the value is the rest of the line, taken literally), ``unset NAME`` removes
one and ``print text`` shows ``text`` on the task's stdout. So CUDA_VISIBLE_DEVICES and
TF_CONFIG are in place before Python or CUDA start.

The hook acts only when ``TFSLURM_TF_DIST`` is set (by the SPANK plugin's ``--tf-dist``, or
by the user). The shell wrapper written by :func:`write_wrapper` checks that without starting
Python, so jobs that do not use tfslurm pay one ``/bin/sh`` start-up per task.

With ``--node`` (the SPANK plugin's ``prolog=`` mode) it prints the lines of every task
of the step on this node in one go (:func:`node_output`), so Python starts once per node
and step instead of once per task.

Only the standard library is imported, and only what the plan needs: this module runs in
every task of every tf-dist job at a site (no ``typing`` or ``json`` at run time; which of
tfslurm's modules and value types a run loads is pinned by ``tests/test_prolog.py``).
"""

from __future__ import annotations

import os
import sys

from tfslurm import __version__
from tfslurm.errors import PrologError, TfslurmError, clip, one_line
from tfslurm.plan import Plan, gpu_plan_for, resolve_plan
from tfslurm.settings import DESCRIPTOR_VARIABLE, TF_DIST_VARIABLE, Settings
from tfslurm.step import Step

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only; pathlib, json and shlex only write the wrapper
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import TextIO

    PlanSource = Callable[[Step], Plan]

__all__ = [
    "CONTAINER_ARG",
    "SLURM_ENV_STRLEN_MAX",
    "PrologError",
    "container_lines",
    "find_python",
    "format_lines",
    "main",
    "node_output",
    "prolog_lines",
    "read_environ",
    "task_changes",
    "wrapper_script",
    "write_wrapper",
]

#: Slurm drops a variable when ``len(name) + len(value) + 2 >= 131072`` (``setenvf`` in
#: ``src/common/env.c``); ``execve`` has the same per-string limit on 4 KiB-page kernels.
SLURM_ENV_STRLEN_MAX = 131_072

#: First line of the ``--node`` output (the plugin's parser in plugin/src/node.c checks it).
NODE_HEADER = "tfslurm-node 1"
#: The wrapper's ``--node`` run states tfslurm's release before NODE_HEADER in a line
#: starting so; the plugin compares it with its own (plugin/src/version.h).
VERSION_LINE = "tfslurm-version "
#: Longest error line the hook prints, in characters (the message it quotes is bounded too).
MAX_PRINT_LINE = 600
#: The argument the plugin's host-side helper runs the hook with for a containerised task.
CONTAINER_ARG = "--container"
#: Most local tasks ``--node`` answers for (a node runs far fewer).
NODE_TASKS_MAX = 4096
_WRAPPER_TEMPLATE = "taskprolog.sh.in"


def _valid_name(name: str) -> bool:
    """``[A-Za-z_][A-Za-z0-9_]*``, without importing ``re``."""
    return name.isascii() and name.isidentifier()


def task_changes(env: Mapping[str, str], plan_source: PlanSource | None = None) -> dict[str, str | None]:
    """The variables to set (str) or unset (None) in this task, in output order."""
    return _task_output(_task_step(env, Settings.from_environ(env)), env, plan_source)[0]


def _task_step(env: Mapping[str, str], settings: Settings) -> Step | None:
    """The entries' one read of the step from ``env``: None when the task did not ask for a
    TF cluster (no marker), so a job that does not use tfslurm is never parsed."""
    return Step.from_environ(env, settings=settings) if settings.asked_for_cluster else None


def _task_output(
    step: Step | None, env: Mapping[str, str], plan_source: PlanSource | None = None
) -> tuple[dict[str, str | None], tuple[str, ...]]:
    """:func:`task_changes` and this task's GPU warnings (``tfslurm.gpus.gpu_warnings``).

    Empty when the marker is absent or this is not a task of a step (the batch script of an
    ``sbatch`` that exported ``TFSLURM_TF_DIST`` itself runs the hook too, and needs nothing).
    The plan is the one every entry resolves (:func:`tfslurm.plan.resolve_plan`): from
    ``TFSLURM_DESCRIPTOR`` when the task has one, as ``tfslurm env`` does, else from Slurm's
    variables, never from an inherited TF_CONFIG, which is replaced or unset, so a stale one
    cannot survive. ``plan_source`` makes the plan instead of :func:`resolve_plan` (the
    per-node mode shares one per node). ``step`` is ``env``'s (None: no marker).
    """
    if step is None or step.context != "step":
        return {}, ()
    settings = step.settings
    plan = resolve_plan(step) if plan_source is None else plan_source(step)
    if (settings.frameworks or "").strip() or plan.cluster.iface is not None:
        # lazy: the hook imports the framework spellings only for runtimes other than TF
        from tfslurm.frameworks import parse_runtimes, runtime_env

        variables = runtime_env(plan, parse_runtimes(settings.frameworks), env)
    else:
        variables = plan.task_env()
    changes: dict[str, str | None] = {}
    inherited = {"TF_CONFIG": "TF_CONFIG" in env, DESCRIPTOR_VARIABLE: settings.descriptor is not None}
    for stale, present in inherited.items():
        if stale not in variables and present:
            changes[stale] = None
    changes.update(variables)
    return changes, plan.gpus.warnings if plan.gpus is not None else ()


def format_lines(changes: Mapping[str, str | None]) -> list[str]:
    """TaskProlog lines for ``changes``; raises PrologError for anything the protocol mangles.

    The protocol has no quoting: a value runs to the end of its line, so a newline would cut
    it and start a new (possibly ``export``) line. Such values are refused, never passed on.
    """
    lines = []
    for name, value in changes.items():
        if not _valid_name(name):
            raise PrologError(f"cannot export {name!r}: not a valid variable name")
        if value is None:
            lines.append(f"unset {name}")
            continue
        if "\n" in value or "\0" in value:
            bad = "a newline" if "\n" in value else "a NUL byte"
            raise PrologError(
                f"cannot export {name}: its value contains {bad}, which Slurm's TaskProlog "
                f"protocol cannot carry (value starts {value[:40]!r})"
            )
        try:
            size = len(name) + len(value.encode("utf-8", "surrogateescape")) + 2
        except UnicodeEncodeError:
            raise PrologError(f"cannot export {name}: its value {value[:40]!r} is not encodable") from None
        if size >= SLURM_ENV_STRLEN_MAX:
            raise PrologError(
                f"cannot export {name}: {size - 2} bytes with its name, but Slurm drops variables "
                f"of {SLURM_ENV_STRLEN_MAX - 2} bytes or more"
            )
        lines.append(f"export {name}={value}")
    return lines


def prolog_lines(env: Mapping[str, str] | None = None, plan_source: PlanSource | None = None) -> list[str]:
    """Every line the hook prints for a task with environment ``env`` (default: os.environ).

    GPU warnings come first as ``print`` lines: Slurm writes them to the task's output (a
    TaskProlog has no way to the task's stderr).
    """
    env = os.environ if env is None else env
    return _lines(_task_step(env, Settings.from_environ(env)), env, plan_source)


def _lines(step: Step | None, env: Mapping[str, str], plan_source: PlanSource | None = None) -> list[str]:
    changes, warnings = _task_output(step, env, plan_source)
    return [f"print {line}" for line in warnings] + format_lines(changes)


def main(
    env: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    argv: list[str] | None = None,
    plan_source: PlanSource | None = None,
    stdin: bytes | None = None,
) -> int:
    """Run the hook: print the lines; on error print a ``print`` line and return non-zero.

    A non-zero exit makes Slurm cancel the task, which is right only when the task asked for
    a TF cluster (``TFSLURM_TF_DIST`` set): without the marker this returns 0 whatever happens.
    ``argv`` ``["--node"]``: print :func:`node_output` instead (exit 3, no output, if it
    cannot: the plugin then runs the hook in every task). ``["--container"]``: the task is in
    a container and ``stdin`` (default: read from standard input) holds the step's
    environment on the host; see :func:`container_lines`.
    """
    env = os.environ if env is None else env
    out = sys.stdout if out is None else out
    if argv == [CONTAINER_ARG]:
        return _container_main(
            env, Settings.from_environ(env), out, sys.stdin.buffer.read() if stdin is None else stdin
        )
    if argv:
        if argv != ["--node"]:
            print(
                f"tfslurm prolog: unknown arguments {argv!r} (only --node, {CONTAINER_ARG})", file=sys.stderr
            )
            return 2
        try:
            text = node_output(env)
        except Exception:  # the plugin falls back to one run per task, which reports it
            return 3
        _write(out, text)
        return 0
    settings = Settings.from_environ(env)  # read once: the marker, then the plan's settings
    try:
        lines = _lines(_task_step(env, settings), env, plan_source)
    except TfslurmError as exc:
        return _fail(out, settings, f"error: {exc}", 2)
    except Exception as exc:  # a bug must still reach the user as one readable line
        return _fail(out, settings, f"internal error: {type(exc).__name__}: {exc}", 1)
    _write(out, "".join(line + "\n" for line in lines))
    return 0


def container_lines(env: Mapping[str, str], outside: Mapping[str, str]) -> list[str]:
    """:func:`prolog_lines` for a task in a container, plus at most one ``warn`` line.

    ``env`` is the task's environment inside the container (the image's variables copied
    over it), ``outside`` the step's on the host before the container; the ``warn`` line
    (for the task's stderr) names what the container replaced (``tfslurm.container_env``).
    """
    # lazy: only a containerised task compares the container's variables with the step's
    from tfslurm.container_env import warning

    changes, warnings = _task_output(_task_step(env, Settings.from_environ(env)), env)
    lines = [f"print {line}" for line in warnings] + format_lines(changes)
    note = warning(outside, env, changes) if changes else None
    return lines + ([f"warn {note}"] if note else [])


def read_environ(data: bytes) -> dict[str, str]:
    """``NAME=value`` strings, each ended by a NUL byte (as the plugin's helper writes the
    step's environment on the hook's standard input)."""
    env: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def _container_main(env: Mapping[str, str], settings: Settings, out: TextIO, stdin: bytes) -> int:
    try:
        lines = container_lines(env, read_environ(stdin))
    except TfslurmError as exc:
        return _fail(out, settings, f"error: {exc}", 2)
    except Exception as exc:  # a bug must still reach the user as one readable line
        return _fail(out, settings, f"internal error: {type(exc).__name__}: {exc}", 1)
    _write(out, "".join(line + "\n" for line in lines))
    return 0


def node_output(env: Mapping[str, str]) -> str:
    """What the hook prints for every task of this step on this node (``--node``).

    ``env`` is the environment of the node's first task. The tasks on a node differ only
    in SLURM_PROCID (the ``SLURM_GTIDS`` entry), SLURM_LOCALID and SLURM_TASK_PID, which
    nothing here reads; each block names the values it assumed (``input`` lines) and the
    plugin uses a block only for a task whose whole environment is ``env`` with those.
    Format: ``NODE_HEADER``, then per task ``task LOCALID STATUS``, its ``input`` lines
    and exactly the lines :func:`main` prints for it, then ``end``.
    """
    from io import StringIO

    gtids = Step.from_environ(env).gtids  # SlurmEnvError for malformed Slurm variables
    if not gtids or len(gtids) > NODE_TASKS_MAX:
        raw = ",".join(map(str, gtids or ()))  # as Slurm writes it
        raise PrologError(f"SLURM_GTIDS={_clip(raw)!r} is not a list of at most {NODE_TASKS_MAX} task ids")
    parts = [NODE_HEADER + "\n"]
    shared = _NodePlans()
    for local, gtid in enumerate(gtids):
        # Each task's environment, as Slurm gives it to that task: main reads it as its own.
        task_env = dict(env)
        task_env["SLURM_PROCID"] = str(gtid)
        task_env["SLURM_LOCALID"] = str(local)
        lines = StringIO()
        status = main(task_env, lines, plan_source=shared)
        parts.append(f"task {local} {status}\ninput SLURM_PROCID={gtid}\ninput SLURM_LOCALID={local}\n")
        parts.append(lines.getvalue())
    parts.append("end\n")
    return "".join(parts)


class _NodePlans:
    """One plan per node for :func:`node_output`: the first task's plan is made and
    verified as usual; the node's other tasks take it with their own rank and GPUs.

    That is sound because they differ from the first only in SLURM_PROCID/SLURM_LOCALID,
    and the first task's verification already checked the whole node: its SLURM_GTIDS
    equal the layout's ranks on this node, in local-id order, so rank ``SLURM_GTIDS[i]`` has
    local id ``i`` on this node, which is what each other task's own check would find. A
    plan from a descriptor checked only the first task's rank, so each task makes its own.
    """

    def __init__(self) -> None:
        self.first: Plan | None = None

    def __call__(self, step: Step) -> Plan:
        first = self.first
        if first is None or first.cluster.layout.source == "descriptor":
            self.first = resolve_plan(step)
            return self.first
        assert step.procid is not None
        return first.for_task(step.procid, gpu_plan_for(step, first.cluster.layout))


def _fail(out: TextIO, settings: Settings, message: str, code: int) -> int:
    if not settings.asked_for_cluster:
        return 0
    # One printable line whatever the message and the setting hold (the error's own
    # message is one already; an internal error's need not be).
    line = f"tfslurm prolog ({TF_DIST_VARIABLE}={_clip(settings.tf_dist or '')}): {' '.join(message.split())}"
    _write(out, f"print {one_line(line, MAX_PRINT_LINE)}\n")
    return code


def _write(out: TextIO, text: str) -> None:
    # Values come from the environment, which may hold undecodable bytes (surrogate
    # escapes): write them back as the same bytes rather than fail on encoding.
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()
    else:
        out.write(text)
        out.flush()


def _clip(text: str, limit: int = 60) -> str:
    """User text on one line (blanks and newlines collapsed), shortened and escaped."""
    return one_line(clip(" ".join(text.split()), limit))


# --- the shell wrapper for TaskProlog= ---------------------------------------------------


def find_python(name: str, search_path: str) -> str:
    """The absolute path the wrapper names for the interpreter ``name``, as a shell finds a
    command: a bare name in the directories of ``search_path`` (a PATH value), a name with a
    slash relative to the current directory. Symbolic links are kept: a virtual
    environment's python is one, and only its own path starts that environment."""
    import shutil

    if "/" in name:
        return os.path.abspath(name)
    found = shutil.which(name, path=search_path) if name else None
    if found is None:
        raise PrologError(
            f"python {clip(name)!r} is not found on PATH; give --python the path of the "
            "interpreter tfslurm is installed for"
        )
    return os.path.abspath(found)  # a relative directory on PATH gives a relative path


def wrapper_script(python: str | None = None, package_parent: str | None = None) -> str:
    """The text of the ``TaskProlog=`` wrapper for this installation.

    ``python`` (default: this interpreter) runs with ``-I -S`` (no user site, no
    ``PYTHON*`` variables, no ``site`` import: faster and immune to the job's Python
    settings); a path, relative ones to the current directory (:func:`find_python` turns a
    bare command name into one). ``package_parent`` (default: where this ``tfslurm``
    package lives) is put on ``sys.path`` instead.
    """
    import json
    import shlex
    from pathlib import Path

    if python is not None and "/" not in python:
        raise PrologError(
            f"python {clip(python)!r} is not a path: the wrapper runs no PATH lookup "
            "(tfslurm prolog --python looks a bare name up)"
        )
    python = os.path.abspath(python or sys.executable)
    parent = package_parent or str(Path(__file__).resolve().parent.parent)
    for what, path in (("python", python), ("package directory", parent)):
        if any(c in path for c in "\n\r\0"):
            raise PrologError(f"{what} path {path!r} contains a newline or NUL")
        if not os.path.isabs(path):
            raise PrologError(f"{what} path {path!r} is not absolute")
    code = (
        f"import sys; sys.path.insert(0, {json.dumps(parent)}); "
        "from tfslurm import __version__; from tfslurm.prolog import VERSION_LINE, main; "
        'sys.argv[1:] == ["--node"] and print(VERSION_LINE + __version__, flush=True); '
        "sys.exit(main(argv=sys.argv[1:]))"
    )
    template = (Path(__file__).parent / "data" / _WRAPPER_TEMPLATE).read_text()
    return (
        template.replace("@VERSION@", __version__)
        .replace("@PYTHON@", shlex.quote(python))
        .replace("@CODE@", shlex.quote(code))
    )


def write_wrapper(
    path: str | os.PathLike[str], python: str | None = None, package_parent: str | None = None
) -> Path:
    """Write the wrapper to ``path`` (mode 0755, replaced atomically) and return its
    absolute path, which plugstack.conf and slurm.conf need (Slurm refuses a relative one).

    The interpreter must exist here: a wrapper naming a Python that is not there would fail
    every ``--tf-dist`` task with exit status 127. (``wrapper_script`` alone, for
    ``--print-wrapper``, may name one that exists only on other machines.)
    """
    from pathlib import Path

    target = Path(os.path.abspath(path))
    text = wrapper_script(python, package_parent)
    exe = os.path.abspath(python or sys.executable)
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise PrologError(
            f"python {exe!r} is not an executable file; give --python the interpreter tfslurm "
            "is installed for (the same path must exist on every compute node)"
        )
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.chmod(0o755)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise PrologError(f"cannot write the TaskProlog wrapper {str(target)!r}: {exc.strerror}") from None
    return target
