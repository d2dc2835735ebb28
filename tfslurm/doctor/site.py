"""The login node's checks: Slurm's commands, the SPANK plugin, the hook's wrapper.

What a site must have for ``--tf-dist`` (docs/admin-guide.md): the Slurm commands, the
plugin registered (``srun --help`` lists ``--tf-dist`` and names the release it was built
from), the plugin and this tfslurm of one release, and each hook wrapper that slurm.conf
(``TaskProlog=``) or plugstack.conf (``prolog=``) names present, executable, and running a
Python that imports a tfslurm of the same release. The parsers are pure functions of the
commands' texts; :func:`site_report` runs the commands through a :class:`Commands`.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import subprocess
from typing import TYPE_CHECKING

from tfslurm.doctor.findings import Finding, Report
from tfslurm.errors import clip

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Final

PLUGIN_FILE = "spank_tfslurm.so"
COMMAND_TIMEOUT_S = 30.0
_SLURM_VERSION = re.compile(r"\bslurm(?:-wlm)?\s+(\d+\.\d+[.\w-]*)")
# the plugin's help text ends "(docs/tf-dist.md; tfslurm RELEASE)." (plugin/src/option.c)
_PLUGIN_VERSION = re.compile(r"--tf-dist.*?;\s*tfslurm\s+([0-9A-Za-z.+-]+?)\)", re.DOTALL)
_CONFIG_LINE = re.compile(r"^\s*(\w+)\s*=\s*(.*?)\s*$", re.MULTILINE)
_WRAPPER_MARK = "tfslurm TaskProlog hook"
_PACKAGE_PARENT = re.compile(r"sys\.path\.insert\(0, (\"(?:[^\"\\]|\\.)*\")\)")
_VERSION_CODE = "import sys; sys.path.insert(0, sys.argv[1]); import tfslurm; print(tfslurm.__version__)"


class Ran:
    """What a command printed and its status; ``missing``: it is not on PATH."""

    __slots__ = ("missing", "output", "status")

    def __init__(self, status: int, output: str, missing: bool = False) -> None:
        self.status: Final = status
        self.output: Final = output
        self.missing: Final = missing

    @property
    def last_line(self) -> str:
        lines = [line for line in self.output.splitlines() if line.strip()]
        return clip(lines[-1].strip(), 200) if lines else f"exit status {self.status}"


class Commands:
    """Runs a command with the environment the entry point read (its PATH finds Slurm)."""

    def __init__(self, env: Mapping[str, str], timeout: float = COMMAND_TIMEOUT_S) -> None:
        self.env = dict(env)
        self.timeout = timeout

    def __call__(self, argv: Sequence[str]) -> Ran:
        try:
            done = subprocess.run(
                list(argv),
                env=self.env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError:
            return Ran(127, "", missing=True)
        except PermissionError as exc:
            return Ran(126, str(exc))
        except subprocess.TimeoutExpired:
            return Ran(124, f"no answer within {self.timeout:g} s")
        return Ran(done.returncode, done.stdout + done.stderr)


# ------------------------------------------------------------------ parsing (pure)
def slurm_version(text: str) -> str | None:
    """The release in ``sinfo --version``'s answer (``slurm 22.05.8``, ``slurm-wlm 22.05.8``)."""
    found = _SLURM_VERSION.search(text)
    return found.group(1) if found else None


def plugin_help(text: str) -> tuple[bool, str | None]:
    """Whether ``srun --help`` lists ``--tf-dist``, and the release its help names (None:
    it names none, a plugin from before the release was stated)."""
    if "--tf-dist" not in text:
        return False, None
    found = _PLUGIN_VERSION.search(text[text.index("--tf-dist") :])
    return True, found.group(1) if found else None


def config_values(text: str) -> dict[str, str]:
    """``scontrol show config``'s ``Name = value`` lines; ``(null)`` is ''."""
    return {k: ("" if v == "(null)" else v) for k, v in _CONFIG_LINE.findall(text)}


class PluginLine:
    """A plugstack.conf line that loads tfslurm's plugin: its file, ``prolog=`` wrapper, and
    the plugstack file it is in."""

    __slots__ = ("conf", "plugin", "prolog")

    def __init__(self, conf: str, plugin: str, prolog: str | None) -> None:
        self.conf: Final = conf
        self.plugin: Final = plugin
        self.prolog: Final = prolog


def plugin_lines(path: str, read: Callable[[str], str | None], depth: int = 0) -> list[PluginLine]:
    """tfslurm's lines in the plugstack.conf at ``path``, ``include`` files followed (a
    relative include is relative to the including file's directory, as Slurm does)."""
    text = read(path)
    if text is None or depth > 8:
        return []
    found: list[PluginLine] = []
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if len(words) >= 2 and words[0] == "include":
            pattern = words[1] if os.path.isabs(words[1]) else os.path.join(os.path.dirname(path), words[1])
            for included in sorted(glob.glob(pattern)):
                found.extend(plugin_lines(included, read, depth + 1))
        elif (
            len(words) >= 2
            and words[0] in ("optional", "required")
            and os.path.basename(words[1]) == PLUGIN_FILE
        ):
            prolog = next((w.split("=", 1)[1] for w in words[2:] if w.startswith("prolog=")), None)
            found.append(PluginLine(path, words[1], prolog))
    return found


def wrapper_parts(text: str) -> tuple[str, str] | None:
    """(Python, package directory) a tfslurm wrapper runs; None: the text is no tfslurm
    wrapper (another script, which may call one)."""
    if _WRAPPER_MARK not in text:
        return None
    for line in text.splitlines():
        if not line.startswith("exec "):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            return None
        code = next((w for w in words if "sys.path.insert" in w), "")
        found = _PACKAGE_PARENT.search(code)
        if len(words) >= 2 and found:
            return words[1], str(json.loads(found.group(1)))
    return None


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


# ------------------------------------------------------------------ the checks
WRITE_WRAPPER = (
    "tfslurm prolog --write-wrapper {path} (on every compute node, or once on a shared file system)"
)


def wrapper_report(
    path: str, source: str, run: Callable[[Sequence[str]], Ran], where: str
) -> tuple[Report, str | None]:
    """The wrapper at ``path`` (``source`` says who names it) on this machine, named
    ``where`` in the findings: the report and the tfslurm release it runs (None: unknown)."""
    fix = WRITE_WRAPPER.format(path=path)
    if not os.path.exists(path):
        return Report(
            [Finding("wrapper", [where], f"the hook's wrapper {path} ({source}) does not exist", fix)]
        ), None
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return Report(
            [
                Finding(
                    "wrapper",
                    [where],
                    f"the hook's wrapper {path} ({source}) is not an executable file",
                    f"chmod 755 {path}, or {fix}",
                )
            ]
        ), None
    text = read_text(path)
    parts = wrapper_parts(text or "")
    if parts is None:
        return Report(
            checked=[f"{source} {path}: not a tfslurm wrapper (a site script: not checked further)"]
        ), None
    python, parent = parts
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        message = f"the hook's wrapper {path} ({source}) runs Python {python}, which is not here"
        return Report(
            [Finding("wrapper", [where], message, f"install tfslurm's Python there, or {fix}")]
        ), None
    ran = run([python, "-I", "-S", "-c", _VERSION_CODE, parent])
    if ran.status != 0:
        message = f"the hook's wrapper {path} ({source}) cannot import tfslurm from {parent}: {ran.last_line}"
        return Report([Finding("wrapper", [where], message, f"reinstall tfslurm there, then {fix}")]), None
    release = ran.output.strip()
    return Report(checked=[f"{source} {path} runs tfslurm {release}"]), release


def site_report(
    run: Callable[[Sequence[str]], Ran], ours: str, where: str, read: Callable[[str], str | None] = read_text
) -> Report:
    """The login node's checks, ``where`` its name in the findings; ``ours`` is this
    tfslurm's release."""
    sinfo = run(["sinfo", "--version"])
    if sinfo.missing:
        return Report(
            [
                Finding(
                    "slurm",
                    [where],
                    "sinfo is not on PATH: no Slurm commands here",
                    "run tfslurm doctor where Slurm's commands are (a login node), or put Slurm's bin directory on PATH",
                )
            ]
        )
    version = slurm_version(sinfo.output)
    if sinfo.status != 0 or version is None:
        return Report(
            [
                Finding(
                    "slurm",
                    [where],
                    f"sinfo --version failed: {sinfo.last_line}",
                    "check the Slurm installation (SLURM_CONF, the commands' libraries)",
                )
            ]
        )
    report = Report(checked=[f"slurm {version}"])
    config = run(["scontrol", "show", "config"])
    values = config_values(config.output) if config.status == 0 else {}
    if config.status != 0:
        report = report.plus(
            Report(
                [
                    Finding(
                        "slurm",
                        [where],
                        f"scontrol show config failed: {config.last_line}",
                        "check that slurmctld is up and reachable from here (scontrol ping)",
                    )
                ]
            )
        )
    lines = plugin_lines(values["PlugStackConfig"], read) if values.get("PlugStackConfig") else []
    registered, release = plugin_help(run(["srun", "--help"]).output)
    plugstack = values.get("PlugStackConfig", "")
    report = report.plus(_plugin_report(registered, release, ours, where, lines, plugstack))
    task_prolog = values.get("TaskProlog", "")
    report = report.plus(_wrappers_report(run, ours, where, lines, task_prolog, release))
    if registered and not task_prolog and not any(line.prolog for line in lines):
        message = "srun offers --tf-dist but no hook gives its tasks TF_CONFIG: no prolog= on the plugin's line, no TaskProlog="
        fix = "write the wrapper (tfslurm prolog --write-wrapper PATH) and add prolog=PATH to the plugin's plugstack line"
        report = report.plus(Report([Finding("wrapper", [where], message, fix)]))
    return report


def _plugin_report(
    registered: bool, release: str | None, ours: str, where: str, lines: list[PluginLine], plugstack: str
) -> Report:
    if not registered:
        if lines:
            named = ", ".join(sorted({line.plugin for line in lines}))
            message = f"srun has no --tf-dist, though {lines[0].conf} loads {named}: the file is missing here or built for another Slurm release"
            fix = "build the plugin against this Slurm's headers and install it at that path (admin guide, 'Upgrading Slurm')"
        else:
            where_conf = plugstack or "plugstack.conf"
            message = f"srun has no --tf-dist: no line of {where_conf} loads {PLUGIN_FILE}"
            fix = "install the plugin and its plugstack line (admin guide, 'plugstack.conf'); without it, use the sbatch templates or tfslurm run"
        return Report([Finding("plugin", [where], message, fix)])
    if release is None:
        message = "the plugin (srun --help) states no release: it is older than this tfslurm"
        return Report(
            [Finding("version", [where], message, f"rebuild and reinstall the plugin from tfslurm {ours}")],
            ["plugin registered"],
        )
    checked = [f"plugin registered, tfslurm {release}"]
    if release != ours:
        message = f"the plugin (srun --help) is tfslurm {release} but this tfslurm is {ours}"
        fix = f"install both from one release: rebuild and reinstall the plugin from tfslurm {ours} (admin guide, 'Versions'), or use tfslurm {release}"
        return Report([Finding("version", [where], message, fix)], checked)
    return Report(checked=checked)


def _wrappers_report(
    run: Callable[[Sequence[str]], Ran],
    ours: str,
    where: str,
    lines: list[PluginLine],
    task_prolog: str,
    plugin: str | None,
) -> Report:
    named = [(line.prolog, f"prolog= in {line.conf}") for line in lines if line.prolog]
    if task_prolog:
        named.append((task_prolog, "TaskProlog="))
    report = Report()
    releases: list[tuple[str, str]] = []
    for path, source in named:
        found, release = wrapper_report(path, source, run, where)
        report = report.plus(found)
        if release is not None:
            releases.append((path, release))
    for path, release in releases:
        if release == ours:
            continue  # a plugin of another release is said once, against this tfslurm
        whose, other = (
            ("the plugin", plugin) if plugin is not None and plugin != release else ("this tfslurm", ours)
        )
        message = f"the hook's wrapper {path} runs tfslurm {release} but {whose} is {other}"
        fix = f"install one release everywhere, then {WRITE_WRAPPER.format(path=path)}"
        report = report.plus(Report([Finding("version", [where], message, fix)]))
    hooks = [path for path, _ in named]
    tf_task_prolog = task_prolog and wrapper_parts(read_text(task_prolog) or "") is not None
    if tf_task_prolog and len(hooks) > 1:
        message = f"the hook runs twice per --tf-dist task: TaskProlog={task_prolog} and prolog={hooks[0]}"
        fix = "keep one: remove TaskProlog= (set-up A, recommended) or prolog= (admin guide)"
        report = report.plus(Report([Finding("wrapper", [where], message, fix)]))
    return report
